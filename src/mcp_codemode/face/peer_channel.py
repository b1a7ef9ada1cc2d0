"""The forwarding replica's side of ``POST /internal/v1/run``: one HTTP/1.1 request on a kept-alive loopback or
cluster connection, its answer read as it streams (JSON lines: progress, then the result).

Why not httpx, which the rest of the bridge uses: a forwarded call must cost at most about a millisecond more
than a direct one (issue 22's target), and httpx's layers cost 0.8 ms per streamed request here against 0.25 ms
for the same exchange written straight to a socket. h11 (the HTTP/1.1 state machine under httpx and uvicorn) does
the parsing, so framing, chunking and keep-alive follow the protocol; this module only moves bytes and keeps
idle connections, one list per peer. The answer comes from a replica holding the shared token, but its bytes are
still bounded: h11 caps the head, and a line of the body may not exceed ``MAX_LINE``.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass

import h11

from ..errors import CodemodeError

MAX_LINE = 64 << 20  # a result line: output, value and images of one call are bounded well below this
READ_SIZE = 64 << 10
# uvicorn closes a kept-alive connection after 5 s idle; one idle longer than this is not reused.
IDLE_REUSE = 4.0


class PeerUnreachable(CodemodeError, OSError):
    """The peer refused or dropped the connection before answering (it is gone, or not there yet)."""


class PeerBroke(CodemodeError):
    """The peer's answer broke off or was not HTTP/1.1: the call's outcome is unknown."""


@dataclass
class Answer:
    status: int
    lines: AsyncIterator[bytes]  # the body, line by line (without the newline), as it arrives

    async def body(self) -> bytes:
        return b"\n".join([line async for line in self.lines])


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, read_timeout: float) -> None:
        self.reader = reader
        self.writer = writer
        self.read_timeout = read_timeout
        self.state = h11.Connection(our_role=h11.CLIENT, max_incomplete_event_size=64 << 10)
        self.idle_since = 0.0
        self.reused = False
        self.received = 0  # bytes read in this exchange: none means the peer never answered

    def close(self) -> None:
        self.writer.close()

    async def next_event(self) -> object:
        while True:
            event = self.state.next_event()
            if event is not h11.NEED_DATA:
                return event
            try:
                async with asyncio.timeout(self.read_timeout):  # no task per read, unlike wait_for
                    data = await self.reader.read(READ_SIZE)
            except TimeoutError:
                raise PeerBroke(f"no word from the peer for {self.read_timeout:g} s") from None
            self.received += len(data)
            self.state.receive_data(data)  # b"" marks the end: h11 then says whether that was allowed


class PeerChannel:
    """Kept-alive HTTP/1.1 connections to the other replicas, one idle list per peer address."""

    def __init__(self, connect_timeout: float, read_timeout: float, max_line: int = MAX_LINE) -> None:
        """``read_timeout``: the longest silence in an answer (the owner sends progress at least that often)."""
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.max_line = max_line
        self._idle: dict[tuple[str, int], list[_Connection]] = {}

    async def close(self) -> None:
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()

    @contextlib.asynccontextmanager
    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> AsyncIterator[Answer]:
        """POST ``body`` to ``url``; the answer streams while the block runs. A connection goes back to the idle
        list only when its answer was read to the end; an error or a cancellation closes it, which is how the
        peer learns that the caller went away."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"a peer replica's URL must be http://HOST:PORT, not {url!r}")
        address = (parts.hostname, parts.port or 80)
        connection = await self._connection(address)
        finished = False
        try:
            try:
                answer = await self._send(connection, parts, body, headers)
            except PeerUnreachable:
                if not connection.reused:
                    raise
                # The peer closed that idle connection as we sent on it: once more, on a new one.
                connection.close()
                connection = await self._connection(address, reuse=False)
                answer = await self._send(connection, parts, body, headers)
            yield answer
            async for _ in answer.lines:  # the rest of the body, so the connection can be used again
                pass
            finished = connection.state.our_state is h11.DONE and connection.state.their_state is h11.DONE
        finally:
            if finished:
                connection.state.start_next_cycle()
                connection.idle_since = asyncio.get_running_loop().time()
                self._idle.setdefault(address, []).append(connection)
            else:
                connection.close()

    async def _connection(self, address: tuple[str, int], reuse: bool = True) -> _Connection:
        idle = self._idle.get(address) if reuse else None
        now = asyncio.get_running_loop().time()
        while idle:
            connection = idle.pop()
            if not connection.reader.at_eof() and now - connection.idle_since < IDLE_REUSE:
                connection.reused = True
                return connection
            connection.close()
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(*address), self.connect_timeout)
        except (OSError, TimeoutError) as exc:
            raise PeerUnreachable(f"cannot connect to {address[0]}:{address[1]}: {exc}") from None
        return _Connection(reader, writer, self.read_timeout)

    async def _send(self, connection: _Connection, parts: urllib.parse.SplitResult, body: bytes,
                    headers: dict[str, str]) -> Answer:  # fmt: skip
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        fields = [("Host", parts.netloc), ("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                  *headers.items()]  # fmt: skip
        state = connection.state
        connection.received = 0
        try:
            events = (
                h11.Request(method="POST", target=target, headers=fields),
                h11.Data(data=body),
                h11.EndOfMessage(),
            )
            connection.writer.write(b"".join(state.send(event) or b"" for event in events))  # one write, one packet
            await connection.writer.drain()
            event = await connection.next_event()
        except (OSError, h11.RemoteProtocolError) as exc:
            if connection.received:
                raise PeerBroke(f"the answer was not HTTP/1.1: {exc}") from None
            # Nothing came back: a peer that is gone (or a kept-alive connection it closed meanwhile).
            raise PeerUnreachable(f"the connection failed before an answer: {exc}") from None
        if isinstance(event, h11.ConnectionClosed):
            raise PeerUnreachable("the peer closed the connection without answering")
        if not isinstance(event, h11.Response):
            raise PeerBroke(f"expected an HTTP response, got {type(event).__name__}")
        return Answer(event.status_code, self._lines(connection))

    async def _lines(self, connection: _Connection) -> AsyncIterator[bytes]:
        pending = bytearray()  # appended to in place: a result of megabytes arrives in many reads
        while True:
            try:
                event = await connection.next_event()
            except (OSError, h11.RemoteProtocolError) as exc:
                raise PeerBroke(f"the answer broke off: {exc}") from None
            if isinstance(event, h11.Data):
                searched = len(pending)
                pending += event.data
                end = pending.find(b"\n", searched)
                while end != -1:
                    yield bytes(pending[:end])
                    del pending[: end + 1]
                    end = pending.find(b"\n")
                if len(pending) > self.max_line:
                    raise PeerBroke(f"a line of the answer is over {self.max_line} bytes")
            elif isinstance(event, h11.EndOfMessage):
                if pending:
                    yield bytes(pending)
                return
            elif isinstance(event, h11.ConnectionClosed):
                raise PeerBroke("the answer ended without its end")
