"""The traces' pure logic: the OTEL_* variables read and refused, spans and their parents (kept in memory), the
client span of an upstream use with hostile names, the trace context across tasks and in a forwarded call, and the
HTTP headers an upstream request gets. One trace exported over OTLP/HTTP through a real bridge is
tests/telemetry/test_traces_e2e.py."""

from __future__ import annotations

import asyncio
import contextvars
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_codemode.errors import SettingsError
from mcp_codemode.face.forwarded_calls import BadForwardedCall, Forwarded, forwarded_body, parse_forwarded
from mcp_codemode.guest.protocol import ERROR_KIND_POLICY
from mcp_codemode.observability_settings import OtelExport, OtelProblem, otel_export, otel_secrets
from mcp_codemode.policy.guard import CallGuard, CallNote
from mcp_codemode.policy.rules import Policy
from mcp_codemode.runs.audit import AuditLog
from mcp_codemode.runs.bridge import RunRequest
from mcp_codemode.runs.relay_run import Run
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.settings import Settings
from mcp_codemode.telemetry.otel_tracing import OtelTracing
from mcp_codemode.telemetry.seam import Telemetry, tracing
from mcp_codemode.telemetry.tracing import NO_SPAN, SPAN_IDS, Tracing
from mcp_codemode.upstream.servers.transport import trace_headers

SECRET = "sk-live-0123456789abcdef"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE}-{PARENT}-01"


def recorded(digests: bool = False) -> tuple[OtelTracing, InMemorySpanExporter]:
    """A recording tracing whose spans stay in memory (no exporter of its own: ``OTEL_TRACES_EXPORTER=none``)."""
    traced = OtelTracing(OtelExport(exporter="none"), digests=digests)
    memory = InMemorySpanExporter()
    traced.provider.add_span_processor(SimpleSpanProcessor(memory))
    return traced, memory


def flat(span: ReadableSpan) -> dict[str, Any]:
    """A finished span as plain values: ids in hex, its parent's ("" for a root), attributes, status, events."""
    assert span.context is not None
    return {
        "name": span.name, "kind": span.kind.name, "trace": format(span.context.trace_id, "032x"),
        "span": format(span.context.span_id, "016x"),
        "parent": format(span.parent.span_id, "016x") if span.parent is not None else "",
        "attributes": dict(span.attributes or {}), "error": span.status.status_code.name == "ERROR",
        "description": span.status.description or "", "events": len(span.events),
    }  # fmt: skip


def by_name(memory: InMemorySpanExporter) -> dict[str, dict[str, Any]]:
    return {span.name: flat(span) for span in memory.get_finished_spans()}


# --- the settings ---------------------------------------------------------------------------------------------


def test_the_standard_variables_say_where_and_what() -> None:
    export = otel_export({
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%3Db,x=1",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25",
        "OTEL_SERVICE_NAME": "bridge-a", "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
    })  # fmt: skip
    assert export.endpoint == "http://collector:4318/v1/traces"
    assert export.headers == (("api-key", "a=b"), ("x", "1"))
    assert (export.sampler, export.ratio, export.timeout, export.compression) == (
        "parentbased_traceidratio", 0.25, 2.5, "gzip",
    )  # fmt: skip
    assert (export.service_name, export.resource) == ("bridge-a", (("deployment.environment", "prod"),))
    # The signal's own endpoint is taken as it is, and wins over the general one.
    specific = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b/t"}
    assert otel_export(specific).endpoint == "http://b/t"
    assert otel_export({}).endpoint == "http://localhost:4318/v1/traces"
    assert otel_secrets({"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20xyz"}) == ["Bearer xyz", "Bearer", "xyz"]


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"),
        ({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"),
        ({"OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER"),
        ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "nan"}, "OTEL_TRACES_SAMPLER_ARG"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"),
        ({"OTEL_BSP_SCHEDULE_DELAY": "-1"}, "OTEL_BSP_SCHEDULE_DELAY"),
        ({"OTEL_EXPORTER_OTLP_HEADERS": f"{SECRET}"}, "OTEL_EXPORTER_OTLP_HEADERS"),
    ],
)
def test_a_variable_tracing_cannot_use_is_refused_by_name_once_tracing_is_on(variables: dict[str, str],
                                                                            named: str) -> None:  # fmt: skip
    with pytest.raises(OtelProblem, match=named):
        otel_export(variables)
    env = {"MCP_BRIDGE_TRACING": "on", **variables}
    with pytest.raises(SettingsError, match=f"MCP_BRIDGE_TRACING is on, but {named}") as raised:
        Settings.load(env=env, settings_file=None)
    assert SECRET not in str(raised.value)  # a header without '=' may be a bare key
    # Meant for another program: a bridge that does not trace starts all the same.
    assert Settings.load(env=variables, settings_file=None).tracing is False


