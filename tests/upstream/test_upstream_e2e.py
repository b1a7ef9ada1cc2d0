"""Upstream MCP servers through the real ``mcp-codemode`` process: an agent's task, images, orphans, the CLI.

Everything is real: the ``mcp-codemode`` executable, the SDK client (or the MCP Inspector, or raw JSON-RPC lines
where the test must hold the process itself), the sandbox and the reference servers of tests/support/upstreams.py,
which the bridge finds in a ``--config`` file or in a client's config under a temporary HOME.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import hashlib
import json
import os
import re
import select
import signal
import subprocess
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import IO, Any

import mcp_types as types
import pytest
from mcp import Client

from mcp_codemode.cli.servers_report import ServerRow, ServersReport
from mcp_codemode.upstream.model import ServerConfig
from tests.support import upstreams
from tests.support.cells import private_state_dir
from tests.support.clients import (
    MODES,
    SERVE,
    STARTED_SERVERS,
    ClientCallbacks,
    HttpServer,
    assert_no_orphans,
    clean_environ,
    http_client_for,
    images_of,
    require_bubblewrap,
    stdio_client_for,
    text_of,
)
from tests.support.inspector import BRIDGE, inspector, result_of
from tests.support.patience import patient
from tests.support.processes import Proc, descendants

pytestmark = pytest.mark.backend

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
DEADLINE = patient(60.0)  # bound on waiting for a process to answer or end: a hang fails the test instead of the run
TODO_FILES = {
    "alpha.py": "def alpha():\n    # TODO: handle the empty case SECRET-ALPHA-41\n    return 1\n",
    "beta.md": "# Beta\n\nNothing left to do here. SECRET-BETA-42\n",
    "gamma.txt": "TODO write the gamma docs SECRET-GAMMA-43\n",
    "delta.cfg": "[delta]\nsetting = SECRET-DELTA-44\n",
}
SUMMARY = "2 of 4 files mention TODO: alpha.py, gamma.txt"


# --------------------------------------------------------------------------------------------------- helpers


def write_config(path: Path, *servers: ServerConfig) -> Path:
    """An ``{"mcpServers": …}`` file, the format every client shares, for stdio servers."""
    entries: dict[str, dict[str, Any]] = {}
    for server in servers:
        assert server.transport == "stdio", server
        entry: dict[str, Any] = {"command": server.command, "args": list(server.args)}
        if server.env:
            entry["env"] = dict(server.env)
        entries[server.name] = entry
    path.write_text(json.dumps({"mcpServers": entries}, indent=2))
    return path


def wait_until(condition: Any, seconds: float = DEADLINE) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class RawBridge:
    """``mcp-codemode serve`` over stdio, spoken to line by line, so the test holds the process and its pid."""

    def __init__(self, config: Path, state: Path, log: Path) -> None:
        self.log = log
        with log.open("ab") as errlog:
            self.process = subprocess.Popen(
                [*SERVE, "--config", str(config), "--no-discover"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errlog,
                env=clean_environ(MCP_BRIDGE_STATE_DIR=str(state)),
            )
        STARTED_SERVERS.add(self.process.pid)
        self._buffer = b""
        self._ids = iter(range(1, 1 << 30))

    @property
    def stdin(self) -> IO[bytes]:
        assert self.process.stdin is not None
        return self.process.stdin

    def send(self, message: dict[str, Any]) -> None:
        self.stdin.write(json.dumps(message).encode() + b"\n")
        self.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        number = next(self._ids)
        self.send({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
        return self._answer(number)

    def _answer(self, number: int) -> dict[str, Any]:
        assert self.process.stdout is not None
        stream = self.process.stdout.fileno()
        deadline = time.monotonic() + DEADLINE
        while True:
            while b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                message = json.loads(line)
                if message.get("id") == number:
                    answer: dict[str, Any] = message
                    return answer
            left = deadline - time.monotonic()
            assert left > 0, f"no answer to request {number}; the bridge's log:\n{self.log.read_text()}"
            ready, _, _ = select.select([stream], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(stream, 1 << 16)
                assert chunk, f"the bridge closed its output; its log:\n{self.log.read_text()}"
                self._buffer += chunk

    def initialize(self) -> None:
        answer = self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
        )
        assert "result" in answer, answer
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def run_python(self, code: str) -> dict[str, Any]:
        answer = self.request("tools/call", {"name": "run_python", "arguments": {"code": code}})
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        assert result.get("isError") is False, result
        return result

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=DEADLINE)
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError, ValueError):
                if stream is not None:
                    stream.close()


@contextlib.contextmanager
def raw_bridge(config: Path, state: Path, log: Path) -> Iterator[RawBridge]:
    bridge = RawBridge(config, state, log)
    try:
        yield bridge
    finally:
        bridge.close()


# --------------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module", autouse=True)
def _bubblewrap_usable() -> None:
    require_bubblewrap()


@pytest.fixture(scope="module")
def state() -> Iterator[Path]:
    with private_state_dir() as path:
        yield path


@dataclasses.dataclass
class Agent:
    """An SDK client on one ``mcp-codemode serve`` with filesystem, memory and everything configured."""

    client: Client
    files: Path
    memory_file: Path


@pytest.fixture(scope="module")
async def agent(tmp_path_factory: pytest.TempPathFactory, state: Path) -> AsyncIterator[Agent]:
    work = tmp_path_factory.mktemp("agent")
    files = work / "project"
    (files / "nested").mkdir(parents=True)
    for name, text in TODO_FILES.items():
        (files / name).write_text(text)
    (files / "nested" / "ignored.txt").write_text("TODO in a subfolder, which the task does not read\n")
    memory_file = work / "memory.jsonl"
    config = write_config(
        work / "servers.json", upstreams.filesystem(files), upstreams.memory(memory_file), upstreams.everything()
    )
    log = work / "serve.log"
    args = ("--config", str(config), "--no-discover")
    # The task's first search must see every server: let it wait for their first listings (bounded, not timed).
    wait = str(DEADLINE)
    async with stdio_client_for(
        log, "legacy", *args, deadline=None, MCP_BRIDGE_STATE_DIR=str(state), MCP_BRIDGE_SEARCH_WAIT=wait
    ) as client:
        yield Agent(client, files, memory_file)


# ------------------------------------------------------------------------------------ 12. an agent's task


AGENT_TASK = """
import asyncio

