"""The upstream hub against real MCP servers: the npm and PyPI reference servers, started by their entry points.

Every test runs its own event loop (``asyncio.run``) and its own Hub, so each starts from nothing and proves that
nothing outlives it. Servers missing on this machine fail under CI=true and skip elsewhere (tests/support/upstreams.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import http.server
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import mcp_types as types
import pytest

from mcp_codemode.upstream.errors import (
    SelfServerSkipped,
    ServerUnavailable,
    UnknownServer,
    UpstreamCallError,
    UpstreamTimeout,
)
from mcp_codemode.upstream.model import ServerConfig
from mcp_codemode.upstream.servers.hub import Hub
from mcp_codemode.upstream.servers.launch import MARK
from mcp_codemode.upstream.servers.restart import backoff_delay
from tests.support import upstreams
from tests.support.processes import wait_until_gone
from tests.support.upstreams import GROWER
from tests.support.zygote import serve_command

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]


def run(body: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(body)


def text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def starts(log: Path) -> int:
    """How many times the hub launched the server that writes this log."""
    return sum(1 for line in log.read_text().splitlines() if line.startswith(MARK) and " starting " in line)


def live(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its reaper runs nothing and counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def still_running(pids: list[int]) -> list[str]:
    return [str(pid) for pid in pids if live(pid)]


async def wait_for(condition: Any, seconds: float = 10.0) -> None:
    """Poll an async-world condition; a bounded wait for a notification, not a timing assertion."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition() and loop.time() < deadline:
        await asyncio.sleep(0.02)


# -- laziness, reuse, logs --------------------------------------------------------------------------------------


@pytest.mark.backend
def test_nothing_starts_before_first_use_and_concurrent_first_calls_start_one_server(tmp_path: Path) -> None:
    async def body() -> None:
        async with Hub([upstreams.everything(), upstreams.time()], log_dir=tmp_path) as hub:
            assert hub.names() == ("everything", "time")
            assert hub.state("everything").status == "idle"
            assert not tmp_path.joinpath("everything.log").exists()

            listings = await asyncio.gather(*(hub.tools("everything") for _ in range(10)))
            assert all({tool.name for tool in listing} >= {"echo", "get-env"} for listing in listings)
            state = hub.state("everything")
            assert (state.status, state.restarts, state.error) == ("ready", 0, "")
            assert state.pid is not None and live(state.pid)
            assert starts(tmp_path / "everything.log") == 1

            # Later calls reuse the warm connection: same process, no new start.
            assert text(await hub.call_tool("everything", "echo", {"message": "again"})) == "Echo: again"
            assert hub.state("everything").pid == state.pid
            assert starts(tmp_path / "everything.log") == 1
            assert hub.state("time").status == "idle"  # never used, never started
            processes = [state.pid, parent(state.pid)]  # the server, and the wrapper that launched it
        assert wait_until_gone(lambda: still_running(processes)) == []
        assert hub.state("everything").status == "idle"

    run(body())


@pytest.mark.backend
def test_warm_starts_servers_in_the_background_and_calls_then_find_them_ready(tmp_path: Path) -> None:
    async def body() -> None:
        async with Hub([upstreams.everything(), upstreams.memory(tmp_path / "m.jsonl")], log_dir=tmp_path) as hub:
            with pytest.raises(UnknownServer):
                hub.warm(["everything", "no-such-server"])
            assert hub.state("everything").status == "idle"  # a bad hint starts nothing
            hub.warm(["everything"])
            await wait_for(lambda: hub.state("everything").status == "ready")
            pid = hub.state("everything").pid
            assert pid is not None and live(pid)
            assert text(await hub.call_tool("everything", "echo", {"message": "warm"})) == "Echo: warm"
            assert hub.state("everything").pid == pid and starts(tmp_path / "everything.log") == 1
            assert hub.state("memory").status == "idle"

    run(body())


