"""The roots the bridge gives its upstream servers: configured ones win, else the client's (pure logic)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import mcp_types as types
import pytest

from mcp_codemode.errors import SettingsError
from mcp_codemode.settings import Settings
from mcp_codemode.upstream.servers.roots import Roots


def root(uri: str) -> types.Root:
    return types.Root.model_validate({"uri": uri})


def test_configured_roots_win_and_the_clients_are_given_otherwise_with_the_servers_told_of_a_change() -> None:
    told: list[str] = []

    async def tell() -> None:
        told.append("changed")

    async def main() -> tuple[list[types.Root], list[types.Root], list[types.Root]]:
        follows = Roots()
        follows.on_change(tell)
        before = (await follows.on_list(None)).roots
        await follows.client_gave([root("file:///a")])
        await follows.client_gave([root("file:///a")])  # the same again: nobody is told
        given = (await follows.on_list(None)).roots
        configured = Roots([Path("/srv/project")])
        configured.on_change(tell)
        await configured.client_gave([root("file:///b")])  # configured roots win: no change to tell
        return before, given, (await configured.on_list(None)).roots

    before, given, configured = asyncio.run(main())
    assert before == [] and [str(r.uri) for r in given] == ["file:///a"]
    assert [(str(r.uri), r.name) for r in configured] == [("file:///srv/project", "project")]
    assert told == ["changed"]


def test_roots_are_read_from_the_environment_and_a_relative_one_is_refused_naming_it() -> None:
    assert Settings.load(env={"MCP_BRIDGE_ROOTS": "/srv/a:/srv/b"}).roots == (Path("/srv/a"), Path("/srv/b"))
    with pytest.raises(SettingsError, match=r"MCP_BRIDGE_ROOTS=.srv/a. is not valid: expected absolute directories"):
        Settings.load(env={"MCP_BRIDGE_ROOTS": "srv/a"})
