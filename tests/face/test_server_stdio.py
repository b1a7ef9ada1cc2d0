"""The MCP face over stdio, driven by the SDK's real ``Client`` in both protocol eras, on real sandboxes."""

from __future__ import annotations

import base64
import dataclasses
import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_codemode.cli.exits import EXIT_BRIDGE
from mcp_codemode.sandbox import cgroups
from tests.support.backends import fail_unless
from tests.support.clients import (
    LEGACY_VERSION,
    LISTING_LIMIT,
    MODES,
    assert_no_orphans,
    images_of,
    listing_json,
    raw_stdio_exchange,
    require_bubblewrap,
    stdio_client_for,
    text_of,
)
from tests.support.zygote import REAL_SERVE

pytestmark = [pytest.mark.anyio, pytest.mark.backend]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module", autouse=True)
def _bubblewrap_usable() -> None:
    require_bubblewrap()


@pytest.fixture(autouse=True)
def _no_orphans() -> Iterator[None]:
    yield
    assert_no_orphans()


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "server.log"


@dataclasses.dataclass
class Connected:
    """A client shared by the tests of this module, with what it sent (to see cancellations go out)."""

    client: Client
    sent: list[dict[str, Any]]


async def _shared(tmp_path_factory: pytest.TempPathFactory, mode: str, **settings: str) -> AsyncIterator[Connected]:
    sent: list[dict[str, Any]] = []
    log = tmp_path_factory.mktemp(f"stdio-{mode}") / "server.log"
    async with stdio_client_for(log, mode, sent=sent, deadline=None, callbacks=None, **settings) as client:
        yield Connected(client, sent)


# One server per protocol era for the tests that need no special settings: a server costs a Python start.
@pytest.fixture(scope="module")
async def legacy(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Connected]:
    async for connected in _shared(tmp_path_factory, "legacy"):
        yield connected


@pytest.fixture(scope="module")
async def auto(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Connected]:
    async for connected in _shared(tmp_path_factory, "auto"):
        yield connected


@pytest.fixture(scope="module")
async def tuned(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Connected]:
    """A legacy client on a server with small output and image caps and frequent progress."""
    settings = {
        "MCP_BRIDGE_OUTPUT_LIMIT": "2000",
        "MCP_BRIDGE_IMAGE_LIMIT": "2k",
        "MCP_BRIDGE_PROGRESS_INTERVAL": "0.2",
    }
    async for connected in _shared(tmp_path_factory, "legacy", **settings):
        yield connected


@pytest.fixture(params=MODES)
def either(request: pytest.FixtureRequest) -> Connected:
    """The shared client of each protocol era in turn."""
    connected: Connected = request.getfixturevalue(request.param)
    return connected


# --- listing, calls, state, resources ---------------------------------------------------------------


async def test_the_listing_is_one_small_tool_in_either_protocol_era(either: Connected) -> None:
    listing = await either.client.list_tools()
    assert either.client.protocol_version in MODES.values()
    assert [tool.name for tool in listing.tools] == ["run_python"]
    assert len(listing_json(listing)) <= LISTING_LIMIT, listing_json(listing)


async def test_each_mode_negotiates_its_protocol_era(legacy: Connected, auto: Connected) -> None:
    assert legacy.client.protocol_version == MODES["legacy"]
    assert auto.client.protocol_version == MODES["auto"]


async def test_a_call_returns_its_output_and_the_default_session_keeps_state(either: Connected) -> None:
    client = either.client
    printed = await client.call_tool("run_python", {"code": "print('hello', 6 * 7)"})
    await client.call_tool("run_python", {"code": "import math\nx = 20\ndef double(v):\n    return v * 2"})
    kept = await client.call_tool("run_python", {"code": "double(x) + math.floor(2.5)"})
    fresh = await client.call_tool("run_python", {"code": "'double' in globals()", "reset": True})
    assert (printed.is_error, text_of(printed)) == (False, "hello 42")
    assert (kept.is_error, text_of(kept)) == (False, "42")
    assert kept.structured_content is not None
    assert kept.structured_content["session"] == "default"
    assert text_of(fresh).startswith("False"), text_of(fresh)
    assert "reset" in text_of(fresh)


