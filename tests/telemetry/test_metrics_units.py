"""The metrics' pure logic: bounded labels (attacked with hostile names), outcomes, the tool cap, the scrape-time
snapshot, and who may read ``/metrics`` (the ASGI endpoints driven without a socket). A real Prometheus scraping a
real bridge is tests/telemetry/test_prometheus_e2e.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from mcp_codemode.errors import SettingsError
from mcp_codemode.face.metrics_endpoint import MetricsEndpoint, check_metrics_exposure
from mcp_codemode.face.web import Guard
from mcp_codemode.guest.protocol import ERROR_KIND_APPROVAL, ERROR_KIND_TOOL_NOT_FOUND
from mcp_codemode.policy.guard import CallGuard, CallNote
from mcp_codemode.policy.rules import Policy
from mcp_codemode.runs.audit import AuditLog
from mcp_codemode.runs.call_outcomes import call_outcome, output_bytes
from mcp_codemode.runs.relay import Relay
from mcp_codemode.runs.relay_run import Run
from mcp_codemode.runs.saved_tools import FileSavedTools, SavedToolStore
from mcp_codemode.sandbox.results import ExecutionResult, GuestError, OutputImage
from mcp_codemode.settings import Settings
from mcp_codemode.telemetry.metrics import CALL_OUTCOMES, MAX_TOOLS_PER_SERVER, OTHER_TOOL, ApprovalDecision
from mcp_codemode.telemetry.seam import Recording, Telemetry, telemetry
from mcp_codemode.telemetry.snapshot import ServerSnapshot, Snapshot
from mcp_codemode.upstream.tools.directory import ToolDirectory
from tests.support.backends import sandbox_settings
from tests.support.prometheus import Samples, samples_of

if TYPE_CHECKING:
    from mcp_codemode.guest.protocol import CallFrame

SECRET = "sk-live-0123456789abcdef"  # what a session name, a principal, code or an argument could hold
HOSTILE = f'evil"}}\n{SECRET}'  # and an attempt to break out of a label value
METRICS_TOKEN = "m" * 16 + "metrics-only-123"
CLIENT_TOKEN = "c" * 16 + "runs-code-456789"


def samples(recording: Telemetry) -> Samples:
    return samples_of(recording.exposition())


# --- labels never carry what clients or their code chose ------------------------------------------------------


def test_no_label_carries_a_session_name_principal_code_or_argument(tmp_path: Path) -> None:
    """The relay's real path with hostile names everywhere a client or its code can put one: an unknown server, a
    made-up tool, arguments, a session and an owner. Only the closed sets and configured names may come out."""
    recording = Recording()
    settings = sandbox_settings(state_dir=tmp_path)
    directory = ToolDirectory([], settings)  # no server: nothing starts, every name the code writes is unknown
    relay = Relay(directory, FileSavedTools(SavedToolStore(tmp_path / "saved")), settings, AuditLog(None), recording)

    async def main() -> None:
        handler = relay.for_run(owner=f"p:{HOSTILE}", session=f"s-{HOSTILE}")
        frames: list[dict[str, Any]] = [
            {"op": "call", "server": HOSTILE, "tool": HOSTILE, "arguments": {"k": SECRET}},
            {"op": "read_resource", "server": HOSTILE, "uri": f"file:///{SECRET}"},
            {"op": "get_prompt", "server": HOSTILE, "prompt": HOSTILE, "arguments": {}},
        ]
        for number, frame in enumerate(frames):
            await handler(cast("CallFrame", {"type": "call", "id": number, **frame}))

    asyncio.run(main())
    # And the guard as the relay drives it once a call got further: the names the code wrote are in the note, but
    # only what was configured and listed may be labels.
    guard = CallGuard(Policy(), AuditLog(None), recording)

    async def listed(note: CallNote) -> Any:
        note.server, note.tool, note.arguments = HOSTILE, f"alias-{SECRET}", SECRET.encode()
        note.configured, note.listed = "everything", "echo"
        return {"ok": False, "error": {"kind": ERROR_KIND_TOOL_NOT_FOUND, "message": SECRET}}

    asyncio.run(guard.audited(Run(f"p:{HOSTILE}", f"s-{HOSTILE}"), listed))
    text = recording.exposition().decode()
    assert SECRET not in text and "evil" not in text
    found = samples(recording)
    unknown = (("mcp_method_name", "tools/call"), ("outcome", "error"), ("server", ""), ("tool", ""))
    assert found[("mcp_codemode_upstream_calls_total", unknown)] == 1
    read = (("mcp_method_name", "resources/read"), ("outcome", "error"), ("server", ""), ("tool", ""))
    assert found[("mcp_codemode_upstream_calls_total", read)] == 1
    echo = (("mcp_method_name", "tools/call"), ("outcome", "error"), ("server", "everything"), ("tool", "echo"))
    assert found[("mcp_codemode_upstream_calls_total", echo)] == 1


def test_a_servers_tools_past_the_cap_are_counted_as_other() -> None:
    recording = Recording()
    for number in range(MAX_TOOLS_PER_SERVER + 5):
        recording.upstream_used("tool", "big", f"tool-{number}", "ok", 0.001)
    recording.upstream_used("tool", "big", "tool-0", "ok", 0.001)  # one that has a label keeps it
    recording.upstream_used("tool", "small", "tool-999", "ok", 0.001)  # the cap is per server
    calls = {labels: value for (name, labels), value in samples(recording).items()
             if name == "mcp_codemode_upstream_calls_total"}  # fmt: skip
    tools = {dict(labels)["tool"] for labels in calls if dict(labels)["server"] == "big"}
    assert len(tools) == MAX_TOOLS_PER_SERVER + 1 and OTHER_TOOL in tools
    label = (("mcp_method_name", "tools/call"), ("outcome", "ok"), ("server", "big"), ("tool", OTHER_TOOL))
    assert calls[label] == 5
    assert calls[(("mcp_method_name", "tools/call"), ("outcome", "ok"), ("server", "big"), ("tool", "tool-0"))] == 2
    assert any(dict(labels) == {"mcp_method_name": "tools/call", "outcome": "ok", "server": "small",
                                "tool": "tool-999"} for labels in calls)  # fmt: skip


# --- what a call's outcome is -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "outcome"),
    [
        (ExecutionResult("ok", value="1"), "ok"),
        (ExecutionResult("timeout"), "timeout"),
        (ExecutionResult("crashed"), "crashed"),
        (ExecutionResult("error", error=GuestError("ZeroDivisionError", "", "")), "code_error"),
        (ExecutionResult("error", error=GuestError("PolicyError", "", "")), "refused"),
        (ExecutionResult("error", error=GuestError(ERROR_KIND_APPROVAL, "", "")), "refused"),
        (ExecutionResult("error", error=GuestError("ToolError", "", "")), "tool_error"),
        (ExecutionResult("error", error=GuestError(HOSTILE, "", "")), "code_error"),  # the guest names the type
        (ExecutionResult("error"), "code_error"),
    ],
)
def test_a_calls_outcome_is_one_of_a_closed_set(result: ExecutionResult, outcome: str) -> None:
    assert call_outcome(result) == outcome
    assert outcome in CALL_OUTCOMES


def test_output_bytes_count_what_the_code_produced_in_utf8() -> None:
    result = ExecutionResult("error", stdout="é", stderr="ab", value="c", error=GuestError("E", "xyz", "tb"),
                             images=(OutputImage("image/png", b"12345"),))  # fmt: skip
    assert output_bytes(result) == 2 + 2 + 1 + 3 + 5


def test_every_outcome_is_exposed_from_the_start_with_zero() -> None:
    """Rates and ratios need the series before the first failure: each outcome's counter starts at 0."""
    found = samples(Recording())
    assert {dict(labels)["outcome"] for (name, labels) in found if name == "mcp_codemode_calls_total"} == set(
        CALL_OUTCOMES
    )