def test_tracing_is_off_by_default_and_off_is_the_null_tracing() -> None:
    settings = Settings.load(env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, settings_file=None)
    assert (settings.tracing, settings.trace_digests, settings.log_format) == (False, False, "text")
    assert type(tracing(settings.tracing)) is Tracing
    assert type(tracing(True, OtelExport(disabled=True))) is Tracing  # OTEL_SDK_DISABLED=true
    off = Tracing()
    with off.span("anything", "server", parent={"traceparent": TRACEPARENT}) as span:
        assert span is NO_SPAN and SPAN_IDS.get() == ("", "")
    assert off.carrier() == {} and off.captured() is None


# --- spans -------------------------------------------------------------------------------------------------------


def test_a_span_continues_the_trace_its_carrier_names_and_marks_a_failure_without_its_message() -> None:
    traced, memory = recorded()

    async def main() -> None:
        with traced.span("server", "server", {"mcp.method.name": "tools/call"}, parent={"traceparent": TRACEPARENT}):
            with traced.span("child") as child:
                assert SPAN_IDS.get() == (TRACE, child.span_id)
                captured = traced.captured()

            async def elsewhere() -> None:  # another task, as the sandbox's reader serves the code's requests
                with traced.resumed(captured), traced.span("resumed"):
                    assert traced.carrier()["traceparent"].startswith(f"00-{TRACE}-")

            await asyncio.get_running_loop().create_task(elsewhere(), context=contextvars.Context())
            with pytest.raises(ValueError, match="the code chose"), traced.span("failing"):
                raise ValueError(f"the {SECRET} the code chose")
        # A carrier without a valid traceparent keeps the current parent instead of starting a new trace.
        with traced.span("outer"), traced.span("garbage", parent={"traceparent": "00-zz-zz-01"}):
            pass

    asyncio.run(main())
    spans = by_name(memory)
    server = spans["server"]
    assert (server["trace"], server["parent"], server["kind"]) == (TRACE, PARENT, "SERVER")
    assert spans["child"]["parent"] == server["span"]
    assert spans["resumed"]["parent"] == spans["child"]["span"]
    failing = spans["failing"]
    assert failing["error"] and failing["attributes"]["error.type"] == "ValueError"
    assert SECRET not in failing["description"] and not failing["events"]
    assert spans["garbage"]["parent"] == spans["outer"]["span"]


def test_an_upstream_use_is_a_client_span_named_only_by_a_listed_tool() -> None:
    """Hostile names everywhere the code can write one; the span may name only what the server listed, and holds
    neither the arguments nor the result, unless digests are asked for: then their size and sha256."""
    traced, memory = recorded(digests=True)
    audit = AuditLog(None)
    lines: list[dict[str, Any]] = []
    audit.record = lambda **fields: lines.append(fields)  # type: ignore[method-assign]
    guard = CallGuard(Policy(), audit, _with(traced))

    def answer(listed: str, reply: dict[str, Any]) -> Any:
        async def respond(note: CallNote) -> Any:
            note.server, note.tool, note.arguments = f"evil-{SECRET}", f"alias-{SECRET}", SECRET.encode()
            note.configured, note.listed = "everything", listed
            return reply

        return respond

    run = Run("local", "s", call="c0ffee0000000001")
    asyncio.run(guard.audited(run, answer("echo", {"ok": True, "value": {"isError": True, "content": SECRET}})))
    asyncio.run(guard.audited(run, answer("", {"ok": False, "error": {"kind": ERROR_KIND_POLICY, "message": SECRET}})))
    failed, refused = (flat(span) for span in memory.get_finished_spans())
    assert (failed["name"], failed["kind"], refused["name"]) == ("tools/call echo", "CLIENT", "tools/call")
    assert failed["attributes"]["gen_ai.tool.name"] == "echo" and failed["attributes"]["error.type"] == "tool_error"
    assert "gen_ai.tool.name" not in refused["attributes"] and refused["attributes"]["error.type"] == "refused"
    assert failed["attributes"]["mcp_codemode.arguments.size"] == len(SECRET)
    assert len(str(failed["attributes"]["mcp_codemode.result.sha256"])) == 64
    everything = json.dumps([failed, refused])
    assert SECRET not in everything and "evil" not in everything
    assert lines[0]["call"] == "c0ffee0000000001"
    assert lines[0]["trace"] == (failed["trace"], failed["span"])


