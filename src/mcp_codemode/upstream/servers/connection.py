"""One upstream server's connection: its state machine (idle → connecting → ready ⇄ failed) and its caches.

Over 400 lines because it is one cohesive thing: a single class owns the long-lived task that holds the SDK's
``async with Client(...)`` (the transports' cancel scopes must be entered and left by the same task), and its
states and restarts all turn on that one task's fields. What does not read those fields is in its own module:
the launcher and the server's log (``launch.py``), opening the transport (``transport.py``), the wording of an
outage (``failures.py``), asking the server who it is (``identity.py``), the restart rule, pagination, redaction
and the stream watcher.

A server whose ``serverInfo`` says it is a code-mode bridge (this one, reached through a wrapper script or by its
HTTP URL, which config discovery cannot see through) is closed as soon as it has said so, and is never started
again: every call fails with ``SelfServerSkipped``, a ``ServerUnavailable``. ``allow_self`` keeps it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ... import __version__
from ..errors import SHUTTING_DOWN, SelfServerSkipped, ServerUnavailable, UpstreamCallError, UpstreamTimeout
from ..model import ServerConfig
from .call_links import CallLinks
from .failures import crash_reason, describe_failure, headline
from .identity import refusal_of
from .launch import LaunchError, ServerLog
from .oauth import bridge_auth
from .paging import list_prompts, list_resource_templates, list_resources, list_tools
from .redaction import redaction_for
from .restart import STABLE_AFTER, backoff_delay
from .roots import Roots
from .sign_ins import SignInStore
from .state import ServerState, Status
from .transport import open_transport
from .watch import watched

# The hub's logger: the bridge's log lines carry the logger name, and these kept theirs when the class moved here.
logger = logging.getLogger("mcp_codemode.upstream.hub")
T = TypeVar("T")


# How long a closing connection may take to wind down before it is cancelled (the SDK bounds stdio at ~6 s).
CLOSE_GRACE = 10.0


class Connection:
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
        roots: Roots | None = None,
        sign_ins: SignInStore | None = None,
    ) -> None:
        self.config = config
        self.sign_ins = sign_ins  # where signed-in servers' tokens are (sign_ins.py); None: none are used
        self.roots = roots or Roots()
        self.log_file = log_file
        self.server_log = ServerLog(config, log_file)
        self.redaction = redaction_for(config, log_file, secrets, sign_ins)  # with its stored OAuth tokens
        self._call_timeout = call_timeout
        self._connect_timeout = connect_timeout
        self._on_tools_changed = on_tools_changed
        self._on_listing = on_listing
        self._backoff = backoff
        self._setpriv = setpriv
        self._allow_self = allow_self
        self.closing = ""  # why it closes for good ("" while it may run): what the calls it fails are told
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
        self.links = CallLinks(config.name)  # the calls in flight, for what the server sends back about them

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
            return self._error(self.closing)
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
                        auth=await bridge_auth(self.config, self.sign_ins) if self.sign_ins is not None else None,
                    )
                    try:
                        client = Client(
                            watched(transport, lambda: self._transport_ended(generation)),
                            mode=self.config.protocol,
                            cache=None,  # the hub caches listings itself, invalidated by list_changed
                            message_handler=self._on_message,
                            # What the server sends back about a call goes to the run_python call that made
                            # it (call_links.py). A modern server sends log messages only to requests that opt
                            # in, at this level and above.
                            logging_callback=self.links.on_log,
                            log_level="info",
                            elicitation_callback=self.links.on_elicit,
                            sampling_callback=self.links.on_sample,
                            list_roots_callback=self.roots.on_list,
                            client_info=types.Implementation(name="mcp-codemode", version=__version__),
                        )
                    except ValueError as exc:
                        raise LaunchError(f'{exc}; fix its "protocol" in {self.config.source}') from exc
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

        except LaunchError as exc:
            failure = str(exc)
        except Exception as exc:  # noqa: BLE001 - any transport or handshake failure is this server's outage
            failure = describe_failure(self.config, self.server_log, exc, started=connected_at is None)
        finally:
            self._client = None
            self._scope = None
            if not ready.done() and (self.closing or not failure):
                # Stopped (hub closing) or cancelled before it could connect.
                ready.set_exception(self._error(self.closing or SHUTTING_DOWN))
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

    async def close(self, reason: str = "") -> None:
        self.closing = self.closing or reason or SHUTTING_DOWN
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
        self,
        what: str,
        subject: str,
        send: Callable[[Client], Awaitable[T]],
        timeout: float | None,
        *,
        background: bool = False,
    ) -> T:
        """Send one request on the live connection, turning every way it can fail into one of the hub's errors.

        ``background``: asked by the bridge for itself (search's listing of prompts and resources), not by a caller.
        Such a request never starts the server (a crashed one is started again by a caller's call, after its
        backoff) and never takes the crash report that the next caller is owed.
        """
        client, generation = self._running() if background else await self.ensure()
        seconds, setting = self._timeout(timeout)
        try:
            with anyio.move_on_after(seconds) as scope:
                return await send(client)
        except MCPError as exc:
            closed = exc.code == types.CONNECTION_CLOSED and exc.message == "Connection closed"
            if closed or self._live() != (client, generation):
                raise await self._lost(generation, background) from exc
            raise UpstreamCallError(
                self.config.name, what, exc.code, exc.message, exc.data, redaction=self.redaction
            ) from exc
        except (RuntimeError, ValidationError, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            if self._live() != (client, generation):
                raise await self._lost(generation, background) from exc
            if isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError)):
                raise
            raise UpstreamCallError(
                self.config.name, what, None, f"its answer was malformed: {exc}", redaction=self.redaction
            ) from exc
        assert scope.cancelled_caught
        raise UpstreamTimeout(self.config.name, subject, seconds, setting, redaction=self.redaction)

    async def _lost(self, generation: int, background: bool = False) -> ServerUnavailable:
        """The connection died under a request: wait for it to be wound down, then say why it died."""
        self._transport_ended(generation)
        async with self._lock:
            if generation != self._generation:
                return self._error("its connection was lost during the request (it has been started again since)")
            await self._settle()
            if not background:
                self._unreported = False  # this caller is told; a background request leaves it to the next caller
            return self._unavailable()

    def _running(self) -> tuple[Client, int]:
        """The live connection, for a background request: never a start, never the crash report a caller is owed."""
        live = self._live()
        if live is None:
            raise self._error("it is not running (a call starts it)")
        return live

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
                listed = tuple(await self.request("tools/list", "tools/list", list_tools, None))
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

    async def resources(self, *, background: bool = False) -> list[types.Resource]:
        client, _ = self._running() if background else await self.ensure()
        if client.server_capabilities.resources is None:
            return []
        return await self.request("resources/list", "resources/list", list_resources, None, background=background)

    async def resource_templates(self, *, background: bool = False) -> list[types.ResourceTemplate]:
        client, _ = self._running() if background else await self.ensure()
        if client.server_capabilities.resources is None:
            return []
        what = "resources/templates/list"
        return await self.request(what, what, list_resource_templates, None, background=background)

    async def prompts(self, *, background: bool = False) -> list[types.Prompt]:
        client, _ = self._running() if background else await self.ensure()
        if client.server_capabilities.prompts is None:
            return []
        return await self.request("prompts/list", "prompts/list", list_prompts, None, background=background)

    async def roots_changed(self) -> None:
        """Tell the server, if it is connected, that the roots it is given changed."""
        live = self._live()
        if live is not None:
            await live[0].send_roots_list_changed()  # deprecated in 2026-07-28; a modern server never asks

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


def _consume(future: asyncio.Future[Any]) -> None:
    """Mark a start's outcome as retrieved: a failed warm-up nobody awaited is recorded in state, not an error."""
    if not future.cancelled():
        future.exception()
