"""Sandboxed code calling real upstream MCP servers through ``Bridge.run``: proxies, values, errors, saved tools.

The code runs in a real sandbox (bubblewrap, and podman where marked), the servers are the reference servers
of tests/support/upstreams.py, and everything between them is the product's: relay, hub, guest runtime. One bridge is
shared by the tests whose servers and sessions do not interfere (each uses its own session key, saved-tool owner or
server entry); the tests that must start from nothing build their own.

Guest code reports what it saw as one JSON line (``report(...)``), so the assertions live here, on the host,
where a failure shows the whole value.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import hashlib
import json
import os
import signal
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp_types as types
import pytest

from mcp_codemode.runs.bridge import Bridge, RunRequest
from mcp_codemode.runs.saved_tools import FileSavedTools, SavedToolStore
from mcp_codemode.runs.sessions import SessionManager
from mcp_codemode.sandbox.results import ExecutionResult
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.upstream.model import Discovery
from tests.support import upstreams
from tests.support.backends import ONE_BACKEND, fail_unless, sandbox_settings
from tests.support.cells import (
    RUN_TIMEOUT,
    GuestServicesStub,
    closed_port,
    explain,
    guest,
    poll,
    private_state_dir,
    reported,
    run,
    time_and_everything,
)
from tests.support.clients import images_of, require_bubblewrap, stdio_client_for, text_of
from tests.support.patience import patient

if TYPE_CHECKING:
    from mcp_codemode.guest.protocol import CallFrame, CellContext
    from mcp_codemode.reply_encoding import Reply

pytestmark = pytest.mark.backend

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------------------------------- helpers


@dataclasses.dataclass
class Shared:
    """The module's bridge and the files its servers work on."""

    bridge: Bridge
    files: Path  # the filesystem server's root
    memory_file: Path
    repo: Path


# --------------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("proxy")


@pytest.fixture(scope="module")
async def shared(workdir: Path) -> AsyncIterator[Shared]:
    """One bridge on bubblewrap with every reference server configured (each starts on first use)."""
    require_bubblewrap()
    files = workdir / "files"
    (files / "notes").mkdir(parents=True)
    (files / "a.txt").write_text("alpha\n")
    (files / "notes" / "b.txt").write_text("beta\n")
    memory_file = workdir / "memory.jsonl"
    repo = workdir / "repo"
    upstreams.make_repo(repo)
    with private_state_dir() as state, upstreams.everything_http() as http, upstreams.everything_sse() as sse:
        servers = (
            upstreams.time(),
            upstreams.time(name="time-warm"),  # only the servers= hint may start it
            upstreams.time(name="time-crash"),  # the one the crash test kills
            upstreams.time(name="time-alias"),  # named by its alias in a servers= hint
            upstreams.everything(),
            upstreams.filesystem(files),
            upstreams.memory(memory_file),
            upstreams.sequential_thinking(),
            upstreams.git(repo),
            upstreams.fetch("fetch", "--allow-private-ips"),
            http,
            sse,
        )
        settings = sandbox_settings(runtime="bubblewrap", state_dir=state)
        async with Bridge(settings, Discovery(servers=servers)) as bridge:
            assert bridge.backend_name == "bubblewrap", bridge.backend_error
            yield Shared(bridge, files, memory_file, repo)


# ------------------------------------------------------------------------------------ 0. the state directory


def test_a_state_directory_the_sandbox_cannot_reach_is_named_in_the_fix(tmp_path: Path) -> None:
    """Under root the sandbox runs as another uid, which cannot pass through a mode-700 parent directory."""
    require_bubblewrap()
    fail_unless(os.geteuid() == 0, "only root runs the sandbox under another uid, which this needs")
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    state = closed / "state"

    async def backend_error() -> str:
        async with Bridge(sandbox_settings(runtime="bubblewrap", state_dir=state), Discovery()) as bridge:
            return bridge.backend_error

    error = asyncio.run(backend_error())
    # Named before any sandbox starts: the first directory on the way that the sandbox uid cannot pass, and why.
    assert "cannot pass through" in error and "(mode 0700, owner uid 0)" in error, error
    fix = error.split("Fix:", 1)[-1]
    assert str(state) in fix or "MCP_BRIDGE_STATE_DIR" in fix, error


# ------------------------------------------------------------------------------------ 1. typed proxies


@pytest.mark.anyio
async def test_proxies_are_typed_functions_with_docs_reachable_by_attribute_index_and_import(shared: Shared) -> None:
    result = await run(
        shared.bridge,
        """
        import contextlib, inspect, io
        read = inspect.signature(mcp_filesystem.read_text_file)
        slow = inspect.signature(mcp_everything.trigger_long_running_operation)
        help_text = io.StringIO()
        with contextlib.redirect_stdout(help_text):
            help(mcp_time.get_current_time)
        from mcp.servers.time import get_current_time
        import mcp.servers.time as time_module
        report({
            "read_params": {name: [str(p), p.kind.name] for name, p in read.parameters.items()},
            "read_returns": str(read.return_annotation),
            "slow_params": {name: str(p) for name, p in slow.parameters.items()},
            "help": help_text.getvalue(),
            "doc": mcp_filesystem.read_text_file.__doc__,
            "dir_time": dir(mcp_time),
            "dir_everything": dir(mcp_everything),
            "same_by_index": mcp_servers["time"] is mcp_time,
            "same_by_server": runtime.server("time") is mcp_time,
            "same_by_import": get_current_time is mcp_time.get_current_time,
            "module_all": time_module.__all__,
            "imported_call": (await get_current_time(timezone="UTC"))["timezone"],
            "sync_call": mcp_time.get_current_time.sync(timezone="UTC")["timezone"],
            "original_name": mcp_everything["trigger-long-running-operation"] is
                             mcp_everything.trigger_long_running_operation,
            "servers": sorted(mcp_servers),
            "discovered": list(runtime.discovered_servers()),
        })
        """,
        "typed",
    )
    seen = reported(result)
    assert seen["read_params"] == {
        "path": ["path: str", "POSITIONAL_OR_KEYWORD"],
        "tail": ["tail: float | None = None", "KEYWORD_ONLY"],
        "head": ["head: float | None = None", "KEYWORD_ONLY"],
    }
    assert seen["read_returns"] == "dict[str, typing.Any]"  # the tool declares an output schema
    assert seen["slow_params"] == {"duration": "duration: float = 10", "steps": "steps: float = 5"}
    assert "get_current_time(timezone: str) -> dict[str, typing.Any]" in seen["help"]
    assert "Get current time in a specific timezone" in seen["help"]
    assert "timezone (string, required): IANA timezone name" in seen["help"]
    assert "Read the complete contents of a file" in seen["doc"]
    assert "head (number, optional): If provided, returns only the first N lines" in seen["doc"]
    assert seen["dir_time"] == ["convert_time", "get_current_time"]
    assert {"echo", "get_tiny_image", "trigger_long_running_operation"} <= set(seen["dir_everything"])
    assert seen["same_by_index"] and seen["same_by_server"] and seen["same_by_import"] and seen["original_name"]
    assert seen["module_all"] == ["convert_time", "get_current_time"]
    assert seen["imported_call"] == seen["sync_call"] == "UTC"
    names = sorted(shared.bridge.servers)
    assert seen["servers"] == names
    assert sorted(seen["discovered"]) == names