def test_approvals_are_counted_by_decision_and_session_closes_by_reason() -> None:
    recording = Recording()
    decisions: tuple[ApprovalDecision, ...] = ("granted", "granted", "denied", "unasked")
    for decision in decisions:
        recording.approval(decision)
    recording.session_closed("evicted")
    found = samples(recording)
    assert found[("mcp_codemode_approvals_total", (("decision", "granted"),))] == 2
    assert found[("mcp_codemode_approvals_total", (("decision", "denied"),))] == 1
    assert found[("mcp_codemode_sessions_closed_total", (("reason", "evicted"),))] == 1


def test_the_snapshot_is_read_at_scrape_time_and_a_failing_one_leaves_the_rest() -> None:
    recording = Recording()
    state = {"sessions": 3}

    def look() -> Snapshot:
        if state["sessions"] < 0:
            raise RuntimeError("broken")
        servers = (ServerSnapshot("everything", "ready", 2),)
        return Snapshot("1.2.3", "bubblewrap", sessions=state["sessions"], sessions_max=16, servers=servers)

    recording.watch(look)
    found = samples(recording)
    assert found[("mcp_codemode_sessions", ())] == 3
    assert found[("mcp_codemode_build_info", (("backend", "bubblewrap"), ("version", "1.2.3")))] == 1
    assert found[("mcp_codemode_upstream_server_state", (("server", "everything"), ("state", "ready")))] == 1
    assert found[("mcp_codemode_upstream_server_state", (("server", "everything"), ("state", "failed")))] == 0
    assert found[("mcp_codemode_upstream_server_restarts_total", (("server", "everything"),))] == 2
    state["sessions"] = 5
    assert samples(recording)[("mcp_codemode_sessions", ())] == 5
    state["sessions"] = -1
    left = samples(recording)
    assert ("mcp_codemode_sessions", ()) not in left and ("mcp_codemode_calls_total", (("outcome", "ok"),)) in left


