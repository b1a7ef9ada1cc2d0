"""What an upstream server sends back while a call made from sandboxed code runs, through the real
``mcp-codemode`` process and the real SDK client: log messages, sampling and elicitation requests passed on to the
client, roots, and the user's approval of tool calls (``ask_tools``).

Apart from test_upstream_e2e.py because these share no bridge (each test starts its own, with its own settings
and client), so pytest-xdist can run them beside that file's tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.support import upstreams
from tests.support.cells import private_state_dir
from tests.support.clients import (
    MODES,
    ClientCallbacks,
    HttpServer,
    http_client_for,
    require_bubblewrap,
    stdio_client_for,
    text_of,
)
from tests.support.patience import patient
from tests.support.upstreams import write_config

pytestmark = pytest.mark.backend  # every test starts a bridge, a sandbox and server-everything


@pytest.fixture(scope="module", autouse=True)
def _bubblewrap_usable() -> None:
    require_bubblewrap()


@pytest.fixture
def state() -> Iterator[Path]:
    with private_state_dir() as path:
        yield path


# -------------------------------------------------------------------------------- 19. upstream log messages


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_an_upstream_servers_progress_and_log_messages_during_a_call_reach_the_client_as_progress(
    tmp_path: Path, state: Path, mode: str
) -> None:
    """server-everything reports each step of a long operation, and, once its simulated logging is on, logs a
    random-level message every 5 s; a call that runs 7 s is in flight for at least one. The client of
    ``run_python`` sees each step and each log message (naming server and tool) as progress, on the same rising
    line as the heartbeat's "running for" messages. A call that asks no progress gets none, and works."""
    config = write_config(tmp_path / "servers.json", upstreams.everything())
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    code = (
        "await mcp_everything.toggle_simulated_logging()\n"
        "try:\n"
        "    await mcp_everything.trigger_long_running_operation(duration=7, steps=4)\n"
        "finally:\n"
        "    await mcp_everything.toggle_simulated_logging()\n"
        "'logged'"
    )
    async with stdio_client_for(
        tmp_path / "serve.log", mode, "--config", str(config), "--no-discover", deadline=None,
        MCP_BRIDGE_STATE_DIR=str(state),
    ) as client:  # fmt: skip
        # The longest timeout a call may ask for: the first call starts the Node server, which can take a while.
        done = await client.call_tool("run_python", {"code": code, "timeout": 120}, progress_callback=on_progress)
        quiet_code = "await mcp_everything.trigger_long_running_operation(duration=1, steps=2)"
        quiet = await client.call_tool("run_python", {"code": quiet_code, "timeout": 120})  # no progress asked
    assert "'logged'" in text_of(done), text_of(done)
    assert "Long running operation completed" in text_of(quiet), text_of(quiet)
    messages = [message or "" for _, _, message in seen]
    upstream = [message for message in messages if message.endswith("/4")]
    assert upstream == [f"everything/trigger-long-running-operation: {step}/4" for step in range(1, 5)], seen
    logged = [m for m in messages if re.fullmatch(r"everything/trigger-long-running-operation log \([a-z]+\): .+", m)]
    assert logged, seen
    assert all(re.search(r"[A-Za-z]+[- ]level[- ]message", m, re.IGNORECASE) for m in logged), logged
    values = [progress for progress, _, _ in seen]
    assert values == sorted(values) and len(set(values)) == len(values), values  # MCP: progress must rise


# ------------------------------------------------------------------------- 20. approval of tool calls (ask_tools)

APPROVAL_CODE = """
import json
rows = {}
for label in ("first", "second", "third"):
    try:
        rows[label] = (await mcp_everything.echo(message=label))
    except runtime.ApprovalDenied as exc:
        rows[label] = ["ApprovalDenied", isinstance(exc, runtime.PolicyError), exc.details.get("rule"), exc.message]
rows["sum"] = await mcp_everything.get_sum(a=1, b=2)
print(json.dumps(rows, default=str))
"""


def _approval_setup(tmp_path: Path, state: Path) -> tuple[str, dict[str, str]]:
    """A bridge whose policy asks before everything/echo (its servers file, and its environment), with its audit
    log where the test can read it."""
    settings = tmp_path / "codemode.toml"
    settings.write_text('[policy]\nask_tools = ["everything/echo"]\n', encoding="utf-8")
    config = write_config(tmp_path / "servers.json", upstreams.everything())
    return str(config), {
        "MCP_CODEMODE_SETTINGS": str(settings),
        "MCP_BRIDGE_STATE_DIR": str(state),
        "MCP_BRIDGE_AUDIT_LOG": str(tmp_path / "audit.jsonl"),
    }