# ------------------------------------------------------------------------------------ 2. natural values


@pytest.mark.anyio
async def test_results_become_natural_python_values_and_raw_gives_the_call_tool_result(shared: Shared) -> None:
    result = await run(
        shared.bridge,
        """
        import base64
        now = await mcp_time.get_current_time(timezone="UTC")
        echoed = await mcp_everything.echo(message="hello")
        env = await mcp_everything.get_env()
        picture = await mcp_everything.get_tiny_image()
        image = [part for part in picture if isinstance(part, runtime.Image)]
        raw = await mcp_everything.echo.raw(message="raw")
        raw_time = await runtime.call_tool("time", "get_current_time", {"timezone": "UTC"}, raw=True)
        by_name = await runtime.call_tool("everything", "echo", {"message": "by name"})
        report({
            "now": [type(now).__name__, now.get("timezone"), sorted(now)],
            "echoed": [type(echoed).__name__, echoed],
            "env": [type(env).__name__, "PATH" in env],
            "picture": [type(picture).__name__, [type(part).__name__ for part in picture]],
            "image": [image[0].mime, image[0].data[:8].hex(), len(image[0].data)] if image else None,
            "raw": raw,
            "raw_time": raw_time,
            "by_name": by_name,
        })
        """,
        "values",
    )
    seen = reported(result)
    assert seen["now"] == ["dict", "UTC", ["datetime", "day_of_week", "is_dst", "timezone"]]
    assert seen["echoed"] == ["str", "Echo: hello"]
    assert seen["env"] == ["dict", True]  # get-env answers JSON text only (no structuredContent): parsed
    assert seen["picture"] == ["list", ["str", "Image", "str"]]
    assert seen["image"] is not None
    assert seen["image"][:2] == ["image/png", PNG_MAGIC.hex()]
    assert seen["raw"]["content"] == [{"type": "text", "text": "Echo: raw"}]
    assert seen["raw"]["isError"] is False
    assert seen["raw_time"]["structuredContent"]["timezone"] == "UTC"
    assert json.loads(seen["raw_time"]["content"][0]["text"])["timezone"] == "UTC"
    assert seen["by_name"] == "Echo: by name"


# ------------------------------------------------------------------------------------ 3, 4. errors


@pytest.mark.anyio
async def test_bad_arguments_are_refused_before_the_server_with_what_to_fix(shared: Shared) -> None:
    await run(shared.bridge, "kept = 'still here'", "arguments")
    result = await run(
        shared.bridge,
        """
        def attempt(label, make):
            try:
                return [label, "no error", repr(make())]
            except runtime.MCPError as exc:
                return [label, type(exc).__name__, exc.message, exc.server, exc.tool, isinstance(exc, TypeError)]

        async def attempt_async(label, make):
            try:
                return [label, "no error", repr(await make())]
            except runtime.MCPError as exc:
                return [label, type(exc).__name__, exc.message, exc.server, exc.tool, isinstance(exc, TypeError)]

        rows = [
            await attempt_async("wrong type", lambda: mcp_time.get_current_time(timezone=5)),
            await attempt_async("unknown", lambda: mcp_time.get_current_time(timezon="UTC")),
            await attempt_async("missing", lambda: mcp_time.get_current_time()),
            await attempt_async("by name, wrong type",
                                lambda: runtime.call_tool("time", "get_current_time", {"timezone": 5})),
            await attempt_async("by name, missing", lambda: runtime.call_tool("time", "get_current_time", {})),
            await attempt_async("by name, unknown",
                                lambda: runtime.call_tool("time", "get_current_time", {"timezon": "UTC"})),
            attempt("sync, wrong type", lambda: mcp_time.get_current_time.sync(timezone=["UTC"])),
        ]
        rows.append(["after", (await mcp_time.get_current_time(timezone="UTC"))["timezone"], kept])
        report(rows)
        """,
        "arguments",
    )
    rows = {row[0]: row[1:] for row in reported(result)}
    expected_type = "argument timezone must be a string, not int (5)"
    assert rows["wrong type"][0] == "ArgumentError", rows
    assert expected_type in rows["wrong type"][1]
    assert rows["wrong type"][2:] == ["time", "get_current_time", True]
    assert rows["by name, wrong type"][:2] == ["ArgumentError", rows["wrong type"][1]]
    assert rows["sync, wrong type"][0] == "ArgumentError"
    assert "argument timezone must be a string, not list" in rows["sync, wrong type"][1]
    for label in ("unknown", "by name, unknown"):
        assert rows[label][0] == "ArgumentError", rows
        assert "unknown argument 'timezon'; did you mean 'timezone'?" in rows[label][1]
    for label in ("missing", "by name, missing"):
        assert rows[label][0] == "ArgumentError", rows
        assert "missing" in rows[label][1] and "'timezone'" in rows[label][1]
        assert "timezone (string, required)" in rows[label][1]
    assert rows["after"] == ["UTC", "still here"]