@pytest.mark.backend
def test_each_stdio_server_appends_its_stderr_to_its_own_log(tmp_path: Path) -> None:
    servers = [upstreams.filesystem(tmp_path), upstreams.memory(tmp_path / "memory.jsonl")]
    # a log directory and file left world-readable (by an older version, or by hand) are made private again:
    # servers may log tokens they were given
    (tmp_path / "logs").mkdir(mode=0o755)
    (tmp_path / "logs" / "memory.log").touch(mode=0o644)

    async def body() -> None:
        for _ in range(2):
            async with Hub(servers, log_dir=tmp_path / "logs") as hub:
                await asyncio.gather(hub.tools("filesystem"), hub.tools("memory"))
                assert hub.state("memory").log_file == tmp_path / "logs" / "memory.log"

    run(body())
    filesystem_log = (tmp_path / "logs" / "filesystem.log").read_text()
    memory_log = (tmp_path / "logs" / "memory.log").read_text()
    assert "Secure MCP Filesystem Server running on stdio" in filesystem_log
    assert "Knowledge Graph MCP Server running on stdio" in memory_log
    assert "Filesystem" not in memory_log
    assert starts(tmp_path / "logs" / "filesystem.log") == starts(tmp_path / "logs" / "memory.log") == 2
    modes = {path.name: path.stat().st_mode & 0o777 for path in [tmp_path / "logs", *(tmp_path / "logs").iterdir()]}
    assert modes == {"logs": 0o700, "filesystem.log": 0o600, "memory.log": 0o600}


@pytest.mark.backend
def test_protocol_setting_chooses_how_the_client_connects(tmp_path: Path) -> None:
    async def body() -> None:
        servers = [upstreams.time("legacy"), upstreams.time("modern", protocol="2026-07-28")]
        async with Hub(servers, log_dir=tmp_path) as hub:
            for name in hub.names():
                result = await hub.call_tool(name, "get_current_time", {"timezone": "UTC"})
                assert not result.is_error and "UTC" in text(result)
            assert hub.state("legacy").protocol == "2025-11-25"
            assert hub.state("modern").protocol == "2026-07-28"

    run(body())


# -- failures: crashes, backoff, missing commands ---------------------------------------------------------------


@pytest.mark.backend
def test_a_killed_server_fails_the_next_call_clearly_and_the_call_after_restarts_it(tmp_path: Path) -> None:
    async def body() -> None:
        async with Hub([upstreams.everything()], log_dir=tmp_path) as hub:
            await hub.call_tool("everything", "echo", {"message": "hello"})
            first = hub.state("everything").pid
            assert first is not None
            os.kill(first, signal.SIGKILL)

            with pytest.raises(ServerUnavailable) as caught:
                await hub.call_tool("everything", "echo", {"message": "are you there?"})
            message = str(caught.value)
            assert "'everything'" in message and "killed by signal 9 (SIGKILL)" in message
            assert "next call will try again" in message
            assert str(tmp_path) not in message  # the log's path is for the bridge's user, not for sandboxed code
            assert str(tmp_path / "everything.log") in caught.value.host_message
            assert hub.state("everything").status == "failed"

            result = await hub.call_tool("everything", "echo", {"message": "back"})
            assert text(result) == "Echo: back"
            state = hub.state("everything")
            assert (state.status, state.restarts) == ("ready", 1)
            assert state.pid not in (None, first)

            # A call in flight when the server dies fails at once instead of waiting for its timeout.
            slow = asyncio.create_task(
                hub.call_tool("everything", "trigger-long-running-operation", {"duration": 30, "steps": 3})
            )
            await asyncio.sleep(0.3)
            assert state.pid is not None
            os.kill(state.pid, signal.SIGKILL)
            with pytest.raises(ServerUnavailable, match="killed by signal 9"):
                await slow

            # Its second crash within seconds of a restart counts as a repeated failure: the hub backs off.
            retry_in = hub.state("everything").retry_in
            assert retry_in is not None and retry_in > 0
            with pytest.raises(ServerUnavailable, match="try again in"):
                await hub.call_tool("everything", "echo", {"message": "too soon"})
            await asyncio.sleep(retry_in)
            assert text(await hub.call_tool("everything", "echo", {"message": "x"})) == "Echo: x"
            assert hub.state("everything").restarts == 2

    run(body())


