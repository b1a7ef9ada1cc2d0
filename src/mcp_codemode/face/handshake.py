"""The face's MCP server before the bridge is behind it: what needs only the settings is answered at once, the rest
waits until the bridge has started.

A stdio client starts the bridge as its subprocess and waits for the answer to its first request (``initialize``, or
``server/discover`` in the 2026-07-28 era), and often lists the tools right after. Loading the sandbox, upstream and
relay code and starting the bridge took longer than importing the SDK itself, so ``serve`` answers first and starts
the bridge meanwhile (cli/serve.py, issue 38). The server is the same object from the first answer on:
``build_server`` (server.py) gives the methods that need the bridge their handlers, so the name, instructions and
capabilities the client learns at the handshake are those it is then served by. This module imports only the SDK,
so neither the settings nor anything of the bridge is loaded before the first answer; the listing, which needs the
settings, waits for them (``Listing``) when they are read after the first answer (cli/plain_serve.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from pydantic import BaseModel

from .. import __version__
from .listing import run_python_tool

if TYPE_CHECKING:
    from ..settings import Settings

NAME = "mcp-codemode"
INSTRUCTIONS = "Use run_python to compute, transform data and call tools in code; state persists per session."

# The methods whose handlers need the bridge (build_server's), with the type of their parameters. Registered here
# too, with a stand-in, because the SDK derives the capabilities it announces from the methods registered.
BRIDGE_REQUESTS: dict[str, type[BaseModel]] = {
    "tools/call": types.CallToolRequestParams,
    "resources/list": types.PaginatedRequestParams,
    "resources/read": types.ReadResourceRequestParams,
    "resources/templates/list": types.PaginatedRequestParams,
}
# What is answered without the bridge: by the SDK from the server object, or by the handlers below.
AT_ONCE = frozenset(
    {"initialize", "notifications/initialized", "notifications/cancelled", "ping", "server/discover", "tools/list",
     "prompts/list", "logging/setLevel"}
)  # fmt: skip

Handler = Callable[[ServerRequestContext[Any, Any], Any], Awaitable[Any]]
CallNext = Callable[[ServerRequestContext[Any, Any]], Awaitable[Any]]


class Listing:
    """The ``tools/list`` answer, made once the settings are known: at once, or after the first answer.

    A listing asked for before then sets ``wanted``, as ``Hold`` does: in the 2026-07-28 era it may be the first
    request, and the settings are read only once a first answer has gone out or something is waiting for them.
    """

    def __init__(self, wanted: anyio.Event | None = None) -> None:
        self._result: types.ListToolsResult | None = None
        self._settled = anyio.Event()
        self._wanted = wanted

    def settle(self, settings: Settings) -> None:
        self._result = types.ListToolsResult(tools=[run_python_tool(settings)])
        self._settled.set()

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """The schema of tool ``name`` once settled (over HTTP, where the SDK asks, it is settled from the start)."""
        tools = self._result.tools if self._result is not None else []
        return next((tool.input_schema for tool in tools if tool.name == name), None)

    async def result(self) -> types.ListToolsResult:
        if self._wanted is not None and not self._settled.is_set():
            self._wanted.set()
        await self._settled.wait()
        assert self._result is not None
        return self._result


def face_server(settings: Settings | Listing) -> Server[Any]:
    """The server with the face's identity, its listing (from ``settings``, or once the ``Listing`` is settled), and
    stand-ins for what ``build_server`` adds."""
    listing = settings if isinstance(settings, Listing) else Listing()
    if not isinstance(settings, Listing):
        listing.settle(settings)
    # Without this lookup the SDK answers a stateless-era tools/call's schema question (its Mcp-Param-* header check)
    # by running the whole tools/list request through its pipeline first: about 7 % of the bridge's CPU under load
    # (benchmarks/load.py, issue 35). The listing never changes once settled, so the schema is known.
    server: Server[Any] = Server(
        NAME, version=__version__, instructions=INSTRUCTIONS, get_tool_input_schema=listing.input_schema
    )
    # The SDK's OpenTelemetry middleware costs a few per cent of every request even with no exporter, and writes to
    # the process's global tracer provider, which the bridge leaves alone: the bridge's own server span replaces it
    # when tracing is on (request_spans.py, added by build_server), and nothing does when it is off.
    server.middleware = [m for m in server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"]

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams) -> Any:
        return await listing.result()

    async def list_prompts(ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams) -> Any:
        # Empty rather than "method not found": generic clients (and the conformance suite) list the prompts of every
        # server, and an error there reads as a broken server.
        return types.ListPromptsResult(prompts=[])

    async def set_logging_level(ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams) -> Any:
        # Handshake-era clients send this unasked; we send no log notifications, so there is nothing to change.
        # Registered rather than given to the constructor, which warns that logging is deprecated in 2026-07-28.
        return types.EmptyResult()

    server.add_request_handler("tools/list", types.PaginatedRequestParams, list_tools)
    server.add_request_handler("prompts/list", types.PaginatedRequestParams, list_prompts)
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_logging_level)
    for method, params in BRIDGE_REQUESTS.items():
        server.add_request_handler(method, params, _stand_in(method))
    return server


def _stand_in(method: str) -> Handler:
    async def handler(ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
        raise RuntimeError(f"{method} was served before build_server gave it its handler")

    return handler


class Hold:
    """Middleware that holds every request but those answered ``AT_ONCE`` until ``release``; the first one held sets
    ``wanted`` (the bridge is needed now).

    A held request's chain was composed when it arrived, so the middleware ``build_server`` adds meanwhile (the seal of
    input_required rounds, the request spans) is run around it here, once released, in its order.
    """

    def __init__(self, server: Server[Any], wanted: anyio.Event) -> None:
        self._server = server
        self._before = list(server.middleware)  # what a held request's chain already holds, with this one
        self.wanted = wanted
        self._released = anyio.Event()

    def release(self) -> None:
        self._released.set()

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        if ctx.method in AT_ONCE or self._released.is_set():
            return await call_next(ctx)
        self.wanted.set()
        await self._released.wait()
        added = [m for m in self._server.middleware if m is not self and all(m is not b for b in self._before)]
        for middleware in reversed(added):
            call_next = _around(middleware, call_next)
        return await call_next(ctx)


def _around(middleware: Any, call_next: CallNext) -> CallNext:
    async def call(ctx: ServerRequestContext[Any, Any]) -> Any:
        return await middleware(ctx, call_next)

    return call
