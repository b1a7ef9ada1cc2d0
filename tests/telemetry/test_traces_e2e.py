"""One trace spans the client, the bridge and an upstream server, as a collector receives it over OTLP/HTTP.

A real stdio bridge (bubblewrap) with tracing on exports to a receiver in this test that decodes the real protobuf
messages (tests/support/otlp.py); its upstream server is a Python MCP server that traces itself with the SDK's own
middleware and exports to the same receiver, and answers with the traceparent it received in ``_meta``. The SDK
client sends a traceparent of its own in ``_meta``. The call's code calls the upstream tool (once fine, once failing
with ``isError``); then the spans must make one tree: client → ``tools/call run_python`` (server) → placing the
session, starting the sandbox, the cell → ``tools/call seen`` (client) → the upstream's ``tools/call seen`` (server).

The same bridge writes its log as JSON (``--log-format json``) and its audit log: the log lines of the call carry
its call id, trace id and span id, the audit line the same call id and trace id, so each leads to the others. And
secrets planted everywhere (a bearer token and the exporter's API key in the settings, an env value and a
``--token`` argument in the server's config, text in the code and in a tool's arguments) reach no log line and no
span: code, arguments and results are not recorded by default.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from mcp_codemode.upstream.model import ServerConfig
from tests.support import upstreams
from tests.support.clients import require_bubblewrap, stdio_client_for, text_of
from tests.support.otlp import ReceivedSpan, otlp_receiver

pytestmark = [pytest.mark.anyio, pytest.mark.backend]
CLIENT_TRACE = uuid.uuid4().hex
CLIENT_SPAN = uuid.uuid4().hex[:16]
SECRETS = {
    "code": "code-secret-" + uuid.uuid4().hex[:12],
    "argument": "argument-secret-" + uuid.uuid4().hex[:12],
    "server env": "env-secret-" + uuid.uuid4().hex[:12],
    "server --token": "arg-token-" + uuid.uuid4().hex[:12],
    "http token": "http-token-" + uuid.uuid4().hex,
    "exporter header": "otlp-key-" + uuid.uuid4().hex[:12],
}


def _one(spans: list[ReceivedSpan], name: str, service: str = "mcp-codemode") -> ReceivedSpan:
    found = [span for span in spans if span.name == name and span.service == service]
    assert len(found) == 1, (name, service, [(s.service, s.name) for s in spans])
    return found[0]


async def test_one_trace_spans_client_bridge_and_upstream_server(tmp_path: Path) -> None:
    require_bubblewrap()
    traced_py = tmp_path / "traced.py"
    traced_py.write_text(upstreams.TRACED)
    log, audit = tmp_path / "bridge.log", tmp_path / "audit.jsonl"
    code = (f"# {SECRETS['code']}\nprint(await mcp_traced.seen(text={SECRETS['argument']!r}))\n"
            f"await mcp_traced.fail(text={SECRETS['argument']!r})")  # fmt: skip
    with otlp_receiver() as receiver:
        server = ServerConfig(
            name="traced", alias="traced", transport="stdio", source="test", command=sys.executable,
            args=(str(traced_py), "--token", SECRETS["server --token"]),
            env={"OTLP_ENDPOINT": receiver.endpoint, "API_KEY": SECRETS["server env"]},
        )  # fmt: skip
        settings: dict[str, Any] = {
            "MCP_SERVERS_CONFIG": str(upstreams.write_config(tmp_path / "servers.json", server)),
            "MCP_BRIDGE_DISCOVER": "false", "MCP_BRIDGE_WARM_POOL": "0", "MCP_BRIDGE_AUDIT_LOG": str(audit),
            "MCP_BRIDGE_HTTP_TOKEN": SECRETS["http token"], "MCP_BRIDGE_TRACING": "on",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_EXPORTER_OTLP_HEADERS": f"x-api-key={SECRETS['exporter header']}",
        }  # fmt: skip
        async with stdio_client_for(log, "legacy", "--log-format", "json", **settings) as client:
            meta: Any = {"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"}
            result = await client.call_tool("run_python", {"code": code}, meta=meta)
        # The bridge has ended: its spans were flushed on the way out.
        receiver.wait_for(lambda spans: any(s.name == "mcp_codemode.cell" for s in spans), "the bridge's cell span")
        receiver.wait_for(lambda spans: any(s.service == "traced-upstream" and s.name == "tools/call fail"
                                            for s in spans), "the upstream server's spans")  # fmt: skip
        spans, problems = list(receiver.spans), list(receiver.problems)
    assert problems == []
    assert result.is_error and "ToolError" in text_of(result), text_of(result)

    # One tree, one trace: the client's span is the parent of the bridge's server span.
    request = _one(spans, "tools/call run_python")
    assert (request.kind, request.trace_id, request.parent_span_id) == ("server", CLIENT_TRACE, CLIENT_SPAN)
    assert request.attributes["mcp.method.name"] == "tools/call"
    assert request.attributes["gen_ai.tool.name"] == "run_python"
    assert request.attributes["mcp.protocol.version"] and request.attributes["jsonrpc.request.id"]
    assert request.error and request.attributes["error.type"] == "tool_error"  # isError: failed all the same
    placing, starting, cell = (_one(spans, name) for name in (
        "mcp_codemode.place_session", "mcp_codemode.start_sandbox", "mcp_codemode.cell"))  # fmt: skip
    assert {span.parent_span_id for span in (placing, starting, cell)} == {request.span_id}
    assert starting.attributes["mcp_codemode.backend"] == "bubblewrap"
    assert cell.error and cell.attributes["mcp_codemode.cell.status"] == "error"
    called, failed = _one(spans, "tools/call seen"), _one(spans, "tools/call fail")
    for span in (called, failed):
        assert (span.kind, span.parent_span_id) == ("client", cell.span_id)
        assert span.attributes["mcp.method.name"] == "tools/call"
        assert span.attributes["mcp_codemode.server"] == "traced"
    assert called.attributes["gen_ai.tool.name"] == "seen" and not called.error
    assert failed.error and failed.attributes["error.type"] == "tool_error"
    # The upstream server received the client span's context in _meta, and its own span is that span's child.
    assert f"'00-{CLIENT_TRACE}-{called.span_id}-01'" in text_of(result).splitlines()[0]
    upstream = _one(spans, "tools/call seen", "traced-upstream")
    assert (upstream.kind, upstream.parent_span_id) == ("server", called.span_id)
    handshake = ("initialize", "notifications/initialized")  # the client sent them without a trace of its own
    others = [(s.service, s.name) for s in spans if s.trace_id != CLIENT_TRACE and s.name not in handshake]
    assert others == [], others

    # The audit line and the log lines of the call lead to the trace, and to each other, by the call id.
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    call_ids = {line["call"] for line in lines}
    assert len(call_ids) == 1 and cell.attributes["mcp_codemode.call.id"] in call_ids, lines
    by_tool = {line["tool"]: line for line in lines}
    assert (by_tool["seen"]["trace_id"], by_tool["seen"]["span_id"]) == (CLIENT_TRACE, called.span_id)
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]  # every line is JSON
    assert {"time", "level", "logger", "message"} <= set(events[0]), events[0]
    during = [event for event in events if event.get("call_id") in call_ids]
    assert during and all(event["trace_id"] == CLIENT_TRACE and event["span_id"] for event in during), events

    # Nothing secret in any log line or span; the bridge's spans hold no code, arguments or results.
    text = log.read_text() + " ".join(span.text() for span in spans)
    for what, secret in SECRETS.items():
        assert secret not in text, what
    assert not any("refused on purpose" in span.text() for span in spans if span.service == "mcp-codemode")
