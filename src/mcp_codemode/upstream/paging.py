"""Listing an upstream server's tools and resources across pages, bounded so a server that paginates forever
cannot hang a listing. Apart from the connection: the same loop for each kind of listing.
"""

from __future__ import annotations

import mcp_types as types
from mcp import Client

# A server that paginates forever cannot hang a listing.
PAGE_CAP = 100


async def list_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(PAGE_CAP):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


async def list_resources(client: Client) -> list[types.Resource]:
    resources: list[types.Resource] = []
    cursor: str | None = None
    for _ in range(PAGE_CAP):
        page = await client.list_resources(cursor=cursor)
        resources.extend(page.resources)
        cursor = page.next_cursor
        if cursor is None:
            break
    return resources