@pytest.mark.anyio
async def test_tool_failures_and_unknown_names_raise_their_runtime_errors(shared: Shared) -> None:
    result = await run(
        shared.bridge,
        """
        async def attempt(label, make):
            try:
                return [label, "no error", repr(await make())]
            except runtime.MCPError as exc:
                return [label, type(exc).__name__, exc.message, exc.server, exc.tool, exc.details]

        def attempt_sync(label, make):
            try:
                return [label, "no error", repr(make())]
            except runtime.MCPError as exc:
                return [label, type(exc).__name__, exc.message, exc.server, exc.tool, exc.details]

        rows = [
            await attempt("tool error", lambda: mcp_time.get_current_time(timezone="Mars/Olympus_Mons")),
            await attempt("tool error by name",
                          lambda: runtime.call_tool("time", "get_current_time", {"timezone": "Mars/Olympus_Mons"})),
            attempt_sync("misspelt tool", lambda: mcp_time.get_curent_time),
            await attempt("misspelt tool by name", lambda: runtime.call_tool("time", "get_curent_time", {})),
            attempt_sync("misspelt server", lambda: mcp_servers["tme"]),
            await attempt("misspelt server by name", lambda: runtime.call_tool("tme", "get_current_time", {})),
        ]
        rows.append(["hasattr", hasattr(mcp_time, "nope"), hasattr(mcp_time, "get_current_time")])
        rows.append(["get", mcp_servers.get("tme"), "tme" in mcp_servers, "time" in mcp_servers])
        rows.append(["hierarchy", *[issubclass(getattr(runtime, name), runtime.MCPError) for name in (
            "ToolError", "ToolNotFound", "ServerNotFound", "ArgumentError", "ServerUnavailable", "ToolTimeout")],
            issubclass(runtime.ToolNotFound, AttributeError), issubclass(runtime.ServerNotFound, LookupError)])
        rows.append(["after", (await mcp_time.get_current_time(timezone="UTC"))["timezone"]])
        report(rows)
        """,
        "errors",
    )
    rows = {row[0]: row[1:] for row in reported(result)}
    for label in ("tool error", "tool error by name"):
        kind, message, server, tool, _details = rows[label]
        assert (kind, server, tool) == ("ToolError", "time", "get_current_time"), rows[label]
        assert "Invalid timezone" in message and "Mars/Olympus_Mons" in message  # the server's own words
    for label in ("misspelt tool", "misspelt tool by name"):
        kind, message, server, tool, details = rows[label]
        assert (kind, server, tool) == ("ToolNotFound", "time", "get_curent_time"), rows[label]
        assert "Did you mean 'get_current_time'" in message
        assert details["suggestions"][0] == "get_current_time"
    for label in ("misspelt server", "misspelt server by name"):
        kind, message, server, _tool, details = rows[label]
        assert (kind, server) == ("ServerNotFound", "tme"), rows[label]
        assert "Did you mean 'time'" in message
        assert details["suggestions"][0] == "time"
    assert rows["hasattr"] == [False, True]
    assert rows["get"] == [None, False, True]
    assert rows["hierarchy"] == [True] * 8
    assert rows["after"] == ["UTC"]


@pytest.mark.anyio
async def test_tool_not_found_suggestions_name_each_tool_once(shared: Shared) -> None:
    result = await run(
        shared.bridge,
        """
        found = []
        try:
            mcp_time.get_curent_time
        except runtime.ToolNotFound as exc:
            found.append(exc.details["suggestions"])
        try:
            await runtime.call_tool("time", "get_curent_time", {})
        except runtime.ToolNotFound as exc:
            found.append(exc.details["suggestions"])
        report(found)
        """,
        "suggestions",
    )
    in_guest, from_host = reported(result)
    assert in_guest == ["get_current_time", "convert_time"]
    assert from_host == ["get_current_time", "convert_time"]


# ------------------------------------------------------------------------------------ 5. concurrency


@ONE_BACKEND
def test_a_hundred_gathered_calls_return_in_order(backend_name: str) -> None:
    async def body() -> ExecutionResult:
        with private_state_dir() as state:
            settings = sandbox_settings(runtime=backend_name, state_dir=state)
            async with Bridge(settings, Discovery(servers=(upstreams.everything(),))) as bridge:
                return await run(
                    bridge,
                    """
                    import asyncio
                    echoes = await asyncio.gather(*(mcp_everything.echo(message=f"n{i}") for i in range(100)))
                    report(echoes)
                    """,
                    "hundred",
                )

    assert reported(asyncio.run(body())) == [f"Echo: n{i}" for i in range(100)]