found = await runtime.search_tool_docs("read the contents of a text file", limit=5)
tools = [(hit["server"], hit["tool"]) for hit in found]
assert ("filesystem", "read_text_file") in tools, tools
listing = await mcp_filesystem.list_directory(path=ROOT)
names = sorted(line[len("[FILE] "):] for line in listing["content"].splitlines() if line.startswith("[FILE] "))
texts = await asyncio.gather(*(mcp_filesystem.read_text_file(path=f"{ROOT}/{name}") for name in names))
todo = [name for name, text in zip(names, texts) if "TODO" in text["content"]]
summary = f"{len(todo)} of {len(names)} files mention TODO: {', '.join(todo)}"
await mcp_memory.create_entities(entities=[{"name": "todo-report", "entityType": "report", "observations": []}])
await mcp_memory.add_observations(observations=[{"entityName": "todo-report", "contents": [summary]}])
print(summary)
"""


@pytest.mark.anyio
async def test_an_agent_task_in_one_call_shows_only_its_summary_and_stores_it_in_memory(agent: Agent) -> None:
    code = f"ROOT = {str(agent.files)!r}\n" + AGENT_TASK
    result = await agent.client.call_tool("run_python", {"code": code})
    everything_sent = json.dumps(result.model_dump(mode="json", by_alias=True))

    assert result.is_error is False, text_of(result)
    assert text_of(result) == SUMMARY
    for secret in ("SECRET-ALPHA-41", "SECRET-BETA-42", "SECRET-GAMMA-43", "SECRET-DELTA-44", "handle the empty"):
        assert secret not in everything_sent  # no file content reached the model
    stored = [json.loads(line) for line in agent.memory_file.read_text().splitlines() if line.strip()]
    assert {"type": "entity", "name": "todo-report", "entityType": "report", "observations": [SUMMARY]} in stored

    graph = await agent.client.call_tool(
        "run_python",
        {"code": "graph = await mcp_memory.read_graph()\n"
                 "print([e['observations'] for e in graph['entities'] if e['name'] == 'todo-report'])"},
    )  # fmt: skip
    assert text_of(graph) == repr([[SUMMARY]])


# ------------------------------------------------------------------------------------ 13. an upstream image


@pytest.mark.anyio
async def test_an_image_from_an_upstream_reaches_the_client_as_image_content_with_its_bytes_intact(
    agent: Agent,
) -> None:
    code = textwrap.dedent(
        """
        import base64, hashlib
        raw = await mcp_everything.get_tiny_image.raw()
        [sent] = [item for item in raw["content"] if item["type"] == "image"]
        upstream = base64.b64decode(sent["data"])
        [picture] = [part for part in await mcp_everything.get_tiny_image() if isinstance(part, runtime.Image)]
        runtime.show(picture)
        print(sent["mimeType"], len(upstream), hashlib.sha256(upstream).hexdigest())
        """
    )
    result = await agent.client.call_tool("run_python", {"code": code})

    assert result.is_error is False, text_of(result)
    mime, size, digest = text_of(result).split()
    (image,) = images_of(result)
    data = base64.b64decode(image.data)
    assert isinstance(image, types.ImageContent)
    assert (image.mime_type, mime) == ("image/png", "image/png")
    assert data.startswith(PNG_MAGIC)
    assert len(data) == int(size)
    assert hashlib.sha256(data).hexdigest() == digest


# ------------------------------------------------------------------------------------ 14. no orphans


@pytest.fixture
def two_upstreams(tmp_path: Path) -> Path:
    return write_config(tmp_path / "servers.json", upstreams.time(), upstreams.everything())


def start_both(bridge: RawBridge) -> list[Proc]:
    """Make one call that starts both upstreams; return every process below the bridge, the servers checked."""
    bridge.initialize()
    result = bridge.run_python(
        "print((await mcp_time.get_current_time(timezone='UTC'))['timezone'], await mcp_everything.echo(message='x'))"
    )
    assert result["content"][0]["text"] == "UTC Echo: x", result
    below = descendants(bridge.process.pid)
    assert all(proc.alive() for proc in below), below
    commands = " ".join(proc.command for proc in below)
    assert "mcp-server-time" in commands and "server-everything" in commands, below
    return below


def test_killing_the_bridge_takes_its_upstream_servers_with_it(
    two_upstreams: Path, state: Path, tmp_path: Path
) -> None:
    with raw_bridge(two_upstreams, state, tmp_path / "serve.log") as bridge:
        below = start_both(bridge)
        bridge.process.send_signal(signal.SIGKILL)
        bridge.process.wait(timeout=DEADLINE)
        assert wait_until(lambda: not any(proc.alive() for proc in below)), [p for p in below if p.alive()]
    assert_no_orphans()


def test_closing_the_bridge_s_stdin_ends_it_and_its_upstream_servers(
    two_upstreams: Path, state: Path, tmp_path: Path
) -> None:
    with raw_bridge(two_upstreams, state, tmp_path / "serve.log") as bridge:
        below = start_both(bridge)
        bridge.stdin.close()
        status = bridge.process.wait(timeout=DEADLINE)
        assert status == 0, (tmp_path / "serve.log").read_text()
        assert wait_until(lambda: not any(proc.alive() for proc in below)), [p for p in below if p.alive()]
    assert_no_orphans()


# ------------------------------------------------------------------------------------ 15. servers --json


@dataclasses.dataclass
class Clients:
    """A temporary HOME and project directory with the config files of three different clients."""

    home: Path
    project: Path
    marker: Path  # created by the time server's command line when it is started
    state: Path

    def servers(self, *args: str, **env: str) -> dict[str, Any]:
        done = subprocess.run(
            [str(BRIDGE), "servers", "--json", *args],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            cwd=self.project,
            env={"PATH": os.environ["PATH"], "HOME": str(self.home), "MCP_BRIDGE_STATE_DIR": str(self.state), **env},
            check=False,
        )
        assert done.returncode == 0, done.stderr
        report: dict[str, Any] = json.loads(done.stdout)
        return report

    @staticmethod
    def rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {row["name"]: row for row in report["servers"]}


@pytest.fixture
def clients(tmp_path: Path) -> Iterator[Clients]:
    with private_state_dir() as state:
        yield make_clients(tmp_path, state)


def make_clients(tmp_path: Path, state: Path) -> Clients:
    home, project = tmp_path / "home", tmp_path / "project"
    marker = tmp_path / "time-server-started"
    time_server = upstreams.time()
    (home / ".cursor").mkdir(parents=True)
    (home / ".cursor" / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "time": {
                        "command": "/bin/sh",
                        "args": ["-c", 'touch "$0" && exec "$@"', str(marker), time_server.command, *time_server.args],
                    },
                    "codemode": {"command": str(BRIDGE), "args": ["serve"]},
                }
            }
        )
    )
    (home / "MCPs").mkdir()
    (home / "MCPs" / "broken.json").write_text('{"mcpServers": {"half": ')
    (project / ".vscode").mkdir(parents=True)
    (project / ".vscode" / "mcp.json").write_text(
        json.dumps({"servers": {"switched-off": {"type": "stdio", "command": "/bin/false", "disabled": True}}})
    )
    return Clients(home, project, marker, state)


def test_servers_json_lists_what_each_client_config_holds_and_which_start(clients: Clients) -> None:
    report = clients.servers()
    rows = clients.rows(report)

    assert clients.marker.exists()
    assert rows["time"]["state"] == "ready", rows["time"]
    assert rows["time"]["tools"] == 2
    assert rows["time"]["source"] == str(clients.home / ".cursor" / "mcp.json")
    assert rows["switched-off"]["state"] == "skipped"
    assert rows["switched-off"]["detail"] == f"disabled in {clients.project / '.vscode' / 'mcp.json'}"
    assert rows["codemode"]["state"] == "skipped"
    assert "MCP_BRIDGE_ALLOW_SELF_SERVER=1" in rows["codemode"]["detail"]
    assert set(rows) == {"time", "switched-off", "codemode"}
    [problem] = report["problems"]
    assert problem.startswith(f"{clients.home / 'MCPs' / 'broken.json'}: is not valid JSON")


def test_servers_no_connect_starts_nothing_and_the_self_server_is_used_only_when_allowed(clients: Clients) -> None:
    quiet = clients.rows(clients.servers("--no-connect"))
    allowed = clients.rows(clients.servers("--no-connect", MCP_BRIDGE_ALLOW_SELF_SERVER="1"))

    assert not clients.marker.exists()
    assert not (clients.state / "logs" / "time.log").exists()  # the hub logs every start it makes
    assert (quiet["time"]["state"], quiet["time"]["tools"]) == ("not started", None)
    assert quiet["codemode"]["state"] == "skipped"
    assert quiet["switched-off"]["state"] == "skipped"
    assert allowed["codemode"]["state"] == "not started"
    assert allowed["codemode"]["target"] == f"{BRIDGE} serve"


# ------------------------------------------------------------------- the bridge in its own files, unrecognisable


def wrapped_bridge(where: Path) -> Path:
    """A script with another name that starts this bridge, as a user may write one: only serverInfo tells."""
    script = where / "team-assistant"
    script.write_text(f'#!/bin/sh\nexec {BRIDGE} "$@"\n')
    script.chmod(0o755)
    return script


def ask_the_bridge(
    home: Path, project: Path, state: Path, url: str, time_server: ServerConfig, where: Path
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str], dict[str, Any], str]:
    """``servers --json --refresh`` and ``run`` with a Cursor file that lists the bridge thrice and a time server,
    then ``servers`` with ``MCP_BRIDGE_ALLOW_SELF_SERVER=1``.

    The entries are the ones docs/clients.md used to give: Cursor's HTTP entry (the bridge's own URL) in a file
    the bridge reads, and the bridge started by a wrapper script.
    """
    cursor = home / ".cursor" / "mcp.json"
    cursor.parent.mkdir(parents=True)
    cursor.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "mcp-codemode": {"url": url},
                    "mcp-codemode-2026": {"url": url, "protocol": "2026-07-28"},  # serverInfo from server/discover
                    "assistant": {
                        "command": str(wrapped_bridge(where)),
                        "args": ["serve"],
                        "env": {"MCP_BRIDGE_WARM_POOL": "0"},
                    },
                    "time": {"command": time_server.command, "args": list(time_server.args)},
                }
            }
        )
    )
    environment = {"PATH": os.environ["PATH"], "HOME": str(home), "MCP_BRIDGE_STATE_DIR": str(state)}

    def bridge(*argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BRIDGE), *argv], capture_output=True, text=True, timeout=DEADLINE, cwd=project,
            env={**environment, **extra}, check=False,
        )  # fmt: skip

    listed = bridge("servers", "--json", "--refresh")
    code = textwrap.dedent(
        """
        from mcp import runtime
        print((await mcp_time.get_current_time(timezone="UTC"))["timezone"])
        for name in ("mcp-codemode", "mcp-codemode-2026", "assistant"):
            try:
                await runtime.call_tool(name, "run_python", {"code": "1"})
            except runtime.ServerUnavailable as exc:
                print(name, "->", exc)
        """
    )
    ran = bridge("run", "-c", code)
    allowed = bridge("servers", "--json", "--refresh", MCP_BRIDGE_ALLOW_SELF_SERVER="1")
    assert allowed.returncode == 0, allowed.stderr
    outer_log = (where / "http-bridge.log").read_text()
    return listed, ran, Clients.rows(json.loads(allowed.stdout)), outer_log


def test_the_bridge_listed_by_its_http_url_or_behind_a_wrapper_is_skipped_on_connecting(
    tmp_path: Path, state: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir(parents=True)
    time_server = upstreams.time()
    with private_state_dir() as outer_state:
        outer = HttpServer(
            tmp_path / "http-bridge.log",
            MCP_BRIDGE_DISCOVER="0",
            MCP_BRIDGE_WARM_POOL="0",
            MCP_BRIDGE_STATE_DIR=str(outer_state),
        )
        outer.start()
        try:
            listed, ran, allowed, outer_log = ask_the_bridge(home, project, state, outer.url, time_server, tmp_path)
        finally:
            outer.stop()
    assert listed.returncode == 0, listed.stderr
    rows = Clients.rows(json.loads(listed.stdout))
    assert (rows["time"]["state"], rows["time"]["tools"]) == ("ready", 2), rows["time"]
    for name in ("mcp-codemode", "mcp-codemode-2026", "assistant"):
        assert rows[name]["state"] == "skipped", rows[name]
        assert rows[name]["detail"].startswith("it is mcp-codemode itself (its serverInfo says mcp-codemode "), rows
        assert rows[name]["detail"].endswith("set MCP_BRIDGE_ALLOW_SELF_SERVER=1 to use it anyway"), rows[name]
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0] == "UTC", ran.stdout
    for name, line in zip(("mcp-codemode", "mcp-codemode-2026", "assistant"), lines[1:], strict=True):
        assert line.startswith(f"{name} -> upstream MCP server {name!r} is unavailable: it is mcp-codemode itself")
        assert "nest code mode inside code mode" in line, line
    # MCP_BRIDGE_ALLOW_SELF_SERVER=1 keeps them: each copy is proxied, with its one tool.
    for name in ("mcp-codemode", "mcp-codemode-2026", "assistant"):
        assert (allowed[name]["state"], allowed[name]["tools"]) == ("ready", 1), allowed[name]
    # Every MCP session the HTTP bridge had (one per run for the legacy entry) was closed again.
    opened, closed = outer_log.count("Created new transport"), outer_log.count("Terminating session")
    assert (opened, closed) == (3, 3), outer_log
    assert_no_orphans()


def test_a_report_whose_every_server_is_skipped_says_so_instead_of_that_none_is_configured() -> None:
    skipped = ServerRow("assistant", "assistant", "stdio", "/h/.cursor/mcp.json", "team-assistant serve", "skipped",
                        detail="it is mcp-codemode itself (its serverInfo says mcp-codemode 0.1.0), ...")  # fmt: skip
    text = ServersReport((skipped,), (), ("/h/.cursor/mcp.json",)).as_text().splitlines()
    assert text[:4] == [
        "No MCP server is used: every one found is skipped (see below).",
        "",
        "Skipped:",
        f"  assistant (/h/.cursor/mcp.json): {skipped.detail}",
    ]
    assert ServersReport((), (), ()).as_text().startswith("No MCP servers are configured.")


# ------------------------------------------------------------------------------------ 16. mcp-codemode run


def test_run_prints_what_the_code_got_from_an_upstream(tmp_path: Path, state: Path) -> None:
    config = write_config(tmp_path / "servers.json", upstreams.time())
    code = "print((await mcp_time.get_current_time(timezone='UTC'))['timezone'])"
    done = subprocess.run(
        [str(BRIDGE), "run", "--config", str(config), "--no-discover", "-c", code],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        env=clean_environ(MCP_BRIDGE_STATE_DIR=str(state)),
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "UTC\n"), done.stderr


# ------------------------------------------------------------------------------------ 17. the MCP Inspector


def test_the_inspector_calls_run_python_which_calls_the_time_server(tmp_path: Path, state: Path) -> None:
    config = write_config(tmp_path / "servers.json", upstreams.time())
    code = "now = await mcp_time.get_current_time(timezone='UTC')\nprint('zone', now['timezone'], now['day_of_week'])"
    target = ["--", str(BRIDGE), "serve", "--config", str(config), "--no-discover"]
    environment = ("-e", f"MCP_BRIDGE_STATE_DIR={state}", "-e", "MCP_BRIDGE_RUNTIME=bubblewrap")
    call = ("--method", "tools/call", "--tool-name", "run_python", "--tool-arg", f"code={code}")
    result = result_of(inspector(target, *environment, *call, storage=tmp_path))

    assert result["isError"] is False, result
    text = "\n".join(block["text"] for block in result["content"] if block["type"] == "text")
    words = text.split()
    assert words[:2] == ["zone", "UTC"], text
    assert words[2] in {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}, text


# ------------------------------------------------------------------------------------ 18. upstream progress


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_an_upstream_servers_progress_reaches_the_client_as_progress_of_run_python(
    tmp_path: Path, state: Path, mode: str
) -> None:
    """server-everything reports each step of a long operation; the client of ``run_python`` sees each one, on
    the same rising line as the heartbeat's "running for" messages."""
    config = write_config(tmp_path / "servers.json", upstreams.everything())
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    code = "await mcp_everything.trigger_long_running_operation(duration=2, steps=4)"
    async with stdio_client_for(
        tmp_path / "serve.log", mode, "--config", str(config), "--no-discover", deadline=None,
        MCP_BRIDGE_STATE_DIR=str(state),
    ) as client:  # fmt: skip
        # The longest timeout a call may ask for: the first call starts the Node server, which can take a while.
        call = {"code": code, "timeout": 120}
        done = await client.call_tool("run_python", call, progress_callback=on_progress)
        quiet = await client.call_tool("run_python", call)  # no progress asked: none is sent, and it works
    assert "Long running operation completed" in text_of(done), text_of(done)
    assert "Long running operation completed" in text_of(quiet), text_of(quiet)
    upstream = [message for _, _, message in seen if message and not message.startswith("running for ")]
    assert upstream == [f"everything/trigger-long-running-operation: {step}/4" for step in range(1, 5)], seen
    values = [progress for progress, _, _ in seen]
    assert values == sorted(values) and len(set(values)) == len(values), values  # MCP: progress must rise