def _with(traced: Tracing) -> Telemetry:
    made = Telemetry()
    made.tracing = traced
    return made


# --- across replicas and to HTTP upstreams -------------------------------------------------------------------------


def test_a_forwarded_call_carries_the_forwarding_span_and_the_holder_reads_it_strictly() -> None:
    traced, _ = recorded()
    place = Forwarded(SessionKey.principal("t-abc", "work"), "work", "t-abc")
    with traced.span("mcp_codemode.forward", "client") as span:
        body = forwarded_body(place, RunRequest(code="print(1)"), traced)
    read, _ = parse_forwarded(body, 120)
    assert read.trace["traceparent"].startswith(f"00-{span.trace_id}-{span.span_id}-")
    assert parse_forwarded(forwarded_body(place, RunRequest(code="1")), 120)[0].trace == {}  # not traced
    for hostile in ({"traceparent": "00-x"}, {"traceparent": TRACEPARENT, "baggage": "a=1"},
                    {"traceparent": TRACEPARENT, "tracestate": "k=\n" + "v" * 600}):  # fmt: skip
        raw = json.loads(body)
        raw["trace"] = hostile
        with pytest.raises(BadForwardedCall, match="trace"):
            parse_forwarded(json.dumps(raw).encode(), 120)


def test_an_http_upstream_request_repeats_its_meta_trace_context_as_headers() -> None:
    def request(body: object) -> httpx2.Request:
        return httpx2.Request("POST", "http://upstream/mcp", content=json.dumps(body).encode())

    meta = {"traceparent": TRACEPARENT, "tracestate": "k=v", "baggage": "user=1", "progressToken": 3}
    traced = request({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "_meta": meta}})
    asyncio.run(trace_headers(traced))
    assert (traced.headers["traceparent"], traced.headers["tracestate"], traced.headers["baggage"]) == (
        TRACEPARENT, "k=v", "user=1",
    )  # fmt: skip
    # The word in an argument is not a trace context; nor is a header value that would break the request.
    plain = request({"method": "tools/call", "params": {"arguments": {"traceparent": TRACEPARENT}}})
    broken = request({"method": "tools/call", "params": {"_meta": {"traceparent": "00-a\r\nX-Injected: 1"}}})
    for untouched in (plain, broken):
        asyncio.run(trace_headers(untouched))
        assert "traceparent" not in untouched.headers


def test_settings_read_the_tracing_switches(tmp_path: Path) -> None:
    env = {"MCP_BRIDGE_TRACING": "on", "MCP_BRIDGE_TRACE_DIGESTS": "on", "MCP_BRIDGE_LOG_FORMAT": "JSON",
           "OTEL_SERVICE_NAME": "x", "HOME": str(tmp_path)}  # fmt: skip
    settings = Settings.load(env=env, settings_file=None)
    assert (settings.tracing, settings.trace_digests, settings.log_format) == (True, True, "json")
    assert settings.otel == {"OTEL_SERVICE_NAME": "x"}
    with pytest.raises(SettingsError, match="MCP_BRIDGE_LOG_FORMAT"):
        Settings.load(env={"MCP_BRIDGE_LOG_FORMAT": "xml"}, settings_file=None)