@ONE_BACKEND
def test_gathered_calls_are_in_flight_at_the_same_time(with_sessions: Callable[..., Any]) -> None:
    """Each relayed call is held until all of them have arrived: a serial relay would never get there.

    The relay here is test logic on the host (no upstream server); the sandbox and its runtime are real.
    A serial implementation deadlocks at the first call, and the cell's timeout ends the run as a failure.
    """
    calls = 24  # below the worker's per-cell cap of concurrently relayed calls

    async def body(sessions: SessionManager) -> tuple[ExecutionResult, list[int]]:
        barrier = asyncio.Barrier(calls)
        arrived: list[int] = []

        async def relay(message: CallFrame) -> Reply:
            if message.get("op") != "call":
                return {"ok": False, "error": {"kind": "MCPError", "message": f"unexpected {message.get('op')}"}}
            number = message["arguments"]["n"]
            arrived.append(number)
            await barrier.wait()
            return {"ok": True, "value": {"content": [{"type": "text", "text": f"done {number}"}]}}

        def context(fresh: bool) -> CellContext:
            return {"servers": [{"name": "held", "alias": "held", "transport": "stdio"}], "versions": {}}

        code = guest(
            f"""
            import asyncio
            done = await asyncio.gather(*(runtime.call_tool("held", "wait", {{"n": n}}) for n in range({calls})))
            report(done)
            """
        )
        sessions.services = GuestServicesStub(context, relay)
        result = await sessions.execute(code, session="barrier", timeout=30)
        return result, arrived

    result, arrived = with_sessions(body)
    assert reported(result) == [f"done {n}" for n in range(calls)]
    assert sorted(arrived) == list(range(calls))


# ------------------------------------------------------------------------------------ 6. resources


@pytest.mark.anyio
async def test_resources_are_listed_and_read_as_text_or_bytes(shared: Shared) -> None:
    result = await run(
        shared.bridge,
        """
        listed = await runtime.list_resources("everything")
        first = listed[0]
        text = await runtime.read_resource("everything", first["uri"])
        blob = await runtime.read_resource("everything", "demo://resource/dynamic/blob/7")
        dynamic = runtime.read_resource_sync("everything", "demo://resource/dynamic/text/7")
        try:
            await runtime.read_resource("everything", "demo://resource/nowhere/1")
            missing = "no error"
        except runtime.MCPError as exc:
            missing = [type(exc).__name__, exc.message]
        report({
            "listed": [[entry["uri"], entry.get("mimeType")] for entry in listed],
            "text": [type(text).__name__, text[:200]],
            "blob": [type(blob).__name__, blob.decode()],
            "dynamic": [type(dynamic).__name__, dynamic],
            "missing": missing,
            "time": runtime.list_resources_sync("time"),
        })
        """,
        "resources",
    )
    seen = reported(result)
    uris = [uri for uri, _mime in seen["listed"]]
    assert "demo://resource/static/document/architecture.md" in uris
    assert seen["text"][0] == "str" and seen["text"][1].startswith("#")
    assert seen["blob"][0] == "bytes"  # a blob arrives base64-encoded and is decoded
    assert seen["blob"][1].startswith("Resource 7: This is a base64 blob")
    assert seen["dynamic"][0] == "str" and seen["dynamic"][1].startswith("Resource 7: This is a plaintext resource")
    assert seen["missing"][0] == "MCPError" and "demo://resource/nowhere/1" in seen["missing"][1]
    assert seen["time"] == []  # a server without the resources capability has none, and that is no error


# ------------------------------------------------------------------------------------ 7. saved tools


def files_of(bridge: Bridge) -> SavedToolStore:
    """The files of the bridge's saved tools (MCP_BRIDGE_SHARED_STATE=files, the default)."""
    store = bridge.relay.store
    assert isinstance(store, FileSavedTools), store
    return store.files


def owner_dir(bridge: Bridge, owner: str) -> Path:
    """Where the store keeps one owner's tools (saved_tools.py: a folder per owner, named by a hash)."""
    return files_of(bridge).root / hashlib.sha256(owner.encode()).hexdigest()[:16]


@pytest.mark.anyio
async def test_saved_tools_are_defined_in_later_sessions_of_their_owner_only(shared: Shared) -> None:
    bridge = shared.bridge
    owner, stranger = f"owner-{uuid.uuid4().hex[:8]}", f"stranger-{uuid.uuid4().hex[:8]}"
    saved = await run(
        bridge,
        """
        def double(x):
            \"\"\"Twice x.\"\"\"
            return 2 * x

        @runtime.save_tool
        async def zone_of_utc():
            \"\"\"The time zone the time server reports for UTC.\"\"\"
            return (await mcp_time.get_current_time(timezone="UTC"))["timezone"]

        runtime.save_tool(double)
        report(sorted(tool["name"] for tool in runtime.list_saved_tools()))
        """,
        f"{owner}-1",
        owner=owner,
    )
    later = await run(
        bridge,
        """
        report({"double": double(21), "zone": await zone_of_utc(), "doc": zone_of_utc.__doc__,
                "listed": {tool["name"]: tool["description"] for tool in runtime.list_saved_tools()},
                "deleted": runtime.delete_saved_tool("double"), "again": runtime.delete_saved_tool("double"),
                "still_here": double(2)})
        """,
        f"{owner}-2",
        owner=owner,
    )
    after_delete = await run(
        bridge,
        'report({"double": "double" in globals(), "zone": await zone_of_utc(), '
        '"listed": [tool["name"] for tool in runtime.list_saved_tools()]})',
        f"{owner}-3",
        owner=owner,
    )
    other = await run(
        bridge,
        'report({"double": "double" in globals(), "zone": "zone_of_utc" in globals(), '
        '"listed": runtime.list_saved_tools()})',
        f"{stranger}-1",
        owner=stranger,
    )
    assert reported(saved) == ["double", "zone_of_utc"]
    assert reported(later) == {
        "double": 42,
        "zone": "UTC",
        "doc": "The time zone the time server reports for UTC.",
        "listed": {"double": "Twice x.", "zone_of_utc": "The time zone the time server reports for UTC."},
        "deleted": True,
        "again": False,
        "still_here": 4,  # a session that already has a tool keeps its copy
    }
    assert reported(after_delete) == {"double": False, "zone": "UTC", "listed": ["zone_of_utc"]}
    assert reported(other) == {"double": False, "zone": False, "listed": []}


