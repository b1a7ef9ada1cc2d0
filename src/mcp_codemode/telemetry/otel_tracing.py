"""The recording ``Tracing``: OpenTelemetry's SDK, exporting over OTLP/HTTP where the ``OTEL_*`` variables say.

Imported only by ``tracing.tracing`` when tracing is on; nothing else may import this module (the SDK and its
exporter, protobuf and requests among them, are the ``tracing`` extra, and a stdio bridge must start without them).

The tracer provider is the bridge's own, never the process's global one. The MCP SDK opens spans of its own around
every request it sends and every request it serves through the global provider: left without one, those are
pass-through spans that carry the current context, so when the hub calls an upstream tool inside the bridge's client
span, the SDK writes that span's ``traceparent`` (and ``tracestate``, ``baggage``) into the request's ``_meta``, and
the trace goes on in the upstream server, with one span per call and the names and attributes of the MCP semantic
conventions rather than two.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased, Sampler, TraceIdRatioBased
from opentelemetry.trace import SpanKind as OtelKind
from opentelemetry.trace import StatusCode

from .. import __version__
from ..observability_settings import OtelExport
from .tracing import SPAN_IDS, Attribute, Span, SpanKind, Tracing

_KINDS = {"server": OtelKind.SERVER, "client": OtelKind.CLIENT, "internal": OtelKind.INTERNAL}


class OtelSpan(Span):
    """One SDK span: its ids as hex, and what the bridge may say about it."""

    __slots__ = ("_span", "recording", "span_id", "trace_id")

    def __init__(self, span: trace.Span) -> None:
        self._span = span
        self.recording = span.is_recording()
        ids = span.get_span_context()
        self.trace_id = format(ids.trace_id, "032x") if ids.is_valid else ""
        self.span_id = format(ids.span_id, "016x") if ids.is_valid else ""

    def set(self, key: str, value: Attribute) -> None:
        self._span.set_attribute(key, value)

    def rename(self, name: str) -> None:
        self._span.update_name(name)

    def fail(self, error_type: str) -> None:
        self._span.set_attribute("error.type", error_type)
        self._span.set_status(StatusCode.ERROR)  # no description: a message could carry what the code wrote


class OtelTracing(Tracing):
    """Spans of this bridge, batched and exported over OTLP/HTTP (protobuf) by the SDK's own thread."""

    enabled = True

    def __init__(self, export: OtelExport, *, digests: bool = False, instance: str = "") -> None:
        self.digests = digests
        attributes: dict[str, Any] = dict(export.resource)
        attributes.update({"service.name": export.service_name, "service.version": __version__})
        if instance:
            attributes.setdefault("service.instance.id", instance)
        self.provider = TracerProvider(resource=Resource(attributes), sampler=_sampler(export))
        if export.exporter == "otlp":
            exporter = OTLPSpanExporter(
                endpoint=export.endpoint,
                certificate_file=export.certificate,
                client_key_file=export.client_key,
                client_certificate_file=export.client_certificate,
                headers=dict(export.headers),
                timeout=export.timeout,
                compression=Compression(export.compression),
            )
            processor = BatchSpanProcessor(exporter, max_queue_size=export.max_queue,
                                           schedule_delay_millis=export.schedule_delay * 1000,
                                           max_export_batch_size=min(export.max_batch, export.max_queue))  # fmt: skip
            self.provider.add_span_processor(processor)
        self.tracer = self.provider.get_tracer("mcp-codemode", __version__)

    @contextlib.contextmanager
    def span(self, name: str, kind: SpanKind = "internal", attributes: Mapping[str, Attribute] | None = None,
             parent: Mapping[str, Any] | None = None) -> Iterator[Span]:  # fmt: skip
        context = _extracted(parent) if parent else None
        opened = self.tracer.start_span(name, context=context, kind=_KINDS[kind], attributes=attributes)
        token = otel_context.attach(trace.set_span_in_context(opened, context))
        span = OtelSpan(opened)
        ids = SPAN_IDS.set((span.trace_id, span.span_id))
        try:
            yield span
        except BaseException as exc:
            span.fail("cancelled" if isinstance(exc, asyncio.CancelledError) else type(exc).__qualname__)
            raise
        finally:
            SPAN_IDS.reset(ids)
            otel_context.detach(token)
            opened.end()

    def captured(self) -> object:
        return otel_context.get_current()

    @contextlib.contextmanager
    def resumed(self, captured: object) -> Iterator[None]:
        if not isinstance(captured, otel_context.Context):
            yield
            return
        token = otel_context.attach(captured)
        ids = trace.get_current_span(captured).get_span_context()
        shown = SPAN_IDS.set((format(ids.trace_id, "032x"), format(ids.span_id, "016x")) if ids.is_valid else ("", ""))
        try:
            yield
        finally:
            SPAN_IDS.reset(shown)
            otel_context.detach(token)

    def carrier(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return {key: value for key, value in carrier.items() if key in ("traceparent", "tracestate")}

    def close(self) -> None:
        self.provider.shutdown()  # exports what is queued (bounded by the exporter's timeout), then stops


def _extracted(carrier: Mapping[str, Any]) -> otel_context.Context | None:
    """The context a carrier names, or None (the current one stays the parent) when it holds no valid trace: an
    empty context would make the span a root and cut it from a trace it belongs to."""
    try:
        context = propagate.extract(carrier)
    except (TypeError, ValueError):
        return None
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def _sampler(export: OtelExport) -> Sampler:
    name = export.sampler
    root: Sampler = ALWAYS_OFF if name.endswith("always_off") else ALWAYS_ON
    if name.endswith("traceidratio"):
        root = TraceIdRatioBased(export.ratio)
    return ParentBased(root=root) if name.startswith("parentbased_") else root
