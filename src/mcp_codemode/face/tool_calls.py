"""A ``run_python`` call from its arrival to its result: placed, run here or at the replica that holds it, with a
heartbeat while it runs, and in input_required rounds when a 2026-07-28 client can be asked something.

The handlers are methods of one object built per server (``ToolCalls``), not closures inside ``build_server``:
what a call needs (the bridge, the transport, the router, the parked rounds) is named once, on the object.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from ..errors import CodemodeError
from ..runs.bridge import Bridge, RunRequest
from ..runs.relay_run import Caller, News
from ..telemetry.tracing import FORWARDED
from .client_requests import learn_roots, learn_roots_in_round, reaching
from .forwarded_calls import Forwarded
from .heartbeat import ProgressLine, Report, heartbeat
from .input_rounds import ABANDONED, InputRounds, ListRoots
from .listing import TOOL_NAME
from .placement import Placement, Transport, close_with_connection, place
from .render import error_result, render_result
from .tool import InvalidArguments, meta_files, parse_arguments

if TYPE_CHECKING:  # the router (httpx, the cluster's API) is imported only where replicas share sessions
    from .replicas import Place, RunHere, SessionRouter

log = logging.getLogger("mcp_codemode.server")  # the name log lines have always shown
T = TypeVar("T")


def _progress_token(ctx: ServerRequestContext[Any, Any]) -> object:
    meta: Mapping[str, Any] = ctx.meta or {}
    return meta.get("progress_token", meta.get("progressToken"))


async def _report_progress(line: ProgressLine, interval: float) -> None:
    """Tell the client we are alive: many drop a call that stays silent for a while."""
    try:
        await heartbeat(line.timeout, interval, line)
    except Exception:  # a client that went away is noticed by the call itself
        log.debug("progress notification failed", exc_info=True)


def local_runner(bridge: Bridge) -> RunHere:
    """Run a placed call in this replica's sandboxes and render it: what every call comes down to. A call another
    replica forwarded runs under a server span that continues that replica's trace (``Forwarded.trace``)."""
    settings, tracing = bridge.settings, bridge.telemetry.tracing

    async def run_here(
        request: RunRequest, where: Place, news: News | None = None, client: Caller | None = None
    ) -> types.CallToolResult:
        try:
            caller = dataclasses.replace(client or Caller(), news=news)
            parent = where.trace if isinstance(where, Forwarded) else None
            with tracing.span(FORWARDED, "server", parent=parent) if parent else contextlib.nullcontext():
                result = await bridge.run(request, where.key, owner=where.owner, caller=caller)
        except CodemodeError as exc:
            return error_result(str(exc), type(exc).__name__)
        return render_result(result, settings.output_mode, settings.output_limit, where.label)

    return run_here


async def _beating(line: ProgressLine, interval: float, work: Awaitable[T]) -> T:
    """``work`` with the heartbeat on ``line`` beside it. What ``work`` raises comes out as itself: raised inside the
    task group it would come out wrapped, and an MCPError would reach the client as an internal error."""
    failure: Exception | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(_report_progress, line, interval)
        try:
            result = await work
        except Exception as exc:  # noqa: BLE001 - re-raised below, outside the group
            failure = exc
        group.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return result


def _asks_in_rounds(ctx: ServerRequestContext[Any, Any], wants_roots: bool) -> bool:
    """Whether a call asks its client through input_required rounds: it has no channel to send requests on (the
    2026-07-28 era) and its client declared something it can be asked (elicitation or sampling, or its roots when
    a stdio bridge ``wants_roots``)."""
    if ctx.session.can_send_request:
        return False
    capabilities = ctx.session.client_capabilities
    if capabilities is None:
        return False
    return (
        capabilities.elicitation is not None
        or capabilities.sampling is not None
        or (wants_roots and capabilities.roots is not None)
    )


