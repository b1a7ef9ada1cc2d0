"""The listing of the one tool, ``run_python``: a small constant written by hand, whatever the user configures.

Apart from tool.py (the arguments' check) because the listing needs nothing but the settings, so the stdio face
answers ``tools/list`` before the bridge behind it has loaded (handshake.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types

if TYPE_CHECKING:
    from ..settings import Settings

TOOL_NAME = "run_python"

# What a model needs to start, and no more: every character here is paid in every prompt of every conversation (the
# whole listing stays within 925 characters of JSON in both protocol eras, tests/face/test_server_stdio.py). The rest
# (no network, output cut in the middle, images, top-level await, resources) is in the capability summary, which this
# points to and which the codemode://capabilities resource serves too (runs/summary.py).
DESCRIPTION = (
    "Run Python in a sandbox. Variables, imports and functions persist from call to call in a session, until "
    "`reset`. The code can call the user's MCP servers: `await runtime.search_tool_docs('...')` finds tools, "
    "`await mcp_<server>.<tool>(...)` calls one. Servers, limits, help: `print(runtime.capability_summary())`."
)


def run_python_tool(settings: Settings) -> types.Tool:
    """The whole listing: small and constant whatever the user configures.

    Only what the description does not say gets a description of its own; ``title`` and the annotations' defaults
    (not read-only, open world) are left out, as a client reads their absence the same way.
    """
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "code": {"type": "string"},
            "servers": {"type": "array", "items": {"type": "string"}, "description": "start these early"},
            "timeout": {
                "type": "integer",
                "maximum": settings.max_timeout,
                "default": settings.timeout,
                "description": "seconds",
            },
            "session": {"type": "string"},
            "reset": {"type": "boolean"},
        },
        "required": ["code"],
        "additionalProperties": False,
    }
    if settings.shares_sessions:
        # SEP-2243, only where a load balancer in front of replicas may route on it: a 2026-07-28 client mirrors
        # the argument into an Mcp-Param-Session header, and the SDK refuses a call that carries the argument
        # without it, which every client that calls before it lists (fastmcp 4, openai-agents' cached listing)
        # would meet on a bridge that has nothing to route.
        schema["properties"]["session"]["x-mcp-header"] = "Session"
    return types.Tool(
        name=TOOL_NAME,
        description=DESCRIPTION,
        input_schema=schema,
        annotations=types.ToolAnnotations(destructive_hint=False),
    )
