"""An OTLP/HTTP trace receiver on loopback: the stand-in for a collector, which no registry here offers.

It is honest in what matters: exporters send it real ``ExportTraceServiceRequest`` protobuf bodies over HTTP (gzip or
not), it decodes them with ``opentelemetry-proto``, the messages the collector itself uses, and answers with an
``ExportTraceServiceResponse``. Anything it cannot decode fails the test that reads it (``problems``), so a bridge
that sent JSON, a wrong path or a broken body is caught rather than ignored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from .patience import patient

TRACES_PATH = "/v1/traces"


@dataclasses.dataclass(frozen=True)
class ReceivedSpan:
    """One span as a collector would store it: ids as hex, its kind and status as words, attributes as values."""

    service: str
    name: str
    kind: str  # server, client, internal, producer, consumer
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root
    attributes: dict[str, Any]
    error: bool  # status code ERROR
    status_message: str
    events: tuple[str, ...]

    def text(self) -> str:
        """Everything the span holds as text, to search for what it must not hold."""
        attributes = (f"{key}={value}" for key, value in self.attributes.items())
        return " ".join([self.name, self.status_message, *self.events, *attributes])


def _value(value: AnyValue) -> Any:
    field = value.WhichOneof("value")
    if field == "array_value":
        return [_value(item) for item in value.array_value.values]
    if field == "kvlist_value":
        return {item.key: _value(item.value) for item in value.kvlist_value.values}
    return getattr(value, field) if field else None


def decode(body: bytes) -> list[ReceivedSpan]:
    """The spans of one ``ExportTraceServiceRequest``; ``DecodeError`` when the body is not one."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {item.key: _value(item.value) for item in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                kind = Span.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_").lower()
                spans.append(ReceivedSpan(
                    service=str(resource.get("service.name", "")), name=span.name, kind=kind,
                    trace_id=span.trace_id.hex(), span_id=span.span_id.hex(), parent_span_id=span.parent_span_id.hex(),
                    attributes={item.key: _value(item.value) for item in span.attributes},
                    error=span.status.code == Status.STATUS_CODE_ERROR, status_message=span.status.message,
                    events=tuple(event.name for event in span.events),
                ))  # fmt: skip
    return spans


class OtlpReceiver:
    """``POST /v1/traces`` on a free 127.0.0.1 port, in a thread; ``endpoint`` is what OTEL_EXPORTER_OTLP_ENDPOINT
    takes. Every span received is kept in ``spans``; every body it could not take, with why, in ``problems``."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.problems: list[str] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                receiver._take(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _take(self, handler: BaseHTTPRequestHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        encoding = (handler.headers.get("Content-Encoding") or "").lower()
        problem = ""
        if handler.path != TRACES_PATH:
            problem = f"posted to {handler.path}, not {TRACES_PATH}"
        elif handler.headers.get("Content-Type") != "application/x-protobuf":
            problem = f"Content-Type {handler.headers.get('Content-Type')!r}, not application/x-protobuf"
        else:
            try:
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                spans = decode(body)
            except (DecodeError, OSError, zlib.error) as exc:
                problem = f"not an ExportTraceServiceRequest: {exc}"
        with self._lock:
            self.requests += 1
            if problem:
                self.problems.append(problem)
            else:
                self.spans.extend(spans)
        answer = b"" if problem else ExportTraceServiceResponse().SerializeToString()
        handler.send_response(400 if problem else 200)
        handler.send_header("Content-Type", "application/x-protobuf")
        handler.send_header("Content-Length", str(len(answer)))
        handler.end_headers()
        handler.wfile.write(answer)

    def wait_for(self, condition: Callable[[list[ReceivedSpan]], bool], what: str, seconds: float = 60.0) -> None:
        """Poll until ``condition`` holds of the spans received; a hang guard, not a timing test."""
        deadline = time.monotonic() + patient(seconds)
        while time.monotonic() < deadline:
            with self._lock:
                if condition(list(self.spans)):
                    return
            time.sleep(0.05)
        raise AssertionError(f"the receiver never got {what}; it has {[s.name for s in self.spans]}, {self.problems}")

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


@contextlib.contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as receiver:
        yield receiver
