"""Handing a file the code produced back to the client: ``runtime.share_file``.

The cell's result then carries a resource link (``codemode://sessions/{session}/files/{path}``) that the client
reads through the bridge's resources, so a large output (a CSV, a PDF, a chart's data) reaches the user without
passing through the model's context. Only the path goes with the result: the client reads the bytes when it
wants them, and the bridge checks the link again (the code could forge it; reading goes through the same
symlink-refusing walk as any other file of the workspace).
"""

from __future__ import annotations

import os
import stat

if __package__ != "mcp":  # imported on the host (tests) as mcp_codemode.guest.mcp._files
    from ..protocol import workspace_path_problem
else:  # in the sandbox the guest's folder is on sys.path and this package is the top-level ``mcp``
    from protocol import workspace_path_problem  # type: ignore[import-not-found,no-redef]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

WORKSPACE = "/workspace"
MAX_LINKS = 16  # per cell; a result is read by a person, not a file listing (the client can list the workspace)
_links: list[dict[str, Any]] = []


class SharedFile(str):
    """The shared file's URI path under the session, as a ``str`` (``"report.csv"``), with its size and type."""

    size: int
    mime_type: str

    def __repr__(self) -> str:
        return f"<shared /workspace/{self!s}: {self.size:,} bytes, {self.mime_type}; a resource link in the result>"


def share_file(path: str, mime_type: str | None = None, description: str | None = None) -> SharedFile:
    """Hand ``path`` (a file under /workspace; relative paths start at the current directory) back to the client
    as a resource link in this call's result; the client reads it through the bridge, not the model's context."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"share_file() takes a file path, not {type(path).__name__}")
    full = os.path.normpath(os.path.join(os.getcwd(), os.fspath(path)))
    if not full.startswith(WORKSPACE + "/"):
        raise ValueError(f"{full} is outside /workspace: write the file under /workspace and share that")
    relative = full[len(WORKSPACE) + 1 :]
    problem = workspace_path_problem(relative)
    if problem:
        raise ValueError(f"{full} cannot be shared: {problem}")
    where = WORKSPACE
    for part in relative.split("/"):
        where = f"{where}/{part}"
        info = os.lstat(where)  # FileNotFoundError names the path
        if stat.S_ISLNK(info.st_mode):
            raise ValueError(f"{where} is a symlink: share the file itself")
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{full} is not a regular file")
    if len(_links) >= MAX_LINKS and all(link["path"] != relative for link in _links):
        raise ValueError(f"a call can share at most {MAX_LINKS} files; put them in one archive, or list the folder")
    import mimetypes  # here, not at the top: it would cost every sandbox's start for a call few cells make

    guessed = mime_type or mimetypes.guess_type(relative)[0] or "application/octet-stream"
    if not isinstance(guessed, str) or len(guessed) > 100:
        raise ValueError("mime_type must be a short string such as 'text/csv'")
    link: dict[str, Any] = {"path": relative, "size": info.st_size, "mime": guessed}
    if description:
        link["description"] = str(description)[:500]
    _links[:] = [other for other in _links if other["path"] != relative] + [link]
    shared = SharedFile(relative)
    shared.size, shared.mime_type = info.st_size, guessed
    return shared


def take_links() -> list[dict[str, Any]]:
    """The links of the cell that just ended, forgotten here (the worker sends them with its result)."""
    taken = list(_links)
    _links.clear()
    return taken
