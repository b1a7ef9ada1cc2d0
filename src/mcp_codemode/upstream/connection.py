"""One upstream server's connection: its state machine (idle → connecting → ready ⇄ failed) and its caches.

Over 400 lines because it is one cohesive thing: a single class owns the long-lived task that holds the SDK's
``async with Client(...)`` (the transports' cancel scopes must be entered and left by the same task), and its
states, restarts, log reading and error wording all turn on that one task's fields. The launcher, the restart
rule, pagination, redaction and the stream watcher are in their own modules.

A server whose ``serverInfo`` says it is a code-mode bridge (this one, reached through a wrapper script or by its
HTTP URL, which config discovery cannot see through) is closed as soon as it has said so, and is never started
again: every call fails with ``SelfServerSkipped``, a ``ServerUnavailable``. ``allow_self`` keeps it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TextIO, TypeVar

import anyio
import anyio.lowlevel
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client import Transport
from mcp.client.session import IncomingMessage
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from .. import __version__
from .errors import ServerUnavailable, UpstreamCallError, UpstreamTimeout
from .launch import (
    _EXIT_LINE,
    _INNER_SCRIPT,
    _OUTER_SCRIPT,
    _PID_LINE,
    _SH,
    LOG_ROTATE_BYTES,
    LOG_TAIL_BYTES,
    MARK,
    STDERR_LINE_CHARS,
    STDERR_TAIL_LINES,
    _describe_exit,
    _LaunchError,
    _open_private_log,
    _resolve_command,
)
from .model import ServerConfig
from .paging import _list_resources, _list_tools
from .redaction import redaction_for
from .restart import STABLE_AFTER, backoff_delay
from .selfref import SELF_SERVER_SETTING, bridge_identity
from .state import ServerState, Status
from .watch import _watched

# The hub's logger: the bridge's log lines carry the logger name, and these kept theirs when the class moved here.
logger = logging.getLogger("mcp_codemode.upstream.hub")
T = TypeVar("T")


# How long a closing connection may take to wind down before it is cancelled (the SDK bounds stdio at ~6 s).
CLOSE_GRACE = 10.0
# How long a server connected at a named 2026-era version may take to say who it is (see _server_info).
IDENTITY_WAIT = 5.0


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
        self.server_log = ServerLog(config, log_file)
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
                    transport = await open_transport(
                        stack,
                        self.config,
                        self.server_log,
                        start=self._starts,
                        call_timeout=self._call_timeout,
                        setpriv=self._setpriv,
                    )
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
                    refusal = await refusal_of(client, self.config.protocol, allow_self=self._allow_self)
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
                _, tail = self.server_log.exit_and_stderr()
                failure += f"; the end of its stderr:\n{tail}" if tail else ""

        except _LaunchError as exc:
            failure = str(exc)
        except Exception as exc:  # noqa: BLE001 - any transport or handshake failure is this server's outage
            failure = describe_failure(self.config, self.server_log, exc, started=connected_at is None)
        finally:
            self._client = None
            self._scope = None
            if not ready.done() and (self.closing or not failure):
                # Stopped (hub closing) or cancelled before it could connect.
                ready.set_exception(self._error("the bridge is shutting down"))
        self._finish(ready, connected_at, failure)

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
            self.server_log.note(f"skipped: {self.refused}")
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
            self.server_log.note(f"failed to start: {headline(failure)}")
            logger.warning("upstream %r failed to start: %s", name, failure)
            if not ready.done():
                ready.set_exception(self._unavailable())
            return
        reason = failure or crash_reason(self.config, self.server_log)
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
        self.server_log.note(f"stopped unexpectedly: {headline(reason)}")
        logger.warning("upstream %r stopped unexpectedly: %s", name, reason)

    def _connected(self, client: Client, seconds: float) -> None:
        self._settled_starts += 1
        self._client = client
        self.pid = self.server_log.pid()
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


class ServerLog:
    """One server's log file: a line marking each start, the hub's notes, and the launcher's pid and exit lines."""

    def __init__(self, config: ServerConfig, path: Path | None) -> None:
        self.path = path
        self._config = config
        self._offset = 0  # where the current start's part of the log begins

    def open(self, start: int) -> TextIO:
        """Open the server's log for appending, after a line that marks this start (and where it begins)."""
        assert self.path is not None
        try:
            if self.path.stat().st_size > LOG_ROTATE_BYTES:
                self.path.replace(self.path.with_name(self.path.name + ".1"))
        except FileNotFoundError:
            pass
        log = _open_private_log(self.path)
        self._offset = log.tell()
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        log.write(f"{MARK} {now} starting {self._config.name!r} (start {start}): {self._config.target}\n")
        log.flush()
        return log

    def note(self, event: str) -> None:
        """Record a failure in the server's log too, so the log alone tells what happened (even if it never ran)."""
        if self.path is None:
            return
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        try:
            with _open_private_log(self.path) as log:
                log.write(f"{MARK} {now} {self._config.name!r} {event}\n")
        except OSError as exc:
            logger.warning("cannot write to %s: %s", self.path, exc)

    def read(self, *, tail: bool) -> str:
        """The start (where the pid is) or the end (exit status, last words) of this start's part of the log."""
        if self.path is None:
            return ""
        try:
            with self.path.open("rb") as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(self._offset, size - LOG_TAIL_BYTES) if tail else self._offset)
                data = log.read(LOG_TAIL_BYTES)
        except OSError:
            return ""
        text = data.decode("utf-8", "replace")
        # A tail read may start mid-line: drop that partial first line.
        return text.split("\n", 1)[-1] if tail and size - self._offset > LOG_TAIL_BYTES else text

    def pid(self) -> int | None:
        found = _PID_LINE.findall(self.read(tail=False))
        return int(found[-1]) if found else None

    def exit_and_stderr(self) -> tuple[str, str]:
        """How the server's process ended (if it did), and the end of what it wrote to stderr, from its log."""
        text = self.read(tail=True)
        statuses = _EXIT_LINE.findall(text)
        ending = _describe_exit(int(statuses[-1])) if statuses else ""
        lines = [line for line in text.splitlines() if line.strip() and not line.startswith(MARK)]
        tail = [line if len(line) <= STDERR_LINE_CHARS else line[:STDERR_LINE_CHARS] + "…" for line in lines]
        tail = tail[-STDERR_TAIL_LINES:]
        return ending, "\n".join("  | " + line for line in tail)