async def test_the_capabilities_resource_is_what_the_sandbox_runtime_says(either: Connected) -> None:
    client = either.client
    listed = await client.list_resources()
    read = await client.read_resource("codemode://capabilities")
    inside = await client.call_tool(
        "run_python", {"code": "import mcp.runtime as runtime; print(runtime.capability_summary())"}
    )
    # Besides the capabilities, only the listings of this client's sessions' files (the shared client's sessions).
    others = [str(resource.uri) for resource in listed.resources if str(resource.uri) != "codemode://capabilities"]
    assert len(listed.resources) == len(others) + 1
    assert all(uri.startswith("codemode://sessions/") and uri.endswith("/files/") for uri in others), others
    (contents,) = read.contents
    assert isinstance(contents, types.TextResourceContents)
    assert "run_python" in contents.text
    assert not inside.is_error
    assert text_of(inside) == contents.text.rstrip("\n")


async def test_an_unknown_resource_uri_is_an_mcp_error_naming_it(either: Connected) -> None:
    with pytest.raises(MCPError) as caught:
        await either.client.read_resource("codemode://no-such-thing")
    still = await either.client.call_tool("run_python", {"code": "1 + 1"})
    assert "codemode://no-such-thing" in str(caught.value)
    assert text_of(still) == "2"


# --- argument checking -------------------------------------------------------------------------------

BAD_ARGUMENTS: list[tuple[str, dict[str, Any], str]] = [
    ("missing code", {}, "`code` is missing"),
    ("empty code", {"code": "  "}, "`code` is empty"),
    ("code not a string", {"code": 5}, "`code` is a number"),
    ("servers not a list", {"code": "1", "servers": "github"}, "`servers` must be a list"),
    ("timeout not a number", {"code": "1", "timeout": "abc"}, "`timeout` must be a whole number"),
    ("fractional timeout", {"code": "1", "timeout": 2.5}, "`timeout` must be a whole number"),
    ("zero timeout", {"code": "1", "timeout": 0}, "`timeout` must be a whole number"),
    ("timeout above the ceiling", {"code": "1", "timeout": 121}, "from 1 to 120"),
    ("boolean timeout", {"code": "1", "timeout": True}, "`timeout` must be a whole number"),
    ("path as session", {"code": "1", "session": "../x"}, "not a valid session name"),
    ("blank session", {"code": "1", "session": " "}, "not a valid session name"),
    ("65-character session", {"code": "1", "session": "s" * 65}, "not a valid session name"),
    ("reset not a boolean", {"code": "1", "reset": "yes"}, "`reset` must be true or false"),
    ("unknown argument", {"code": "1", "bogus": 1}, "no argument 'bogus'"),
]


async def test_bad_arguments_come_back_as_readable_tool_errors_and_the_connection_keeps_working(
    either: Connected,
) -> None:
    client = either.client
    replies: list[tuple[types.CallToolResult, types.CallToolResult]] = []
    await client.call_tool("run_python", {"code": "kept = 'still here'"})
    for _label, arguments, _expected in BAD_ARGUMENTS:
        refused = await client.call_tool("run_python", arguments)
        after = await client.call_tool("run_python", {"code": "kept"})
        replies.append((refused, after))
    for (label, _arguments, expected), (refused, after) in zip(BAD_ARGUMENTS, replies, strict=True):
        message = text_of(refused)
        assert refused.is_error, label
        assert expected in message, (label, message)
        assert "for example" in message or "it takes code" in message, (label, message)
        assert refused.structured_content == {
            "status": "refused",
            "error": {"type": "InvalidArguments", "message": message},
        }
        assert (after.is_error, text_of(after)) == (False, "'still here'"), label


async def test_the_empty_values_a_strict_schema_client_sends_mean_not_given(either: Connected) -> None:
    # OpenAI's strict mode makes every property required: such a client sends the optional ones "empty".
    client = either.client
    await client.call_tool("run_python", {"code": "strict_kept = 'in the default session'"})
    empty: dict[str, Any] = {"session": "", "servers": [], "timeout": None, "reset": None}
    answer = await client.call_tool("run_python", {"code": "strict_kept", **empty})
    assert (answer.is_error, text_of(answer)) == (False, "'in the default session'")
    assert answer.structured_content is not None
    assert answer.structured_content["session"] == "default"