# -------------------------------------------------------------------------------- 19. upstream log messages


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_an_upstream_servers_log_messages_during_a_call_reach_the_client_as_progress(
    tmp_path: Path, state: Path, mode: str
) -> None:
    """server-everything, once its simulated logging is on, logs a random-level message every 5 s; a call that
    runs 7 s is in flight for at least one, which its client sees as a progress message naming server and tool."""
    config = write_config(tmp_path / "servers.json", upstreams.everything())
    seen: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    code = (
        "await mcp_everything.toggle_simulated_logging()\n"
        "try:\n"
        "    await mcp_everything.trigger_long_running_operation(duration=7, steps=1)\n"
        "finally:\n"
        "    await mcp_everything.toggle_simulated_logging()\n"
        "'logged'"
    )
    async with stdio_client_for(
        tmp_path / "serve.log", mode, "--config", str(config), "--no-discover", deadline=None,
        MCP_BRIDGE_STATE_DIR=str(state),
    ) as client:  # fmt: skip
        done = await client.call_tool("run_python", {"code": code, "timeout": 120}, progress_callback=on_progress)
    assert "'logged'" in text_of(done), text_of(done)
    logged = [m for m in seen if re.fullmatch(r"everything/trigger-long-running-operation log \([a-z]+\): .+", m)]
    assert logged, seen
    assert all(re.search(r"[A-Za-z]+[- ]level[- ]message", m, re.IGNORECASE) for m in logged), logged


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
    transport: str, tmp_path: Path, config: str, env: dict[str, str], callbacks: ClientCallbacks
) -> AsyncIterator[Client]:
    """A handshake-era SDK client that answers what ``callbacks`` answer, on a bridge over stdio or HTTP."""
    args = ("--config", config, "--no-discover")
    if transport == "stdio":
        async with stdio_client_for(
            tmp_path / "serve.log", "legacy", *args, sent=None, deadline=None, callbacks=callbacks, **env
        ) as client:
            yield client
        return
    with HttpServer(tmp_path / "serve.log", *args, **env) as server:
        async with http_client_for(server.url, "legacy", deadline=None, callbacks=callbacks) as client:
            yield client


