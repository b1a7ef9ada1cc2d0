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

import binascii
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
    except Exception as exc:  # noqa: BLE001 - this runs on the control thread: raising here would end the worker
        reply.update(ok=False, error={"message": f"the sandbox failed to answer ({type(exc).__name__})"})
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
        import base64  # here: it imports re, about 1.2 MiB an idle sandbox would keep (docs/density.md)

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
    device = os.fstat(fd).st_dev
    try:
        for index, part in enumerate(parts):
            where = "/".join(parts[: index + 1])
            if create:
                try:  # noqa: SIM105 - no contextlib in the guest: it costs every idle sandbox ~0.9 MiB
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            child = _open_beside(fd, part, _DIRECTORY, where, device, folder=True)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_beside(parent: int, name: str, flags: int, where: str, device: int, folder: bool = False) -> int:
    """Open ``name`` in ``parent`` only if it is what ``lstat`` saw there: a folder (or a regular file) of the
    workspace's own file system, not a symlink. ``O_NOFOLLOW`` alone is not enough: gVisor follows a symlink to a
    folder opened with ``O_DIRECTORY | O_NOFOLLOW``, and the code could swap a name between the look and the open;
    comparing the opened inode with the one looked at refuses both. The device check keeps the walk off other
    mounts (a bind mount under /workspace)."""
    seen = os.stat(name, dir_fd=parent, follow_symlinks=False)
    if folder and not stat.S_ISDIR(seen.st_mode):
        what = "a symlink" if stat.S_ISLNK(seen.st_mode) else "a file"
        raise FileProblem(f"{where!r} is not a folder of the workspace ({what})")
    if not folder and stat.S_ISLNK(seen.st_mode):
        raise FileProblem(f"{where!r} is a symlink; only regular files of the workspace can be read")
    if not folder and not stat.S_ISREG(seen.st_mode):
        raise FileProblem(f"{where!r} is not a regular file")
    if seen.st_dev != device:
        raise FileProblem(f"{where!r} is on another file system than the workspace (a mount); it cannot be reached")
    try:
        fd = os.open(name, flags, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise FileProblem(f"{where!r} changed while it was opened; retry") from exc
        raise
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (seen.st_dev, seen.st_ino):
        os.close(fd)
        raise FileProblem(f"{where!r} changed while it was opened; retry")
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
        fd = _open_beside(folder, name, _FILE, path, os.fstat(folder).st_dev)
    finally:
        os.close(folder)
    try:
        size = os.fstat(fd).st_size
        data = os.pread(fd, FILE_CHUNK, offset)
    finally:
        os.close(fd)
    return {"data": binascii.b2a_base64(data, newline=False).decode("ascii"), "size": size}


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
        try:  # noqa: SIM105 - no contextlib in the guest (idle memory)
            os.unlink(temporary, dir_fd=folder)
        except OSError:
            pass
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
