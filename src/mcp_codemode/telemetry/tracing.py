"""Traces: the spans the bridge opens where a call spends its time, behind a seam that costs nothing when off.

``Tracing`` is what the rest of the bridge calls (through ``Telemetry.tracing``): ``span`` around a piece of a call,
``captured`` and ``resumed`` to carry a call's trace across the tasks that serve its code's requests, ``carrier``
for the trace context a forwarded call takes along. This base class records nothing: each method hands back a shared
object that does nothing, so a bridge whose tracing is off pays a method call and an empty ``with`` where a span
would be, and never imports OpenTelemetry's SDK (start-up time matters for a stdio server a client starts on demand).
``seam.tracing`` builds the recording one (``otel_tracing.py``) only when ``MCP_BRIDGE_TRACING`` is on.

The call id is apart from the traces: every ``run_python`` call gets one (``new_call_id``), traced or not, and it is
what joins a call's audit lines, its log lines and its spans. It and the ids of the current span live in context
variables that the JSON log reads (``logs.py``), so a log line knows its call without being told.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
from collections.abc import Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Any, Literal

SpanKind = Literal["server", "client", "internal"]
Attribute = str | int | float | bool

# The spans of a call below the MCP request's own (``{mcp.method.name} {target}``, as the conventions name it).
PLACE_SESSION = "mcp_codemode.place_session"  # finding the call's session, waiting for its turn in it
START_SANDBOX = "mcp_codemode.start_sandbox"  # a sandbox from the warm pool, or started for the session
CELL = "mcp_codemode.cell"  # the code running in the sandbox; upstream calls are its children
APPROVAL = "mcp_codemode.approval"  # asking the user to approve a call ask_tools names
CLIENT_REQUEST = "mcp_codemode.client_request"  # an upstream server's elicitation or sampling passed on
FORWARD = "mcp_codemode.forward"  # this replica sends the call to the replica holding its session
FORWARDED = "mcp_codemode.forwarded"  # the holding replica runs a call another one forwarded

# What the JSON log reads: the run_python call being served, and the trace and span ids of the current span.
CALL_ID: ContextVar[str] = ContextVar("mcp_codemode_call_id", default="")
SPAN_IDS: ContextVar[tuple[str, str]] = ContextVar("mcp_codemode_span_ids", default=("", ""))


def new_call_id() -> str:
    """A fresh call id: 16 hex digits, random, so replicas never hand out the same one."""
    return secrets.token_hex(8)


class Span:
    """A span that records nothing (tracing off, or a span the sampler dropped); the recording one overrides it."""

    recording = False
    trace_id = ""  # 32 hex digits while a trace is known
    span_id = ""  # 16 hex digits

    def set(self, key: str, value: Attribute) -> None:
        """An attribute; never code, arguments, results or any text the code or its client chose."""

    def rename(self, name: str) -> None:
        """The span's name, once what it is about is known (an upstream tool's name, once it is a listed one)."""

    def fail(self, error_type: str) -> None:
        """Mark the span failed: ``error.type``, a closed word (``tool_error``, ``refused``, an exception's class)."""


NO_SPAN = Span()
_NOTHING: AbstractContextManager[Any] = contextlib.nullcontext(NO_SPAN)


class Tracing:
    """Records nothing: the bridge with its tracing off. ``OtelTracing`` overrides every method."""

    enabled = False
    digests = False  # MCP_BRIDGE_TRACE_DIGESTS: spans hold sizes and sha256 of code, arguments and results

    def span(self, name: str, kind: SpanKind = "internal", attributes: Mapping[str, Attribute] | None = None,
             parent: Mapping[str, Any] | None = None) -> AbstractContextManager[Span]:  # fmt: skip
        """A span around the ``with`` block, a child of the current one, or of the trace context in ``parent`` (a
        request's ``_meta``, a forwarded call's carrier) when that holds a valid ``traceparent``. What the block
        raises marks it failed with the exception's class, never its message."""
        return _NOTHING

    def captured(self) -> object:
        """The current trace context, for work another task does on its behalf (``resumed``)."""
        return None

    def resumed(self, captured: object) -> AbstractContextManager[Any]:
        """Make ``captured`` current for the ``with`` block: a request of a call's code is served in a task of the
        sandbox's reader, which knows nothing of the call, and its spans must still be the cell's children."""
        return _NOTHING

    def carrier(self) -> dict[str, str]:
        """The current span's ``traceparent`` (and ``tracestate``), to send along with a forwarded call."""
        return {}

    def close(self) -> None:
        """Send what is still queued and stop (the bridge calls it as it ends)."""


def digest(span: Span, prefix: str, data: bytes | None) -> None:
    """Only with ``MCP_BRIDGE_TRACE_DIGESTS``: ``{prefix}.size`` and ``{prefix}.sha256`` of ``data`` on ``span``,
    never the data (callers check ``Tracing.digests`` first, so nothing is hashed otherwise)."""
    if data is None or not span.recording:
        return
    span.set(f"{prefix}.size", len(data))
    span.set(f"{prefix}.sha256", hashlib.sha256(data).hexdigest())
