"""A transport's read stream that reports when it ends: how the hub learns a server died without a request failing.

Apart from the connection because it is a small stream adapter over the SDK's stream protocol, with no state of
the hub's own.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Generic, Self, TypeVar

import anyio
import anyio.lowlevel
from mcp.client import Transport
from mcp.shared.message import SessionMessage

if TYPE_CHECKING:  # the SDK's stream protocols live in a private module: use them for type checking only
    from mcp.shared._stream_protocols import ReadStream, WriteStream


T = TypeVar("T")


class _WatchedReadStream(Generic[T]):
    """A transport's read stream, passed through unchanged, that reports when it ends.

    The end of the read stream is how every transport shows a dead peer (EOF on a server's stdout, a closed
    HTTP stream), so this is the one place the hub learns that a server died without a request failing.
    """

    def __init__(self, inner: ReadStream[T], on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> contextvars.Context | None:
        # The dispatcher reads the sender's context from the stream it iterates; keep passing it on.
        context: contextvars.Context | None = getattr(self._inner, "last_context", None)
        return context

    async def receive(self) -> T:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


@asynccontextmanager
async def watched(
    transport: Transport, on_end: Callable[[], None]
) -> AsyncIterator[tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
    async with transport as (read_stream, write_stream):
        yield _WatchedReadStream(read_stream, on_end), write_stream