@pytest.mark.anyio
async def test_unreadable_and_broken_saved_tools_are_reported_and_the_rest_still_load(shared: Shared) -> None:
    bridge = shared.bridge
    owner = f"owner-{uuid.uuid4().hex[:8]}"
    store = files_of(bridge)
    store.save(owner, "good_tool", "def good_tool():\n    return 'good'\n", "works")
    store.save(owner, "bad_syntax", "def bad_syntax(:\n    return 1\n", "does not compile")
    store.save(owner, "raises_on_load", "raise RuntimeError('boom at load')\n", "fails when defined")
    (owner_dir(bridge, owner) / "garbled.json").write_text("{not json at all")
    result = await run(
        bridge,
        'report({"good": good_tool(), "bad": "bad_syntax" in globals(), "listed": runtime.list_saved_tools()})',
        f"{owner}-1",
        owner=owner,
    )
    seen = reported(result)
    assert seen["good"] == "good"
    assert seen["bad"] is False
    names = [entry.get("name") for entry in seen["listed"] if "name" in entry]
    problems = [entry["problem"] for entry in seen["listed"] if "problem" in entry]
    assert names == ["bad_syntax", "good_tool", "raises_on_load"]
    assert len(problems) == 1 and "'garbled' could not be read" in problems[0]
    assert "saved tool 'garbled' could not be read (JSONDecodeError)" in result.notice, result.notice
    assert "saved tool 'bad_syntax' could not be loaded (SyntaxError" in result.notice, result.notice
    assert "saved tool 'raises_on_load' could not be loaded (RuntimeError: boom at load)" in result.notice
    assert "runtime.delete_saved_tool('garbled')" in result.notice
    again = await run(bridge, "report(good_tool())", f"{owner}-1", owner=owner)
    assert reported(again) == "good"
    assert again.notice == ""  # said once, when the session was set up


@pytest.mark.anyio
async def test_a_tool_saved_under_another_name_is_defined_under_that_name(shared: Shared) -> None:
    owner = f"owner-{uuid.uuid4().hex[:8]}"
    saved = await run(
        shared.bridge,
        """
        def f(x):
            return x + 1
        runtime.save_tool(f, name="plus_one")
        report([tool["name"] for tool in runtime.list_saved_tools()])
        """,
        f"{owner}-1",
        owner=owner,
    )
    later = await run(shared.bridge, "report(plus_one(1))", f"{owner}-2", owner=owner)
    assert reported(saved) == ["plus_one"]
    assert reported(later) == 2


@pytest.mark.anyio
async def test_a_tool_saved_with_a_decorator_over_several_lines_loads_later(shared: Shared) -> None:
    owner = f"owner-{uuid.uuid4().hex[:8]}"
    saved = await run(
        shared.bridge,
        """
        @runtime.save_tool(
            description="Says hello.",
        )
        def hello():
            return "hello"
        report(hello())
        """,
        f"{owner}-1",
        owner=owner,
    )
    later = await run(shared.bridge, "report(hello())", f"{owner}-2", owner=owner)
    assert reported(saved) == "hello"
    assert later.notice == ""
    assert reported(later) == "hello"


# ------------------------------------------------------------------------------------ 8. the servers= hint


@pytest.mark.anyio
async def test_the_servers_hint_starts_known_servers_in_the_background_and_notes_unknown_ones(
    shared: Shared,
) -> None:
    hub = shared.bridge.hub
    assert hub.state("time-warm").status == "idle"
    result = await run(shared.bridge, "report(1 + 1)", "hint", servers=("time-warm", "no-such-server"))
    assert reported(result) == 2
    assert "servers= named no-such-server, which is not configured" in result.notice, result.notice
    assert "named time-warm" not in result.notice
    assert await poll(lambda: hub.state("time-warm").status == "ready"), hub.state("time-warm")
    assert hub.state("time-warm").pid is not None


@pytest.mark.anyio
async def test_the_servers_hint_accepts_a_server_s_alias_like_every_other_api(shared: Shared) -> None:
    hub = shared.bridge.hub
    assert hub.config("time_alias").name == "time-alias"  # the hub, the relay and mcp_servers[...] take aliases
    result = await run(shared.bridge, "report(mcp_servers['time_alias'] is mcp_time_alias)", "alias-hint",
                       servers=("time_alias",))  # fmt: skip
    assert reported(result) is True
    assert "not configured" not in result.notice, result.notice
    assert await poll(lambda: hub.state("time-alias").status == "ready"), hub.state("time-alias")


# ------------------------------------------------------------------------------------ 9. a crashed server


@pytest.mark.anyio
async def test_a_killed_server_fails_the_next_call_then_is_restarted_by_the_one_after(shared: Shared) -> None:
    hub = shared.bridge.hub
    code = """
    try:
        report(["ok", (await mcp_time_crash.get_current_time(timezone="UTC"))["timezone"]])
    except runtime.MCPError as exc:
        report([type(exc).__name__, exc.message, exc.server])
    """
    assert reported(await run(shared.bridge, code, "crash")) == ["ok", "UTC"]
    first = hub.state("time-crash")
    assert first.status == "ready" and first.pid is not None
    os.kill(first.pid, signal.SIGKILL)
    assert await poll(lambda: hub.state("time-crash").status == "failed"), hub.state("time-crash")

    refused = reported(await run(shared.bridge, code, "crash"))
    recovered = reported(await run(shared.bridge, code, "crash"))

    assert refused[0] == "ServerUnavailable", refused
    assert refused[2] == "time-crash"
    assert "killed by signal 9 (SIGKILL)" in refused[1]
    assert "The next call will try again" in refused[1]
    assert recovered == ["ok", "UTC"]
    second = hub.state("time-crash")
    assert second.status == "ready"
    assert second.restarts == 1
    assert second.pid is not None and second.pid != first.pid


# ------------------------------------------------------------------------------------ 10. every real server


