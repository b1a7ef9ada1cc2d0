"""One tool as the guest receives it to build its proxy: names, description and both schemas.

It lives apart from ``catalog`` (the docs a model reads) and ``stubs`` (the Python text of a tool) because both
need it: ``catalog`` renders stubs, and a stub's parameters come from the guest's ``ToolSpec`` built from this
very dictionary. Kept below both, it lets each import it at module level with no circle between them.
"""

from __future__ import annotations

from typing import Any

from mcp import types


def proxy_info(tool: types.Tool, alias: str) -> dict[str, Any]:
    """What the guest needs to build a typed proxy: names, description and both schemas."""
    info: dict[str, Any] = {"name": tool.name, "alias": alias, "description": tool.description or ""}
    info["inputSchema"] = tool.input_schema or {"type": "object"}
    if tool.output_schema:
        info["outputSchema"] = tool.output_schema
    return info
