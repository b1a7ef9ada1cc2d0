"""The MCP stdio channel, read and written from the event loop without threads.

The SDK hands every read, write and flush of the channel to a worker thread. That costs three thread
hand-offs per request (about 0.4 ms of a 2 ms round trip here), and a thread blocked in ``read()`` cannot
be cancelled: on SIGTERM the server would wait for the client's next line before closing its sandboxes.
Here the channel is a pair of private non-blocking descriptors driven by the event loop, and fds 0 and 1
point at /dev/null and stderr while serving, so nothing else in the process can read from or print onto
the wire.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator

import anyio

_CHUNK = 1 << 16


class LineReader:
    """Lines of a non-blocking descriptor, as ``async for`` yields them (UTF-8, bad bytes replaced)."""

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
            try:
                chunk = os.read(self._fd, _CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True
        line = bytes(self._buffer[: end + 1])
        del self._buffer[: end + 1]
        return line.decode("utf-8", "replace")


class LineWriter:
    """The two methods the SDK's stdio loop calls on its output: ``write`` buffers, ``flush`` sends.

    ``sent`` is set once a first message has gone out whole: what ``serve`` waits for before it lets the bridge's
    start take the event loop, so the client's first answer is never queued behind it (cli/serve.py).
    """

    def __init__(self, fd: int, sent: anyio.Event | None = None) -> None:
        self._fd = fd
        self._pending = bytearray()
        self._sent = sent

    async def write(self, text: str) -> int:
        self._pending += text.encode("utf-8")
        return len(text)

    async def flush(self) -> None:
        while self._pending:
            try:
                written = os.write(self._fd, self._pending)
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
                continue
            del self._pending[:written]
        if self._sent is not None:
            self._sent.set()


def _private_copy(fd: int, flags: int) -> int:
    """A descriptor of our own for what ``fd`` refers to, preferably a new open file description.

    Reopening through /proc gives pipes and terminals their own description, so making it non-blocking
    does not change the client's end (a shared description would); sockets cannot be reopened, so they
    are duplicated instead.
    """
    try:
        copy = os.open(f"/proc/self/fd/{fd}", flags | os.O_CLOEXEC)
    except OSError:
        copy = os.dup(fd)
    os.set_blocking(copy, False)
    return copy


@contextlib.contextmanager
def private_stdio(sent: anyio.Event | None = None) -> Iterator[tuple[LineReader, LineWriter]]:
    """The process's stdin/stdout as a cancellable reader and writer; fds 0 and 1 are restored afterwards.
    ``sent``: set once the writer has sent a first message."""
    reader_fd = _private_copy(0, os.O_RDONLY)
    writer_fd = _private_copy(1, os.O_WRONLY)
    saved = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        yield LineReader(reader_fd), LineWriter(writer_fd, sent)
    finally:
        for original, target in zip(saved, (0, 1), strict=True):
            os.dup2(original, target)
            os.close(original)
        for fd in (reader_fd, writer_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
