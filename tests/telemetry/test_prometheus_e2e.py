"""A real Prometheus scrapes a real bridge that ran real calls, and its query API returns the expected series.

One HTTP bridge (bubblewrap, server-everything as its upstream server, a client token and a metrics-only token, room
for one session) runs an ok call, a code error, a timeout, an upstream tool call and a call in a second session
whose name and code carry a secret (which evicts the first session). Prometheus, started here on loopback, scrapes
it with the metrics token, and with no token and a wrong one as two other jobs, which must stay down. Then its API
answers for the series. The bridge writes its log as JSON (``--log-format json``): each line an event, those of a
call with its call id, and none with a token or the secret. A stdio bridge's ``--metrics-port`` is read with a plain
GET: a second Prometheus would add its start to the suite for what the first one already proves.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_codemode.face.principals import principal_of
from tests.support import upstreams
from tests.support.clients import (
    HttpServer,
    assert_no_orphans,
    bearer,
    free_port,
    http_client_for,
    require_bubblewrap,
    stdio_client_for,
    text_of,
)
from tests.support.prometheus import Prometheus, get, prometheus, scrape_config

pytestmark = [pytest.mark.anyio, pytest.mark.backend]
CLIENT_TOKEN = "client-" + uuid.uuid4().hex
METRICS_TOKEN = "metrics-" + uuid.uuid4().hex
SECRET = "sk-live-" + uuid.uuid4().hex[:16]  # in a session name, in code, in a made-up tool name, in an argument


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    require_bubblewrap()
    where = tmp_path_factory.mktemp("metrics-bridge")
    config = upstreams.write_config(where / "servers.json", upstreams.everything())
    settings = {"MCP_SERVERS_CONFIG": str(config), "MCP_BRIDGE_DISCOVER": "false", "MCP_BRIDGE_MAX_SESSIONS": "1",
                "MCP_BRIDGE_WARM_POOL": "1", "MCP_BRIDGE_METRICS_TOKEN": METRICS_TOKEN}  # fmt: skip
    with HttpServer(where / "server.log", "--token", CLIENT_TOKEN, "--log-format", "json", **settings) as server:
        yield server
    assert_no_orphans()


async def _run_calls(bridge: HttpServer) -> dict[str, Any]:
    """The calls whose metrics the test expects; each one's result, to tell a broken call from a broken metric."""
    made_up = f"await rt.call_tool('everything', 'nope-{SECRET}', {{'k': '{SECRET}'}})"
    hostile = f"import mcp.runtime as rt\ntry:\n    {made_up}\nexcept Exception as exc:\n    print(type(exc).__name__)"
    echo = "print(await mcp_everything.echo(message='hi'))"
    async with http_client_for(bridge.url, "legacy", bearer(CLIENT_TOKEN)) as client:
        return {
            "ok": await client.call_tool("run_python", {"code": "print(6 * 7)"}),
            "code error": await client.call_tool("run_python", {"code": "1 / 0"}),
            "timeout": await client.call_tool("run_python", {"code": "import time\ntime.sleep(60)", "timeout": 1}),
            "upstream": await client.call_tool("run_python", {"code": echo}),
            "hostile": await client.call_tool("run_python", {"code": hostile, "session": f"s-{SECRET}"}),
        }


async def test_prometheus_scrapes_the_calls_a_bridge_ran(bridge: HttpServer, tmp_path: Path) -> None:
    results = await _run_calls(bridge)
    assert text_of(results["ok"]).strip() == "42", text_of(results["ok"])
    assert "ZeroDivisionError" in text_of(results["code error"])
    assert "Echo: hi" in text_of(results["upstream"]), text_of(results["upstream"])
    assert text_of(results["hostile"]).splitlines()[0] == "ToolNotFound", text_of(results["hostile"])
    # Its log is JSON, one event per line; the lines written during a call name it; none holds a token or the secret.
    events = [json.loads(line) for line in bridge.log_text().splitlines() if line.strip()]
    assert any(len(event.get("call_id", "")) == 16 for event in events), events
    for leak in (SECRET, CLIENT_TOKEN, METRICS_TOKEN):
        assert leak not in bridge.log_text(), leak
    target = [f"127.0.0.1:{bridge.port}"]
    config = scrape_config({
        "bridge": {"static_configs": [{"targets": target}], "authorization": {"credentials": METRICS_TOKEN}},
        "no-token": {"static_configs": [{"targets": target}]},
        "wrong-token": {"static_configs": [{"targets": target}], "authorization": {"credentials": METRICS_TOKEN[:-1]}},
    })  # fmt: skip
    with prometheus(tmp_path, config) as server:
        scraped = lambda found: len(found) == 3 and all(t["health"] != "unknown" for t in found.values())  # noqa: E731
        targets = server.wait_for(scraped, "all three jobs scraped")
        assert targets["bridge"]["health"] == "up", targets["bridge"]
        for refused in ("no-token", "wrong-token"):
            assert (targets[refused]["health"], "401" in targets[refused]["lastError"]) == ("down", True), targets
        _assert_series(server)