async def test_an_unknown_tool_is_an_mcp_error_and_the_connection_keeps_working(either: Connected) -> None:
    with pytest.raises(MCPError) as caught:
        await either.client.call_tool("run_javascript", {"code": "1"})
    still = await either.client.call_tool("run_python", {"code": "1 + 1"})
    assert "run_javascript" in str(caught.value)
    assert "run_python" in str(caught.value)
    assert text_of(still) == "2"


# --- results -------------------------------------------------------------------------------------------


async def test_is_error_is_false_for_success_and_true_for_an_exception(legacy: Connected) -> None:
    ok = await legacy.client.call_tool("run_python", {"code": "21 * 2"})
    raised = await legacy.client.call_tool("run_python", {"code": "def f():\n    return 1 / 0\nf()"})
    assert ok.is_error is False
    assert ok.structured_content is not None
    assert ok.structured_content["status"] == "ok"
    assert ok.structured_content["session"] == "default"
    assert ok.structured_content["value"] == "42"
    assert raised.is_error is True
    assert "ZeroDivisionError: division by zero" in text_of(raised)
    assert text_of(raised).startswith("error:\n")
    assert raised.structured_content is not None
    assert raised.structured_content["status"] == "error"
    assert raised.structured_content["error"]["type"] == "ZeroDivisionError"
    # A client that shows the model structuredContent (pydantic-ai does) must show it the whole traceback too.
    assert raised.structured_content["error"]["traceback"] == text_of(raised).removeprefix("error:\n")
    assert "line 2, in f" in raised.structured_content["error"]["traceback"]


async def test_a_timeout_is_an_error_that_says_so_and_the_session_keeps_its_variables(legacy: Connected) -> None:
    client = legacy.client
    await client.call_tool("run_python", {"code": "survivor = 7"})
    slow = await client.call_tool("run_python", {"code": "import time\ntime.sleep(10)", "timeout": 1})
    after = await client.call_tool("run_python", {"code": "survivor * 6"})
    assert slow.is_error is True
    assert "Timed out after 1 s" in text_of(slow)
    assert slow.structured_content is not None
    assert slow.structured_content["status"] == "timeout"
    assert (after.is_error, text_of(after)) == (False, "42")


async def test_output_over_the_cap_keeps_head_and_tail_around_a_marker(tuned: Connected) -> None:
    flood = await tuned.client.call_tool("run_python", {"code": "print('H' * 50_000 + 'T' * 50_000)"})
    text = text_of(flood)
    assert not flood.is_error
    assert len(text) <= 2000
    assert text.startswith("HHHH") and text.endswith("TTTT")
    assert "characters cut" in text
    assert flood.structured_content is not None
    assert flood.structured_content["characters_cut"] > 90_000
    assert flood.structured_content["stdout"].rstrip("\n") == text, "structuredContent keeps what the text keeps"


async def test_stderr_follows_the_output_after_a_stderr_line(legacy: Connected) -> None:
    both = await legacy.client.call_tool(
        "run_python", {"code": "import sys\nprint('to out')\nprint('to err', file=sys.stderr)"}
    )
    assert not both.is_error
    assert text_of(both) == "to out\nstderr:\nto err"


async def test_toon_output_mode_gives_a_toon_document(log: Path) -> None:
    async with stdio_client_for(log, "legacy", MCP_BRIDGE_OUTPUT_MODE="toon") as client:
        result = await client.call_tool("run_python", {"code": "print('hi')\n6 * 7"})
    lines = text_of(result).splitlines()
    assert "status: ok" in lines, lines
    assert any(line.startswith("value:") and "42" in line for line in lines), lines
    assert result.structured_content is not None
    assert result.structured_content["status"] == "ok"


async def test_json_output_mode_gives_parseable_json(log: Path) -> None:
    async with stdio_client_for(log, "legacy", MCP_BRIDGE_OUTPUT_MODE="json") as client:
        ok = await client.call_tool("run_python", {"code": "print('hi')\n6 * 7"})
        raised = await client.call_tool("run_python", {"code": "raise KeyError('k')"})
    assert json.loads(text_of(ok)) == {"status": "ok", "stdout": "hi\n", "value": "42"}
    document = json.loads(text_of(raised))
    assert document["status"] == "error"
    assert "KeyError: 'k'" in document["error"]
    assert raised.is_error


# --- images --------------------------------------------------------------------------------------------


def assert_one_png(result: types.CallToolResult) -> None:
    assert not result.is_error, text_of(result)
    (image,) = images_of(result)
    assert image.mime_type == "image/png"
    assert base64.b64decode(image.data).startswith(PNG_MAGIC)
    assert result.structured_content is not None
    assert result.structured_content["images"] == 1