async def open_transport(
    stack: AsyncExitStack,
    config: ServerConfig,
    server_log: ServerLog,
    *,
    start: int,
    call_timeout: float,
    setpriv: str | None,
) -> Transport:
    """The transport to one server: an HTTP or SSE client, or a stdio server launched (and logged) now."""
    # An HTTP read may take as long as the longest call (the hub's own timeouts bound every request).
    read_timeout = max(300.0, call_timeout, config.timeout or 0.0) + 30.0
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
    errlog = stack.enter_context(server_log.open(start))
    guard = [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []
    # sh exports PWD to what it runs; the server gets exactly its configured environment, so drop it.
    unset = "" if "PWD" in config.env else "unset PWD; "
    inner = [_SH, "-c", unset + _INNER_SCRIPT, "mcp-codemode-server", *guard, command, *config.args]
    argv = [*guard, _SH, "-c", unset + _OUTER_SCRIPT, "mcp-codemode-launcher", *inner]
    logger.info("starting upstream %r: %s", config.name, config.target)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(config.env) or None, cwd=config.cwd)
    return stdio_client(params, errlog=errlog)


def describe_failure(config: ServerConfig, server_log: ServerLog, exc: BaseException, *, started: bool) -> str:
    """Why a connection failed to start or broke, from the exception and the end of the server's log."""
    if config.transport != "stdio":
        verb = "could not connect to" if started else "lost its connection to"
        return f"it {verb} {config.url}: {_remote_cause(exc)}"
    ending, tail = server_log.exit_and_stderr()
    if not ending and isinstance(exc, OSError):
        return f"it could not be started: {exc}"
    when = "during startup" if started else "while connected"
    leaf = _leaf(exc)
    reason = f"{ending} {when}" if ending else f"the MCP handshake failed ({type(leaf).__name__}: {leaf})"
    return reason + (f"; the end of its stderr:\n{tail}" if tail else "; it wrote nothing to stderr")


def crash_reason(config: ServerConfig, server_log: ServerLog) -> str:
    """Why a connection that was up has ended, from the end of the server's log."""
    if config.transport != "stdio":
        return f"the connection to {config.url} closed"
    ending, tail = server_log.exit_and_stderr()
    reason = f"{ending} while connected" if ending else "it closed its output while connected"
    return reason + (f"; the end of its stderr:\n{tail}" if tail else "")


async def refusal_of(client: Client, protocol: str, *, allow_self: bool) -> str:
    """Why this connection must not be used: the server says it is a code-mode bridge ("" if it is not).

    The bridge is usually in the very files it reads, and not always recognisably (a wrapper script, its
    HTTP URL): proxying it would nest code mode inside code mode, and a copy it started would read the
    same files and start another. The name in ``serverInfo`` is checked in either protocol era (a
    2026-era server may not give one; then nothing can be told).
    """
    if allow_self:
        return ""
    info = await server_info(client, protocol)
    if info is None:
        return ""
    bridge = bridge_identity(info.name)
    if bridge is None:
        return ""
    return (
        f"it is {bridge} (its serverInfo says {info.name} {info.version}), which would nest code mode inside "
        f"code mode: skipped, and not started again; set {SELF_SERVER_SETTING} to use it anyway"
    )


async def server_info(client: Client, protocol: str) -> types.Implementation | None:
    """The name and version the server gave itself, asking it once if connecting did not.

    ``initialize`` and the ``server/discover`` of ``protocol: auto`` carry it. A 2026-era version named
    in the config is adopted without a word to the server, so the hub sends the ``server/discover`` the
    client skipped, bounded by ``IDENTITY_WAIT``: a server that does not answer it is not recognised,
    and is otherwise used as it would have been.
    """
    info = client.server_info
    if info is not None or protocol in ("legacy", "auto"):
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
