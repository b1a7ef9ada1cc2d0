"""openai-agents' MCP server classes against the bridge, with the strict tool schemas OpenAI models are given.

``Agent(mcp_config={"convert_schemas_to_strict": True})`` turns ``run_python``'s schema into a strict one, where
every property is required: a model must then send ``servers``, ``timeout``, ``session`` and ``reset`` on every
call, and sends ``""`` for a session it does not mean to name. The driver calls the agent's own tool objects
(``FunctionTool.on_invoke_tool``, what the runner calls with the model's arguments) with such arguments and
reports what the library hands back for the model.

It also measures the library's client timeout: ``client_session_timeout_seconds`` defaults to 5 s, so a call that
runs longer than that fails in the client with the library's defaults, and succeeds with the value
docs/clients.md recommends.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agents import Agent, FunctionTool, RunContextWrapper
from agents.mcp import MCPServer, MCPServerStdio, MCPServerStreamableHttp, MCPServerStreamableHttpParams
from agents.tool_context import ToolContext

from tests.clients.scenario import IMAGE, STATE_GET, STATE_SET, TRACEBACK, Target, report, target

SLOW = "import time\ntime.sleep(6)\n'slept'"  # longer than the 5 s default client timeout (a sleep is never shorter)


def server_for(where: Target, timeout: float | None) -> MCPServerStdio | MCPServerStreamableHttp:
    """The bridge as openai-agents connects it; ``timeout`` None keeps the library's defaults."""
    extra: dict[str, Any] = {} if timeout is None else {"client_session_timeout_seconds": timeout}
    if where["transport"] == "stdio":
        return MCPServerStdio(
            {"command": where["command"], "args": where["args"], "env": where["env"]}, name="codemode", **extra
        )
    params: MCPServerStreamableHttpParams = {"url": where["url"], "headers": where.get("headers", {})}
    if timeout is not None:
        params["sse_read_timeout"] = timeout
    return MCPServerStreamableHttp(params, name="codemode", **extra)


async def strict_tool(server: MCPServer) -> FunctionTool:
    agent = Agent(name="coder", mcp_servers=[server], mcp_config={"convert_schemas_to_strict": True})
    (tool,) = await agent.get_mcp_tools(RunContextWrapper(context=None))
    assert isinstance(tool, FunctionTool)
    return tool


async def invoke(tool: FunctionTool, code: str) -> str:
    """Call the tool as the runner does for a strict model: every field present, an unnamed session empty."""
    arguments = json.dumps({"code": code, "servers": [], "timeout": 30, "session": "", "reset": False})
    context = ToolContext(context=None, tool_name=tool.name, tool_call_id="call-1", tool_arguments=arguments)
    return repr(await tool.on_invoke_tool(context, arguments))


async def drive(where: Target) -> dict[str, Any]:
    found: dict[str, Any] = {}
    async with server_for(where, 150) as server:
        tool = await strict_tool(server)
        found["strict"] = tool.strict_json_schema
        found["required"] = sorted(tool.params_json_schema.get("required", []))
        await invoke(tool, STATE_SET)
        found["state"] = await invoke(tool, STATE_GET)
        found["traceback"] = await invoke(tool, TRACEBACK)
        found["image"] = await invoke(tool, IMAGE)
        found["slow_with_timeout"] = await invoke(tool, SLOW)
    # The default's 5 s also bounds initialize, and over stdio initialize waits for the interpreter to start and import
    # the SDK, which a loaded machine has taken 32 s to do: the default is shown cutting a call over HTTP, where the
    # bridge is already running, and only read over stdio.
    if where["transport"] == "stdio":
        found["default_timeout"] = server_for(where, None).client_session_timeout_seconds
        found["slow_by_default"] = None
        return found
    async with server_for(where, None) as server:
        found["default_timeout"] = server.client_session_timeout_seconds
        found["slow_by_default"] = await invoke(await strict_tool(server), SLOW)
    return found


if __name__ == "__main__":
    report(asyncio.run(drive(target())))
