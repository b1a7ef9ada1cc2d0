"""Reading the MCP stdio channel without a thread.

The SDK reads standard input in a worker thread, and a thread blocked in ``read()`` cannot be cancelled:
on SIGTERM the server would wait for the client's next line before it could close its sandboxes. Reading
the descriptor in non-blocking mode from the event loop makes stopping immediate.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator

import anyio

_CHUNK = 1 << 16


class LineReader:
    """Lines of a file descriptor, as ``async for`` yields them (UTF-8, bad bytes replaced)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()
        self._eof = False

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        while (end := self._buffer.find(b"\n")) < 0:
            if self._eof:
                if not self._buffer:
                    raise StopAsyncIteration
                end = len(self._buffer) - 1
                break
            await anyio.wait_readable(self._fd)
            try:
                chunk = os.read(self._fd, _CHUNK)
            except BlockingIOError:
                continue
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True
        line = bytes(self._buffer[: end + 1])
        del self._buffer[: end + 1]
        return line.decode("utf-8", "replace")


@contextlib.contextmanager
def nonblocking_stdin() -> Iterator[LineReader]:
    """Standard input as a cancellable line reader; its blocking mode is restored afterwards."""
    fd = 0
    was_blocking = os.get_blocking(fd)
    os.set_blocking(fd, False)
    try:
        yield LineReader(fd)
    finally:
        with contextlib.suppress(OSError):
            os.set_blocking(fd, was_blocking)
