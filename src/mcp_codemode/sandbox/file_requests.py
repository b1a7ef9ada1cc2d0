"""The client's requests for a session's files, asked of its guest on the worker's channel and matched to the answers.

A client lists, reads and writes the files of a session's /workspace (``runs/session_files.py``) through the
session's worker: a ``files`` frame down, the guest's ``file_reply`` back, answered on the guest's control thread
even while a cell runs. That exchange is a job of its own, beside the cell the worker runs: at most
``MAX_FILE_REQUESTS`` of one worker wait at once (more are refused, so a busy client cannot pile them up), each
waits until its answer, its timeout or the worker's death, whichever comes first, and its own hostile case is a
guest that forges answers: a ``file_reply`` is taken only for an id that waits, and only an answer with
``ok: true`` and an object ``value`` is one (its fields are the caller's to check); anything else is a refusal
whose message is cut. Words about the worker itself (that it is not running, or stopped) are the worker's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

from ..errors import CodemodeError
from ..guest.protocol import FILES

if TYPE_CHECKING:
    from ..guest.protocol import FileReplyFrame, FilesFrame

MAX_FILE_REQUESTS = 8  # file requests waiting for the guest at once, per worker; more are refused


class FileRequestError(CodemodeError):
    """A file request the guest refused or could not answer; the message is for the client."""


class FileRequests:
    """The file requests one worker sent its guest that wait for their answers."""

    def __init__(self, send: Callable[[FilesFrame], None], dead: asyncio.Event, ids: Iterator[int]) -> None:
        self._send = send
        self._dead = dead  # set when the worker died: nothing waits for its answer any longer
        self._ids = ids  # the worker's, so a request's id is never a running cell's
        self._waiting: dict[int, asyncio.Future[FileReplyFrame]] = {}

    async def ask(self, request: dict[str, Any], timeout: float) -> FileReplyFrame | None:
        """Send one request (``op``, ``path``, ...: a FILES frame's fields) and return the guest's answer, or None
        when the worker died or ``timeout`` passed first. ``FileRequestError`` when too many already wait."""
        if len(self._waiting) >= MAX_FILE_REQUESTS:
            raise FileRequestError(f"{MAX_FILE_REQUESTS} file requests to this session are waiting; retry shortly")
        request_id = next(self._ids)
        waiting: asyncio.Future[FileReplyFrame] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = waiting
        frame = cast("FilesFrame", {**request, "type": FILES, "id": request_id})
        dead: asyncio.Future[Any] = asyncio.ensure_future(self._dead.wait())
        either: set[asyncio.Future[Any]] = {waiting, dead}
        try:
            self._send(frame)
            await asyncio.wait(either, timeout=timeout, return_when="FIRST_COMPLETED")
        finally:
            dead.cancel()
            self._waiting.pop(request_id, None)
        return waiting.result() if waiting.done() else None

    def answered(self, request_id: int | None, message: FileReplyFrame) -> None:
        """A ``file_reply`` frame of id ``request_id`` (None: not one the host issues): the answer to the request of
        that id when one waits; any other is dropped."""
        waiting = self._waiting.pop(request_id or 0, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(message)


def answer_value(answer: FileReplyFrame) -> dict[str, Any]:
    """The ``value`` of the guest's answer, unchecked but for being an object; ``FileRequestError`` (its message
    cut) when the guest refused, or answered with anything else."""
    if answer.get("ok") is True and isinstance(answer.get("value"), dict):
        value: dict[str, Any] = answer["value"]
        return value
    error = answer.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    raise FileRequestError(message[:500] if isinstance(message, str) else "the sandbox refused the request")
