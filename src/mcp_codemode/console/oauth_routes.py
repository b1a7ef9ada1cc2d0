"""Signing in to a remote upstream server (OAuth 2.1) from the console's Servers page, in the person's own browser.

The flow and the token store are ``mcp-codemode login``'s (``upstream/servers/oauth_flow.py``, through
``Bridge.upstreams``); only the two ends differ. *Sign in* (a POST, with the page's CSRF token and Origin, by an
operator: the tokens serve every principal, as a restart hits every principal) starts the flow, which discovers the
authorization server and registers the bridge for a redirect to this console's own ``/servers/signed-in``; the
answer is a page that moves the browser on to the authorization address (a meta refresh: the page's
``form-action 'self'`` forbids a form's redirect to another site). The provider sends the browser back with a code
and the ``state`` the flow chose; the callback hands the code to the waiting flow, which exchanges it (with the PKCE
verifier only the SDK holds) and stores the tokens, and the server restarts with them.

Why the callback is trusted, and only then: it needs a ``state`` the flow is waiting for (256 random bits, once,
for ``TTL``: an unknown, replayed or expired one is refused), *and* the cookie set on the browser that started the
sign-in (``BROWSER``, SameSite=Lax so that it comes back with the provider's redirect, where the console's Strict
cookie does not), *and*, when the browser is signed in to the console, the same principal. So a link crafted by
someone else cannot finish a sign-in in another person's browser (their account's tokens would serve the bridge),
nor can another principal's browser finish or start one. No token, code or verifier is rendered or logged: the
code goes from the query string to the flow, and a failure is told by its cause, with the server's secrets hidden.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
import logging
import secrets
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from mcp.shared.auth import AuthorizationCodeResult
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from ..console_settings import CONSOLE_PATH
from ..errors import CodemodeError
from . import pages
from .signins import COOKIE, Visitor
from .upstream_routes import Console, operator_acting

log = logging.getLogger("mcp_codemode.console")
TTL = 600.0  # seconds a sign-in may wait for its callback, as a sign-in link may
START_WAIT = 60.0  # seconds for discovery and registration before the browser is sent on
FINISH_WAIT = 60.0  # seconds for the token exchange and the first listing after the callback
MAX_PENDING = 16
BROWSER = "mcp_codemode_oauth"  # the cookie that ties a callback to the browser that started its sign-in
CALLBACK = "/servers/signed-in"


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).digest()


@dataclasses.dataclass
class Pending:
    """A sign-in waiting for its callback: for which server, started by whom, from which browser (the digest of
    its ``BROWSER`` cookie), until when; ``code`` is what the flow awaits, ``flow`` the flow itself."""

    server: str
    principal: str
    browser: bytes
    expires: float
    code: asyncio.Future[AuthorizationCodeResult]
    flow: asyncio.Task[None]


class PendingSignIns:
    """The sign-ins waiting for their callbacks, by the digest of their ``state``; ``clock`` is ``time.monotonic``
    but in tests of expiry."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._waiting: dict[bytes, Pending] = {}

    def add(self, state: str, pending: Pending) -> None:
        """Wait for ``state``; the same server's earlier sign-in, expired ones and the oldest beyond the bound end."""
        now = self.clock()
        for key, old in list(self._waiting.items()):
            if old.expires <= now or old.server == pending.server or len(self._waiting) >= MAX_PENDING:
                self._end(key)
        self._waiting[_digest(state)] = pending

    def take(self, state: str, browser: str | None, principal: str | None) -> Pending | str:
        """The sign-in ``state`` belongs to, once, if this browser started it (and ``principal``, when signed in,
        is who started it); else why not. A callback from the wrong browser leaves the sign-in waiting: a forged
        link must not end the person's own."""
        key = _digest(state)
        pending = self._waiting.get(key)
        if pending is None:
            return "this sign-in is unknown or was finished already"
        if pending.expires <= self.clock():
            self._end(key)
            return "this sign-in expired"
        same_browser = browser is not None and hmac.compare_digest(_digest(browser), pending.browser)
        if not same_browser or (principal is not None and principal != pending.principal):
            return "this sign-in was started by someone else, or in another browser"
        del self._waiting[key]
        return pending

    def _end(self, key: bytes) -> None:
        pending = self._waiting.pop(key)
        pending.flow.cancel()