@contextlib.asynccontextmanager
async def approval_client(
    transport: str,
    tmp_path: Path,
    config: str,
    env: dict[str, str],
    callbacks: ClientCallbacks,
    mode: str = "legacy",
    sent: list[dict[str, Any]] | None = None,
) -> AsyncIterator[Client]:
    """An SDK client of the ``mode`` era that answers what ``callbacks`` answer, on a bridge over stdio or HTTP
    (``sent``: what it writes, over stdio)."""
    args = ("--config", config, "--no-discover")
    if transport == "stdio":
        async with stdio_client_for(
            tmp_path / "serve.log", mode, *args, sent=sent, deadline=None, callbacks=callbacks, **env
        ) as client:
            yield client
        return
    with HttpServer(tmp_path / "serve.log", *args, **env) as server:
        async with http_client_for(server.url, mode, deadline=None, callbacks=callbacks) as client:
            yield client


def plain_client(tmp_path: Path, mode: str, config: str, env: dict[str, str]) -> Any:
    """An SDK client over stdio that declares neither elicitation nor sampling."""
    args = ("--config", config, "--no-discover")
    return stdio_client_for(tmp_path / "serve.log", mode, *args, sent=None, deadline=None, callbacks=None, **env)


@pytest.mark.anyio
async def test_over_the_2026_protocol_questions_go_as_input_required_rounds_while_the_cell_keeps_running(
    tmp_path: Path, state: Path
) -> None:
    """A 2026-07-28 call has no channel to ask on: run_python answers input_required with the question and a
    sealed requestState, the SDK client asks its user and sends the call again with the answer, and the run, which
    waited where it asked, goes on. What the client wrote shows the rounds: the same call three times (one per
    question), the later ones with inputResponses and the requestState. A forged or replayed state is refused."""
    config, env = _approval_setup(tmp_path, state)
    sent: list[dict[str, Any]] = []
    accept = types.ElicitResult(action="accept", content={"remember": False})
    answers = iter([accept, types.ElicitResult(action="decline"), accept])

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return next(answers)

    code = APPROVAL_CODE
    callbacks = ClientCallbacks(elicitation=answer)
    async with approval_client("stdio", tmp_path, config, env, callbacks, "auto", sent) as client:
        assert client.protocol_version == MODES["auto"]
        result = await client.call_tool("run_python", {"code": code, "timeout": 120})
        rounds = [m for m in sent if m.get("method") == "tools/call"]
        arguments = {"code": code, "timeout": 120}
        with pytest.raises(MCPError, match="no longer waiting for answers") as replayed:  # that run has ended
            await client.call_tool("run_python", arguments, request_state=rounds[-1]["params"]["requestState"])
        with pytest.raises(MCPError, match="Invalid or expired requestState"):  # not sealed by this bridge
            await client.call_tool("run_python", arguments, request_state="forged-" + "A" * 40)
    assert "call run_python again" in str(replayed.value)
    rows = json.loads(text_of(result).strip().splitlines()[0])
    assert rows["first"] == "Echo: first" and rows["third"] == "Echo: third", rows
    assert rows["second"][0] == "ApprovalDenied", rows
    assert len(rounds) == 4, [sorted(r["params"]) for r in rounds]
    assert "requestState" not in rounds[0]["params"]
    for later in rounds[1:]:
        assert later["params"]["arguments"] == rounds[0]["params"]["arguments"]
        assert later["params"]["requestState"] and later["params"]["inputResponses"], later["params"]
        assert len(later["params"]["requestState"]) > 40  # sealed, not the parked run's bare key


# ----------------------------------------------------- 21. an upstream server's sampling and elicitation, passed on

