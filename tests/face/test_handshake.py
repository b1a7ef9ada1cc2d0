"""The face's server before the bridge is behind it (face/handshake.py), driven in process by the SDK's real client.

Pure logic, no sandbox: the handshake and the listing are answered with no bridge at all; a request that needs the
bridge waits, asks for it, and is then served by the handler given afterwards, inside the middleware added
afterwards; and the server announces, from its first answer, exactly what the fully built server serves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server.context import ServerRequestContext

from mcp_codemode.face.handshake import BRIDGE_REQUESTS, Hold, Listing, face_server
from mcp_codemode.face.server import build_server
from mcp_codemode.runs.bridge import Bridge
from mcp_codemode.settings import Settings
from tests.support.clients import MODES

pytestmark = pytest.mark.anyio


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def held_server() -> tuple[Any, Hold, anyio.Event]:
    server = face_server(Settings())
    wanted = anyio.Event()
    hold = Hold(server, wanted)
    server.middleware.append(hold)
    return server, hold, wanted


async def test_the_handshake_and_the_listing_need_no_bridge(mode: str) -> None:
    server, _, wanted = held_server()
    async with Client(server, mode=mode) as client:
        listing = await client.list_tools()
        prompts = await client.list_prompts()
    assert [tool.name for tool in listing.tools] == ["run_python"]
    assert prompts.prompts == []
    assert not wanted.is_set()


async def test_the_tool_schema_is_looked_up_without_a_listing_per_call() -> None:
    """A stateless-era tools/call asks the server for the tool's schema (its Mcp-Param-* check); without the lookup
    the SDK runs a whole tools/list through its pipeline for every call, a cost the load benchmark found."""
    server = face_server(Settings())
    async with Client(server, mode="auto") as client:
        listed = (await client.list_tools()).tools[0]
    assert server.get_tool_input_schema is not None
    assert server.get_tool_input_schema("run_python") == listed.input_schema
    assert server.get_tool_input_schema("another_tool") is None


async def test_before_the_settings_are_read_the_handshake_is_answered_and_the_listing_waits_for_them(mode: str) -> None:
    """A plain stdio ``serve`` reads its settings after the first answer (cli/plain_serve.py): the listing, which
    shows the timeout, is answered once they are there, with what they say (the client's handshake was answered
    before, as ``Client`` opens with it)."""
    wanted = anyio.Event()
    listing = Listing(wanted)
    server = face_server(listing)
    listed: list[types.ListToolsResult] = []
    async with Client(server, mode=mode) as client, anyio.create_task_group() as group:

        async def list_tools() -> None:
            listed.append(await client.list_tools())

        group.start_soon(list_tools)
        await anyio.sleep(0.05)
        assert listed == []
        assert wanted.is_set()  # what reads the settings is told they are needed (a first request may be the listing)
        listing.settle(Settings(timeout=7))
    (result,) = listed
    assert result.tools[0].input_schema["properties"]["timeout"]["default"] == 7


async def test_a_request_that_needs_the_bridge_waits_for_it_then_gets_the_handler_and_middleware_given_after(
    mode: str,
) -> None:
    server, hold, wanted = held_server()
    around: list[str] = []

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        return types.CallToolResult(content=[types.TextContent(text=f"served {params.arguments}")])

    async def after(ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        around.append(ctx.method)
        return await call_next(ctx)

    results: list[types.CallToolResult] = []
    async with Client(server, mode=mode) as client, anyio.create_task_group() as group:

        async def call() -> None:
            results.append(await client.call_tool("run_python", {"code": "1"}))

        group.start_soon(call)
        with anyio.fail_after(30):
            await wanted.wait()
        assert results == []
        server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
        server.middleware.append(after)
        hold.release()
    (result,) = results
    assert [block.text for block in result.content if isinstance(block, types.TextContent)] == ["served {'code': '1'}"]
    assert around[:1] == ["tools/call"], around  # the held call ran inside it (the client may list afterwards)


async def test_the_first_answer_announces_what_the_built_server_serves(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path)
    early = face_server(settings)
    built = build_server(Bridge(settings), "stdio")
    assert early.create_initialization_options() == built.create_initialization_options()
    for version in MODES.values():
        assert early.get_capabilities(protocol_version=version) == built.get_capabilities(protocol_version=version)
    assert early.create_initialization_options().capabilities.tools is not None
    assert early.create_initialization_options().capabilities.resources is not None
    for method in BRIDGE_REQUESTS:  # build_server gave every method that needs the bridge its handler
        entry = built.get_request_handler(method)
        assert entry is not None and "_stand_in" not in entry.handler.__qualname__, method