def _assert_series(server: Prometheus) -> None:
    job = 'job="bridge"'
    calls = server.query(f"mcp_codemode_calls_total{{{job}}} > 0")
    assert {dict(labels)["outcome"]: value for labels, value in calls.items()} == {
        "ok": 3, "code_error": 1, "timeout": 1,
    }  # fmt: skip
    assert server.value(f'mcp_server_operation_duration_seconds_count{{{job},outcome="ok"}}') == 3
    assert server.value(f"mcp_codemode_sandbox_wait_seconds_count{{{job}}}") == 5
    assert server.value(f"mcp_codemode_output_bytes_count{{{job}}}") == 5
    echo = f'{job},mcp_method_name="tools/call",server="everything",tool="echo"'
    assert server.value(f'mcp_codemode_upstream_calls_total{{{echo},outcome="ok"}}') == 1
    assert server.value(f"mcp_client_operation_duration_seconds_count{{{echo}}}") == 1
    made_up = f'{job},mcp_method_name="tools/call",server="everything",tool="",outcome="error"'
    assert server.value(f"mcp_codemode_upstream_calls_total{{{made_up}}}") == 1
    assert server.value(f'mcp_codemode_upstream_server_state{{{job},server="everything",state="ready"}}') == 1
    assert server.value(f'mcp_codemode_sessions_closed_total{{{job},reason="evicted"}}') == 1
    assert (server.value(f"mcp_codemode_sessions{{{job}}}"), server.value(f"mcp_codemode_sessions_max{{{job}}}")) == (
        1, 1,
    )  # fmt: skip
    assert server.value(f'mcp_codemode_sandbox_starts_total{{{job},backend="bubblewrap",outcome="ok"}}') >= 2
    assert server.value(f'mcp_codemode_build_info{{{job},backend="bubblewrap"}}') == 1
    # No label Prometheus stored holds the session name, the code's secret, the principal or a token.
    stored = server.api("/api/v1/series", **{"match[]": f"{{{job}}}"})
    values = " ".join(value for series in stored for value in series.values())
    for leak in (SECRET, principal_of(CLIENT_TOKEN), CLIENT_TOKEN, METRICS_TOKEN):
        assert leak not in values, leak


async def test_a_stdio_bridge_serves_metrics_on_its_own_port(tmp_path: Path) -> None:
    require_bubblewrap()
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    log = tmp_path / "stdio.log"
    serving = stdio_client_for(log, "legacy", "--metrics-port", str(port), MCP_BRIDGE_DISCOVER="false",
                               MCP_BRIDGE_WARM_POOL="0", MCP_BRIDGE_METRICS_TOKEN=METRICS_TOKEN)  # fmt: skip
    async with serving as client:
        answer = await client.call_tool("run_python", {"code": "print('over stdio')"})
        assert text_of(answer).strip() == "over stdio"
        read = await anyio.to_thread.run_sync(lambda: get(url, bearer(METRICS_TOKEN)))
        anonymous = await anyio.to_thread.run_sync(lambda: get(url))
        mcp = await anyio.to_thread.run_sync(lambda: get(f"http://127.0.0.1:{port}/mcp", bearer(METRICS_TOKEN)))
    assert (read[0], anonymous[0], mcp[0]) == (200, 401, 404)
    assert b'mcp_codemode_calls_total{outcome="ok"} 1.0' in read[1], read[1][:2000]
    assert b'mcp_codemode_sandbox_starts_total{backend="bubblewrap",outcome="ok"} 1.0' in read[1]
