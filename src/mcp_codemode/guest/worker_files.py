"""The client's files in and out of /workspace: the guest's answer to a FILES frame.

In the guest because only the sandbox can see its own /workspace (a tmpfs in the sandbox's mount namespace on
every backend, or a pod's volume): the host cannot open it without following paths the sandboxed code controls.
Answered on the control thread, so a client can take a file out while a cell runs.

Every path is walked one part at a time from a descriptor of the workspace, with ``O_NOFOLLOW`` at each step: a
symlink the code planted (``out.txt -> /etc/passwd``, ``data -> /``) is refused, never followed, and a FIFO is
opened without blocking and refused. Writes go to a temporary name beside the target and are renamed over it,
so a failed write (the workspace full) leaves the old file whole. The host checks every answer again: the code
shares this process and could change any of this.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms of start-up and is only needed by type checkers
    from typing import Any

if __package__:  # imported on the host (tests) as mcp_codemode.guest.worker_files
    from .protocol import FILE_CHUNK, FILE_REPLY, MAX_LISTED_FILES, MAX_PATH_PARTS, workspace_path_problem
else:  # in the sandbox the guest folder is on sys.path
    from protocol import (  # type: ignore[import-not-found,no-redef]
        FILE_CHUNK,
        FILE_REPLY,
        MAX_LISTED_FILES,
        MAX_PATH_PARTS,
        workspace_path_problem,
    )

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class FileProblem(Exception):
    """What the client is told; the message names the path and the cause."""


def answer(root: str, message: dict[str, Any]) -> dict[str, Any]:
    """The FILE_REPLY frame for one FILES frame (``root``: the workspace)."""
    reply: dict[str, Any] = {"type": FILE_REPLY, "id": message.get("id")}
    try:
        reply["value"] = _serve(root, message)
        reply["ok"] = True
    except FileProblem as exc:
        reply.update(ok=False, error={"message": str(exc)})
    except OSError as exc:
        reply.update(ok=False, error={"message": _os_problem(exc, message.get("path"))})
    return reply


def _serve(root: str, message: dict[str, Any]) -> dict[str, Any]:
    op = message.get("op")
    if op == "list" and message.get("path") == "":
        return _list(root, "")
    path = _checked(message.get("path"))
    if op == "list":
        return _list(root, path)
    if op == "read":
        offset = message.get("offset", 0)
        if type(offset) is not int or offset < 0:
            raise FileProblem("the read offset must be a whole number of bytes, at least 0")
        return _read(root, path, offset)
    if op == "write":
        data = message.get("data")
        try:
            content = base64.b64decode(data if isinstance(data, str) else "", validate=True)
        except (binascii.Error, ValueError) as exc:
            raise FileProblem("the file's content was not valid base64") from exc
        return _write(root, path, content)
    raise FileProblem(f"unknown file operation {op!r}")


def _checked(path: object) -> str:
    problem = workspace_path_problem(path)
    if problem or not isinstance(path, str):
        raise FileProblem(problem or "a file path must be a string")
    return path


def _open_folder(root: str, parts: list[str], create: bool = False) -> int:
    """A descriptor of the folder ``parts`` names under ``root``, never through a symlink."""
    fd = os.open(root, _DIRECTORY)
    try:
        for index, part in enumerate(parts):
            try:
                child = os.open(part, _DIRECTORY, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, _DIRECTORY, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    where = "/".join(parts[: index + 1])
                    raise FileProblem(f"{where!r} is not a folder of the workspace (a file or a symlink)") from exc
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _list(root: str, path: str) -> dict[str, Any]:
    """Files and folders under ``path``, depth first; symlinks and special files are left out (never followed)."""
    entries: list[dict[str, Any]] = []
    base = path.split("/") if path else []
    pending = [base]
    while pending:
        parts = pending.pop()
        try:
            fd = _open_folder(root, parts)
        except (OSError, FileProblem):
            if parts is base:
                raise
            continue  # changed under us (the code is running): leave it out
        try:
            names = sorted(os.listdir(fd))
            for name in names:
                try:
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    continue
                relative = "/".join([*parts, name])
                if stat.S_ISDIR(info.st_mode):
                    entries.append({"path": relative, "size": 0, "kind": "folder"})
                    if len(parts) + 1 < MAX_PATH_PARTS:
                        pending.append([*parts, name])
                elif stat.S_ISREG(info.st_mode):
                    entries.append({"path": relative, "size": info.st_size, "kind": "file"})
                if len(entries) >= MAX_LISTED_FILES:
                    return {"entries": entries, "more": True}
        finally:
            os.close(fd)
    entries.sort(key=lambda entry: entry["path"])
    return {"entries": entries, "more": False}


def _read(root: str, path: str, offset: int) -> dict[str, Any]:
    *folders, name = path.split("/")
    folder = _open_folder(root, folders)
    try:
        fd = os.open(name, _FILE, dir_fd=folder)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FileProblem(f"{path!r} is a symlink; only regular files of the workspace can be read") from exc
        raise
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileProblem(f"{path!r} is not a regular file")
        data = os.pread(fd, FILE_CHUNK, offset)
    finally:
        os.close(fd)
    return {"data": base64.b64encode(data).decode("ascii"), "size": info.st_size}


def _write(root: str, path: str, content: bytes) -> dict[str, Any]:
    *folders, name = path.split("/")
    folder = _open_folder(root, folders, create=True)
    temporary = f".{name[:200]}.{os.getpid()}.partial"
    try:
        fd = os.open(
            temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=folder
        )
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        try:
            info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISDIR(info.st_mode):
                raise FileProblem(f"{path!r} is a folder; name a file inside it")
        os.rename(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)  # replaces a symlink, never follows it
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder)
        raise
    finally:
        os.close(folder)
    return {"size": len(content)}


def _os_problem(exc: OSError, path: object) -> str:
    shown = repr(path) if isinstance(path, str) and path else "the workspace"
    if exc.errno == errno.ENOENT:
        return f"{shown} does not exist in the session's /workspace"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return f"the session's /workspace has no room for {shown} (its size is capped)"
    if exc.errno == errno.ENOTDIR:
        return f"a part of {shown} is a file, not a folder"
    if exc.errno == errno.EISDIR:
        return f"{shown} is a folder; name a file inside it"
    return f"{shown}: {os.strerror(exc.errno) if exc.errno else type(exc).__name__}"