def _progress_reporter(ctx: ServerRequestContext[Any, Any]) -> Report:
    """Progress another replica reports for a forwarded call, passed on to this call's client."""

    async def report(progress: float, total: float | None, message: str | None) -> None:
        try:
            await ctx.session.report_progress(progress, total, message)
        except Exception:  # a client that went away is noticed by the call itself
            log.debug("progress notification failed", exc_info=True)

    return report


class ToolCalls:
    """The tool's handler, ``tools/call``, for one bridge and transport (``tools/list`` needs no bridge: handshake.py).

    ``router``: replicas share sessions (face/replicas.py), so a call may run at another replica.
    """

    def __init__(self, bridge: Bridge, transport: Transport, router: SessionRouter | None = None) -> None:
        self.bridge = bridge
        self.settings = bridge.settings
        self.transport = transport
        self.router = router
        self.run_here = local_runner(bridge)
        self.rounds = InputRounds()

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        bridge, settings, transport, router = self.bridge, self.settings, self.transport, self.router
        run_here = self.run_here
        if params.name != TOOL_NAME:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool {params.name!r}: this server has one tool, {TOOL_NAME}")
        try:
            request = dataclasses.replace(parse_arguments(params.arguments, settings), files=meta_files(ctx))
            where = place(ctx, transport, request.session)
        except InvalidArguments as exc:
            return error_result(str(exc))
        if where.per_connection:
            close_with_connection(ctx, bridge, where.key)
        timeout = settings.clamp_timeout(request.timeout)
        wants_progress = _progress_token(ctx) is not None
        reached = reaching(ctx)
        if transport == "stdio":  # one client: its roots are the upstream servers' (unless some are configured)
            await learn_roots(ctx, bridge)

        async def run(
            request: RunRequest, where: Place, news: News | None = None, given: Caller | None = None
        ) -> types.CallToolResult:
            client = given or reached
            if not wants_progress:
                return await run_here(request, where, None, client)
            # The heartbeat and upstream servers' progress on the code's tool calls, on one increasing line.
            line = ProgressLine(timeout, ctx.session.report_progress)
            return await _beating(line, settings.progress_interval, run_here(request, where, line.news, client))

        if router is not None and router.shares(where):
            return await router.run(request, where, run, _progress_reporter(ctx) if wants_progress else None)
        abandoned = self.rounds.abandon_waiting(where.key) if params.request_state is None else None
        wants_roots = transport == "stdio" and bridge.wants_client_roots()
        if params.request_state is not None or _asks_in_rounds(ctx, wants_roots):
            result = await self.in_rounds(ctx, params, request, where, timeout, wants_progress)
        else:
            result = await run(request, where)
        if abandoned is not None and isinstance(result, types.CallToolResult):
            result.content.insert(0, types.TextContent(type="text", text=ABANDONED.format(what=abandoned)))
        return result

    async def in_rounds(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.CallToolRequestParams,
        request: RunRequest,
        where: Placement,
        timeout: float,
        wants_progress: bool,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """A 2026-07-28 call whose client can be asked: the run may answer input_required (face/input_rounds.py)."""
        line = ProgressLine(timeout, ctx.session.report_progress) if wants_progress else None
        news = line.news if line is not None else None
        capabilities = ctx.session.client_capabilities or types.ClientCapabilities()

        async def go(caller: Caller, round_news: News, list_roots: ListRoots | None) -> types.CallToolResult:
            if self.transport == "stdio" and list_roots is not None:  # the one client's roots, asked in a round
                await learn_roots_in_round(list_roots, self.bridge)
            return await self.run_here(request, where, round_news if wants_progress else None, caller)

        rounds = self.rounds
        if params.request_state is not None:
            work = rounds.resume(params.request_state, where.owner, params.arguments, params.input_responses, news)
        else:
            work = rounds.start(where.owner, where.key, params.arguments, capabilities, go, news)
        return await (work if line is None else _beating(line, self.settings.progress_interval, work))