@pytest.mark.backend
def test_a_background_listing_neither_restarts_a_crashed_server_nor_takes_the_callers_crash_report(
    tmp_path: Path,
) -> None:
    """Search lists prompts and resources in the background; a crash it meets stays the next caller's to hear.

    Before, that listing (started after each tool listing) could reach a killed server first: it took the
    report of the crash (or started the server again), and the caller's next call then ran as if nothing had
    happened, against "the next call fails clearly" above.
    """

    async def body() -> None:
        async with Hub([upstreams.everything()], log_dir=tmp_path) as hub:
            with pytest.raises(ServerUnavailable, match="it is not running"):
                await hub.list_prompts("everything", background=True)
            assert hub.state("everything").status == "idle", "a background listing started the server"
            await hub.call_tool("everything", "echo", {"message": "hello"})
            assert await hub.list_prompts("everything", background=True), "a running server is listed"
            first = hub.state("everything").pid
            assert first is not None
            os.kill(first, signal.SIGKILL)
            for listing in (hub.list_prompts, hub.list_resources, hub.list_resource_templates):
                with pytest.raises(ServerUnavailable, match=r"it is not running|killed by signal 9"):
                    await listing("everything", background=True)
            assert hub.state("everything").status == "failed" and hub.state("everything").restarts == 0
            with pytest.raises(ServerUnavailable, match="killed by signal 9"):
                await hub.call_tool("everything", "echo", {"message": "are you there?"})
            assert text(await hub.call_tool("everything", "echo", {"message": "back"})) == "Echo: back"

    run(body())


@pytest.mark.backend
def test_a_server_that_keeps_failing_is_retried_with_backoff_and_its_stderr_is_quoted(tmp_path: Path) -> None:
    script = "import sys; print('fatal: no API key in BROKEN_KEY', file=sys.stderr); sys.exit(3)"
    broken = ServerConfig(
        name="broken", alias="broken", transport="stdio", source="/etc/test.json", command=sys.executable,
        args=("-c", script),
    )  # fmt: skip

    async def body() -> None:
        async with Hub([broken], log_dir=tmp_path, backoff=(60.0, 600.0)) as hub:
            # Concurrent first calls share one failed start, and all of them hear why.
            outcomes = await asyncio.gather(*(hub.tools("broken") for _ in range(5)), return_exceptions=True)
            assert all(isinstance(outcome, ServerUnavailable) for outcome in outcomes)
            first = str(outcomes[0])
            assert "exited with status 3 during startup" in first and "fatal: no API key in BROKEN_KEY" in first
            assert "next call will try again" in first
            assert starts(tmp_path / "broken.log") == 1

            with pytest.raises(ServerUnavailable) as second:  # the first failure is retried at once
                await hub.tools("broken")
            assert "try again in" in str(second.value)
            assert starts(tmp_path / "broken.log") == 2

            with pytest.raises(ServerUnavailable) as third:  # backing off: fails at once, starts nothing
                await hub.call_tool("broken", "anything", {})
            assert "try again in" in str(third.value) and "fail at once" in str(third.value)
            assert starts(tmp_path / "broken.log") == 2
            state = hub.state("broken")
            assert state.status == "failed" and state.retry_in is not None and state.retry_in > 0

    run(body())


@pytest.mark.backend
def test_a_server_that_never_answers_the_handshake_fails_after_connect_timeout(tmp_path: Path) -> None:
    mute = ServerConfig(
        name="mute", alias="mute", transport="stdio", source="test", command=sys.executable,
        args=("-c", "import sys; print('waiting forever', file=sys.stderr, flush=True); sys.stdin.read()"),
    )  # fmt: skip
    wrong = dataclasses.replace(mute, name="wrong", alias="wrong", protocol="1999-01-01")

    async def body() -> None:
        async with Hub([mute, wrong], log_dir=tmp_path, connect_timeout=0.5) as hub:
            with pytest.raises(ServerUnavailable) as caught:
                await hub.tools("mute")
            assert "did not complete the MCP handshake within 0.5 s" in str(caught.value)
            assert "connect_timeout" in str(caught.value) and "waiting forever" in str(caught.value)
            with pytest.raises(ServerUnavailable, match='fix its "protocol" in test'):
                await hub.tools("wrong")

    run(body())


