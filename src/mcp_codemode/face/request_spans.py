"""The server span of each MCP request, as the MCP semantic conventions of OpenTelemetry describe it.

One span per request the client sends (``tools/call``, ``tools/list``, ``resources/read``, ``initialize``...), named
``{mcp.method.name} {target}`` (``tools/call run_python``), a child of the trace context the client put in the
request's ``_meta`` (``traceparent``, ``tracestate``, ``baggage``) when it sent one. Everything the call does below
(placing its session, starting a sandbox, the cell, its upstream calls) is the span's child.

Why ours and not the SDK's ``OpenTelemetryMiddleware``: that one writes to the process's global tracer provider,
which the bridge leaves alone (``telemetry/otel_tracing.py``), and does not name the session. Ours adds
``mcp.session.id``, as the session's tag (``principals.session_tag``): the id itself opens the session to whoever
holds it with the principal's token, so it is written nowhere, the log and the traces included. A tool result with
``isError`` is a successful JSON-RPC response: the span is failed all the same (``error.type`` ``tool_error``).
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from ..telemetry.tracing import Attribute, Tracing
from .listing import TOOL_NAME
from .placement import connection_of
from .principals import session_tag


class RequestSpans:
    """Server-tier middleware of the SDK's ``Server``: a server span around every request it serves."""

    def __init__(self, tracing: Tracing) -> None:
        self.tracing = tracing

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        method = ctx.method
        # Only our one tool names the span: a name a client made up is its own text, and unbounded.
        target = TOOL_NAME if method == "tools/call" and (ctx.params or {}).get("name") == TOOL_NAME else ""
        attributes: dict[str, Attribute] = {"mcp.method.name": method, "mcp.protocol.version": ctx.protocol_version}
        if ctx.request_id is not None:
            attributes["jsonrpc.request.id"] = str(ctx.request_id)
        session_id = getattr(connection_of(ctx), "session_id", None)
        if isinstance(session_id, str) and session_id:
            attributes["mcp.session.id"] = session_tag(session_id)
        if target:
            attributes["gen_ai.tool.name"] = target
            attributes["gen_ai.operation.name"] = "execute_tool"
        meta = ctx.meta if isinstance(ctx.meta, dict) else None
        name = f"{method} {target}" if target else method
        with self.tracing.span(name, "server", attributes, parent=meta) as span:
            result = await call_next(ctx)
            failed = result.is_error if isinstance(result, types.CallToolResult) else None
            if failed or (isinstance(result, dict) and result.get("isError") is True):
                span.fail("tool_error")
            return result
