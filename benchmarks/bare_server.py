"""A bare MCP SDK server with one no-op tool: the start-up baseline of ``benchmarks/startup.py`` (issue 38).

What the simplest Python MCP server costs to start: the SDK's high-level ``MCPServer``, one tool, stdio. Any
Python server pays at least this before its first answer, mostly for importing the SDK, so the bridge's start is
judged against it, run by the same interpreter in the same run.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("bare")


@server.tool()
def noop() -> str:
    """Do nothing."""
    return "ok"


if __name__ == "__main__":
    server.run()
