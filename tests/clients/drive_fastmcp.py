"""fastmcp's ``Client`` against the bridge, as its documentation connects it: stdio or a URL, defaults otherwise.

fastmcp 4 speaks the stateless protocol era (``mode="auto"``) unless told ``mode="legacy"``. ``call_tool`` raises
``ToolError`` carrying the first text block of an error result; that text is what a fastmcp user (or an agent
built on fastmcp) gets to see of a failure, so it is what this driver reports.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from fastmcp.exceptions import ToolError

from tests.clients.scenario import (
    FILES_META,
    IMAGE,
    SHARE,
    STATE_GET,
    STATE_SET,
    TIMEOUT_CELL,
    TIMEOUT_SECONDS,
    TRACEBACK,
    Target,
    report,
    target,
)


def texts(content: list[Any]) -> str:
    return "\n".join(block.text for block in content if getattr(block, "type", None) == "text")


async def drive(where: Target) -> dict[str, Any]:
    transport: StdioTransport | StreamableHttpTransport
    if where["transport"] == "stdio":
        transport = StdioTransport(where["command"], where["args"], env=where["env"])
    else:
        transport = StreamableHttpTransport(where["url"], headers=where.get("headers"))
    async with Client(transport, timeout=150) as client:
        # raise_on_error=False: a lost variable is an error result, and the test wants to read it, not a crash.
        await client.call_tool("run_python", {"code": STATE_SET}, raise_on_error=False)
        state = await client.call_tool("run_python", {"code": STATE_GET}, raise_on_error=False)
        try:
            await client.call_tool("run_python", {"code": TRACEBACK})
            failure = "no ToolError was raised"
        except ToolError as error:
            failure = str(error)
        image = await client.call_tool("run_python", {"code": IMAGE})
        arguments = {"code": TIMEOUT_CELL, "timeout": TIMEOUT_SECONDS}
        slow = await client.call_tool("run_python", arguments, raise_on_error=False)
        shared = await client.call_tool("run_python", {"code": SHARE}, meta=FILES_META)  # files in _meta, one out
        links = [str(block.uri) for block in shared.content if block.type == "resource_link"]
        read = [getattr(item, "text", None) for item in await client.read_resource(links[0])] if links else []
        protocol = client.protocol_version
    async with Client(transport, timeout=150) as fresh:  # its first request: a call naming a session, no listing
        first = await fresh.call_tool("run_python", {"code": "'first call'", "session": "fastmcp-first"},
                                      raise_on_error=False)  # fmt: skip
    return {
        "first_call": texts(first.content),
        "protocol": protocol,
        "shared": {"shown": texts(shared.content), "links": links, "read": read},
        "state": texts(state.content),
        "traceback": failure,
        "images": [getattr(block, "mime_type", None) for block in image.content if block.type == "image"],
        "timeout": texts(slow.content),
        "timeout_structured": slow.structured_content,
    }


if __name__ == "__main__":
    report(asyncio.run(drive(target())))
