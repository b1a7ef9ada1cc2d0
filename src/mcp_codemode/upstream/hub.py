"""The hub: one persistent MCP client connection per configured upstream server, opened on first use.

Code in the sandbox calls upstream tools in loops, so each call must reuse a warm connection (a call costs about
5 ms) instead of paying for a process start and a handshake (0.2-0.3 s for a Node server, 0.6-0.8 s for a Python
one). The hub therefore keeps one ``mcp.Client`` per server, connects it lazily, shares it between concurrent
callers, notices when the server dies, restarts it on a later call with bounded backoff, and guarantees that no
server process outlives the hub, not even when the process that holds the hub is killed.

Each connection lives in its own long-lived task that owns the ``async with Client(...)``: the SDK's transports
use cancel scopes, which must be entered and left by the same task. Callers from any task send requests through
the connected session; the owning task only waits until it is told to stop or its transport ends.

Stdio servers are launched through a small ``/bin/sh`` wrapper, started by ``setpriv --pdeathsig KILL`` (and the
server itself again under ``setpriv --pdeathsig KILL``), so that:

* the kernel kills the wrapper when the hub's process dies (even by SIGKILL, when no cleanup code runs), and the
  server when the wrapper dies, so no server is orphaned;
* the server's pid and, when it ends, its exit status are written to its log file, where the hub reads them to
  fill ``ServerState.pid`` and to say *why* a server died (the SDK keeps its process object private).

When a server dies, the request in flight (or else the next one) fails with ``ServerUnavailable`` saying why,
and the call after that starts the server again. Repeated failures back off (0.5 s doubling to 30 s by default;
calls meanwhile fail at once, saying when the next try is); a connection that stayed up resets the backoff.

A server whose ``serverInfo`` says it is a code-mode bridge (this one, reached through a wrapper script or by its
HTTP URL, which config discovery cannot see through) is closed as soon as it has said so, and is never started
again: every call fails with ``SelfServerSkipped``, a ``ServerUnavailable``. ``allow_self`` keeps it.

Only asyncio is supported: the connection tasks are asyncio tasks. PDEATHSIG fires when the *thread* that
started the server ends, so the hub must run on a loop in a thread that lives at least as long as the hub (the
main thread, or a loop thread that closes the hub before it ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import datetime
import logging
import math
import os
import re
import shutil
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Literal, Self, TextIO, TypeVar
from urllib.parse import parse_qsl, urlsplit

import anyio
import anyio.lowlevel
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client import Transport
from mcp.client.session import IncomingMessage
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from .. import __version__
from .config import SELF_SERVER_SETTING, bridge_identity
from .errors import (
    HIDDEN,
    Redaction,
    ServerUnavailable,
    UnknownServer,
    UpstreamCallError,
    UpstreamTimeout,
    secret_args,
)
from .model import ServerConfig

if TYPE_CHECKING:  # the SDK's stream protocols live in a private module: use them for type checking only
    from mcp.shared._stream_protocols import ReadStream, WriteStream

logger = logging.getLogger(__name__)

Status = Literal["idle", "connecting", "ready", "failed"]
T = TypeVar("T")

# A connection that stayed up this long counts as healthy: its crash starts the backoff from the beginning.
STABLE_AFTER = 10.0
# How long a closing connection may take to wind down before it is cancelled (the SDK bounds stdio at ~6 s).
CLOSE_GRACE = 10.0
# Lines of a server's stderr quoted in an error, and the longest line quoted.
STDERR_TAIL_LINES = 12
STDERR_LINE_CHARS = 300
# A log file this big is rotated to <alias>.log.1 when the server next starts, so logs cannot fill the disk.
LOG_ROTATE_BYTES = 8 << 20
# How much of a log is read to find a pid, an exit status and the last lines of stderr.
LOG_TAIL_BYTES = 64 << 10
# A server that paginates forever cannot hang a listing.
PAGE_CAP = 100
# How long a server connected at a named 2026-era version may take to say who it is (see _server_info).
IDENTITY_WAIT = 5.0

# Lines the launcher and the hub write into a server's log; the prefix tells them from the server's own stderr.
MARK = "[mcp-codemode]"
# The outer wrapper runs the server in the foreground, so it stays its parent and sees its exit status.
_OUTER_SCRIPT = f'"$@"; status=$?; echo "{MARK} server exited with status $status" >&2; exit $status'
# The inner one reports the pid the server will have, then becomes it.
_INNER_SCRIPT = f'echo "{MARK} server pid $$" >&2; exec "$@"'
_SH = "/bin/sh"
_PID_LINE = re.compile(re.escape(MARK) + r" server pid (\d+)")
_EXIT_LINE = re.compile(re.escape(MARK) + r" server exited with status (\d+)")


@dataclasses.dataclass(frozen=True)
class ServerState:
    """A snapshot of one server's connection, for ``servers``/``doctor`` output and for tests.

    ``tools`` is the number of tools in the cached listing (None until listed), ``restarts`` how often the server
    was started again after its first start, ``pid`` the server's process id while a stdio server runs, and
    ``retry_in`` the seconds until the hub will try again after a failure (0: on the next call), and ``protocol``
    the protocol version negotiated on the last connection ("" before the first). ``error`` is why it failed as
    sandboxed code may see it (no secret, no host path); ``detail`` is the same for the bridge's user, with paths.
    """

    status: Status
    error: str = ""
    tools: int | None = None
    restarts: int = 0
    log_file: Path | None = None
    pid: int | None = None
    retry_in: float | None = None
    protocol: str = ""
    detail: str = ""


def backoff_delay(failures: int, first: float, ceiling: float) -> float:
    """Seconds to wait before the next start after ``failures`` consecutive failures.

    The first failure is retried by the next call (a crash is often a one-off); from the second on the wait
    doubles from ``first`` up to ``ceiling``, so a server that cannot start costs little and floods no log.
    """
    if failures <= 1:
        return 0.0
    return float(min(ceiling, first * 2 ** (failures - 2)))


class Hub:
    """Persistent, lazily opened MCP client connections to every configured upstream server.

    Use it as an async context manager: nothing starts on entry, each server starts on its first use, and on
    exit every connection is closed and every server process stopped.

    Two callbacks let the layer above follow the listings: ``on_tools_changed(name)`` when a server says its
    tools changed (its cached listing is dropped), and ``on_listing(name, tools)`` whenever a fresh listing is
    cached (first connection, restart, after a change). Both run on the event loop and must not block.
    """

    def __init__(
        self,
        servers: Sequence[ServerConfig],
        *,
        log_dir: Path,
        call_timeout: float = 60.0,
        connect_timeout: float = 30.0,
        on_tools_changed: Callable[[str], None] | None = None,
        on_listing: Callable[[str, tuple[types.Tool, ...]], None] | None = None,
        backoff: tuple[float, float] = (0.5, 30.0),
        secrets: Iterable[str] = (),
        allow_self: bool = False,
    ) -> None:
        """``secrets``: values no server's error text may show, besides each server's own ``env`` and ``headers``
        values (the bridge's HTTP tokens, credential-looking variables of its environment: ``secret_values``).
        ``allow_self`` (``MCP_BRIDGE_ALLOW_SELF_SERVER``) keeps a server that says it is a code-mode bridge."""
        secrets = tuple(secrets)
        self._connections: dict[str, _Connection] = {}
        self._aliases: dict[str, str] = {}
        setpriv = shutil.which("setpriv", path=get_default_environment().get("PATH", os.defpath))
        if setpriv is None and any(server.transport == "stdio" for server in servers):
            logger.warning(
                "setpriv (util-linux) is not on PATH: stdio servers will not be killed if this process is killed"
            )
        logs: set[str] = set()
        for server in servers:
            if server.name in self._connections:
                raise ValueError(f"two upstream servers are named {server.name!r}")
            # Aliases are unique once config discovery is done; should two collide, their logs must not.
            log_name = next(
                candidate
                for candidate in (server.alias, *(f"{server.alias}-{n}" for n in range(2, len(servers) + 2)))
                if candidate not in logs
            )
            logs.add(log_name)
            self._connections[server.name] = _Connection(
                server,
                log_file=log_dir / f"{log_name}.log" if server.transport == "stdio" else None,
                call_timeout=call_timeout,
                connect_timeout=connect_timeout,
                on_tools_changed=on_tools_changed,
                on_listing=on_listing,
                backoff=backoff,
                setpriv=setpriv,
                secrets=secrets,
                allow_self=allow_self,
            )
            self._aliases.setdefault(server.alias, server.name)
        self._warming: set[asyncio.Task[None]] = set()
        self._closed = False

    async def __aenter__(self) -> Hub:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every connection and stop every server process; idempotent."""
        self._closed = True
        for connection in self._connections.values():
            connection.closing = True
        await asyncio.gather(*(connection.close() for connection in self._connections.values()))
        if self._warming:
            await asyncio.wait(self._warming)

    def names(self) -> tuple[str, ...]:
        """The configured servers' names, in configuration order."""
        return tuple(self._connections)

    def config(self, name: str) -> ServerConfig:
        """The configuration of the server called ``name`` (its name, or its alias)."""
        return self._connection(name).config

    def state(self, name: str) -> ServerState:
        return self._connection(name).state()

    async def tools(self, name: str) -> tuple[types.Tool, ...]:
        """The server's tools: listed once, then served from the cache until the server says they changed.

        The cached tuple itself is returned (nothing can change it), so a caller can tell by identity that a
        listing is the one it saw before: the directory does, on every tool call.
        """
        return await self._connection(name).tools()

    def may_start(self, name: str) -> bool:
        """Whether a background start of this server is in order now (see ``warm``): not while it runs, backs
        off after failures, or owes its next caller the news that it crashed."""
        return self._connection(name).may_warm()

    async def call_tool(
        self, name: str, tool: str, arguments: dict[str, Any], timeout: float | None = None
    ) -> types.CallToolResult:
        """Call one tool; an ``isError`` answer is returned as it is, for the layer above to show the agent."""
        connection = self._connection(name)
        return await connection.request(
            f"tool {tool!r}",
            tool,
            lambda client: client.call_tool(tool, arguments),
            timeout,
        )

    async def list_resources(self, name: str) -> list[types.Resource]:
        return await self._connection(name).resources()

    async def read_resource(self, name: str, uri: str) -> types.ReadResourceResult:
        connection = self._connection(name)
        return await connection.request(f"resource {uri!r}", uri, lambda client: client.read_resource(uri), None)

    def warm(self, names: Iterable[str]) -> None:
        """Start connecting to these servers in the background and return at once (the ``servers`` hint).

        Failures are not raised here: they are recorded in ``state()`` and raised by the first real call.
        """
        connections = [self._connection(name) for name in names]
        if self._closed:
            return
        for connection in connections:
            if connection.may_warm():
                task = asyncio.get_running_loop().create_task(connection.warm())
                self._warming.add(task)
                task.add_done_callback(self._warming.discard)

    def _connection(self, name: str) -> _Connection:
        connection = self._connections.get(name) or self._connections.get(self._aliases.get(name, ""))
        if connection is None:
            raise UnknownServer(name, tuple(self._connections))
        return connection


class _Connection:
    """One server's connection, its state machine (idle → connecting → ready ⇄ failed) and its caches."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        log_file: Path | None,
        call_timeout: float,
        connect_timeout: float,
        on_tools_changed: Callable[[str], None] | None,
        on_listing: Callable[[str, tuple[types.Tool, ...]], None] | None,
        backoff: tuple[float, float],
        setpriv: str | None,
        secrets: Sequence[str] = (),
        allow_self: bool = False,
    ) -> None:
        self.config = config
        self.log_file = log_file
        self.redaction = redaction_for(config, log_file, secrets)
        self._call_timeout = call_timeout
        self._connect_timeout = connect_timeout
        self._on_tools_changed = on_tools_changed
        self._on_listing = on_listing
        self._backoff = backoff
        self._setpriv = setpriv
        self._allow_self = allow_self
        self.closing = False
        # Why this server is not used at all (it turned out to be a code-mode bridge); "" while it may be.
        self.refused = ""

        self.status: Status = "idle"
        self.error = ""
        self.pid: int | None = None
        self.protocol = ""
        self._starts = 0
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[Client] | None = None
        self._end: asyncio.Event | None = None
        self._scope: anyio.CancelScope | None = None
        self._dead = False  # the transport of the current connection has ended
        self._generation = 0  # one per start, so news about an old connection cannot touch the current one
        self._lock = asyncio.Lock()
        self._settled_starts = 0  # starts that have connected or failed, for callers queued behind one
        self._failures = 0
        self._retry_at = 0.0
        self._unreported = False  # a crash no caller has been told about yet
        self._log_offset = 0

        self._tools: tuple[types.Tool, ...] | None = None
        self._tools_generation = 0
        self._tools_lock = asyncio.Lock()

    # -- state ---------------------------------------------------------------------------------------------

    def state(self) -> ServerState:
        return ServerState(
            status=self.status,
            error=self.redaction.for_sandbox(self.error),
            tools=len(self._tools) if self._tools is not None else None,
            restarts=max(0, self._starts - 1),
            log_file=self.log_file,
            pid=self.pid,
            retry_in=self.retry_in() if self.status == "failed" and not self.refused else None,
            protocol=self.protocol,
            detail=self.redaction.for_host(self.error),
        )

    def may_warm(self) -> bool:
        """Whether a pre-load hint should start this server: not when running, backing off, or owing a report."""
        if self.refused:
            return False
        if self.status == "idle":
            return True
        return self.status == "failed" and not self._unreported and self.retry_in() == 0

    def retry_in(self) -> float:
        return max(0.0, self._retry_at - time.monotonic())

    def _unavailable(self) -> ServerUnavailable:
        if self.closing:
            return self._error("the bridge is shutting down")
        if self.refused:
            return SelfServerSkipped(self.config.name, self.refused, redaction=self.redaction)
        return self._error(
            self.error or "it is not connected",
            retry_in=self.retry_in() if self.status == "failed" else 0.0 if self.status == "idle" else None,
        )

    def _error(self, reason: str, retry_in: float | None = None) -> ServerUnavailable:
        return ServerUnavailable(
            self.config.name, reason, log_file=self.log_file, retry_in=retry_in, redaction=self.redaction
        )

    def _fail(self, reason: str) -> None:
        self.status = "failed"
        self.error = reason
        self.pid = None
        self._failures += 1
        self._retry_at = time.monotonic() + backoff_delay(self._failures, *self._backoff)

    # -- connecting --------------------------------------------------------------------------------------------

    def _live(self) -> tuple[Client, int] | None:
        if self.status == "ready" and not self._dead and self._client is not None:
            return self._client, self._generation
        return None

    async def ensure(self) -> tuple[Client, int]:
        """The connected client and its generation, starting the server if needed (once, however many ask)."""
        live = self._live()
        if live is not None:
            return live
        seen = self._settled_starts
        async with self._lock:
            if self.closing or self.refused:
                raise self._unavailable()
            live = self._live()
            if live is not None:
                return live
            if self.status == "connecting" and self._ready is not None:
                # The caller that started this attempt was cancelled while waiting; wait for it instead.
                return await asyncio.shield(self._ready), self._generation
            if self._task is not None:
                # Its transport ended: let the owning task finish winding down and record why.
                await self._settle()
            if self._unreported:
                self._unreported = False
                raise self._unavailable()
            if self.status == "failed" and (self._settled_starts != seen or self.retry_in() > 0):
                # A start failed while we queued behind it, or we are backing off: fail now, start later.
                raise self._unavailable()
            return await self._start(), self._generation

    async def _start(self) -> Client:
        loop = asyncio.get_running_loop()
        self._starts += 1
        self._generation += 1
        self.status = "connecting"
        self.error = ""
        self.pid = None
        self._dead = False
        ready: asyncio.Future[Client] = loop.create_future()
        ready.add_done_callback(_consume)
        self._ready = ready
        self._end = asyncio.Event()
        run = self._run(ready, self._end, self._generation)
        self._task = loop.create_task(run, name=f"mcp-codemode upstream {self.config.name}")
        return await asyncio.shield(ready)

    async def warm(self) -> None:
        try:
            await self.ensure()
        except ServerUnavailable as exc:
            logger.info("pre-loading upstream %r failed: %s", self.config.name, exc.host_message)

    async def _run(self, ready: asyncio.Future[Client], end: asyncio.Event, generation: int) -> None:
        """Own one connection from start to end; record how it ended.

        Every outcome resolves ``ready``: the client once connected, else a ServerUnavailable saying why.
        """
        started = time.monotonic()
        connected_at: float | None = None
        failure = ""
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + self._connect_timeout) as scope:
                self._scope = scope
                async with AsyncExitStack() as stack:
                    transport = await self._open_transport(stack)
                    try:
                        client = Client(
                            _watched(transport, lambda: self._transport_ended(generation)),
                            mode=self.config.protocol,
                            cache=None,  # the hub caches listings itself, invalidated by list_changed
                            message_handler=self._on_message,
                            client_info=types.Implementation(name="mcp-codemode", version=__version__),
                        )
                    except ValueError as exc:
                        raise _LaunchError(f'{exc}; fix its "protocol" in {self.config.source}') from exc
                    await stack.enter_async_context(client)
                    refusal = await self._refusal(client)
                    if refusal:
                        # Leaving the stack closes the connection: a bridge it started ends with it.
                        self.refused = failure = refusal
                    else:
                        scope.deadline = math.inf
                        connected_at = time.monotonic()
                        self._connected(client, connected_at - started)
                        ready.set_result(client)
                        await end.wait()
            if connected_at is None and not self.closing and not failure:
                failure = (
                    f"it did not complete the MCP handshake within {self._connect_timeout:g} s "
                    "(raise connect_timeout, env MCP_BRIDGE_CONNECT_TIMEOUT, if it is just slow)"
                )
                _, tail = self._exit_and_stderr()
                failure += f"; the end of its stderr:\n{tail}" if tail else ""

        except _LaunchError as exc:
            failure = str(exc)
        except Exception as exc:  # noqa: BLE001 - any transport or handshake failure is this server's outage
            failure = self._describe_failure(exc, started=connected_at is None)
        finally:
            self._client = None
            self._scope = None
            if not ready.done() and (self.closing or not failure):
                # Stopped (hub closing) or cancelled before it could connect.
                ready.set_exception(self._error("the bridge is shutting down"))
        self._finish(ready, connected_at, failure)

    async def _refusal(self, client: Client) -> str:
        """Why this connection must not be used: the server says it is a code-mode bridge ("" if it is not).

        The bridge is usually in the very files it reads, and not always recognisably (a wrapper script, its
        HTTP URL): proxying it would nest code mode inside code mode, and a copy it started would read the
        same files and start another. The name in ``serverInfo`` is checked in either protocol era (a
        2026-era server may not give one; then nothing can be told).
        """
        if self._allow_self:
            return ""
        info = await self._server_info(client)
        if info is None:
            return ""
        bridge = bridge_identity(info.name)
        if bridge is None:
            return ""
        return (
            f"it is {bridge} (its serverInfo says {info.name} {info.version}), which would nest code mode inside "
            f"code mode: skipped, and not started again; set {SELF_SERVER_SETTING} to use it anyway"
        )

    async def _server_info(self, client: Client) -> types.Implementation | None:
        """The name and version the server gave itself, asking it once if connecting did not.

        ``initialize`` and the ``server/discover`` of ``protocol: auto`` carry it. A 2026-era version named
        in the config is adopted without a word to the server, so the hub sends the ``server/discover`` the
        client skipped, bounded by ``IDENTITY_WAIT``: a server that does not answer it is not recognised,
        and is otherwise used as it would have been.
        """
        info = client.server_info
        if info is not None or self.config.protocol in ("legacy", "auto"):
            return info
        raw: dict[str, Any] | None = None
        with anyio.move_on_after(IDENTITY_WAIT), contextlib.suppress(MCPError):
            raw = await client.session.send_discover(client.protocol_version)
        meta = raw.get("_meta") if raw is not None else None
        stamp = meta.get(types.SERVER_INFO_META_KEY) if isinstance(meta, dict) else None
        if stamp is None:
            return None
        try:
            return types.Implementation.model_validate(stamp)
        except ValidationError:
            return None

    def _finish(self, ready: asyncio.Future[Client], connected_at: float | None, failure: str) -> None:
        name = self.config.name
        if self.closing:
            if connected_at is not None:
                logger.info("upstream %r stopped", name)
            self.status = "idle"
            self.pid = None
            return
        if connected_at is None and self.refused:
            self._settled_starts += 1
            self._fail(self.refused)
            self._note(f"skipped: {self.refused}")
            logger.warning("upstream %r skipped: %s", name, self.refused)
            if not ready.done():
                ready.set_exception(self._unavailable())
            if self._on_tools_changed is not None:
                # A listing cached on an earlier run, when it was still proxied, must not be served any longer.
                try:
                    self._on_tools_changed(name)
                except Exception:
                    logger.exception("on_tools_changed(%r) failed", name)
            return
        if connected_at is None:
            self._settled_starts += 1
            self._fail(failure)
            self._note(f"failed to start: {headline(failure)}")
            logger.warning("upstream %r failed to start: %s", name, failure)
            if not ready.done():
                ready.set_exception(self._unavailable())
            return
        reason = failure or self._crash_reason()
        if self.config.transport != "stdio" and not failure:
            # A remote connection that closes cleanly is not a crash (idle SSE streams time out, servers restart):
            # the next call reconnects, and if the server is really gone that attempt says so.
            self.status = "idle"
            self.error = reason
            logger.info("upstream %r: %s; the next call reconnects", name, reason)
            return
        if time.monotonic() - connected_at >= STABLE_AFTER:
            self._failures = 0
        self._fail(reason)
        self._unreported = True
        self._note(f"stopped unexpectedly: {headline(reason)}")
        logger.warning("upstream %r stopped unexpectedly: %s", name, reason)

    def _connected(self, client: Client, seconds: float) -> None:
        self._settled_starts += 1
        self._client = client
        self.pid = self._read_pid()
        self.protocol = client.protocol_version
        self.status = "ready"
        self.error = ""
        # A restarted server may have other tools (an upgrade, another config).
        self._tools = None
        self._tools_generation += 1
        what = "restarted" if self._starts > 1 else "started"
        pid = f", pid {self.pid}" if self.pid is not None else ""
        logger.info("upstream %r %s in %.2f s (%s%s)", self.config.name, what, seconds, self.config.transport, pid)

    def _transport_ended(self, generation: int) -> None:
        if generation == self._generation:
            self._dead = True
            if self._end is not None:
                self._end.set()

    async def _open_transport(self, stack: AsyncExitStack) -> Transport:
        config = self.config
        # An HTTP read may take as long as the longest call (the hub's own timeouts bound every request).
        read_timeout = max(300.0, self._call_timeout, config.timeout or 0.0) + 30.0
        if config.transport == "http":
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=dict(config.headers), timeout=httpx2.Timeout(30.0, read=read_timeout))
            )
            logger.info("connecting to upstream %r at %s", config.name, config.url)
            return streamable_http_client(config.url, http_client=http)
        if config.transport == "sse":
            logger.info("connecting to upstream %r at %s", config.name, config.url)
            return sse_client(config.url, headers=dict(config.headers) or None, sse_read_timeout=read_timeout)
        command = _resolve_command(config)
        if config.cwd is not None and not os.path.isdir(config.cwd):
            raise _LaunchError(f"its working directory {config.cwd!r} does not exist; fix cwd in {config.source}")
        errlog = stack.enter_context(self._open_log())
        guard = [self._setpriv, "--pdeathsig", "KILL", "--"] if self._setpriv else []
        # sh exports PWD to what it runs; the server gets exactly its configured environment, so drop it.
        unset = "" if "PWD" in config.env else "unset PWD; "
        inner = [_SH, "-c", unset + _INNER_SCRIPT, "mcp-codemode-server", *guard, command, *config.args]
        argv = [*guard, _SH, "-c", unset + _OUTER_SCRIPT, "mcp-codemode-launcher", *inner]
        logger.info("starting upstream %r: %s", config.name, config.target)
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(config.env) or None, cwd=config.cwd)
        return stdio_client(params, errlog=errlog)

    def _open_log(self) -> TextIO:
        """Open the server's log for appending, after a line that marks this start (and where it begins)."""
        assert self.log_file is not None
        try:
            if self.log_file.stat().st_size > LOG_ROTATE_BYTES:
                self.log_file.replace(self.log_file.with_name(self.log_file.name + ".1"))
        except FileNotFoundError:
            pass
        log = _open_private_log(self.log_file)
        self._log_offset = log.tell()
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        log.write(f"{MARK} {now} starting {self.config.name!r} (start {self._starts}): {self.config.target}\n")
        log.flush()
        return log

    def _note(self, event: str) -> None:
        """Record a failure in the server's log too, so the log alone tells what happened (even if it never ran)."""
        if self.log_file is None:
            return
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        try:
            with _open_private_log(self.log_file) as log:
                log.write(f"{MARK} {now} {self.config.name!r} {event}\n")
        except OSError as exc:
            logger.warning("cannot write to %s: %s", self.log_file, exc)

    def _read_log(self, *, tail: bool) -> str:
        """The start (where the pid is) or the end (exit status, last words) of this start's part of the log."""
        if self.log_file is None:
            return ""
        try:
            with self.log_file.open("rb") as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(self._log_offset, size - LOG_TAIL_BYTES) if tail else self._log_offset)
                data = log.read(LOG_TAIL_BYTES)
        except OSError:
            return ""
        text = data.decode("utf-8", "replace")
        # A tail read may start mid-line: drop that partial first line.
        return text.split("\n", 1)[-1] if tail and size - self._log_offset > LOG_TAIL_BYTES else text

    def _read_pid(self) -> int | None:
        found = _PID_LINE.findall(self._read_log(tail=False))
        return int(found[-1]) if found else None

    def _exit_and_stderr(self) -> tuple[str, str]:
        """How the server's process ended (if it did), and the end of what it wrote to stderr, from its log."""
        text = self._read_log(tail=True)
        statuses = _EXIT_LINE.findall(text)
        ending = _describe_exit(int(statuses[-1])) if statuses else ""
        lines = [line for line in text.splitlines() if line.strip() and not line.startswith(MARK)]
        tail = [line if len(line) <= STDERR_LINE_CHARS else line[:STDERR_LINE_CHARS] + "…" for line in lines]
        tail = tail[-STDERR_TAIL_LINES:]
        return ending, "\n".join("  | " + line for line in tail)

    def _describe_failure(self, exc: BaseException, *, started: bool) -> str:
        if self.config.transport != "stdio":
            verb = "could not connect to" if started else "lost its connection to"
            return f"it {verb} {self.config.url}: {_remote_cause(exc)}"
        ending, tail = self._exit_and_stderr()
        if not ending and isinstance(exc, OSError):
            return f"it could not be started: {exc}"
        when = "during startup" if started else "while connected"
        leaf = _leaf(exc)
        reason = f"{ending} {when}" if ending else f"the MCP handshake failed ({type(leaf).__name__}: {leaf})"
        return reason + (f"; the end of its stderr:\n{tail}" if tail else "; it wrote nothing to stderr")

    def _crash_reason(self) -> str:
        if self.config.transport != "stdio":
            return f"the connection to {self.config.url} closed"
        ending, tail = self._exit_and_stderr()
        reason = f"{ending} while connected" if ending else "it closed its output while connected"
        return reason + (f"; the end of its stderr:\n{tail}" if tail else "")

    async def _settle(self) -> None:
        """Wait (bounded) for the owning task to finish after its transport ended or it was told to stop."""
        task = self._task
        if task is None:
            return
        if self._end is not None:
            self._end.set()
        done, _ = await asyncio.wait({task}, timeout=CLOSE_GRACE)
        if not done:
            if self._scope is not None:
                self._scope.cancel()
            await asyncio.wait({task})
        self._task = None
        self._ready = None

    async def close(self) -> None:
        self.closing = True
        if self.status == "connecting" and self._scope is not None:
            self._scope.cancel()
        await self._settle()
        self.status = "idle"
        self.pid = None

    # -- requests ----------------------------------------------------------------------------------------------

    def _timeout(self, given: float | None) -> tuple[float, str]:
        if given is not None:
            return given, "the timeout passed with the call"
        if self.config.timeout is not None:
            return self.config.timeout, f'this server\'s "timeout" in {self.config.source}'
        return self._call_timeout, "tool_timeout (env MCP_BRIDGE_TOOL_TIMEOUT)"

    async def request(
        self, what: str, subject: str, send: Callable[[Client], Awaitable[T]], timeout: float | None
    ) -> T:
        """Send one request on the live connection, turning every way it can fail into one of the hub's errors."""
        client, generation = await self.ensure()
        seconds, setting = self._timeout(timeout)
        try:
            with anyio.move_on_after(seconds) as scope:
                return await send(client)
        except MCPError as exc:
            closed = exc.code == types.CONNECTION_CLOSED and exc.message == "Connection closed"
            if closed or self._live() != (client, generation):
                raise await self._lost(generation) from exc
            raise UpstreamCallError(
                self.config.name, what, exc.code, exc.message, exc.data, redaction=self.redaction
            ) from exc
        except (RuntimeError, ValidationError, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            if self._live() != (client, generation):
                raise await self._lost(generation) from exc
            if isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError)):
                raise
            raise UpstreamCallError(
                self.config.name, what, None, f"its answer was malformed: {exc}", redaction=self.redaction
            ) from exc
        assert scope.cancelled_caught
        raise UpstreamTimeout(self.config.name, subject, seconds, setting, redaction=self.redaction)

    async def _lost(self, generation: int) -> ServerUnavailable:
        """The connection died under a request: wait for it to be wound down, then say why it died."""
        self._transport_ended(generation)
        async with self._lock:
            if generation != self._generation:
                return self._error("its connection was lost during the request (it has been started again since)")
            await self._settle()
            self._unreported = False
            return self._unavailable()

    async def tools(self) -> tuple[types.Tool, ...]:
        if self._tools is not None:
            return self._tools
        # Connect before queueing for the listing, so concurrent first callers share one start and its outcome.
        await self.ensure()
        async with self._tools_lock:
            listed: tuple[types.Tool, ...] = ()
            for _ in range(3):
                if self._tools is not None:
                    return self._tools
                generation = self._tools_generation
                listed = tuple(await self.request("tools/list", "tools/list", _list_tools, None))
                # A list_changed that arrived while we listed makes this listing stale: list again.
                if generation == self._tools_generation:
                    self._tools = listed
                    self._listed(listed)
                    return listed
            return listed  # it keeps changing: serve the latest, cache nothing

    def _listed(self, tools: tuple[types.Tool, ...]) -> None:
        if self._on_listing is None:
            return
        try:
            self._on_listing(self.config.name, tools)
        except Exception:
            logger.exception("on_listing(%r) failed", self.config.name)

    async def resources(self) -> list[types.Resource]:
        client, _ = await self.ensure()
        if client.server_capabilities.resources is None:
            return []
        return await self.request("resources/list", "resources/list", _list_resources, None)

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._tools = None
            self._tools_generation += 1
            logger.info("upstream %r says its tools changed", self.config.name)
            if self._on_tools_changed is not None:
                try:
                    self._on_tools_changed(self.config.name)
                except Exception:
                    logger.exception("on_tools_changed(%r) failed", self.config.name)
        elif isinstance(message, Exception):
            logger.warning("upstream %r: transport error: %s", self.config.name, message)
        await anyio.lowlevel.checkpoint()