async def test_matplotlib_figures_left_open_or_shown_come_back_as_images(legacy: Connected) -> None:
    client = legacy.client
    left_open = await client.call_tool("run_python", {"code": "import matplotlib.pyplot as plt\nplt.plot([1, 2])"})
    shown = await client.call_tool("run_python", {"code": "plt.plot([2, 1])\nplt.show()"})
    closed_after = await client.call_tool("run_python", {"code": "print(len(plt.get_fignums()))"})
    assert_one_png(left_open)
    assert_one_png(shown)
    assert text_of(closed_after) == "0"
    assert images_of(closed_after) == []


async def test_a_pil_image_as_last_value_and_runtime_show_bytes_come_back_as_images(legacy: Connected) -> None:
    client = legacy.client
    last_value = await client.call_tool(
        "run_python", {"code": "from PIL import Image\nImage.new('RGB', (20, 10), 'red')"}
    )
    shown_bytes = await client.call_tool(
        "run_python",
        {
            "code": "import io\nimport mcp.runtime as runtime\nbuffer = io.BytesIO()\n"
            "Image.new('RGB', (8, 8), 'blue').save(buffer, 'PNG')\nruntime.show(buffer.getvalue())"
        },
    )
    assert_one_png(last_value)
    assert_one_png(shown_bytes)


async def test_showing_bytes_that_are_not_an_image_raises_in_the_sandbox(legacy: Connected) -> None:
    result = await legacy.client.call_tool(
        "run_python", {"code": "import mcp.runtime as runtime\nruntime.show(b'not an image')"}
    )
    assert result.is_error
    assert images_of(result) == []
    assert "not a PNG, JPEG, GIF or WebP image" in text_of(result)


async def test_an_image_over_the_cap_is_not_sent_and_a_note_says_why(tuned: Connected) -> None:
    noise = "import os\nfrom PIL import Image\npicture = Image.frombytes('RGB', (200, 200), os.urandom(120_000))\n"
    last_value = await tuned.client.call_tool("run_python", {"code": noise + "picture"})
    shown = await tuned.client.call_tool(
        "run_python", {"code": noise + "import mcp.runtime as runtime\nruntime.show(picture)"}
    )
    assert not last_value.is_error
    assert images_of(last_value) == []
    assert "an image was not shown" in text_of(last_value)
    assert "over the 2.0 KB cap" in text_of(last_value)
    assert shown.is_error, "runtime.show() of an image over the cap should raise, saying why"
    assert images_of(shown) == []
    assert "over the 2.0 KB cap" in text_of(shown)


# --- progress and cancellation ------------------------------------------------------------------------


async def test_a_long_call_with_a_progress_callback_gets_rising_progress(tuned: Connected) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    done = await tuned.client.call_tool(
        "run_python", {"code": "import time\ntime.sleep(4)\n'done'"}, progress_callback=on_progress
    )
    without = await tuned.client.call_tool("run_python", {"code": "'quiet'"})
    assert text_of(done) == "'done'"
    # Every 0.2 s for 4 s is 20 on an ordinary machine; a starved one has delivered two in 2 s. Two show the rise.
    assert len(seen) >= 2, seen
    progress = [item[0] for item in seen]
    assert progress == sorted(progress) and len(set(progress)) == len(progress), progress
    assert all(total == 30 for _, total, _ in seen), seen
    assert all(message and "running for" in message for _, _, message in seen), seen
    assert text_of(without) == "'quiet'"


async def test_a_cancelled_call_is_interrupted_and_the_session_survives(either: Connected) -> None:
    client = either.client
    await client.call_tool("run_python", {"code": "x = 1"})
    before = len(either.sent)
    with anyio.move_on_after(2) as waited:
        await client.call_tool("run_python", {"code": "while True:\n    pass", "timeout": 120})
    # The loop had 120 s to run: an answer well inside that proves the cancel interrupted it.
    with anyio.fail_after(30):
        after = await client.call_tool("run_python", {"code": "x"})
        again = await client.call_tool("run_python", {"code": "x + 1"})
    assert waited.cancelled_caught
    cancels = [message for message in either.sent[before:] if message.get("method") == "notifications/cancelled"]
    assert len(cancels) == 1, [message.get("method") for message in either.sent[before:]]
    assert (after.is_error, text_of(after)) == (False, "1")
    assert text_of(again) == "2"


