"""A session's /workspace from the client's side: list it, take a file out, put one in.

The bytes live in the sandbox (a tmpfs of its own mount namespace, or a pod's volume), so every operation is a
request to the session's guest (``guest/worker_files.py``), which walks the path without following symlinks.
This module is the host's half: it checks each path before asking, so the client hears exactly what to fix, and
checks every answer after, because the guest shares its process with the code and may say anything. Sizes are
bounded both ways (``MAX_FILE_BYTES``, and the workspace's own size, which its tmpfs enforces).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from typing import Any

from ..errors import CodemodeError
from ..guest.protocol import FILE_CHUNK, MAX_LISTED_FILES, workspace_path_problem
from ..sandbox.worker import FileRequestError, Worker
from ..settings import Settings
from .sessions import SessionManager

MAX_FILE_BYTES = 32 * 1024 * 1024  # one file in or out: an MCP message carries it whole, as base64
MAX_FILES_PER_CALL = 64  # files one run_python call may put in before its code runs
FILE_REQUEST_TIMEOUT = 30.0  # seconds the guest has to answer one request (a 4 MiB chunk takes milliseconds)


class SessionFileError(CodemodeError):
    """A file request the bridge cannot serve; the message names the path and what to do."""


@dataclasses.dataclass(frozen=True)
class FileEntry:
    path: str  # relative to /workspace
    size: int
    kind: str  # "file" or "folder"


@dataclasses.dataclass(frozen=True)
class Listing:
    entries: tuple[FileEntry, ...]
    more: bool  # the guest stopped at MAX_LISTED_FILES


def checked_path(path: str) -> str:
    """``path`` as the guest takes it (relative to /workspace); a leading ``/workspace/`` is accepted and dropped."""
    if isinstance(path, str) and path.startswith("/workspace/"):
        path = path[len("/workspace/") :]
    problem = workspace_path_problem(path)
    if problem:
        raise SessionFileError(f"{path!r}: {problem}")
    return path


class SessionFiles:
    """The file requests of one bridge's sessions; sessions are named by their internal key."""

    def __init__(self, sessions: SessionManager, settings: Settings) -> None:
        self.sessions = sessions
        self.limit = min(MAX_FILE_BYTES, settings.workspace_size)

    def _worker(self, key: str, label: str) -> Worker:
        worker = self.sessions.live_worker(key)
        if worker is None:
            raise SessionFileError(
                f"the session {label!r} has no running sandbox: run code in it first (its files live only while it "
                "runs; an idle session closes after MCP_BRIDGE_SESSION_IDLE_TIMEOUT)"
            )
        return worker

    async def _ask(self, worker: Worker, request: dict[str, Any]) -> dict[str, Any]:
        try:
            return await worker.files(request, FILE_REQUEST_TIMEOUT)
        except FileRequestError as exc:
            raise SessionFileError(str(exc)) from None

    async def listing(self, key: str, label: str, folder: str = "") -> Listing:
        """The files and folders under ``folder`` ("" for the whole workspace), as far as MAX_LISTED_FILES."""
        path = checked_path(folder) if folder else ""
        value = await self._ask(self._worker(key, label), {"op": "list", "path": path})
        raw = value.get("entries")
        entries: list[FileEntry] = []
        for item in raw[:MAX_LISTED_FILES] if isinstance(raw, list) else ():
            if not isinstance(item, dict):
                continue
            name, size, kind = item.get("path"), item.get("size"), item.get("kind")
            if not isinstance(name, str) or workspace_path_problem(name) or kind not in ("file", "folder"):
                continue
            if type(size) is not int or size < 0:
                continue
            entries.append(FileEntry(name, size, kind))
        return Listing(tuple(entries), value.get("more") is True)

    async def read(self, key: str, label: str, path: str) -> bytes:
        """The whole file, in chunks of FILE_CHUNK; refused past the size limit before more is read."""
        path = checked_path(path)
        worker = self._worker(key, label)
        parts: list[bytes] = []
        received = 0
        while True:
            value = await self._ask(worker, {"op": "read", "path": path, "offset": received})
            size, encoded = value.get("size"), value.get("data")
            if (
                type(size) is not int
                or size < 0
                or not isinstance(encoded, str)
                or len(encoded) > FILE_CHUNK * 4 // 3 + 4
            ):
                raise SessionFileError(f"the sandbox answered the read of {path!r} with something that is not a file")
            if size > self.limit:
                raise SessionFileError(
                    f"{path!r} is {size:,} bytes; a file taken out of a session may have at most {self.limit:,}: "
                    "split or compress it in code (for example with zipfile) and take the parts"
                )
            try:
                chunk = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                raise SessionFileError(
                    f"the sandbox answered the read of {path!r} with bytes that are not base64"
                ) from None
            parts.append(chunk)
            received += len(chunk)
            if not chunk or received >= size or len(chunk) < FILE_CHUNK:
                break
            if received > self.limit:  # the file grows while it is read
                raise SessionFileError(f"{path!r} grew past {self.limit:,} bytes while it was read")
        return b"".join(parts)[: self.limit]

    async def write(self, worker: Worker, path: str, content: bytes) -> int:
        """Put ``content`` at ``path`` in ``worker``'s workspace (replacing a file there); returns its size."""
        path = checked_path(path)
        if len(content) > self.limit:
            raise SessionFileError(
                f"{path!r} is {len(content):,} bytes; a file put into a session may have at most {self.limit:,}"
            )
        request = {"op": "write", "path": path, "data": base64.b64encode(content).decode("ascii")}
        value = await self._ask(worker, request)
        size = value.get("size")
        if size != len(content):
            raise SessionFileError(f"the sandbox did not confirm writing {path!r}")
        return len(content)
