"""A session's /workspace from the client's side: list it, take a file out, put one in.

The bytes live in the sandbox (a tmpfs of its own mount namespace, or a pod's volume), so every operation is a
request to the session's guest (``guest/worker_files.py``), which walks the path without following symlinks.
This module is the host's half: it checks each path before asking, so the client hears exactly what to fix, and
checks every answer after, because the guest shares its process with the code and may say anything. Sizes are
bounded both ways (``MAX_FILE_BYTES`` in, ``MCP_BRIDGE_FILE_READ_MAX`` out, and the workspace's own size, which its
tmpfs enforces), and the bytes all reads hold at once by the bridge's read budget (``read_budget.py``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from ..errors import CodemodeError
from ..guest.protocol import FILE_CHUNK, MAX_LISTED_FILES, workspace_path_problem
from ..sandbox.file_requests import FileRequestError
from ..sandbox.worker import Worker
from ..settings import Settings
from .read_budget import ReadBudget
from .sessions import SessionManager

MAX_FILE_BYTES = 32 * 1024 * 1024  # files put in with one call: an MCP message carries them whole, as base64
PAST_THE_END = 1 << 62  # a read offset no file reaches: the answer is the size alone
# Seconds a read may wait for room in the read budget before it is refused. Thirty-two 32 MiB reads at once, two
# at a time (the default budget), took 60 s on a busy 2-core machine: the last in line must not fail for that.
BUDGET_WAIT = 120.0
MAX_FILES_PER_CALL = 64  # files one run_python call may put in before its code runs
FILE_REQUEST_TIMEOUT = 30.0  # seconds the guest has to answer one request (a 4 MiB chunk takes milliseconds)
READ_TIMEOUT = 30.0  # seconds one whole read may take, while it holds its room in the read budget


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
        self.limit = min(settings.file_read_max, settings.workspace_size)
        self.budget = ReadBudget(settings.file_read_budget, BUDGET_WAIT)  # shared by all sessions

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
        """The whole file, as bytes of its own (for a caller that keeps it; ``reading`` copies nothing)."""
        async with self.reading(key, label, path) as data:
            return bytes(data)

    @contextlib.asynccontextmanager
    async def reading(self, key: str, label: str, path: str) -> AsyncIterator[bytearray]:
        """The whole file, held in the bridge's read budget for the body of the block (where the caller encodes it).

        The guest is asked for the file's size first (a read past its end), so the read reserves its room before
        any of its bytes reach the host; refused past the per-read cap before anything is read. Then the file comes
        in chunks of FILE_CHUNK, each decoded into one buffer of that size (no list of parts and no join: a 32 MiB
        read held 75 MiB of the bridge's memory with them). A file that grows meanwhile is read as far as the size
        it had; what a lying guest sends past it is dropped."""
        path = checked_path(path)
        worker = self._worker(key, label)
        size, _ = await self._chunk(worker, path, PAST_THE_END)
        async with self.budget.hold(size, f"reading {path!r}"):
            data = bytearray(size)
            received = 0
            try:
                # The whole read, not each chunk alone: a guest that answers slowly must not keep its room in the
                # budget, which other sessions' reads wait for, for FILE_REQUEST_TIMEOUT a chunk.
                async with asyncio.timeout(READ_TIMEOUT):
                    while received < size:
                        total, chunk = await self._chunk(worker, path, received)
                        take = min(len(chunk), size - received)
                        data[received : received + take] = memoryview(chunk)[:take]
                        received += take
                        if len(chunk) < FILE_CHUNK or total <= received:  # the file shrank, or this was its end
                            break
            except TimeoutError:
                raise SessionFileError(
                    f"the sandbox sent {received:,} of the {size:,} bytes of {path!r} in {READ_TIMEOUT:g} s; "
                    "retry, or make the file smaller"
                ) from None
            del data[received:]
            yield data

    async def _chunk(self, worker: Worker, path: str, offset: int) -> tuple[int, bytes]:
        """One read answer, checked: the file's size (refused past the cap) and the bytes from ``offset``."""
        value = await self._ask(worker, {"op": "read", "path": path, "offset": offset})
        size, encoded = value.get("size"), value.get("data")
        if type(size) is not int or size < 0 or not isinstance(encoded, str) or len(encoded) > FILE_CHUNK * 4 // 3 + 4:
            raise SessionFileError(f"the sandbox answered the read of {path!r} with something that is not a file")
        if size > self.limit:
            raise SessionFileError(
                f"{path!r} is {size:,} bytes; a file taken out of a session may have at most {self.limit:,} "
                "(MCP_BRIDGE_FILE_READ_MAX): split or compress it in code (for example with zipfile) and take the parts"
            )
        try:
            return size, base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise SessionFileError(
                f"the sandbox answered the read of {path!r} with bytes that are not base64"
            ) from None

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
