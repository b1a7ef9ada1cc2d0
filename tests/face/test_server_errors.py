"""A bridge that cannot sandbox still serves: every call and the capabilities say why and how to fix it."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from tests.support.clients import clean_environ
from tests.support.zygote import serve_command

pytestmark = pytest.mark.backend


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_without_a_usable_sandbox_every_call_explains_the_problem_and_the_fix(mode: str) -> None:
    env = clean_environ(MCP_BRIDGE_SANDBOX_PYTHON="/nonexistent/python3")
    command, *args = serve_command()
    params = StdioServerParameters(command=command, args=[*args, "--backend", "bubblewrap"], env=env)

    async def body() -> None:
        with anyio.fail_after(60):
            async with Client(params, mode=mode) as client:
                for _ in range(2):  # the second call must not hang or crash either
                    result = await client.call_tool("run_python", {"code": "1"})
                    assert result.is_error
                    text = result.content[0].text if isinstance(result.content[0], types.TextContent) else ""
                    assert "MCP_BRIDGE_SANDBOX_PYTHON=/nonexistent/python3" in text
                    assert "Fix:" in text
                resource = await client.read_resource("codemode://capabilities")
                summary = resource.contents[0]
                assert isinstance(summary, types.TextResourceContents)
                assert "cannot run code right now" in summary.text.splitlines()[0]

    anyio.run(body)