@pytest.mark.anyio
async def test_filesystem_lists_and_reads_files_in_its_root(shared: Shared) -> None:
    root = shared.files
    result = await run(
        shared.bridge,
        f"""
        listing = await mcp_filesystem.list_directory(path={str(root)!r})
        text = await mcp_filesystem.read_text_file(path={str(root / "notes" / "b.txt")!r})
        try:
            await mcp_filesystem.read_text_file(path="/etc/hostname")
            outside = "no error"
        except runtime.ToolError as exc:
            outside = exc.message
        report({{"listing": listing, "text": text, "outside": outside}})
        """,
        "filesystem",
    )
    seen = reported(result)
    assert sorted(seen["listing"]["content"].splitlines()) == ["[DIR] notes", "[FILE] a.txt"]
    assert seen["text"] == {"content": "beta\n"}
    assert "Access denied" in seen["outside"] and "outside allowed directories" in seen["outside"]


@pytest.mark.anyio
async def test_memory_keeps_entities_in_its_file(shared: Shared) -> None:
    result = await run(
        shared.bridge,
        """
        created = await mcp_memory.create_entities(entities=[
            {"name": "proxy-test", "entityType": "test", "observations": ["made from the sandbox"]}])
        await mcp_memory.add_observations(observations=[
            {"entityName": "proxy-test", "contents": ["observed twice"]}])
        graph = await mcp_memory.read_graph()
        report({"created": created, "graph": graph})
        """,
        "memory",
    )
    seen = reported(result)
    assert seen["created"]["entities"][0]["name"] == "proxy-test"
    [entity] = [entity for entity in seen["graph"]["entities"] if entity["name"] == "proxy-test"]
    assert entity["observations"] == ["made from the sandbox", "observed twice"]
    stored = [json.loads(line) for line in shared.memory_file.read_text().splitlines() if line.strip()]
    assert any(row.get("name") == "proxy-test" and "observed twice" in row.get("observations", []) for row in stored)


@pytest.mark.anyio
async def test_sequential_thinking_takes_a_thought(shared: Shared) -> None:
    result = await run(
        shared.bridge,
        """
        step = await mcp_sequential_thinking.sequentialthinking(
            thought="Check that one thought goes through", thoughtNumber=1, totalThoughts=1, nextThoughtNeeded=False)
        report(step)
        """,
        "thinking",
    )
    step = reported(result)
    assert step["thoughtNumber"] == 1
    assert step["totalThoughts"] == 1
    assert step["nextThoughtNeeded"] is False
    assert step["thoughtHistoryLength"] >= 1


@pytest.mark.anyio
async def test_git_reports_status_and_log_of_a_repository(shared: Shared) -> None:
    result = await run(
        shared.bridge,
        f"""
        report({{"status": await mcp_git.git_status(repo_path={str(shared.repo)!r}),
                 "log": await mcp_git.git_log(repo_path={str(shared.repo)!r}, max_count=5)}})
        """,
        "git",
    )
    seen = reported(result)
    assert "modified:   tracked.txt" in seen["status"]
    assert "untracked.txt" in seen["status"]
    assert "Message: the first commit" in seen["log"]
    assert "Author: Proxy Tests" in seen["log"]


@pytest.mark.anyio
async def test_fetch_of_an_unreachable_url_is_a_tool_error_saying_why(shared: Shared) -> None:
    port = closed_port()
    result = await run(
        shared.bridge,
        f"""
        try:
            report(["no error", await mcp_fetch.fetch(url="http://127.0.0.1:{port}/page")])
        except runtime.ToolError as exc:
            report([type(exc).__name__, exc.message, exc.server, exc.tool])
        """,
        "fetch",
    )
    kind, message, server, tool = reported(result)
    assert (kind, server, tool) == ("ToolError", "fetch", "fetch")
    assert f"127.0.0.1:{port}" in message
    assert "connection issue" in message


@pytest.mark.anyio
async def test_everything_answers_over_stdio_streamable_http_and_sse(shared: Shared) -> None:
    result = await run(
        shared.bridge,
        """
        import asyncio
        report(await asyncio.gather(mcp_everything.echo(message="stdio"), mcp_everything_http.echo(message="http"),
                                    mcp_everything_sse.echo(message="sse")))
        """,
        "transports",
    )
    assert reported(result) == ["Echo: stdio", "Echo: http", "Echo: sse"]
    assert [
        shared.bridge.hub.config(name).transport for name in ("everything", "everything-http", "everything-sse")
    ] == ["stdio", "http", "sse"]


# ------------------------------------------------------------------------------------ 11. tool timeout


@pytest.mark.anyio
async def test_a_call_past_its_timeout_raises_tool_timeout_and_the_session_goes_on(shared: Shared) -> None:
    result = await run(
        shared.bridge,
        """
        survivor = "kept"
        try:
            await runtime.call_tool("everything", "trigger-long-running-operation",
                                    {"duration": 60, "steps": 2}, timeout=1)
            outcome = ["no error"]
        except runtime.ToolTimeout as exc:
            outcome = [type(exc).__name__, exc.message, exc.server, exc.tool, isinstance(exc, TimeoutError)]
        outcome.append(await mcp_everything.echo(message="after"))
        report(outcome)
        """,
        "timeout",
    )
    kind, message, server, tool, is_timeout, after = reported(result)
    assert (kind, server, tool, is_timeout) == ("ToolTimeout", "everything", "trigger-long-running-operation", True)
    assert "did not answer 'trigger-long-running-operation' within 1 s" in message
    assert after == "Echo: after"
    later = await run(shared.bridge, "report(survivor)", "timeout")
    assert reported(later) == "kept"


@pytest.mark.anyio
async def test_a_blocking_call_is_interrupted_by_the_run_timeout_and_the_session_goes_on(shared: Shared) -> None:
    """A ``.sync`` call waits on a lock in the sandbox; the run's timeout must still interrupt that wait."""
    await run(shared.bridge, "blocked_state = 'kept'", "blocking")
    result = await run(
        shared.bridge,
        "mcp_everything.trigger_long_running_operation.sync(duration=60, steps=2)",
        "blocking",
        timeout=2,
    )
    assert (result.status, result.state_lost) == ("timeout", False), explain(result)
    later = await run(shared.bridge, "report([blocked_state, mcp_everything.echo.sync(message='after')])", "blocking")
    assert reported(later) == ["kept", "Echo: after"]


