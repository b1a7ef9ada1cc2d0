"""Python agent frameworks nobody on this project wrote, installed from PyPI, against a real bridge.

What a new user gets when they connect fastmcp, pydantic-ai, openai-agents or langchain-mcp-adapters to
``mcp-codemode serve`` over stdio and over HTTP on loopback without a token (the stateless era, which the first
three speak by default; langchain's mcp 1.x speaks the handshake era): a variable that survives between two calls,
a traceback the agent can read (the ``ZeroDivisionError`` line *and* a frame line, not only the error's type), and
an image from ``runtime.show``; for fastmcp and langchain also a file sent in ``_meta`` and a shared file's link
read back, as docs/clients.md's table says each does it. The libraries run in venvs of their own
(``.cache/clients``, and ``.cache/clients-langchain`` for langchain's mcp 1.x; ``scripts/setup-clients.sh``)
through a driver script in ``tests/clients/``; the driver prints what the library handed back (for an agent
framework: what its model is shown) as JSON, judged here.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.backends import fail_unless
from tests.support.clients import (
    MODERN_VERSION,
    HttpServer,
    assert_no_orphans,
    clean_environ,
    require_bubblewrap,
    server_env,
)
from tests.support.patience import patient
from tests.support.zygote import serve_command

pytestmark = pytest.mark.backend

ROOT = Path(__file__).resolve().parents[2]
CLIENTS_PYTHON = ROOT / ".cache" / "clients" / "bin" / "python"
LANGCHAIN_PYTHON = ROOT / ".cache" / "clients-langchain" / "bin" / "python"  # mcp 1.x: scripts/setup-clients.sh
DRIVER_DEADLINE = patient(240)  # seconds for one driver's whole run (the openai-agents one waits out two 6 s calls)

STATE = "state kept: 42"
ERROR_LINE = "ZeroDivisionError: division by zero"
FRAME_LINE = re.compile(r"File .{0,20}<cell \d+>.{0,4}, line 2, in divide")
USERS_AWAIT = re.compile(r'File "<cell \d+>", line 3, in <module>\n +await asyncio.sleep\(60\)\nKeyboardInterrupt')


def require_clients(python: Path) -> Path:
    fail_unless(python.is_file(), f"the agent frameworks' venv is not at {python}; run scripts/setup-clients.sh")
    return python


@pytest.fixture(scope="module")
def http_bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """A loopback bridge without a token, as a local user starts it for an agent framework."""
    require_bubblewrap()
    log = tmp_path_factory.mktemp("frameworks-http") / "server.log"
    with HttpServer(log) as server:
        yield server
    assert_no_orphans()


def stdio_target() -> dict[str, Any]:
    """The bridge as a framework starts it over stdio: a command and its arguments (the suite's, which forks the
    bridge from the pre-imported fork server), settings in ``env``."""
    require_bubblewrap()
    command, *args = serve_command()
    return {"transport": "stdio", "command": command, "args": args, "env": server_env()}


def drive(driver: str, where: dict[str, Any], python: Path = CLIENTS_PYTHON) -> dict[str, Any]:
    """Run ``tests/clients/<driver>.py`` with the frameworks' Python; what it saw, or a failure with its output."""
    require_clients(python)
    done = subprocess.run(
        [str(python), "-m", f"tests.clients.{driver}", json.dumps(where)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=DRIVER_DEADLINE,
        env=clean_environ(),
        check=False,
    )
    assert done.returncode == 0, f"{driver} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


@pytest.fixture(params=["stdio", "http"])
def where(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "stdio":
        return stdio_target()
    server: HttpServer = request.getfixturevalue("http_bridge")
    return {"transport": "http", "url": server.url}


def assert_traceback(shown: str) -> None:
    assert ERROR_LINE in shown, shown
    assert FRAME_LINE.search(shown), f"no traceback frame line in what the client shows: {shown}"


def assert_only_the_users_await(shown: str) -> None:
    """A timeout while the cell awaited: the traceback is the user's ``await`` line, and not one frame of ours
    (the worker's, asyncio's event loop, the signal handler that turns an interrupt into KeyboardInterrupt)."""
    assert USERS_AWAIT.search(shown), shown
    for ours in ("worker_cells", "base_events", "selectors.py", "_on_sigint", "/opt/mcp-codemode"):
        assert ours not in shown, shown


def test_fastmcp_keeps_state_and_shows_the_traceback_and_the_image(where: dict[str, Any]) -> None:
    found = drive("drive_fastmcp", where)
    assert found["protocol"] == MODERN_VERSION  # fastmcp 4's default era: stateless
    assert found["first_call"] == "'first call'", found["first_call"]  # `session` on a first call, before any listing
    assert STATE in found["state"], found["state"]
    assert_traceback(found["traceback"])
    assert found["images"] == ["image/png"]
    assert_only_the_users_await(found["timeout"])
    assert "Timed out after 2 s" in found["timeout"], found["timeout"]
    assert_only_the_users_await(found["timeout_structured"]["error"]["traceback"])
    # Files in with call_tool(meta=...), and the shared file's link read back (docs/clients.md's table).
    assert "'sent in _meta'" in found["shared"]["shown"], found["shared"]
    assert found["shared"]["links"] == ["codemode://sessions/default/files/made.txt"], found["shared"]
    assert found["shared"]["read"] == ["made in the sandbox"], found["shared"]


def test_a_pydantic_ai_agent_sees_its_state_the_traceback_and_the_image(where: dict[str, Any]) -> None:
    found = drive("drive_pydantic_ai", where)
    assert found["tools"] == ["run_python"]
    assert STATE in found["state"], found["state"]
    assert_traceback(found["traceback"])
    assert found["images"] == ["image/png"]
    # With tool_error_behavior="failed" (docs/clients.md) three failures in a row all reach the model.
    assert len(found["failed_tracebacks"]) == 3
    for shown in found["failed_tracebacks"]:
        assert_traceback(shown)


def test_openai_agents_strict_calls_with_an_empty_session_run_and_its_timeout_is_needed(
    where: dict[str, Any],
) -> None:
    found = drive("drive_openai_agents", where)
    # Strict schemas make every property required, so the model sends session "" when it names none.
    assert (found["strict"], found["required"]) == (True, ["code", "reset", "servers", "session", "timeout"])
    assert STATE in found["state"], found["state"]
    assert_traceback(found["traceback"].replace("\\n", "\n"))
    assert "data:image/png;base64," in found["image"], found["image"]
    # The library's 5 s default cuts a 6 s call; client_session_timeout_seconds (as docs/clients.md says) does not.
    assert "'slept'" in found["slow_with_timeout"], found["slow_with_timeout"]
    assert found["default_timeout"] == 5
    if where["transport"] == "http":  # over stdio the default would also cut a slow machine's start (the driver says)
        assert "'slept'" not in found["slow_by_default"], found["slow_by_default"]


def test_langchain_keeps_state_only_in_an_explicit_session_and_shows_the_traceback_and_the_image(
    where: dict[str, Any],
) -> None:
    found = drive("drive_langchain", where, LANGCHAIN_PYTHON)
    # client.get_tools() opens an MCP session per call (over stdio a new bridge): docs/clients.md says to use
    # client.session(...) instead, which keeps one.
    assert STATE not in found["state_per_call"], found["state_per_call"]
    assert STATE in found["state"], found["state"]
    assert_traceback(found["traceback"].replace("\\n", "\n"))
    assert "'mime_type': 'image/png'" in found["image"], found["image"]
    assert_shared_file_reached_langchain(found)


def assert_shared_file_reached_langchain(found: dict[str, Any]) -> None:
    """Files sent with the session's own call_tool(meta=...) (its tools send no _meta) reach the code, and a shared
    file is a ``file`` block whose url the session reads back (docs/clients.md's table)."""
    assert "sent in _meta" in found["shared"], found["shared"]
    assert re.search(r"'type': 'file', .*'url': 'codemode://sessions/[\w.@-]+/files/made.txt'", found["shared"]), found
    assert found["shared_read"] == ["made in the sandbox"], found["shared_read"]


def test_langchain_per_call_tools_keep_state_over_http_with_a_session_header(http_bridge: HttpServer) -> None:
    # The Mcp-Codemode-Session header names the session of every request, so even tools that open an MCP session
    # per call (client.get_tools()) find their variables again, as docs/clients.md says.
    where = {"transport": "http", "url": http_bridge.url, "headers": {"Mcp-Codemode-Session": "langchain-per-call"}}
    found = drive("drive_langchain", where, LANGCHAIN_PYTHON)
    assert STATE in found["state_per_call"], found["state_per_call"]
    assert STATE in found["state"], found["state"]
    assert_shared_file_reached_langchain(found)  # its session is the header's: the link names it
