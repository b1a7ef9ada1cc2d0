"""mcp-codemode: one MCP tool, ``run_python``, in front of every MCP server, with code run in a hardened sandbox."""

__version__ = "0.1.0"