def test_metrics_off_record_nothing() -> None:
    off = telemetry(False)
    off.call_ended("ok", 0.001, 10)
    assert (off.enabled, off.exposition()) == (False, b"")


# --- who may read /metrics --------------------------------------------------------------------------------


async def _request(app: Any, path: str, headers: dict[str, str], method: str = "GET") -> tuple[int, bytes]:
    """One request through an ASGI app, no socket: its status and body."""
    scope = {"type": "http", "method": method, "path": path,
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}  # fmt: skip
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def _bearer(token: str) -> dict[str, str]:
    return {"host": "127.0.0.1:8765", "authorization": f"Bearer {token}"}


def test_the_mcp_port_serves_metrics_to_either_token_and_the_metrics_token_runs_no_code() -> None:
    settings = Settings(http_tokens=(CLIENT_TOKEN,), metrics_tokens=(METRICS_TOKEN,))
    reached: list[str] = []

    async def mcp_app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"mcp"})

    guard = Guard(mcp_app, settings, MetricsEndpoint(Recording(), settings, loopback=True))

    async def main() -> dict[str, int]:
        return {
            "metrics token": (await _request(guard, "/metrics", _bearer(METRICS_TOKEN)))[0],
            "client token": (await _request(guard, "/metrics", _bearer(CLIENT_TOKEN)))[0],
            "no token": (await _request(guard, "/metrics", {"host": "127.0.0.1:8765"}))[0],
            "wrong token": (await _request(guard, "/metrics", _bearer(METRICS_TOKEN[:-1] + "x")))[0],
            "rebound host": (await _request(guard, "/metrics", {**_bearer(METRICS_TOKEN), "host": "evil.test"}))[0],
            "other origin": (await _request(guard, "/metrics", {**_bearer(METRICS_TOKEN), "origin": "https://e.test"}))[
                0
            ],
            "post": (await _request(guard, "/metrics", _bearer(METRICS_TOKEN), "POST"))[0],
            "metrics token on /mcp": (await _request(guard, "/mcp", _bearer(METRICS_TOKEN)))[0],
            "client token on /mcp": (await _request(guard, "/mcp", _bearer(CLIENT_TOKEN)))[0],
        }

    assert asyncio.run(main()) == {
        "metrics token": 200,
        "client token": 200,
        "no token": 401,
        "wrong token": 401,
        "rebound host": 403,
        "other origin": 403,
        "post": 405,
        "metrics token on /mcp": 401,
        "client token on /mcp": 200,
    }
    assert reached == ["/mcp"], "only the client's token reached the MCP app"