def plain_client(tmp_path: Path, mode: str, config: str, env: dict[str, str]) -> Any:
    """An SDK client over stdio that declares neither elicitation nor sampling."""
    args = ("--config", config, "--no-discover")
    return stdio_client_for(tmp_path / "serve.log", mode, *args, sent=None, deadline=None, callbacks=None, **env)


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_ask_tools_asks_the_user_through_elicitation_and_a_decline_raises_approval_denied(
    tmp_path: Path, state: Path, transport: str
) -> None:
    """The handshake-era client declares elicitation: it is asked before each echo, sees server, tool and
    arguments; accept lets the call go, decline raises ApprovalDenied, "remember" skips the question for the rest
    of the session. get-sum, which ask_tools does not name, is never asked about. Each outcome is audited."""
    config, env = _approval_setup(tmp_path, state)
    asked: list[str] = []
    answers = iter(
        [
            types.ElicitResult(action="accept", content={"remember": False}),
            types.ElicitResult(action="decline"),
            types.ElicitResult(action="accept", content={"remember": True}),
        ]
    )

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return next(answers)

    async with approval_client(transport, tmp_path, config, env, ClientCallbacks(elicitation=answer)) as client:
        first = await client.call_tool("run_python", {"code": APPROVAL_CODE, "timeout": 120, "session": "s"})
        again = await client.call_tool("run_python", {"code": APPROVAL_CODE, "timeout": 120, "session": "s"})
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
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    approvals = [(line["tool"], line["outcome"], line.get("approval")) for line in audit if line.get("tool") == "echo"]
    assert approvals == [
        ("echo", "ok", "approved"),
        ("echo", "refused", "declined"),
        ("echo", "ok", "approved for the session"),
        ("echo", "ok", "remembered"),
        ("echo", "ok", "remembered"),
        ("echo", "ok", "remembered"),
    ], approvals
    assert all("approval" not in line for line in audit if line.get("tool") == "get-sum")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_ask_tools_with_a_client_that_cannot_be_asked_is_refused_never_passed(
    tmp_path: Path, state: Path, mode: str
) -> None:
    """A client that declared no elicitation cannot approve: the call is refused with ApprovalDenied saying why
    and what to do, and never reaches the server; the call ask_tools does not name still runs."""
    config, env = _approval_setup(tmp_path, state)
    async with plain_client(tmp_path, mode, config, env) as client:
        result = await client.call_tool("run_python", {"code": APPROVAL_CODE, "timeout": 120})
    rows = json.loads(text_of(result).strip().splitlines()[0])
    for label in ("first", "second", "third"):
        kind, is_policy, rule, message = rows[label]
        assert (kind, is_policy, rule) == ("ApprovalDenied", True, "ask_tools"), rows
        assert "did not declare the MCP elicitation capability" in message, message
    assert "3" in str(rows["sum"]), rows
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [line.get("approval") for line in audit if line.get("tool") == "echo"] == ["unavailable"] * 3


