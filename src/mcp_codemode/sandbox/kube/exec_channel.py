"""A ``WorkerChannel`` over a Kubernetes ``pods/exec`` WebSocket: the guest's pipes, carried by the apiserver.

The pod runs an idle PID 1 and the bridge execs the guest's boot in it, so the exec stream's stdin, stdout and
stderr are exactly the pipes a local worker has, and ``worker.py`` runs over them unchanged. What this module
adds is what a pipe gives for free:

* Writes never block. Bytes are queued and a sender task sends them in messages of at most ``MESSAGE_BYTES``:
  large enough that a cell's frame costs one message (a round trip measures the stream, not the splitting), small
  enough for every hop to accept (the sandbox router caps a message at 16 MiB; a kubelet and any proxy between
  have limits of their own, and one 48 MiB reply as one message would be refused). ``unsent`` counts the queue
  and the message being sent (aiohttp's send waits for the socket to drain past its own small buffer), so the
  worker's reply backlog and its kill past it see a guest that stops reading, as over a pipe.
* Reading is bounded. The stdout and stderr readers are ``asyncio.StreamReader``s whose backpressure hook
  (``set_transport``: they call ``pause_reading`` past twice their limit and ``resume_reading`` when read
  down) is a gate the receive task waits on before taking the next message, so a guest that floods while the
  host does not read costs at most ``READER_LIMIT`` times two, plus one message, plus the frame being read.
* The exit status comes from the channel-3 ``Status``; a stream that ends without one, or breaks the protocol
  (``exec_protocol.py``), ends the channel with ``cause`` saying so, never with an exception in the bridge.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import ssl
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ...errors import SandboxStartError, SandboxUnavailable
from .exec_protocol import (
    CLOSE,
    ERROR,
    STDERR,
    STDIN,
    STDOUT,
    SUBPROTOCOLS,
    V5,
    ExecProtocolError,
    ExitStatus,
    decode_message,
    parse_status,
)

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger(__name__)

MESSAGE_BYTES = 256 * 1024  # stdin bytes per message (see the module's docstring)
LOW_WATER = 64 * 1024  # drain() returns once no more than this is unsent
READER_LIMIT = 1024 * 1024  # a reader pauses the stream past twice this much unread
MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # a message from the peer; larger ends the channel (aiohttp's default bound)
NO_STATUS = "the exec stream closed without an exit status"
CLOSED_HERE = "the bridge closed the exec stream (the worker was killed or shut down)"
UNKNOWN_EXIT = 255  # the exit code reported when the stream gave none (``cause`` says why)


class ExecRefused(SandboxStartError):
    """The endpoint answered the WebSocket handshake with an HTTP error (``status``): the backend says what it means
    (RBAC, credentials), knowing the namespace and able to ask the cluster which verb is missing."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class _Gate(asyncio.ReadTransport):
    """The transport a reader pauses and resumes: an event the receive task waits on, not a socket."""

    def __init__(self) -> None:
        super().__init__()
        self.open = asyncio.Event()
        self.open.set()

    def pause_reading(self) -> None:
        self.open.clear()

    def resume_reading(self) -> None:
        self.open.set()

    def is_reading(self) -> bool:
        return self.open.is_set()