PASS_ON_CODE = """
import json
rows = {}
for label, call in (("sampling", lambda: mcp_everything.trigger_sampling_request(prompt="name a colour", maxTokens=5)),
                    ("elicitation", lambda: mcp_everything.trigger_elicitation_request())):
    if label == "elicitation" and hasattr(mcp_everything, "trigger_url_elicitation"):  # listed: URL mode declared
        try:
            rows["url"] = ["ok", await mcp_everything.trigger_url_elicitation(url="https://example.com/sign-in")]
        except runtime.MCPError as exc:
            rows["url"] = [type(exc).__name__, exc.message]
        try:  # the error path: -32042, whose data holds the URL the person must open
            await mcp_everything.trigger_url_elicitation(url="https://example.com/error-path", errorPath=True)
            rows["url_error"] = ["no error"]
        except runtime.MCPError as exc:
            rows["url_error"] = [type(exc).__name__, exc.message, exc.details]
    try:
        rows[label] = ["ok", await call()]
    except runtime.MCPError as exc:
        rows[label] = [type(exc).__name__, exc.message]
print(json.dumps(rows, default=str))
"""


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_ask_tools_asks_through_elicitation_and_an_upstream_servers_sampling_and_elicitation_are_passed_on(
    tmp_path: Path, state: Path, transport: str, mode: str
) -> None:
    """Two things a client with elicitation and sampling is asked, on one bridge per transport and era.

    ask_tools: the client is asked before each echo, sees server, tool and arguments; accept lets the call go,
    decline raises ApprovalDenied, "remember" skips the question for the rest of the session. get-sum, which
    ask_tools does not name, is never asked about. Each outcome is audited. The handshake era asks on the call's
    own stream, the 2026-07-28 era through input_required rounds.

    Passed on: server-everything asks for an LLM completion and for a form while its tool runs; the SDK client of
    run_python answers both, and the server's results carry those answers back to the code. Both audited."""
    config, env = _approval_setup(tmp_path, state)
    asked: list[str] = []
    approvals = iter(
        [
            types.ElicitResult(action="accept", content={"remember": False}),
            types.ElicitResult(action="decline"),
            types.ElicitResult(action="accept", content={"remember": True}),
        ]
    )
    sampled: list[types.CreateMessageRequestParams] = []
    elicited: list[types.ElicitRequestParams] = []

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        sampled.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="teal, says the model"), model="test-model"
        )

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if isinstance(params, types.ElicitRequestFormParams) and "everything/echo" in params.message:
            asked.append(params.message)  # the bridge asking for approval
            return next(approvals)
        elicited.append(params)  # server-everything's own questions, passed on
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content={"name": "Ada", "check": True})

    callbacks = ClientCallbacks(elicitation=answer, sampling=sample)
    async with approval_client(transport, tmp_path, config, env, callbacks, mode) as client:
        first = await client.call_tool("run_python", {"code": APPROVAL_CODE, "timeout": 120, "session": "s"})
        again = await client.call_tool("run_python", {"code": APPROVAL_CODE, "timeout": 120, "session": "s"})
        passed_on = await client.call_tool("run_python", {"code": PASS_ON_CODE, "timeout": 120})
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    rows = json.loads(text_of(first).strip().splitlines()[0])
    assert rows["first"] == "Echo: first" and rows["third"] == "Echo: third", rows
    kind, is_policy, rule, message = rows["second"]
    assert (kind, is_policy, rule) == ("ApprovalDenied", True, "ask_tools"), rows
    assert "the user declined it when asked" in message and 'ask_tools pattern "everything/echo"' in message
    assert "3" in str(rows["sum"]), rows
    assert len(asked) == 3, asked
    assert "everything/echo" in asked[0] and '"message": "first"' in asked[0]
    # Remembered for the session: the second run asks nothing, and all three calls go.
    rows = json.loads(text_of(again).strip().splitlines()[0])
    assert [rows[label] for label in ("first", "second", "third")] == [
        f"Echo: {x}" for x in ("first", "second", "third")
    ]
    assert len(asked) == 3, asked[3:]
    audited = [(line["tool"], line["outcome"], line.get("approval")) for line in audit if line.get("tool") == "echo"]
    assert audited == [
        ("echo", "ok", "approved"),
        ("echo", "refused", "declined"),
        ("echo", "ok", "approved for the session"),
        ("echo", "ok", "remembered"),
        ("echo", "ok", "remembered"),
        ("echo", "ok", "remembered"),
    ], audited
    assert all("approval" not in line for line in audit if line.get("tool") == "get-sum")
    rows = json.loads(text_of(passed_on).strip().splitlines()[0])
    assert rows["sampling"][0] == "ok" and "teal, says the model" in str(rows["sampling"][1]), rows
    assert rows["elicitation"][0] == "ok" and "Name: Ada" in str(rows["elicitation"][1]), rows
    assert len(sampled) == 1 and "name a colour" in str(sampled[0].messages[0].content), sampled
    assert sampled[0].max_tokens == 5
    assert rows["url"][0] == "ok", rows  # URL mode: the client declared it, so the server offered the tool
    kind, text, details = rows["url_error"]  # a URL-elicitation-required error keeps what the person must open
    assert kind == "MCPError" and "must first open https://modelcontextprotocol.io (Open this link" in text, rows
    assert details["code"] == -32042, details
    assert details["data"]["elicitations"][0]["url"] == "https://modelcontextprotocol.io", details
    assert len(elicited) == 2, elicited
    url, form = elicited
    assert isinstance(url, types.ElicitRequestURLParams) and url.url == "https://example.com/sign-in", url
    assert isinstance(form, types.ElicitRequestFormParams), form
    exchanges = [(line["kind"], line["tool"], line["outcome"]) for line in audit if line.get("kind")]
    assert exchanges == [
        ("sampling", "trigger-sampling-request", "ok"),
        ("elicitation", "trigger-url-elicitation", "accept"),
        ("elicitation", "trigger-elicitation-request", "accept"),
    ], exchanges


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_client_without_elicitation_or_sampling_cannot_approve_and_the_upstream_s_requests_are_refused(
    tmp_path: Path, state: Path, mode: str
) -> None:
    """A client that declared no elicitation cannot approve: an ask_tools call is refused with ApprovalDenied
    saying why and what to do, and never reaches the server; the call ask_tools does not name still runs.

    The bridge declares sampling and elicitation to its servers for the clients that have them; when the
    run_python call's client has neither, the server's requests are refused with a message saying why, and the
    code gets the tool's failure as a catchable error. A policy's deny_sampling refuses the same way."""
    config, env = _approval_setup(tmp_path, state)
    async with plain_client(tmp_path, mode, config, env) as client:
        approval = await client.call_tool("run_python", {"code": APPROVAL_CODE, "timeout": 120})
        passed_on = await client.call_tool("run_python", {"code": PASS_ON_CODE, "timeout": 120})
    rows = json.loads(text_of(approval).strip().splitlines()[0])
    for label in ("first", "second", "third"):
        kind, is_policy, rule, message = rows[label]
        assert (kind, is_policy, rule) == ("ApprovalDenied", True, "ask_tools"), rows
        assert "did not declare the MCP elicitation capability" in message, message
    assert "3" in str(rows["sum"]), rows
    rows = json.loads(text_of(passed_on).strip().splitlines()[0])
    for label, capability in (("sampling", "sampling"), ("url", "elicitation"), ("elicitation", "elicitation")):
        kind, message = rows[label]
        assert kind in ("ToolError", "MCPError"), rows
        assert f"did not declare the MCP {capability} capability" in message, rows
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [line.get("approval") for line in audit if line.get("tool") == "echo"] == ["unavailable"] * 3
    assert [(line["kind"], line["outcome"]) for line in audit if line.get("kind")] == [
        ("sampling", "refused"),
        ("elicitation", "refused"),
        ("elicitation", "refused"),
    ]


