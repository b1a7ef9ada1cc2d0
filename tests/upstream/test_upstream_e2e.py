"""Upstream MCP servers through the real ``mcp-codemode`` process: an agent's task, images, orphans, the CLI.

Everything is real: the ``mcp-codemode`` executable, the SDK client (or the MCP Inspector, or raw JSON-RPC lines
where the test must hold the process itself), the sandbox and the reference servers of tests/support/upstreams.py,
which the bridge finds in a ``--config`` file or in a client's config under a temporary HOME.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import json
import os
import select
import shlex
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
from tests.support.cli_here import cli_here
from tests.support.clients import (
    STARTED_SERVERS,
    HttpServer,
    assert_no_orphans,
    clean_environ,
    images_of,
    require_bubblewrap,
    stdio_client_for,
    text_of,
)
from tests.support.inspector import BRIDGE, inspector, result_of
from tests.support.patience import patient
from tests.support.processes import Proc, descendants
from tests.support.upstreams import write_config
from tests.support.zygote import REAL_SERVE, launch_command

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


def wait_until(condition: Any, seconds: float = DEADLINE) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class RawBridge:
    """``mcp-codemode serve`` over stdio, spoken to line by line, so the test holds the process and its pid (exec'd
    for real: its tests kill it and close its stdin, and look at the processes below it)."""

    def __init__(self, config: Path, state: Path, log: Path) -> None:
        self.log = log
        with log.open("ab") as errlog:
            self.process = subprocess.Popen(
                [*REAL_SERVE, "--config", str(config), "--no-discover"],
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
    # The task's first search must see every server: let it wait for their first listings (bounded, not timed; at
    # most the setting's 600 s, which patient() exceeds on a loaded machine: the bridge then stopped at its start).
    wait = f"{min(DEADLINE, 600):g}"
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
        environment = {"PATH": os.environ["PATH"], "HOME": str(self.home), "MCP_BRIDGE_STATE_DIR": str(self.state)}
        done = cli_here({**environment, **env}, "servers", "--json", *args, cwd=self.project)  # as a process would
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
    script.write_text(f'#!/bin/sh\nexec {shlex.join(launch_command())} "$@"\n')  # the fork server's, as a test's
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
        """The command in this process (tests/support/cli_here.py): the copies of the bridge it meets run as the
        processes they are."""
        return cli_here({**environment, **extra}, *argv, cwd=project)

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


# 18. upstream progress: test_client_requests_e2e.py (with the log messages that travel the same line).
