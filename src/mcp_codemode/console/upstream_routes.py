"""The console's Servers and Search pages: the upstream servers' states, restarting one, and searching their tools.

Apart from ``app.py`` (the guards and the per-principal pages) because these pages show what all principals share:
the upstream servers. Reading them is harmless to anyone signed in (a token holder's code could list and search the
same tools); restarting one breaks every principal's calls to it in flight, so it is an operator's act: the local
user (a stdio bridge, or an HTTP bridge without tokens, which listens on loopback only: one user owns the servers),
or a token named in ``MCP_BRIDGE_CONSOLE_OPERATORS``. Any other token holder sees the page read-only, and a restart
posted anyway is refused (403) before the server is even looked up.
"""

from __future__ import annotations

import logging
from typing import Protocol

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from ..console_settings import CONSOLE_PATH
from ..runs.bridge import Bridge
from ..runs.relay_params import MAX_QUERY
from . import pages
from .signins import SignIns, Visitor

log = logging.getLogger("mcp_codemode.console")


def operators(local: str, tokens: list[str], named: tuple[str, ...]) -> frozenset[str]:
    """Who may restart upstream servers: the local user when no token guards the bridge, else the tokens named
    (``named``) among those configured (``tokens``); a name that is no token's is said in the log, and ignored."""
    if not tokens:
        return frozenset({local})
    for name in named:
        if name not in tokens:
            log.warning("MCP_BRIDGE_CONSOLE_OPERATORS names %s, which is not one of the bridge's tokens: ignored", name)
    return frozenset(named) & frozenset(tokens)


class Console(Protocol):
    """What these pages use of the console (``app.Console``): its bridge, its sign-ins and sign-in gate, its guard
    of actions (sign-in and CSRF token) and its page layout."""

    bridge: Bridge
    signins: SignIns

    def gate(self, request: Request) -> Visitor | Response: ...

    async def acting(self, request: Request) -> tuple[Visitor | None, dict[str, str], Response | None]: ...

    def respond(
        self, title: str, body: str, visitor: Visitor, *, live: bool = False, status: int = 200, watch: str = ""
    ) -> Response: ...


async def operator_acting(console: Console, operators: frozenset[str], request: Request,
                          act: str) -> tuple[Visitor, dict[str, str]] | Response:  # fmt: skip
    """An operator's action on a server (``act`` it: restart, sign in) and its form, or the refusal: not signed
    in, no CSRF token, or a token that is no operator's (before the server is even looked up)."""
    visitor, form, refused = await console.acting(request)
    if refused is not None or visitor is None:
        return refused or PlainTextResponse("sign in first", 403)
    if visitor.principal not in operators:
        log.warning("console: refused to %s a server for a token that is no operator's", act)
        return PlainTextResponse("refused: the upstream servers are shared by every token of this bridge; only an "
                                 f"operator (MCP_BRIDGE_CONSOLE_OPERATORS) may {act} one", 403)  # fmt: skip
    return visitor, form


class UpstreamRoutes:
    """The pages and the one action; ``routes`` is what the console's router adds."""

    def __init__(self, console: Console, operators: frozenset[str]) -> None:
        self.console = console
        self.operators = operators
        base = CONSOLE_PATH
        self.routes = [
            Route(base + "/servers", self.servers),
            Route(base + "/servers/restart", self.restart, methods=["POST"]),
            Route(base + "/search", self.search),
        ]

    async def servers(self, request: Request) -> Response:
        visitor = self.console.gate(request)
        if isinstance(visitor, Response):
            return visitor
        upstreams = self.console.bridge.upstreams
        watch = f"&servers={upstreams.fingerprint()}"  # taken first: a change while the page is built is told
        shown = await upstreams.servers(visitor.principal)
        body = pages.servers_page(shown, visitor.principal in self.operators, CONSOLE_PATH, visitor.csrf)
        return self.console.respond("Servers", body, visitor, live=True, watch=watch)

    async def restart(self, request: Request) -> Response:
        acting = await operator_acting(self.console, self.operators, request, "restart")
        if isinstance(acting, Response):
            return acting
        visitor, form = acting
        name = form.get("name", "")
        if not await self.console.bridge.upstreams.restart(name):
            return self.console.respond("Not found", '<p class="empty">No such server runs here.</p>', visitor,
                                        status=404)  # fmt: skip
        log.info("console: an operator restarted upstream server %r", name)
        return RedirectResponse(CONSOLE_PATH + "/servers", 303)

    async def search(self, request: Request) -> Response:
        visitor = self.console.gate(request)
        if isinstance(visitor, Response):
            return visitor
        query = request.query_params.get("q", "").strip()[:MAX_QUERY]
        found = await self.console.bridge.upstreams.search(query, visitor.principal) if query else None
        return self.console.respond("Search", pages.search_page(query, found, CONSOLE_PATH), visitor)