# ------------------------------------------------------------------------------------------------- 22. roots

ROOTS_CODE = "print(await mcp_everything.get_roots_list())"


@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore:The roots capability is deprecated")  # still what handshake-era clients use
async def test_a_stdio_clients_roots_are_the_upstream_servers_roots_and_a_change_reaches_them(
    tmp_path: Path, state: Path
) -> None:
    """server-everything asks the bridge for roots; a stdio bridge gives its client's, asked on the first call,
    and when the client says its roots changed the bridge asks again and tells its servers, which ask again."""
    config = write_config(tmp_path / "servers.json", upstreams.everything())
    given = [types.Root.model_validate({"uri": "file:///srv/first-project", "name": "first"})]

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=list(given))

    async with stdio_client_for(
        tmp_path / "serve.log", "legacy", "--config", str(config), "--no-discover", sent=None, deadline=None,
        callbacks=ClientCallbacks(roots=roots), MCP_BRIDGE_STATE_DIR=str(state),
    ) as client:  # fmt: skip
        first = text_of(await client.call_tool("run_python", {"code": ROOTS_CODE, "timeout": 120}))
        given[:] = [types.Root.model_validate({"uri": "file:///srv/second-project", "name": "second"})]
        await client.send_roots_list_changed()
        deadline = time.monotonic() + patient(60)
        later = first
        while "second-project" not in later and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            later = text_of(await client.call_tool("run_python", {"code": ROOTS_CODE, "timeout": 120}))
    assert "file:///srv/first-project" in first, first
    assert "file:///srv/second-project" in later and "first-project" not in later, later
    bridge_log = (tmp_path / "serve.log").read_text(encoding="utf-8")
    assert "deprecated" not in bridge_log, bridge_log  # the SDK's roots warning is not the user's news


