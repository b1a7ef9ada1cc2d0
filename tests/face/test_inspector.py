"""A real Node MCP client against the real bridge: the MCP Inspector's CLI lists and calls ``run_python``.

Over stdio (the Inspector starts ``mcp-codemode serve`` itself) and over Streamable HTTP (a bridge started here on
127.0.0.1), each in both protocol eras: ``legacy`` negotiates 2025-11-25 through ``initialize``, ``modern`` speaks
the stateless 2026-07-28 era. The Inspector (2.x) and the conformance suite need Node >= 22, which
``scripts/setup-node.sh`` installs into tests/node/node_modules next to them; the helpers
(tests/support/inspector.py) are shared with tests/face/test_conformance.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.inspector import BRIDGE, INSPECTOR, inspector, node_command, result_of, running_bridge

pytestmark = pytest.mark.backend

ERAS = ("legacy", "modern")
TRANSPORTS = ("stdio", "http")
RUN_PYTHON_ARGUMENTS = {"code", "servers", "timeout", "session", "reset"}
EXIT_TOOL_IS_ERROR = 5  # the Inspector CLI's exit status when the tool answered isError: true


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