# --- the stdio channel stays clean ---------------------------------------------------------------------

INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
INITIALIZED: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST: dict[str, Any] = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def call(request_id: int, code: str, progress_token: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "run_python", "arguments": {"code": code}}
    if progress_token is not None:
        params["_meta"] = {"progressToken": progress_token}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def test_with_debug_logging_stdout_carries_only_json_rpc(tmp_path: Path) -> None:
    messages = [
        INITIALIZE,
        INITIALIZED,
        TOOLS_LIST,
        call(3, "import time\nprint('printed')\ntime.sleep(0.6)"),
        call(4, "import time\ntime.sleep(0.6)\n'with progress'", progress_token="tok"),
    ]
    exchange = raw_stdio_exchange(
        messages,
        {1, 2, 3, 4},
        tmp_path / "stderr.log",
        MCP_BRIDGE_LOG_LEVEL="DEBUG",
        MCP_BRIDGE_PROGRESS_INTERVAL="0.2",
    )
    lines, stderr, status = exchange.lines, exchange.stderr, exchange.status
    parsed = [json.loads(line) for line in lines]  # a log line on stdout would fail here
    assert all(message.get("jsonrpc") == "2.0" for message in parsed), lines
    responses = {message["id"]: message for message in parsed if "id" in message}
    assert responses[1]["result"]["protocolVersion"] == LEGACY_VERSION
    assert [tool["name"] for tool in responses[2]["result"]["tools"]] == ["run_python"]
    assert responses[3]["result"]["content"][0]["text"].startswith("printed")
    assert responses[4]["result"]["content"][0]["text"] == "'with progress'"
    progress = [message for message in parsed if message.get("method") == "notifications/progress"]
    assert progress, "a call with a progress token should get progress notifications"
    assert {message["params"]["progressToken"] for message in progress} == {"tok"}
    assert "DEBUG" in stderr or "mcp-codemode:" in stderr, "the logs should have gone to stderr"
    assert status == 0, stderr


def test_log_file_receives_the_logs_instead_of_stderr(tmp_path: Path) -> None:
    log_file = tmp_path / "bridge.log"
    exchange = raw_stdio_exchange(
        [INITIALIZE, INITIALIZED, TOOLS_LIST, call(3, "1")],  # a call: the bridge (which logs its backend) is needed
        {1, 2, 3},
        tmp_path / "stderr.log",
        "--log-file",
        str(log_file),
        MCP_BRIDGE_LOG_LEVEL="DEBUG",
    )
    lines, stderr, status = exchange.lines, exchange.stderr, exchange.status
    assert all(json.loads(line).get("jsonrpc") == "2.0" for line in lines), lines
    written = log_file.read_text(encoding="utf-8")
    assert "bubblewrap" in written, written
    assert " INFO " in written or " DEBUG " in written, written
    assert "bubblewrap" not in stderr, stderr
    assert status == 0, stderr


# Run instead of ``python -m mcp_codemode serve``: the same command, which also notes on standard error every module
# loaded when the first answer has gone out, and after each answer whether the cyclic garbage collector is on.
FIRST_ANSWER_PROBE = """
import gc, json, sys
from mcp_codemode.face import stdio
flush = stdio.LineWriter.flush
async def noted(self):
    await flush(self)
    if not getattr(stdio, "noted", False):
        stdio.noted = True
        print("LOADED AT THE FIRST ANSWER " + json.dumps(sorted(sys.modules)), file=sys.stderr, flush=True)
    print(f"COLLECTOR {gc.isenabled()} {gc.get_freeze_count()}", file=sys.stderr, flush=True)
stdio.LineWriter.flush = noted
from mcp_codemode.cli.entry import main
sys.exit(main(sys.argv[1:]))
"""
# What the first answer must not wait for (issue 38): the sandboxes, the upstream servers, the relay and the HTTP face,
# the libraries only they use, and (for the command line clients launch) the settings and the argument parser.
LOADED_AFTER = (
    "mcp_codemode.sandbox", "mcp_codemode.runs.bridge", "mcp_codemode.runs.sessions", "mcp_codemode.runs.relay",
    "mcp_codemode.upstream.servers", "mcp_codemode.upstream.tools.directory", "mcp_codemode.face.server",
    "mcp_codemode.face.tool_calls", "mcp_codemode.face.web", "mcp_codemode.face.replicas", "mcp_codemode.cluster",
    "jsonschema", "rapidfuzz", "pyseccomp", "toon_format", "prometheus_client", "opentelemetry.sdk", "kubernetes",
    "mcp_codemode.settings", "mcp_codemode.settings_fields", "mcp_codemode.cli.main", "argparse",
)  # fmt: skip