@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore:The roots capability is deprecated")
async def test_a_2026_stdio_clients_roots_reach_the_upstream_servers_through_input_required_rounds(
    tmp_path: Path, state: Path
) -> None:
    """The 2026-07-28 era has no channel to ask the client while a call runs: the bridge asks for its roots as an
    input_required round before its first call's code runs (the SDK client answers it from its roots callback).
    Before, a 2026-era stdio client's roots never reached a server."""
    config = write_config(tmp_path / "servers.json", upstreams.everything())
    given = [types.Root.model_validate({"uri": "file:///srv/modern-project", "name": "modern"})]
    asked: list[int] = []

    async def roots(context: Any) -> types.ListRootsResult:
        asked.append(1)
        return types.ListRootsResult(roots=list(given))

    async with stdio_client_for(
        tmp_path / "serve.log", "auto", "--config", str(config), "--no-discover", sent=None, deadline=None,
        callbacks=ClientCallbacks(roots=roots), MCP_BRIDGE_STATE_DIR=str(state),
    ) as client:  # fmt: skip
        assert client.protocol_version == MODES["auto"]
        first = text_of(await client.call_tool("run_python", {"code": ROOTS_CODE, "timeout": 120}))
        again = text_of(await client.call_tool("run_python", {"code": ROOTS_CODE, "timeout": 120}))
    assert "file:///srv/modern-project" in first and "file:///srv/modern-project" in again, (first, again)
    assert len(asked) == 1, asked  # once, before the first call's code: not on every call


@pytest.mark.anyio
async def test_configured_roots_are_given_whatever_the_client_has(tmp_path: Path, state: Path) -> None:
    """MCP_BRIDGE_ROOTS wins over the client's roots (and serves a client that has none, and HTTP bridges)."""
    config = write_config(tmp_path / "servers.json", upstreams.everything())
    with HttpServer(
        tmp_path / "serve.log", "--config", str(config), "--no-discover", MCP_BRIDGE_STATE_DIR=str(state),
        MCP_BRIDGE_ROOTS=f"{tmp_path}/alpha:{tmp_path}/beta",
    ) as server:  # fmt: skip
        async with http_client_for(server.url, "legacy", deadline=None) as client:
            listed = text_of(await client.call_tool("run_python", {"code": ROOTS_CODE, "timeout": 120}))
    assert f"file://{tmp_path}/alpha" in listed and f"file://{tmp_path}/beta" in listed, listed
    assert "Current MCP Roots (2 total)" in listed, listed


# ------------------------------------------------------------------- 23. a server that asks the client in a loop

FLOODING_SERVER = '''
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("flood")


@server.tool()
async def ask_forever(ctx: Context) -> str:
    """Asks the client for a completion 100 times in one call, and counts the answers and the refusals."""
    answered = refused = 0
    reason = ""
    for _ in range(100):
        try:
            await ctx.session.create_message(
                messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text="again"))],
                max_tokens=5,
            )
            answered += 1
        except Exception as exc:
            refused += 1
            reason = str(exc)
    return f"answered {answered}, refused {refused}: {reason}"


server.run()
'''


@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
async def test_a_server_that_floods_the_client_with_sampling_requests_is_cut_off(tmp_path: Path, state: Path) -> None:
    """A hostile upstream (handshake era) asks for a completion 100 times during one tool call: the client is asked
    20 times, the rest are refused with the reason, and the call, the bridge and the next run go on."""
    script = tmp_path / "flood.py"
    script.write_text(FLOODING_SERVER)
    python = str(Path(sys.executable))
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"flood": {"command": python, "args": [str(script)],
                                                            "protocol": "legacy"}}}))  # fmt: skip
    asked = 0

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        nonlocal asked
        asked += 1
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="no"), model="m")

    code = "print(await mcp_flood.ask_forever())"
    async with stdio_client_for(
        tmp_path / "serve.log", "legacy", "--config", str(config), "--no-discover", sent=None, deadline=None,
        callbacks=ClientCallbacks(sampling=sample), MCP_BRIDGE_STATE_DIR=str(state),
    ) as client:  # fmt: skip
        flooded = text_of(await client.call_tool("run_python", {"code": code, "timeout": 120}))
        again = text_of(await client.call_tool("run_python", {"code": "1 + 1", "timeout": 120}))
    assert "answered 20, refused 80" in flooded, flooded
    assert "already passed on 20 requests to its client" in flooded, flooded
    assert asked == 20
    assert "2" in again
