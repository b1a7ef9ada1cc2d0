"""Reaching the user behind a ``run_python`` call's client while the call runs: questions for approval
(``ask_tools``), an upstream server's elicitation and sampling requests passed on, and the client's roots.

Each goes to the client as a request related to the ``tools/call`` it serves (over Streamable HTTP it travels on
that call's own stream), and only when the client declared the capability. A 2026-07-28 call has no such channel:
that era asks through ``input_required`` rounds (``input_rounds.py``), except for a call that replicas sharing
sessions run, where the request fails with ``CannotAsk`` saying so and what to do instead.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.message import ServerMessageMetadata

from ..errors import CannotAsk
from ..runs.bridge import Bridge
from ..runs.relay_run import Caller

log = logging.getLogger(__name__)

NO_BACK_CHANNEL = (
    "this call came over the 2026-07-28 protocol to replicas that share sessions, where the bridge cannot ask the "
    "client in the middle of a call (input_required rounds need the one replica that runs the code); connect in "
    "the handshake era (2025-11-25 and before), or to a single replica"
)


def reaching(ctx: ServerRequestContext[Any, Any]) -> Caller:
    """The ways this call's client can be reached (no news: that is the progress line's): ``elicit`` and ``sample``,
    each None when the client did not declare the capability."""
    capabilities = ctx.session.client_capabilities or types.ClientCapabilities()
    metadata = ServerMessageMetadata(related_request_id=ctx.request_id)

    def channel() -> None:
        if not ctx.session.can_send_request:
            raise CannotAsk(NO_BACK_CHANNEL)

    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
        channel()
        elicitation = capabilities.elicitation
        if isinstance(params, types.ElicitRequestURLParams) and (elicitation is None or elicitation.url is None):
            raise CannotAsk("the client did not declare URL-mode elicitation (capabilities.elicitation.url)")
        request = types.ElicitRequest(params=params)
        return await ctx.session.send_request(request, types.ElicitResult, metadata=metadata)

    async def sample(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        channel()
        request = types.CreateMessageRequest(params=params)
        return await ctx.session.send_request(request, types.CreateMessageResult, metadata=metadata)

    return Caller(
        elicit=elicit if capabilities.elicitation is not None else None,
        sample=sample if capabilities.sampling is not None else None,
        asker=_connection_name(ctx.session) if ctx.session.can_send_request else "",
    )


_ASKER_KEY = "mcp_codemode_asker"  # in the SDK connection's state: the name approvals are remembered for


def _connection_name(session: Any) -> str:
    """A name for the client's MCP connection (kept in the SDK's per-connection state, so it lives exactly as long
    and is never another connection's): the client an approval was remembered for; "" when there is none."""
    state = getattr(getattr(session, "_connection", None), "state", None)
    if not isinstance(state, dict):
        return ""
    name = state.get(_ASKER_KEY)
    if not isinstance(name, str):
        name = state[_ASKER_KEY] = "connection-" + secrets.token_hex(8)
    return name


async def learn_roots(ctx: ServerRequestContext[Any, Any], bridge: Bridge, *, again: bool = False) -> None:
    """Ask a stdio bridge's one client for its roots, for the upstream servers that ask for them: once, on its
    first call, and ``again`` when it says they changed. Nothing when roots are configured, when the client
    declared no roots, or over the 2026-07-28 protocol (no channel to ask on: ``learn_roots_in_round``)."""
    if not bridge.wants_client_roots(again):
        return
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.roots is None or not ctx.session.can_send_request:
        return
    try:
        given = await ctx.session.list_roots()  # deprecated in 2026-07-28, and only used before it
    except Exception:  # a client that cannot list its roots gives none; the call goes on
        log.info("asking the client for its roots failed", exc_info=True)
        return
    await bridge.client_gave_roots(given.roots)


async def learn_roots_in_round(list_roots: Callable[[], Awaitable[types.ListRootsResult]], bridge: Bridge) -> None:
    """The 2026-07-28 way for a stdio bridge's one client: its roots asked as an ``input_required`` round before
    the code of its first call runs, when none are configured. Once: that era has no notification that roots
    changed (the SDK drops ``notifications/roots/list_changed`` as undefined there), and asking on every call
    would cost every call a round."""
    if not bridge.wants_client_roots():
        return
    try:
        given = await list_roots()
    except CannotAsk as exc:  # a client that cannot list its roots gives none; the call goes on
        log.info("asking the client for its roots failed: %s", exc)
        return
    await bridge.client_gave_roots(given.roots)