class ExecChannel:
    """One exec stream as a worker's channel. Made by ``open_exec_channel``; ``close`` ends it from this side."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, session: aiohttp.ClientSession | None) -> None:
        import aiohttp

        self._aiohttp = aiohttp
        self._ws = ws
        self._session = session
        self.protocol = ws.protocol or ""
        self.stdout = asyncio.StreamReader(limit=READER_LIMIT)
        self.stderr = asyncio.StreamReader(limit=READER_LIMIT)
        self._gates = (_Gate(), _Gate())
        self.stdout.set_transport(self._gates[0])
        self.stderr.set_transport(self._gates[1])
        self._queue: collections.deque[memoryview] = collections.deque()
        self._queued = 0
        self._in_flight = 0
        self._wake = asyncio.Event()
        self._drained = asyncio.Event()
        self._done = asyncio.Event()
        self._status: ExitStatus | None = None
        self._closed: set[int] = set()  # the peer's channels it closed (v5)
        self._stdin_closing = False
        self._ended = False
        self.returncode: int | None = None
        self.cause: str | None = None  # why it ended without a plain exit code, for the backend's death_cause
        self._receiver = asyncio.create_task(self._receive_loop())
        self._sender = asyncio.create_task(self._send_loop())

    # -- the WorkerChannel contract ------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self._ended or self._stdin_closing or not data:
            return  # like a pipe to a dead process: the bytes are dropped, drain() says it is closed
        self._queue.append(memoryview(data))
        self._queued += len(data)
        self._wake.set()

    def unsent(self) -> int:
        return self._queued + self._in_flight

    async def drain(self) -> None:
        while True:
            if self._ended:
                raise ConnectionError(self.cause or NO_STATUS)
            if self.unsent() <= LOW_WATER:
                return
            self._drained.clear()
            await self._drained.wait()

    async def wait(self) -> int:
        await self._done.wait()
        assert self.returncode is not None
        return self.returncode

    # -- beyond the contract -------------------------------------------------------------------------------------

    def close_stdin(self) -> bool:
        """Close the guest's stdin once the queue is sent (v5 only: v4 can close it only with the whole stream)."""
        if self.protocol != V5 or self._ended:
            return False
        self._stdin_closing = True
        self._wake.set()
        return True

    async def close(self) -> None:
        """End the stream from this side (a kill, or cleanup); waits for both tasks. Safe to call twice."""
        if not self._ended:
            self._finish(CLOSED_HERE)
        await asyncio.gather(self._receiver, self._sender, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self._ws.close()
        if self._session is not None:
            await self._session.close()

    # -- the two tasks -------------------------------------------------------------------------------------------

    async def _send_loop(self) -> None:
        try:
            while True:
                while not self._queue:
                    if self._stdin_closing:
                        await self._ws.send_bytes(bytes((CLOSE, STDIN)))
                        return
                    self._wake.clear()
                    await self._wake.wait()
                parts: list[bytes | memoryview] = [bytes((STDIN,))]
                size = 0
                while self._queue and size < MESSAGE_BYTES:
                    item = self._queue[0]
                    room = MESSAGE_BYTES - size
                    if len(item) <= room:
                        self._queue.popleft()
                    else:
                        self._queue[0], item = item[room:], item[:room]
                    parts.append(item)
                    size += len(item)
                self._queued -= size
                self._in_flight = size
                await self._ws.send_bytes(b"".join(parts))
                self._in_flight = 0
                if self.unsent() <= LOW_WATER:
                    self._drained.set()
        except asyncio.CancelledError:
            raise
        except (ConnectionError, RuntimeError, self._aiohttp.ClientError) as exc:  # the stream is over: say why
            self._finish(f"the exec stream failed while sending ({type(exc).__name__}: {exc})")

    async def _receive_loop(self) -> None:
        kinds = self._aiohttp.WSMsgType
        reason: str | None = None
        try:
            while not self._ended:
                for gate in self._gates:
                    await gate.open.wait()
                message = await self._ws.receive()
                if message.type == kinds.BINARY:
                    self._on_binary(message.data)
                elif message.type == kinds.TEXT:
                    raise ExecProtocolError("the exec stream sent a text message (the protocol is binary)")
                elif message.type == kinds.ERROR:
                    raise ExecProtocolError(f"the exec stream failed: {self._ws.exception()}")
                elif message.type in (kinds.CLOSE, kinds.CLOSING, kinds.CLOSED):
                    break
        except asyncio.CancelledError:
            raise
        except ExecProtocolError as exc:
            reason = str(exc)
        except Exception as exc:  # anything else the peer made us choke on still ends only this channel
            log.exception("the exec stream's receive loop failed")
            reason = f"the exec stream could not be read ({type(exc).__name__})"
        self._finish(reason)

    def _on_binary(self, data: bytes) -> None:
        message = decode_message(data, self.protocol)
        if self._status is not None and message.channel != CLOSE:
            raise ExecProtocolError("the exec stream sent more after its exit status")
        if message.channel in self._closed:
            raise ExecProtocolError(f"the exec stream wrote on channel {message.channel} after closing it")
        if message.channel == CLOSE:
            closed = message.data[0]
            self._closed.add(closed)
            if closed in (STDOUT, STDERR):
                (self.stdout if closed == STDOUT else self.stderr).feed_eof()
        elif message.channel == ERROR:
            if message.data:
                self._status = parse_status(message.data)
        elif message.data:
            (self.stdout if message.channel == STDOUT else self.stderr).feed_data(message.data)

    def _finish(self, reason: str | None) -> None:
        """Record how the stream ended (the first reason wins) and wake everything waiting on it."""
        if self._ended:
            return
        self._ended = True
        status = self._status
        self.returncode = status.code if status is not None else UNKNOWN_EXIT
        self.cause = reason or (status.cause if status is not None else NO_STATUS)
        if reason and reason != CLOSED_HERE:
            log.warning("exec stream ended: %s", reason)
        for reader in (self.stdout, self.stderr):
            reader.feed_eof()
        for gate in self._gates:
            gate.open.set()
        self._queue.clear()
        self._queued = self._in_flight = 0
        self._drained.set()
        self._done.set()
        self._wake.set()
        current = asyncio.current_task()
        for task in (self._receiver, self._sender):
            if task is not current:
                task.cancel()


async def open_exec_channel(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    ssl_context: ssl.SSLContext | bool = True,
    protocols: Sequence[str] = SUBPROTOCOLS,
    session: aiohttp.ClientSession | None = None,
) -> ExecChannel:
    """Connect to a ``pods/exec`` URL (``exec_protocol.exec_url``) and speak the subprotocol the server chose.

    ``session``: share one client session (and its connection pool) between streams; without it the channel
    makes one of its own and closes it with the stream.
    """
    try:
        import aiohttp
    except ImportError:
        raise SandboxUnavailable(
            "the kubernetes backend's exec stream needs aiohttp, which is not installed",
            fix="pip install 'mcp-codemode[kubernetes]'",
        ) from None
    own = session is None
    client = aiohttp.ClientSession() if session is None else session
    try:
        ws = await client.ws_connect(
            url,
            protocols=tuple(protocols),
            headers=dict(headers or {}),
            ssl=ssl_context,
            max_msg_size=MAX_MESSAGE_BYTES,
            autoclose=True,
            autoping=True,
        )
        if ws.protocol not in protocols:
            await ws.close()
            offered = ", ".join(protocols)
            raise SandboxUnavailable(
                f"the exec endpoint at {url.split('?', 1)[0]} chose no subprotocol of {offered}",
                fix="use a Kubernetes apiserver of version 1.30 or newer (v5), or one that speaks v4.channel.k8s.io",
            )
    except aiohttp.WSServerHandshakeError as exc:
        if own:
            await client.close()
        if exc.status < 400:
            raise
        raise ExecRefused(
            f"the exec endpoint at {url.split('?', 1)[0]} refused the stream (HTTP {exc.status})", status=exc.status
        ) from None
    except BaseException:
        if own:
            await client.close()
        raise
    return ExecChannel(ws, client if own else None)