class SignInRoutes:
    """The Servers page's *Sign in* and its callback; ``routes`` is what the console's router adds."""

    def __init__(self, console: Console, operators: frozenset[str]) -> None:
        self.console = console
        self.operators = operators
        self.pending = PendingSignIns()
        self.routes = [
            Route(CONSOLE_PATH + "/servers/sign-in", self.start, methods=["POST"]),
            Route(CONSOLE_PATH + CALLBACK, self.callback, methods=["GET"]),
        ]

    async def start(self, request: Request) -> Response:
        acting = await operator_acting(self.console, self.operators, request, "sign in")
        if isinstance(acting, Response):
            return acting
        visitor, form = acting
        upstreams = self.console.bridge.upstreams
        config = upstreams.remote(form.get("name", ""))
        if config is None:
            return self.console.respond("Not found", '<p class="empty">No such remote server runs here.</p>', visitor,
                                        status=404)  # fmt: skip
        # The address this browser reaches the console by: its Origin, checked in app.py (one of the operator's
        # allowed origins is not the console's own: then the Host, as the request came).
        host, origin = request.headers.get("host", ""), request.headers["origin"]
        if origin not in (f"http://{host}", f"https://{host}"):
            origin = f"{request.url.scheme}://{host}"
        redirect_uri = origin + CONSOLE_PATH + CALLBACK
        loop = asyncio.get_running_loop()
        address: asyncio.Future[str] = loop.create_future()
        code: asyncio.Future[AuthorizationCodeResult] = loop.create_future()

        async def show(url: str) -> None:
            if not address.done():
                address.set_result(url)

        async def callback() -> AuthorizationCodeResult:
            return await asyncio.wait_for(asyncio.shield(code), TTL)

        flow = loop.create_task(upstreams.sign_in(config, redirect_uri, show, callback), name="console sign-in")
        flow.add_done_callback(_retrieved)
        waited: set[asyncio.Future[Any]] = {address, flow}
        await asyncio.wait(waited, timeout=START_WAIT, return_when=asyncio.FIRST_COMPLETED)
        if not address.done():
            why = _failure(flow) if flow.done() else "its authorization server did not answer in time"
            flow.cancel()
            return self._told(visitor, config.name, f"Signing in to {config.name} failed: {why}", 502)
        state = urllib.parse.parse_qs(urllib.parse.urlsplit(address.result()).query).get("state", [""])[0]
        browser = secrets.token_urlsafe(32)
        self.pending.add(state, Pending(config.name, visitor.principal, _digest(browser),
                                        self.pending.clock() + TTL, code, flow))  # fmt: skip
        log.info("console: an operator started signing in to upstream server %r", config.name)
        text = f"Signing in to {config.name}: on to its authorization server, which sends you back here."
        page = pages.moving_on(f"Sign in to {config.name}", text, address.result(), "Continue", CONSOLE_PATH)
        response = HTMLResponse(page)
        secure = "; Secure" if origin.startswith("https:") else ""
        response.headers.append("set-cookie", f"{BROWSER}={browser}; Path={CONSOLE_PATH}{CALLBACK}; HttpOnly; "
                                f"SameSite=Lax; Max-Age={int(TTL)}{secure}")  # fmt: skip
        return response

    async def callback(self, request: Request) -> Response:
        query = request.query_params
        visitor = self.console.signins.visitor(request.cookies.get(COOKIE))  # not sent after a provider's page
        taken = self.pending.take(query.get("state", ""), request.cookies.get(BROWSER),
                                  visitor.principal if visitor is not None else None)  # fmt: skip
        if isinstance(taken, str):
            log.warning("console: refused a sign-in callback: %s", taken)
            status = 403 if "someone else" in taken else 400
            return self._page("Sign-in refused", f"Refused: {taken}. Start it again from the Servers page.", status)
        if "error" in query:
            reason = query.get("error_description") or query["error"]
            taken.code.set_exception(CodemodeError(f"the authorization server refused the sign-in: {reason:.300}"))
        elif "code" in query:
            taken.code.set_result(AuthorizationCodeResult(code=query["code"], state=query.get("state"),
                                                          iss=query.get("iss")))  # fmt: skip
        else:
            taken.code.set_exception(CodemodeError("the authorization server sent the browser back without a code"))
        try:
            await asyncio.wait_for(asyncio.shield(taken.flow), FINISH_WAIT)
        except (CodemodeError, TimeoutError) as exc:
            why = str(exc) if isinstance(exc, CodemodeError) else "it did not finish in time"
            response = self._page("Sign-in failed", f"Signing in to {taken.server} failed: {why}", 502)
        else:
            log.info("console: signed in to upstream server %r; it restarts with its new tokens", taken.server)
            text = f"Signed in to {taken.server}: it restarts with its new tokens, and lists its tools."
            response = HTMLResponse(pages.moving_on("Signed in", text, CONSOLE_PATH + "/servers", "Back to Servers",
                                                    CONSOLE_PATH))  # fmt: skip
        response.headers.append("set-cookie", f"{BROWSER}=; Path={CONSOLE_PATH}{CALLBACK}; HttpOnly; SameSite=Lax; "
                                "Max-Age=0")  # fmt: skip
        return response

    def _page(self, title: str, text: str, status: int) -> HTMLResponse:
        """A page without the navigation: the callback may come without the console's cookie."""
        body = f'<p class="problem">{pages.esc(text)}</p><p><a href="{CONSOLE_PATH}/servers">Servers</a></p>'
        return HTMLResponse(pages.layout(title, body, base=CONSOLE_PATH), status)

    def _told(self, visitor: Visitor, server: str, text: str, status: int) -> Response:
        body = f'<p class="problem">{pages.esc(text)}</p>'
        return self.console.respond(f"Sign in to {server}", body, visitor, status=status)


def _failure(flow: asyncio.Task[None]) -> str:
    error = None if flow.cancelled() else flow.exception()
    return str(error) if isinstance(error, CodemodeError) else "the sign-in could not start"


def _retrieved(flow: asyncio.Task[None]) -> None:
    """A flow nobody awaits any more (its callback never came) ends quietly: its error is its pending's expiry."""
    if not flow.cancelled() and flow.exception() is not None:
        log.debug("console: a sign-in ended without its callback")