def test_the_metrics_port_serves_metrics_alone_and_never_to_a_browser() -> None:
    recording = Recording()
    recording.call_ended("ok", 0.001, 5)
    endpoint = MetricsEndpoint(recording, Settings(metrics_tokens=(METRICS_TOKEN,)), loopback=True)

    async def main() -> dict[str, tuple[int, bytes]]:
        return {
            "metrics": await _request(endpoint, "/metrics", _bearer(METRICS_TOKEN)),
            "mcp": await _request(endpoint, "/mcp", _bearer(METRICS_TOKEN)),
            "browser": await _request(endpoint, "/metrics", {**_bearer(METRICS_TOKEN), "origin": "http://127.0.0.1"}),
            "no token": await _request(endpoint, "/metrics", {"host": "[::1]:9464"}),
        }

    answers = asyncio.run(main())
    assert {name: status for name, (status, _) in answers.items()} == {
        "metrics": 200, "mcp": 404, "browser": 403, "no token": 401,
    }  # fmt: skip
    assert b'mcp_codemode_calls_total{outcome="ok"} 1.0' in answers["metrics"][1]


def test_without_any_token_loopback_metrics_are_open_but_not_to_another_host_name() -> None:
    endpoint = MetricsEndpoint(Recording(), Settings(), loopback=True)

    async def main() -> list[int]:
        hosts = ("127.0.0.1:9464", "localhost", "[::1]:9464", "attacker.test:9464", "127.0.0.1.attacker.test")
        return [(await _request(endpoint, "/metrics", {"host": host}))[0] for host in hosts]

    assert asyncio.run(main()) == [200, 200, 200, 403, 403]


def test_metrics_that_are_off_are_not_found() -> None:
    endpoint = MetricsEndpoint(Telemetry(), Settings(), loopback=True)
    status, body = asyncio.run(_request(endpoint, "/metrics", {"host": "127.0.0.1"}))
    assert (status, body) == (404, b"metrics are off on this bridge (MCP_BRIDGE_METRICS=false)\n")


# --- settings ----------------------------------------------------------------------------------------------


def test_a_metrics_port_beyond_loopback_needs_a_token() -> None:
    with pytest.raises(SettingsError, match="MCP_BRIDGE_METRICS_TOKEN"):
        check_metrics_exposure(Settings(metrics_port=9464, metrics_host="0.0.0.0"))
    check_metrics_exposure(Settings(metrics_port=9464, metrics_host="0.0.0.0", metrics_tokens=(METRICS_TOKEN,)))
    check_metrics_exposure(Settings(metrics_port=9464))


def test_metrics_settings_are_read_and_checked() -> None:
    env = {"MCP_BRIDGE_METRICS_PORT": "9464", "MCP_BRIDGE_METRICS_TOKEN": METRICS_TOKEN}
    loaded = Settings.load(env=env)
    assert (loaded.metrics, loaded.metrics_port, loaded.metrics_tokens) == (True, 9464, (METRICS_TOKEN,))
    assert METRICS_TOKEN not in repr(loaded)
    with pytest.raises(SettingsError, match="MCP_BRIDGE_METRICS is off"):
        Settings.load(env={"MCP_BRIDGE_METRICS": "false", "MCP_BRIDGE_METRICS_PORT": "9464"})
    with pytest.raises(SettingsError) as short:
        Settings.load(env={"MCP_BRIDGE_METRICS_TOKEN": "short-secret"})
    assert "short-secret" not in str(short.value) and "<hidden>" in str(short.value)
    with pytest.raises(SettingsError, match="MCP_BRIDGE_METRICS_PORT='70000' is not valid"):
        Settings.load(env={"MCP_BRIDGE_METRICS_PORT": "70000"})
