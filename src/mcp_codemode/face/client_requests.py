"""Reaching the user behind a ``run_python`` call's client while the call runs: questions for approval
(``ask_tools``), an upstream server's elicitation and sampling requests passed on, and the client's roots.

Each goes to the client as a request related to the ``tools/call`` it serves (over Streamable HTTP it travels on
that call's own stream), and only when the client declared the capability. A 2026-07-28 call has no such channel:
that era asks through ``input_required`` rounds (``input_rounds.py``), except for a call that replicas sharing
sessions run, where the request fails with ``CannotAsk`` saying so and what to do instead.
"""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.message import ServerMessageMetadata

from ..runs.relay_run import Caller
from ..upstream.call_links import CannotAsk
from ..upstream.roots import Roots

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
    )


async def learn_roots(ctx: ServerRequestContext[Any, Any], roots: Roots, *, again: bool = False) -> None:
    """Ask a stdio bridge's one client for its roots, for the upstream servers that ask for them: once, on its
    first call, and ``again`` when it says they changed. Nothing when roots are configured, when the client
    declared no roots, or over the 2026-07-28 protocol (no channel to ask on)."""
    if not roots.follows_client or (roots.known and not again):
        return
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.roots is None or not ctx.session.can_send_request:
        return
    try:
        given = await ctx.session.list_roots()  # deprecated in 2026-07-28, and only used before it
    except Exception:  # a client that cannot list its roots gives none; the call goes on
        log.info("asking the client for its roots failed", exc_info=True)
        return
    await roots.client_gave(given.roots)