def test_the_first_answer_goes_out_before_the_bridge_is_loaded_and_what_needs_it_waits_for_it(tmp_path: Path) -> None:
    resources = {"jsonrpc": "2.0", "id": 4, "method": "resources/list"}
    exchange = raw_stdio_exchange(
        [INITIALIZE, INITIALIZED, TOOLS_LIST, call(3, "6 * 7"), resources],  # all sent before the bridge has started
        {1, 2, 3, 4},
        tmp_path / "stderr.log",
        "--no-discover",
        serve=[sys.executable, "-c", FIRST_ANSWER_PROBE, "serve"],
        MCP_BRIDGE_TIMEOUT="17",
    )
    answers = {message.get("id"): message for message in map(json.loads, exchange.lines)}
    assert answers[1]["result"]["serverInfo"]["name"] == "mcp-codemode"
    assert [tool["name"] for tool in answers[2]["result"]["tools"]] == ["run_python"]
    assert answers[2]["result"]["tools"][0]["inputSchema"]["properties"]["timeout"]["default"] == 17
    assert answers[3]["result"]["content"][0]["text"] == "42", answers[3]
    assert "codemode://capabilities" in [resource["uri"] for resource in answers[4]["result"]["resources"]]
    noted = exchange.stderr.split("LOADED AT THE FIRST ANSWER ", 1)[1].splitlines()[0]
    early = [name for name in json.loads(noted) if any(name == x or name.startswith(f"{x}.") for x in LOADED_AFTER)]
    assert early == [], f"loaded before the first answer: {early}"
    collector = [line.split()[1:] for line in exchange.stderr.splitlines() if line.startswith("COLLECTOR ")]
    assert collector[0][0] == "False", collector  # off until the first answer has gone out
    assert collector[-1][0] == "True" and int(collector[-1][1]) > 0, collector  # then on, what the start made frozen
    assert exchange.status == 0, exchange.stderr


def test_a_bad_setting_stops_the_server_after_its_first_answer_with_the_usual_message_and_status(
    tmp_path: Path,
) -> None:
    """The settings of a plain ``serve`` are read once the first answer is out: a bad one is not ignored, it stops
    the server before anything else is served, saying what is wrong as before, with the bridge's exit status."""
    exchange = raw_stdio_exchange(
        [INITIALIZE, INITIALIZED, TOOLS_LIST], {1}, tmp_path / "stderr.log", MCP_BRIDGE_TIMEOUT="30s"
    )
    answers = {message.get("id"): message for message in map(json.loads, exchange.lines)}
    assert answers[1]["result"]["serverInfo"]["name"] == "mcp-codemode"
    assert "result" not in answers.get(2, {}), answers[2]  # the listing is not served (the SDK ends it with an error)
    assert "MCP_BRIDGE_TIMEOUT='30s' is not valid" in exchange.stderr, exchange.stderr
    assert exchange.status == EXIT_BRIDGE, exchange.stderr


def test_sigterm_closes_every_sandbox_before_the_server_exits(tmp_path: Path) -> None:
    parents = cgroups.probe().parents
    fail_unless(bool(parents), "this host gives us no cgroups, where each worker's group shows it was closed")
    exchange = raw_stdio_exchange(
        [INITIALIZE, INITIALIZED, call(2, "'up'")], {1, 2}, tmp_path / "stderr.log", stop="sigterm", serve=REAL_SERVE
    )
    answers = {message.get("id"): message for message in map(json.loads, exchange.lines)}
    assert answers[2]["result"]["content"][0]["text"] == "'up'"
    left = [str(path) for parent in parents.values() for path in parent.glob(f"w-{exchange.pid}-*")]
    assert left == [], (
        f"after SIGTERM (exit status {exchange.status}) the server had not closed its sandbox: worker cgroups "
        f"were left behind; stderr:\n{exchange.stderr}"
    )
