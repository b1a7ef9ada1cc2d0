"""Listing an upstream server's tools, resources, resource templates and prompts across pages, bounded so a server
that paginates forever cannot hang a listing. Apart from the connection: one loop for every kind of listing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import mcp_types as types
from mcp import Client

# A server that paginates forever cannot hang a listing.
PAGE_CAP = 100

Page = TypeVar("Page")
Item = TypeVar("Item")


async def _every_page(
    fetch: Callable[[str | None], Awaitable[Page]],
    items: Callable[[Page], Sequence[Item]],
    cursor_of: Callable[[Page], str | None],
) -> list[Item]:
    collected: list[Item] = []
    cursor: str | None = None
    for _ in range(PAGE_CAP):
        page = await fetch(cursor)
        collected.extend(items(page))
        cursor = cursor_of(page)
        if cursor is None:
            break
    return collected


async def list_tools(client: Client) -> list[types.Tool]:
    return await _every_page(
        lambda cursor: client.list_tools(cursor=cursor), lambda page: page.tools, lambda page: page.next_cursor
    )


async def list_resources(client: Client) -> list[types.Resource]:
    return await _every_page(
        lambda cursor: client.list_resources(cursor=cursor), lambda page: page.resources, lambda page: page.next_cursor
    )


async def list_resource_templates(client: Client) -> list[types.ResourceTemplate]:
    return await _every_page(
        lambda cursor: client.list_resource_templates(cursor=cursor),
        lambda page: page.resource_templates,
        lambda page: page.next_cursor,
    )


async def list_prompts(client: Client) -> list[types.Prompt]:
    return await _every_page(
        lambda cursor: client.list_prompts(cursor=cursor), lambda page: page.prompts, lambda page: page.next_cursor
    )