def test_backoff_doubles_from_the_second_failure_up_to_a_ceiling() -> None:
    delays = [backoff_delay(failures, 0.5, 30.0) for failures in range(1, 10)]
    assert delays == [0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_a_command_missing_from_path_is_named_with_the_file_to_fix(tmp_path: Path) -> None:
    missing = ServerConfig(
        name="ghost", alias="ghost", transport="stdio", source="/root/.cursor/mcp.json",
        command="mcp-server-that-does-not-exist", env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    nowhere = dataclasses.replace(missing, name="nowhere", alias="nowhere", command=sys.executable, cwd="/no/such/dir")

    async def body() -> None:
        async with Hub([missing, nowhere], log_dir=tmp_path) as hub:
            with pytest.raises(ServerUnavailable) as caught:
                await hub.tools("ghost")
            # The PATH it searched comes from the server's env, whose values are hidden from everyone; the config
            # file is named to the bridge's user only.
            shown, host = str(caught.value), caught.value.host_message
            assert "command 'mcp-server-that-does-not-exist' not found on PATH (<hidden>)" in shown
            assert "give its full path in its config file" in shown and "/root/.cursor" not in shown
            assert "not found on PATH (<hidden>)" in host and "give its full path in /root/.cursor/mcp.json" in host
            with pytest.raises(ServerUnavailable, match="working directory '/no/such/dir' does not exist"):
                await hub.tools("nowhere")

    run(body())


def test_unknown_server_names_close_matches_and_every_configured_server(tmp_path: Path) -> None:
    hub = Hub([upstreams.everything(), upstreams.sequential_thinking()], log_dir=tmp_path)
    with pytest.raises(UnknownServer) as caught:
        hub.config("everythin")
    assert "did you mean 'everything'" in str(caught.value)
    assert "configured: everything, sequential-thinking" in str(caught.value)
    assert hub.config("sequential_thinking").name == "sequential-thinking"  # its alias finds it too
    assert hub.state("everything").status == "idle"


# -- notifications, concurrency, timeouts -----------------------------------------------------------------------


@pytest.mark.backend
def test_tools_list_changed_refreshes_the_cache_and_calls_back(tmp_path: Path) -> None:
    grower_py = tmp_path / "grower.py"
    grower_py.write_text(GROWER)
    grower = ServerConfig(
        name="grower", alias="grower", transport="stdio", source="test", command=sys.executable, args=(str(grower_py),)
    )
    changed: list[str] = []

    async def body() -> None:
        async with Hub([upstreams.everything(), grower], log_dir=tmp_path, on_tools_changed=changed.append) as hub:
            # server-everything registers its task tool once initialized, which sends notifications/tools/list_changed.
            await hub.tools("everything")
            await wait_for(lambda: "everything" in changed)
            assert "everything" in changed
            assert "simulate-research-query" in {tool.name for tool in await hub.tools("everything")}

            assert [tool.name for tool in await hub.tools("grower")] == ["grow"]
            assert hub.state("grower").tools == 1
            assert text(await hub.call_tool("grower", "grow", {"name": "sprout"})) == "added sprout"
            await wait_for(lambda: "grower" in changed)
            assert "grower" in changed
            assert sorted(tool.name for tool in await hub.tools("grower")) == ["grow", "sprout"]
            assert hub.state("grower").tools == 2
            assert text(await hub.call_tool("grower", "sprout", {})) == "sprout"

    run(body())


@pytest.mark.backend
def test_fifty_concurrent_calls_share_one_connection(tmp_path: Path) -> None:
    async def body() -> None:
        async with Hub([upstreams.everything()], log_dir=tmp_path) as hub:
            results = await asyncio.gather(
                *(hub.call_tool("everything", "echo", {"message": f"n{index}"}) for index in range(50))
            )
            assert [text(result) for result in results] == [f"Echo: n{index}" for index in range(50)]
            assert starts(tmp_path / "everything.log") == 1
            assert hub.state("everything").restarts == 0

    run(body())


@pytest.mark.backend
def test_a_slow_call_times_out_naming_the_setting_and_the_connection_stays_usable(tmp_path: Path) -> None:
    slow = {"duration": 20, "steps": 2}

    async def body() -> None:
        servers = [upstreams.everything(), upstreams.everything("configured", timeout=0.3)]
        async with Hub(servers, log_dir=tmp_path, call_timeout=0.3) as hub:
            with pytest.raises(UpstreamTimeout) as caught:
                await hub.call_tool("everything", "trigger-long-running-operation", slow)
            message = str(caught.value)
            assert "'everything'" in message and "'trigger-long-running-operation'" in message
            assert "0.3 s" in message and "tool_timeout (env MCP_BRIDGE_TOOL_TIMEOUT)" in message

            with pytest.raises(UpstreamTimeout, match="the timeout passed with the call"):
                await hub.call_tool("everything", "trigger-long-running-operation", slow, timeout=0.2)
            with pytest.raises(UpstreamTimeout, match=re.escape('"timeout" in its config file')) as configured:
                await hub.call_tool("configured", "trigger-long-running-operation", slow)
            assert '"timeout" in tests/upstreams.py' in configured.value.host_message

            pid = hub.state("everything").pid
            assert text(await hub.call_tool("everything", "echo", {"message": "still here"})) == "Echo: still here"
            assert hub.state("everything").pid == pid and hub.state("everything").restarts == 0

    run(body())


# -- what servers answer ----------------------------------------------------------------------------------------


@pytest.mark.backend
def test_error_results_are_returned_and_protocol_errors_raised(tmp_path: Path) -> None:
    async def body() -> None:
        async with Hub([upstreams.everything(), upstreams.time()], log_dir=tmp_path) as hub:
            # The TypeScript SDK answers an unknown tool with an isError result: that is a result, not an exception.
            result = await hub.call_tool("everything", "no-such-tool", {})
            assert result.is_error and "Tool no-such-tool not found" in text(result)
            # The Python SDK answers it with a JSON-RPC error, which keeps its code and message.
            with pytest.raises(UpstreamCallError) as caught:
                await hub.call_tool("time", "no_such_tool", {})
            assert caught.value.code == -32602 and "Unknown tool: no_such_tool" in caught.value.message
            assert "'time'" in str(caught.value)

    run(body())


@pytest.mark.backend
def test_resources_are_listed_and_read(tmp_path: Path) -> None:
    async def body() -> None:
        async with Hub([upstreams.everything(), upstreams.time()], log_dir=tmp_path) as hub:
            resources = await hub.list_resources("everything")
            uris = [str(resource.uri) for resource in resources]
            assert "demo://resource/static/document/features.md" in uris
            read = await hub.read_resource("everything", "demo://resource/static/document/features.md")
            assert read.contents and isinstance(read.contents[0], types.TextResourceContents)
            assert await hub.list_resources("time") == []  # it declares no resources capability

    run(body())


@pytest.mark.backend
def test_every_reference_server_answers_through_one_hub(tmp_path: Path) -> None:
    """Each reference server's tools answer through one hub. mcp-server-fetch does not raise for a URL it cannot
    get: it answers isError, and the hub passes that on. With no internet every URL is unreachable; a closed port on
    loopback stands in for that, reachable only with --allow-private-ips, since by default the server refuses
    private and loopback addresses."""
    page = b"<html><body><h1>Local page</h1><p>The hub fetched this.</p></body></html>"
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "hello.txt").write_text("hello\n")
    (tmp_path / "notes.txt").write_text("filesystem works\n")
    servers = [
        upstreams.everything(),
        upstreams.filesystem(tmp_path),
        upstreams.memory(tmp_path / "memory.jsonl"),
        upstreams.sequential_thinking(),
        upstreams.time(),
        upstreams.git(repo),
        upstreams.fetch(),
        upstreams.fetch("fetch-local", "--allow-private-ips"),
    ]

    async def body() -> None:
        async with Hub(servers, log_dir=tmp_path / "logs") as hub:
            listings = await asyncio.gather(*(hub.tools(name) for name in hub.names()))
            assert all(listings)
            read = await hub.call_tool("filesystem", "read_text_file", {"path": str(tmp_path / "notes.txt")})
            assert "filesystem works" in text(read)
            entity = {"name": "hub", "entityType": "component", "observations": ["connects upstreams"]}
            await hub.call_tool("memory", "create_entities", {"entities": [entity]})
            assert "connects upstreams" in text(await hub.call_tool("memory", "read_graph", {}))
            thought = {"thought": "one", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": False}
            assert not (await hub.call_tool("sequential-thinking", "sequentialthinking", thought)).is_error
            assert "UTC" in text(await hub.call_tool("time", "get_current_time", {"timezone": "UTC"}))
            assert "hello.txt" in text(await hub.call_tool("git", "git_status", {"repo_path": str(repo)}))
            refused = await hub.call_tool("fetch", "fetch", {"url": f"{base}/page"})
            assert refused.is_error and "--allow-private-ips" in text(refused)
            fetched = await hub.call_tool("fetch-local", "fetch", {"url": f"{base}/page"})
            assert not fetched.is_error and "The hub fetched this." in text(fetched)
            unreachable = await hub.call_tool("fetch-local", "fetch", {"url": "http://127.0.0.1:9/nothing"})
            assert unreachable.is_error and "connection issue" in text(unreachable)
            assert {hub.state(name).status for name in hub.names()} == {"ready"}
            pids = [hub.state(name).pid for name in hub.names()]
        assert wait_until_gone(lambda: still_running([pid for pid in pids if pid is not None])) == []
        assert (tmp_path / "memory.jsonl").exists()

    with web_page(page) as base:
        run(body())


@contextlib.contextmanager
def web_page(body: bytes) -> Iterator[str]:
    """A tiny local web server, so fetching is tested without depending on the internet."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = self.path == "/page"
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(body if found else b"not found")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.backend
def test_stdio_servers_get_only_the_default_environment_and_their_own_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_BRIDGE_HTTP_TOKEN", "secret-token-that-must-not-leak")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "another-secret")
    config = upstreams.everything(env={"CODEMODE_TEST_SETTING": "configured"})

    async def body() -> dict[str, str]:
        async with Hub([config], log_dir=tmp_path) as hub:
            environment: dict[str, str] = json.loads(text(await hub.call_tool("everything", "get-env", {})))
            return environment

    environment = run(body())
    assert environment["CODEMODE_TEST_SETTING"] == "configured"
    assert set(environment) <= {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "CODEMODE_TEST_SETTING"}
    assert "secret-token-that-must-not-leak" not in json.dumps(environment)


# -- the bridge itself ------------------------------------------------------------------------------------------


def bridge_behind_a_wrapper(tmp_path: Path, protocol: str = "legacy") -> ServerConfig:
    """This bridge started by a script whose name says nothing, which ``launches_bridge`` cannot see through."""
    script = tmp_path / "assistant-tools"
    script.write_text(f'#!/bin/sh\nexec {shlex.join(serve_command())} "$@"\n')  # the fork server's, as a test's
    script.chmod(0o755)
    settings = {
        "MCP_BRIDGE_STATE_DIR": str(tmp_path / "nested-state"),
        "MCP_BRIDGE_DISCOVER": "0",  # the copy must not read the developer's files
        "MCP_BRIDGE_WARM_POOL": "0",
    }
    return ServerConfig(
        name="assistant", alias="assistant", transport="stdio", source="test", command=str(script), env=settings,
        protocol=protocol,
    )  # fmt: skip


@pytest.mark.backend
@pytest.mark.parametrize("protocol", ["legacy", "auto", "2026-07-28"])
def test_a_server_that_says_it_is_the_bridge_is_closed_at_once_and_never_started_again(
    tmp_path: Path, protocol: str
) -> None:
    config = bridge_behind_a_wrapper(tmp_path, protocol)
    log = tmp_path / "logs" / "assistant.log"

    async def body() -> None:
        async with Hub([config, upstreams.time()], log_dir=tmp_path / "logs") as hub:
            with pytest.raises(SelfServerSkipped) as skipped:
                await hub.tools("assistant")
            # Code that calls it gets a ServerUnavailable that says what it is and how to use it anyway.
            assert isinstance(skipped.value, ServerUnavailable)
            message = str(skipped.value)
            assert "is unavailable: it is mcp-codemode itself (its serverInfo says mcp-codemode " in message
            assert "nest code mode inside code mode" in message and "MCP_BRIDGE_ALLOW_SELF_SERVER=1" in message
            # The copy it started is not left running, while the hub that started it still is.
            [pid] = [int(found) for found in re.findall(r"server pid (\d+)", log.read_text())]
            await wait_for(lambda: not live(pid))
            assert not live(pid)
            # Later calls fail at once with the same reason, and nothing starts it again.
            with pytest.raises(SelfServerSkipped):
                await hub.call_tool("assistant", "run_python", {"code": "1"})
            hub.warm(["assistant"])
            assert not hub.may_start("assistant")
            state = hub.state("assistant")
            assert (state.status, state.retry_in, starts(log)) == ("failed", None, 1)
            assert "skipped: it is mcp-codemode itself" in log.read_text()
            # A real server beside it is untouched.
            result = await hub.call_tool("time", "get_current_time", {"timezone": "UTC"})
            assert not result.is_error and "UTC" in text(result)

    run(body())


@pytest.mark.backend
def test_allow_self_keeps_a_server_that_says_it_is_the_bridge(tmp_path: Path) -> None:
    config = bridge_behind_a_wrapper(tmp_path)

    async def body() -> None:
        async with Hub([config], log_dir=tmp_path / "logs", allow_self=True) as hub:
            assert [tool.name for tool in await hub.tools("assistant")] == ["run_python"]
            assert hub.state("assistant").status == "ready"

    run(body())


# -- remote transports ------------------------------------------------------------------------------------------


@pytest.mark.backend
@pytest.mark.parametrize("serve", [upstreams.everything_http, upstreams.everything_sse], ids=["http", "sse"])
def test_remote_servers_over_streamable_http_and_sse(tmp_path: Path, serve: Any) -> None:
    async def body() -> None:
        server = serve(headers={"X-Codemode-Test": "yes"})
        config: ServerConfig = server.__enter__()
        try:
            async with Hub([config], log_dir=tmp_path) as hub:
                assert "echo" in {tool.name for tool in await hub.tools(config.name)}
                calls = [hub.call_tool(config.name, "echo", {"message": f"m{index}"}) for index in range(10)]
                assert [text(result) for result in await asyncio.gather(*calls)] == [
                    f"Echo: m{index}" for index in range(10)
                ]
                state = hub.state(config.name)
                assert (state.status, state.pid, state.log_file) == ("ready", None, None)

                server.__exit__(None, None, None)  # the server goes away under the live connection
                with pytest.raises(ServerUnavailable) as lost:  # the connection breaks under this call
                    await hub.call_tool(config.name, "echo", {"message": "anyone?"})
                # The URL is named to the bridge's user; sandboxed code reads "its URL".
                assert config.url in lost.value.host_message and "next call will try again" in str(lost.value)
                assert config.url not in str(lost.value) and "its URL" in str(lost.value)
                with pytest.raises(ServerUnavailable) as gone:  # and connecting again says why not
                    await hub.call_tool(config.name, "echo", {"message": "anyone now?"})
                assert config.url in gone.value.host_message and "connection refused" in str(gone.value)
        finally:
            server.__exit__(None, None, None)

    run(body())


# -- no orphans -------------------------------------------------------------------------------------------------

_DRIVER = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path

    from mcp_codemode.upstream.servers.hub import Hub
    from tests.support import upstreams

    async def main() -> None:
        work = Path(sys.argv[1])
        async with Hub([upstreams.everything(), upstreams.memory(work / "memory.jsonl")], log_dir=work) as hub:
            await asyncio.gather(*(hub.tools(name) for name in hub.names()))
            print(json.dumps([hub.state(name).pid for name in hub.names()]), flush=True)
            await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


@pytest.mark.backend
def test_servers_die_with_the_process_that_holds_the_hub_even_when_it_is_killed(tmp_path: Path) -> None:
    upstreams.everything()  # installed, or skip (fail under CI) saying so; the driver builds its own configs
    upstreams.memory(tmp_path / "memory.jsonl")
    driver_py = tmp_path / "driver.py"
    driver_py.write_text(_DRIVER)
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}
    driver = subprocess.Popen(
        [sys.executable, str(driver_py), str(tmp_path)], stdout=subprocess.PIPE, env=env, cwd=ROOT, text=True
    )
    try:
        assert driver.stdout is not None
        servers: list[int] = json.loads(driver.stdout.readline())
        assert len(servers) == 2 and all(live(pid) for pid in servers)
        launchers = [parent(pid) for pid in servers]  # the sh wrappers between the driver and each server
        assert all(parent(launcher) == driver.pid for launcher in launchers)
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        assert wait_until_gone(lambda: still_running(servers + launchers)) == []
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