# ------------------------------------------------------------------------------------ 11. reference-bridge code

# Code written for the reference bridge (mcp-server-code-execution-mode) calls its helpers in these forms; its
# README's "Inspect Available Servers" example uses each of them. This cell is ours (we never copy that GPL text):
# every call below has the name, arguments and result shape the reference documents, and the output is parsed below.
REFERENCE_STYLE_CELL = """\
from mcp import runtime

shown = {
    "names": runtime.discovered_servers(),
    "names_sync": runtime.list_servers_sync(),
    "names_rpc": await runtime.list_servers(),
    "loaded": runtime.list_loaded_server_metadata(),
}
if shown["loaded"]:
    server_name = shown["loaded"][0]["name"]
    described = runtime.describe_server(server_name)
    shown["aliases"] = [(t["alias"], t.get("description", "")) for t in described["tools"]]
    docs = await runtime.query_tool_docs(server_name)
    shown["docs"] = docs
    shown["full"] = await runtime.query_tool_docs(server_name, tool=docs[0]["toolAlias"], detail="full")
    shown["tools_sync"] = runtime.list_tools_sync(server_name)
    shown["docs_sync"] = runtime.query_tool_docs_sync(server_name)
hits = await runtime.search_tool_docs("current time in a timezone", limit=3)
shown["hits"] = [(hit["server"], hit["tool"], hit.get("description", "")) for hit in hits]
shown["hits_sync"] = [hit["tool"] for hit in runtime.search_tool_docs_sync("time")]
shown["summary"] = runtime.capability_summary()
for label, value in shown.items():
    print(f"{label}: {value!r}")
"""
TOOL_METADATA_KEYS = {"name", "alias", "description", "input_schema"}


def printed_values(stdout: str) -> dict[str, Any]:
    """The ``label: <python literal>`` lines a cell printed, as values (lines that are not literals are left out)."""
    import ast

    values: dict[str, Any] = {}
    for line in stdout.splitlines():
        label, _, text = line.partition(": ")
        if text and label.isidentifier():
            with contextlib.suppress(ValueError, SyntaxError):
                values[label] = ast.literal_eval(text)
    return values


@pytest.mark.anyio
async def test_code_written_for_the_reference_bridge_runs_with_its_names_and_shapes() -> None:
    async with time_and_everything() as bridge:
        result = await bridge.run(
            RunRequest(REFERENCE_STYLE_CELL, timeout=RUN_TIMEOUT, servers=("time",)),
            SessionKey.cli("reference"),
            owner="local",
        )
    assert result.status == "ok", explain(result)
    seen = printed_values(result.stdout)
    names = ("time", "everything")
    assert seen["names"] == seen["names_sync"] == seen["names_rpc"] == names
    assert isinstance(seen["loaded"], tuple)
    (loaded,) = seen["loaded"]  # time, named in servers=; everything was not started
    assert {"name", "alias", "tools"} <= set(loaded) and (loaded["name"], loaded["alias"]) == ("time", "time")
    assert [tool["name"] for tool in loaded["tools"]] == ["get_current_time", "convert_time"]
    for tool in loaded["tools"]:
        assert set(tool) == TOOL_METADATA_KEYS, tool
        assert tool["input_schema"]["type"] == "object" and "properties" in tool["input_schema"]
    assert seen["aliases"][0] == ("get_current_time", "Get current time in a specific timezone")
    docs = seen["docs"]
    assert docs[0]["toolAlias"] == docs[0]["alias"] == "get_current_time"
    assert seen["tools_sync"] == seen["docs_sync"] == docs
    full = seen["full"]
    assert (full["tool"], full["toolAlias"]) == ("get_current_time", "get_current_time")
    assert full["inputSchema"]["required"] == ["timezone"]
    assert seen["hits"] and all(server in names for server, _tool, _description in seen["hits"])
    assert ("time", "get_current_time") in [(server, tool) for server, tool, _description in seen["hits"]]
    assert "get_current_time" in seen["hits_sync"]
    assert seen["summary"].startswith("mcp-codemode")


@pytest.mark.anyio
async def test_loaded_servers_are_those_started_and_list_servers_gives_names_or_details() -> None:
    """``list_loaded_server_metadata``: the servers the bridge runs (a servers= hint or an earlier use started)."""
    code = """
    report({
        "loaded": [[entry["name"], sorted(entry), [sorted(tool) for tool in entry["tools"]][:1]]
                   for entry in runtime.list_loaded_server_metadata()],
        "type": type(runtime.list_loaded_server_metadata()).__name__,
        "names": [type(runtime.list_servers_sync()).__name__, list(runtime.list_servers_sync()),
                  "time" in runtime.list_servers_sync(), "time" in await runtime.list_servers()],
        "detailed": [sorted(entry) for entry in await runtime.list_servers(detailed=True)],
        "detailed_sync": [entry["name"] for entry in runtime.list_servers_sync(detailed=True)],
        "discovered": [runtime.discovered_servers(), runtime.discovered_servers(detailed=True)],
    })
    """
    async with time_and_everything() as bridge:
        nothing = reported(await run(bridge, code, "loaded"))
        hinted = reported(await run(bridge, code, "loaded", servers=("everything",)))
        await run(bridge, "await mcp_time.get_current_time(timezone='UTC')", "loaded")
        both = reported(await run(bridge, code, "loaded"))
        described = reported(await run(bridge, "report(runtime.describe_server('time'))", "loaded"))
    assert nothing["loaded"] == [] and nothing["type"] == "tuple"
    assert [name for name, *_ in hinted["loaded"]] == ["everything"]
    assert [name for name, *_ in both["loaded"]] == ["time", "everything"]  # in the configured order
    _, keys, tool_keys = both["loaded"][0]
    assert keys == ["alias", "name", "tools", "transport"] and tool_keys == [sorted(TOOL_METADATA_KEYS)]
    assert nothing["names"] == ["tuple", ["time", "everything"], True, True]
    assert nothing["detailed"][0] == ["alias", "listing", "name", "state", "tools", "transport"]
    assert nothing["detailed_sync"] == ["time", "everything"]
    assert nothing["discovered"] == [
        ["time", "everything"],
        [
            {"name": "time", "alias": "time", "transport": "stdio"},
            {"name": "everything", "alias": "everything", "transport": "stdio"},
        ],
    ]
    assert [set(tool) for tool in described["tools"]] == [TOOL_METADATA_KEYS] * 2
    assert described["tools"][0]["input_schema"]["required"] == ["timezone"]


