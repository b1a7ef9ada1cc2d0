"""langchain-mcp-adapters' ``MultiServerMCPClient`` against the bridge, its tools called as a LangChain agent would.

``client.get_tools()`` gives tools that open a new MCP session for every call (over stdio: a new bridge process),
so a variable does not survive between two of them; tools loaded from ``client.session(name)`` share that one
session. The driver reports both, and what a tool call's result (``ToolMessage``, what the model is shown) holds.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.resources import load_mcp_resources
from langchain_mcp_adapters.tools import load_mcp_tools

from tests.clients.scenario import (
    FILES_META,
    IMAGE,
    SHARE,
    STATE_GET,
    STATE_SET,
    TRACEBACK,
    Target,
    report,
    target,
)


async def shown(tool: BaseTool, code: str) -> str:
    """The tool's answer as the model gets it: the content of the ToolMessage of one tool call."""
    call = {"name": tool.name, "args": {"code": code}, "id": "call-1", "type": "tool_call"}
    message = await tool.ainvoke(call)
    assert isinstance(message, ToolMessage)
    return repr(message.content)


async def drive(where: Target) -> dict[str, Any]:
    connection: Any
    if where["transport"] == "stdio":
        connection = {"transport": "stdio", "command": where["command"], "args": where["args"], "env": where["env"]}
    else:
        connection = {"transport": "streamable_http", "url": where["url"], "headers": where.get("headers", {})}
    client = MultiServerMCPClient({"codemode": connection})
    found: dict[str, Any] = {}
    (fresh,) = await client.get_tools()
    await shown(fresh, STATE_SET)
    found["state_per_call"] = await shown(fresh, STATE_GET)
    async with client.session("codemode") as session:
        (tool,) = await load_mcp_tools(session)
        await shown(tool, STATE_SET)
        found["state"] = await shown(tool, STATE_GET)
        found["traceback"] = await shown(tool, TRACEBACK)
        found["image"] = await shown(tool, IMAGE)
        # Its tools send no _meta: files go in with a call on the session itself, then the tool shares one back.
        await session.call_tool("run_python", {"code": "None"}, meta=FILES_META)
        call = {"name": tool.name, "args": {"code": SHARE}, "id": "call-2", "type": "tool_call"}
        blocks = (await tool.ainvoke(call)).content
        found["shared"] = repr(blocks)
        links = [block["url"] for block in blocks if isinstance(block, dict) and block.get("type") == "file"]
        found["shared_read"] = [blob.as_string() for blob in await load_mcp_resources(session, uris=links)]
    return found


if __name__ == "__main__":
    report(asyncio.run(drive(target())))