@pytest.mark.anyio
async def test_ask_tools_over_the_2026_protocol_refuses_clearly_even_when_the_client_could_elicit(
    tmp_path: Path, state: Path
) -> None:
    """A 2026-07-28 call cannot ask its client mid-call (that era asks through input_required, which run_python
    does not use yet): the call is refused with ApprovalDenied naming the era and the fixes, never passed."""
    config, env = _approval_setup(tmp_path, state)
    asked: list[str] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"remember": True})

    async with stdio_client_for(
        tmp_path / "serve.log", "auto", "--config", config, "--no-discover", sent=None, deadline=None,
        callbacks=ClientCallbacks(elicitation=answer), **env,
    ) as client:  # fmt: skip
        result = await client.call_tool("run_python", {"code": APPROVAL_CODE, "timeout": 120})
    rows = json.loads(text_of(result).strip().splitlines()[0])
    kind, _, rule, message = rows["first"]
    assert (kind, rule) == ("ApprovalDenied", "ask_tools"), rows
    assert "2026-07-28 protocol" in message and "take the tool out of ask_tools" in message, message
    assert asked == [] and "3" in str(rows["sum"]), (asked, rows)


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
    try:
        rows[label] = ["ok", await call()]
    except runtime.MCPError as exc:
        rows[label] = [type(exc).__name__, exc.message]