@pytest.mark.anyio
async def test_a_loaded_server_whose_start_fails_is_left_out_and_the_others_are_listed() -> None:
    """``silent`` never answers, so it is still starting when the cell asks; then it ends without a word, and its
    start fails. (Not by the connect timeout: that is a hang guard for ``time``, a real server whose start has
    taken over 5 s on a starved machine, and a guard long enough for it would keep this test waiting as long.)"""
    require_bubblewrap()
    silent = dataclasses.replace(upstreams.time(name="silent"), command="/bin/sleep", args=(f"{patient(2):.1f}",))
    with private_state_dir() as state:
        settings = sandbox_settings(runtime="bubblewrap", state_dir=state, connect_timeout=patient(60.0))
        async with Bridge(settings, Discovery(servers=(silent, upstreams.time()))) as bridge:
            await run(bridge, "pass", "silent")  # the session's sandbox is up before the hint starts the servers
            code = """
            before = {e["name"]: e["state"] for e in runtime.list_servers_sync(detailed=True)}
            report({"before": before["silent"], "loaded": [e["name"] for e in runtime.list_loaded_server_metadata()],
                    "after": {e["name"]: e["state"] for e in runtime.list_servers_sync(detailed=True)}})
            """
            seen = reported(await run(bridge, code, "silent", servers=("silent", "time")))
    assert seen == {"before": "connecting", "loaded": ["time"], "after": {"silent": "failed", "time": "ready"}}


# ------------------------------------------------------------------------------------ 12. images in a value


@ONE_BACKEND
def test_images_inside_a_cell_s_last_value_reach_the_result_and_its_text_shows_the_rest(backend_name: str) -> None:
    """get-tiny-image answers text, an image and text: the value shows the text, the image goes as an image."""

    async def body() -> list[ExecutionResult]:
        with private_state_dir() as state:
            settings = sandbox_settings(runtime=backend_name, state_dir=state, max_images=3)
            async with Bridge(settings, Discovery(servers=(upstreams.everything(),))) as bridge:
                return [
                    await run(bridge, code, "images")
                    for code in (
                        "img = await mcp_everything.get_tiny_image(); img",
                        "{'first': img, 'again': (img[1], [img[1]]), 'none': None}",  # one object: sent once
                        "[await mcp_everything.get_tiny_image() for _ in range(5)]",  # five images: three go
                        "img[0]",
                    )
                ]

    mixed, nested, too_many, text = asyncio.run(body())
    assert mixed.status == "ok", explain(mixed)
    (image,) = mixed.images
    assert image.mime == "image/png" and image.data.startswith(PNG_MAGIC)
    assert mixed.value is not None
    shown = f"<Image image/png, {len(image.data)} bytes>"
    assert mixed.value == f"[\"Here's the image you requested:\", {shown}, 'The image above is the MCP logo.']"
    assert [nested.status, len(nested.images), nested.notice] == ["ok", 1, ""], explain(nested)
    assert nested.images[0].data == image.data
    assert [too_many.status, len(too_many.images)] == ["ok", 3], explain(too_many)
    assert "2 images in the value were not shown: at most 3 images can be shown per call" in too_many.notice
    assert [text.status, text.images] == ["ok", ()], explain(text)


@pytest.mark.anyio
async def test_through_the_mcp_face_an_upstream_image_reaches_the_client_and_the_reference_resource_is_read(
    tmp_path: Path,
) -> None:
    """A real client on ``mcp-codemode serve`` (stdio, bubblewrap) with server-everything configured."""
    require_bubblewrap()
    everything = upstreams.everything()
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"everything": {"command": everything.command,
                                                                "args": list(everything.args)}}}))  # fmt: skip
    with private_state_dir() as state:
        async with stdio_client_for(
            tmp_path / "serve.log", "legacy", "--config", str(config), "--no-discover", MCP_BRIDGE_STATE_DIR=str(state)
        ) as client:
            listed = await client.list_resources()
            ours = await client.read_resource("codemode://capabilities")
            theirs = await client.read_resource("resource://mcp-server-code-execution-mode/capabilities")
            result = await client.call_tool("run_python", {"code": "await mcp_everything.get_tiny_image()"})
    assert [str(resource.uri) for resource in listed.resources] == ["codemode://capabilities"]  # one is listed
    # (no session ran before the listing, so no session's files are listed)
    ((summary,), (reference,)) = ours.contents, theirs.contents
    assert isinstance(summary, types.TextResourceContents) and isinstance(reference, types.TextResourceContents)
    assert str(reference.uri) == "resource://mcp-server-code-execution-mode/capabilities"
    assert reference.text.startswith(summary.text + "\n\nComing from mcp-server-code-execution-mode:\n")
    assert "runtime.list_loaded_server_metadata()" in reference.text
    assert not result.is_error, text_of(result)
    (image,) = images_of(result)
    assert image.mime_type == "image/png" and base64.b64decode(image.data).startswith(PNG_MAGIC)
    assert "<Image image/png, " in text_of(result) and "The image above is the MCP logo." in text_of(result)
