"""The MCP face: one tool, ``run_python``, one resource, and nothing that grows with the user's servers.

Built on the SDK's low-level ``Server`` rather than ``MCPServer``: the tool listing must stay a small constant we
write by hand (listing.py), and arguments must be checked by us so a wrong one comes back as a tool result the model
can read and fix (tool.py). This module only wires the handlers that need the bridge, which live by concern: the tool
and its rounds (tool_calls.py), the resources and session files (session_resources.py), where a call runs
(placement.py); what needs only the settings (the server's identity, the listing) is handshake.py's, which stdio
serves before the bridge has started.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

from ..runs.bridge import Bridge
from .client_requests import learn_roots
from .handshake import BRIDGE_REQUESTS, Handler, face_server
from .input_rounds import KEEP
from .placement import Transport, principal_of
from .request_spans import RequestSpans
from .session_resources import SessionResources
from .tool_calls import ToolCalls

if TYPE_CHECKING:  # the router (httpx, the cluster's API) is imported only where replicas share sessions
    from .replicas import SessionRouter


def build_server(
    bridge: Bridge, transport: Transport, router: SessionRouter | None = None, server: Server[Any] | None = None
) -> Server[Any]:
    """The MCP server for one bridge; the same object serves stdio, HTTP and both protocol eras.

    ``router``: replicas share sessions (face/replicas.py), so a call may run at another replica. ``server``: the one
    that already answered the handshake while the bridge started (handshake.py), given its handlers here.
    """
    calls = ToolCalls(bridge, transport, router)
    resources = SessionResources(bridge, transport, router)
    server = server if server is not None else face_server(bridge.settings)
    handlers: dict[str, Handler] = {
        "tools/call": calls.call_tool,
        "resources/list": resources.list_resources,
        "resources/read": resources.read_resource,
        "resources/templates/list": resources.list_resource_templates,
    }
    for method, params in BRIDGE_REQUESTS.items():
        server.add_request_handler(method, params, handlers[method])
    if transport == "stdio":  # the one client's roots are the upstream servers' roots: ask again when they change

        async def roots_changed(ctx: ServerRequestContext[Any, Any], params: types.NotificationParams) -> None:
            await learn_roots(ctx, bridge, again=True)

        server.add_notification_handler("notifications/roots/list_changed", types.NotificationParams, roots_changed)
    # input_required rounds carry the key of a parked run and round as requestState: sealed (AES-GCM, a process key),
    # bound to the caller's principal and expiring with the parked run's entry.
    security = RequestStateSecurity(keys=[os.urandom(32)], ttl=KEEP, bind_principal=principal_of)
    server.middleware.append(RequestStateBoundary(security, default_audience="mcp-codemode"))
    # The bridge's own server span replaces the SDK's (face_server took that out), outermost, when tracing is on.
    if bridge.telemetry.tracing.enabled:
        server.middleware.insert(0, RequestSpans(bridge.telemetry.tracing))
    return server
