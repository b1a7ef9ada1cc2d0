"""The calls the rest of the bridge makes when something worth counting happens, and what they cost.

``Telemetry`` is the seam: one method per event, named for the event rather than the metric, so what is recorded
changes here and not at the call sites; its ``tracing`` opens the spans around the same events (``tracing.py``).
The base class records nothing, for a bridge whose metrics are off (``MCP_BRIDGE_METRICS=false``) and for the
command line's ``run``; ``Recording`` keeps Prometheus metrics on a registry of its own bridge.

A warm call takes about a millisecond, so the hot path pays a few dictionary lookups and one observation per
metric: the label children of the closed sets are bound once, here, and those of upstream servers and tools
the first time each is seen. Everything counted by looking (sessions, the warm pool, upstream servers) is read
only when Prometheus scrapes (``snapshot.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.metrics import Counter, Histogram

from ..errors import SettingsError
from .metrics import (
    CALL_OUTCOMES,
    MAX_TOOLS_PER_SERVER,
    OTHER_TOOL,
    UPSTREAM_METHODS,
    ApprovalDecision,
    CallOutcome,
    Metrics,
    SessionEnd,
    UpstreamOutcome,
)
from .snapshot import Snapshot, SnapshotCollector
from .tracing import Tracing

if TYPE_CHECKING:
    from ..observability_settings import OtelExport

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Telemetry:
    """Records nothing: the bridge with its metrics off. ``Recording`` overrides every method."""

    enabled = False
    tracing = Tracing()  # the spans (tracing.py): recorded only when MCP_BRIDGE_TRACING is on, whatever the metrics

    def call_ended(self, outcome: CallOutcome, seconds: float, output_bytes: int | None) -> None:
        """A run_python call ended where it ran (``output_bytes``: what its result holds; None: no result)."""

    def sandbox_waited(self, seconds: float) -> None:
        """A call got its session's sandbox after ``seconds``: its turn in the session, and a start if needed."""

    def sandbox_started(self, backend: str, seconds: float, ok: bool) -> None:
        """A sandbox of ``backend`` started (or failed to) after ``seconds``."""

    def session_closed(self, reason: SessionEnd) -> None:
        """A named session was closed, with its sandbox."""

    def upstream_used(self, kind: str, server: str, tool: str, outcome: UpstreamOutcome, seconds: float) -> None:
        """Sandboxed code used an upstream server: ``kind`` is tool, resource or prompt; ``server`` a configured
        server's name or "" (the code named none); ``tool`` a tool that server listed, or "" (never what the code
        wrote: a name it made up, a resource's URI or a prompt's name could carry anything)."""

    def approval(self, decision: ApprovalDecision) -> None:
        """A call the policy's ask_tools names was decided."""

    def call_forwarded(self) -> None:
        """This replica sent a call to the replica holding its session."""

    def session_taken_over(self) -> None:
        """This replica took a session over from a replica that was gone."""

    def watch(self, look: Callable[[], Snapshot]) -> None:
        """What to read when Prometheus scrapes; the bridge gives it once it runs."""

    def exposition(self) -> bytes:
        """The metrics in Prometheus's text format (``CONTENT_TYPE``)."""
        return b""


class Recording(Telemetry):
    """Prometheus metrics on a registry of this bridge's own, with the process's collectors beside them."""

    enabled = True

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        for collector in (ProcessCollector, PlatformCollector, GCCollector):
            collector(registry=self.registry)
        metrics = self.metrics = Metrics(self.registry)
        self._calls = {
            outcome: (metrics.calls.labels(outcome), metrics.call_duration.labels("tools/call", outcome))
            for outcome in CALL_OUTCOMES
        }
        self._tools: dict[str, set[str]] = {}  # server -> the tool names that have a label of their own
        self._upstream: dict[tuple[str, str, str, str], tuple[Counter, Histogram]] = {}
        self._watched: SnapshotCollector | None = None

    def call_ended(self, outcome: CallOutcome, seconds: float, output_bytes: int | None) -> None:
        count, duration = self._calls[outcome]
        count.inc()
        duration.observe(seconds)
        if output_bytes is not None:
            self.metrics.output_bytes.observe(output_bytes)

    def sandbox_waited(self, seconds: float) -> None:
        self.metrics.sandbox_wait.observe(seconds)

    def sandbox_started(self, backend: str, seconds: float, ok: bool) -> None:
        self.metrics.sandbox_starts.labels(backend, "ok" if ok else "failed").inc()
        if ok:
            self.metrics.sandbox_start_duration.labels(backend).observe(seconds)

    def session_closed(self, reason: SessionEnd) -> None:
        self.metrics.sessions_closed.labels(reason).inc()

    def upstream_used(self, kind: str, server: str, tool: str, outcome: UpstreamOutcome, seconds: float) -> None:
        method = UPSTREAM_METHODS.get(kind, kind)
        key = (method, server, tool, outcome)
        children = self._upstream.get(key)
        if children is None:
            label = self._tool_label(server, tool)
            metrics = self.metrics
            children = (
                metrics.upstream_calls.labels(method, server, label, outcome),
                metrics.upstream_duration.labels(method, server, label),
            )
            if label == tool:  # "other" is looked up again, so each new name past the cap costs one set lookup
                self._upstream[key] = children
        count, duration = children
        count.inc()
        duration.observe(seconds)

    def _tool_label(self, server: str, tool: str) -> str:
        """``tool`` while its server has fewer than ``MAX_TOOLS_PER_SERVER`` tools with labels, else "other"."""
        if not tool:
            return tool
        named = self._tools.setdefault(server, set())
        if tool in named:
            return tool
        if len(named) >= MAX_TOOLS_PER_SERVER:
            return OTHER_TOOL
        named.add(tool)
        return tool

    def approval(self, decision: ApprovalDecision) -> None:
        self.metrics.approvals.labels(decision).inc()

    def call_forwarded(self) -> None:
        self.metrics.forwarded.inc()

    def session_taken_over(self) -> None:
        self.metrics.takeovers.inc()

    def watch(self, look: Callable[[], Snapshot]) -> None:
        if self._watched is not None:
            self.registry.unregister(self._watched)
        self._watched = SnapshotCollector(look)
        self.registry.register(self._watched)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def telemetry(enabled: bool, spans: Tracing | None = None) -> Telemetry:
    """The bridge's telemetry: recording when its metrics are on (``MCP_BRIDGE_METRICS``), else nothing; its spans
    are ``spans``'s (``tracing`` below; none when it is None)."""
    made = Recording() if enabled else Telemetry()
    if spans is not None:
        made.tracing = spans
    return made


def tracing(enabled: bool, export: OtelExport | None = None, digests: bool = False, instance: str = "") -> Tracing:
    """The bridge's tracing: spans exported over OTLP/HTTP when ``enabled`` (``MCP_BRIDGE_TRACING``, and the standard
    ``OTEL_SDK_DISABLED`` not true), else nothing. The SDK is imported here, and only here, when it is on."""
    if not enabled or export is None or export.disabled:
        return Tracing()
    try:
        from .otel_tracing import OtelTracing  # the SDK and its exporter: a fraction of a second, only when on
    except ImportError as exc:
        raise SettingsError(
            f"MCP_BRIDGE_TRACING is on, but OpenTelemetry's SDK is not installed ({exc.name or exc}): install the "
            "tracing extra (pip install 'mcp-codemode[tracing]'), or turn MCP_BRIDGE_TRACING off"
        ) from None
    return OtelTracing(export, digests=digests, instance=instance)