class SelfServerSkipped(ServerUnavailable):
    """The server said it is a code-mode bridge (this one, most likely): closed, skipped, never started again.

    A ``ServerUnavailable`` like any other to code that calls it; ``mcp-codemode servers`` lists it as skipped.
    """


class _LaunchError(Exception):
    """A stdio server cannot even be launched (command missing, bad cwd): a reason for a person, no traceback."""


def _resolve_command(config: ServerConfig) -> str:
    """The executable the server's command names, found as the server's own PATH would find it.

    Done before launching so that a missing command is reported as such, with the PATH that was searched and
    the file to fix, instead of as a spawn error from deep inside the SDK.
    """
    command = config.command
    if not command:
        raise _LaunchError(f"it has no command to run; add one in {config.source}")
    if "/" in command:
        path = Path(config.cwd or ".") / command if not os.path.isabs(command) else Path(command)
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        raise _LaunchError(f"command {command!r} is not an executable file; fix its path in {config.source}")
    search = (get_default_environment() | dict(config.env)).get("PATH", os.defpath)
    found = shutil.which(command, path=search)
    if found is None:
        raise _LaunchError(
            f"command {command!r} not found on PATH ({search}); install it or give its full path in {config.source}"
        )
    return found


def _open_private_log(path: Path) -> TextIO:
    """Open a server's log for appending, readable by the bridge's user only.

    Servers may log what they were given (tokens in URLs, headers, their environment). Modes are set again on
    every open, because a directory or file made by an older version, or by hand, may be world-readable.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(OSError):
        path.parent.chmod(0o700)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o600)
    return open(fd, "a", encoding="utf-8")


def redaction_for(config: ServerConfig, log_file: Path | None, secrets: Iterable[str] = ()) -> Redaction:
    """What of one server's texts stays on the host.

    Hidden from everyone: the values of its ``env`` and ``headers`` (and each word of a header value, so a
    quoted ``Bearer`` token is caught alone), credentials in its URL (user, password, query values) and in its
    args (``--token X``), and ``secrets``. Hidden from sandboxed code only: its log file, its config file, its
    URL and the bridge's ``PATH``, which say where things are on the host and help nobody in the sandbox.
    """
    hidden = [*config.env.values(), *config.headers.values(), *secret_args(config.args), *secrets]
    hidden += [word for value in config.headers.values() for word in value.split()]
    if config.url:
        parts = urlsplit(config.url)
        hidden += [parts.username or "", parts.password or ""]
        hidden += [value for _, value in parse_qsl(parts.query, keep_blank_values=True)]
    secret = Redaction.of(hidden)
    host_only: list[tuple[str, str]] = []
    if log_file is not None:
        host_only.append((str(log_file), "its log file"))
    if "/" in config.source:  # a path, or "--config PATH"; a bare label (tests) would garble other words
        host_only.append((config.source, "its config file"))
    if config.url:
        host_only += [(config.url, "its URL"), (secret.for_host(config.url), "its URL")]
    path = get_default_environment().get("PATH")
    if path:
        host_only.append((path, HIDDEN))
    return Redaction.of(hidden, host_only)


def _describe_exit(status: int) -> str:
    if status > 128:
        number = status - 128
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "unknown signal"
        return f"it was killed by signal {number} ({name})"
    return f"it exited with status {status}"


def headline(reason: str) -> str:
    """A reason without the stderr lines quoted after it (the log they would go into already has them)."""
    return (reason.split("; the end of its stderr", 1)[0].splitlines() or [""])[0]


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups, which is what a person needs to read."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _remote_cause(exc: BaseException) -> str:
    """Why an HTTP connection failed, in the words a person would search for (httpx's own are vaguer)."""
    leaf = _leaf(exc)
    cause: BaseException | None = leaf
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused (is the server running, and on that port?)"
        cause = cause.__cause__ or cause.__context__
    return f"{type(leaf).__name__}: {leaf}"


def _consume(future: asyncio.Future[Any]) -> None:
    """Mark a start's outcome as retrieved: a failed warm-up nobody awaited is recorded in state, not an error."""
    if not future.cancelled():
        future.exception()


async def _list_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(PAGE_CAP):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


async def _list_resources(client: Client) -> list[types.Resource]:
    resources: list[types.Resource] = []
    cursor: str | None = None
    for _ in range(PAGE_CAP):
        page = await client.list_resources(cursor=cursor)
        resources.extend(page.resources)
        cursor = page.next_cursor
        if cursor is None:
            break
    return resources


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
async def _watched(
    transport: Transport, on_end: Callable[[], None]
) -> AsyncIterator[tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
    async with transport as (read_stream, write_stream):
        yield _WatchedReadStream(read_stream, on_end), write_stream