print(json.dumps(rows, default=str))
"""


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_upstream_servers_sampling_and_elicitation_reach_the_client_and_the_answers_go_back(
    tmp_path: Path, state: Path, transport: str
) -> None:
    """server-everything asks for an LLM completion and for a form while its tool runs; the SDK client of
    run_python answers both, and the server's results carry those answers back to the code. Both audited."""
    config, env = _approval_setup(tmp_path, state)
    sampled: list[types.CreateMessageRequestParams] = []
    elicited: list[types.ElicitRequestParams] = []

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        sampled.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="teal, says the model"), model="test-model"
        )

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        elicited.append(params)
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content={"name": "Ada", "check": True})

    callbacks = ClientCallbacks(elicitation=answer, sampling=sample)
    async with approval_client(transport, tmp_path, config, env, callbacks) as client:
        result = await client.call_tool("run_python", {"code": PASS_ON_CODE, "timeout": 120})
    rows = json.loads(text_of(result).strip().splitlines()[0])
    assert rows["sampling"][0] == "ok" and "teal, says the model" in str(rows["sampling"][1]), rows
    assert rows["elicitation"][0] == "ok" and "Name: Ada" in str(rows["elicitation"][1]), rows
    assert len(sampled) == 1 and "name a colour" in str(sampled[0].messages[0].content), sampled
    assert sampled[0].max_tokens == 5
    assert rows["url"][0] == "ok", rows  # URL mode: the client declared it, so the server offered the tool
    assert len(elicited) == 2, elicited
    url, form = elicited
    assert isinstance(url, types.ElicitRequestURLParams) and url.url == "https://example.com/sign-in", url
    assert isinstance(form, types.ElicitRequestFormParams), form
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    exchanges = [(line["kind"], line["tool"], line["outcome"]) for line in audit if line.get("kind")]
    assert exchanges == [
        ("sampling", "trigger-sampling-request", "ok"),
        ("elicitation", "trigger-url-elicitation", "accept"),
        ("elicitation", "trigger-elicitation-request", "accept"),
    ], exchanges


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_client_without_sampling_or_elicitation_gets_the_upstream_refused_and_the_code_an_error(
    tmp_path: Path, state: Path, mode: str
) -> None:
    """The bridge declares sampling and elicitation to its servers for the clients that have them; when the
    run_python call's client has neither, the server's requests are refused with a message saying why, and the
    code gets the tool's failure as a catchable error. A policy's deny_sampling refuses the same way."""
    config, env = _approval_setup(tmp_path, state)
    async with plain_client(tmp_path, mode, config, env) as client:
        result = await client.call_tool("run_python", {"code": PASS_ON_CODE, "timeout": 120})
    rows = json.loads(text_of(result).strip().splitlines()[0])
    for label, capability in (("sampling", "sampling"), ("url", "elicitation"), ("elicitation", "elicitation")):
        kind, message = rows[label]
        assert kind in ("ToolError", "MCPError"), rows
        assert f"did not declare the MCP {capability} capability" in message, rows
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
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
