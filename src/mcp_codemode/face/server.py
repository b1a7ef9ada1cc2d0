"""The MCP face: one tool, ``run_python``, one resource, and nothing that grows with the user's servers.

Built on the SDK's low-level ``Server`` rather than ``MCPServer``: the tool listing must stay a small constant we
write by hand (tool.py), and arguments must be checked by us so a wrong one comes back as a tool result the model
can read and fix. This module only wires the handlers, which live by concern: the tool and its rounds
(tool_calls.py), the resources and session files (session_resources.py), where a call runs (placement.py).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

from .. import __version__
from ..runs.bridge import Bridge
from .client_requests import learn_roots
from .input_rounds import KEEP
from .placement import Transport, principal_of
from .request_spans import RequestSpans
from .session_resources import SessionResources
from .tool_calls import ToolCalls

if TYPE_CHECKING:  # the router (httpx, the cluster's API) is imported only where replicas share sessions
    from .replicas import SessionRouter


async def _list_prompts(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[])


async def _set_logging_level(
    ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
) -> types.EmptyResult:
    # Handshake-era clients send this unasked; we send no log notifications, so there is nothing to change.
    return types.EmptyResult()


def build_server(bridge: Bridge, transport: Transport, router: SessionRouter | None = None) -> Server[Any]:
    """The MCP server for one bridge; the same object serves stdio, HTTP and both protocol eras.

    ``router``: replicas share sessions (face/replicas.py), so a call may run at another replica.
    """
    calls = ToolCalls(bridge, transport, router)
    resources = SessionResources(bridge, transport, router)
    # Empty lists rather than "method not found": generic clients (and the conformance suite) list prompts and
    # templates of every server, and an error there reads as a broken server.
    server: Server[Any] = Server(
        "mcp-codemode",
        version=__version__,
        instructions=("Use run_python to compute, transform data and call tools in code; state persists per session."),
        on_list_tools=calls.list_tools,
        on_call_tool=calls.call_tool,
        on_list_resources=resources.list_resources,
        on_read_resource=resources.read_resource,
        on_list_prompts=_list_prompts,
        on_list_resource_templates=resources.list_resource_templates,
    )
    # Registered directly: passing it to the constructor warns that logging is deprecated in 2026-07-28.
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, _set_logging_level)
    if transport == "stdio":  # the one client's roots are the upstream servers' roots: ask again when they change

        async def roots_changed(ctx: ServerRequestContext[Any, Any], params: types.NotificationParams) -> None:
            await learn_roots(ctx, bridge, again=True)

        server.add_notification_handler("notifications/roots/list_changed", types.NotificationParams, roots_changed)
    # input_required rounds carry the key of a parked run and round as requestState: sealed (AES-GCM, a process key),
    # bound to the caller's principal and expiring with the parked run's entry.
    security = RequestStateSecurity(keys=[os.urandom(32)], ttl=KEEP, bind_principal=principal_of)
    server.middleware.append(RequestStateBoundary(security, default_audience="mcp-codemode"))
    # The SDK's OpenTelemetry middleware costs a few per cent of every request even with no exporter, and writes to
    # the process's global tracer provider, which the bridge leaves alone: the bridge's own server span replaces it
    # when tracing is on (request_spans.py), outermost, and nothing does when it is off.
    server.middleware = [m for m in server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"]
    if bridge.telemetry.tracing.enabled:
        server.middleware.insert(0, RequestSpans(bridge.telemetry.tracing))
    return server
