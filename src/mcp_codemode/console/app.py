"""The console's ASGI app: its guards, then its pages and actions (Starlette's router), with the same security
headers on every answer.

Order of the guards, outermost first: the Host check (no DNS rebinding, ``guards.py``), the Origin check (an action
must come from the console's own pages), then the sign-in (a cookie, ``signins.py``), then, for an action, its CSRF
token. A page shows only what belongs to the principal signed in: every question to the call board names it, and a
call or session of another principal answers exactly as one that does not exist (404), so nothing tells them apart.
Actions are POSTs; every GET only reads.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from importlib import resources
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from ..console_settings import CONSOLE_PATH
from ..errors import CodemodeError
from ..face.principals import principal_of
from ..face.render import render_result
from ..runs.bridge import Bridge
from ..runs.call_board import CallBoard
from ..session_keys import BadSessionKey, SessionKey
from ..settings import Settings
from . import pages
from .audit_reader import Search, audited_calls, search
from .guards import host_ok, origin_ok
from .oauth_routes import SignInRoutes
from .signins import COOKIE, SignIns, Visitor, cleared_cookie, cookie, csrf_ok
from .upstream_routes import UpstreamRoutes, operators

log = logging.getLogger("mcp_codemode.console")
LOCAL = "local"  # the principal of a stdio bridge's calls, and of an HTTP face's without tokens
STREAM_LIFE = 15.0  # seconds one event stream stays open (the browser reconnects): a stop never waits longer
#: No inline script or style, nothing from elsewhere: a value that escaped escaping still could not run.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")  # fmt: skip
_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # no-referrer would make the browser send "Origin: null"
    (b"cache-control", b"no-store"),
    (b"x-frame-options", b"DENY"),
]
_ASSETS = {"console.css": "text/css; charset=utf-8", "console.js": "text/javascript; charset=utf-8"}


def _asset(name: str) -> bytes:
    return (resources.files(__package__) / "static" / name).read_bytes()


class Console:
    """The console of one bridge; an ASGI app that answers every path under ``CONSOLE_PATH``.

    ``loopback``: the console is reached on a loopback address only (a stdio bridge's port, or an HTTP face bound
    on loopback), so the Host must be a loopback name. ``doctor``: doctor's report as text (run in a thread).
    """

    def __init__(self, bridge: Bridge, settings: Settings, *, loopback: bool, doctor: Callable[[], str]) -> None:
        self.bridge = bridge
        self.settings = settings
        self.loopback = loopback
        self.doctor = doctor
        self.signins = SignIns()
        self.tokens = [(token.encode(), principal_of(token)) for token in settings.http_tokens]
        # What `mcp-codemode console` proves it is this machine's user with (console/launch.py keeps it in a 0600
        # file); without tokens only: with them, each person signs in with their own token.
        self.launcher_key = "" if self.tokens else secrets.token_urlsafe(32)
        self.assets = {name: _asset(name) for name in _ASSETS}
        principals = [principal for _, principal in self.tokens]
        may_act = operators(LOCAL, principals, settings.console_operators)
        upstream, oauth = UpstreamRoutes(self, may_act), SignInRoutes(self, may_act)
        base = CONSOLE_PATH
        self.router = Starlette(routes=[
            Route(base, self.home), Route(base + "/", self.home),
            Route(base + "/sign-in", self.sign_in_form, methods=["GET"]),
            Route(base + "/sign-in", self.sign_in_token, methods=["POST"]),
            Route(base + "/sign-out", self.sign_out, methods=["POST"]),
            Route(base + "/link", self.link, methods=["POST"]),
            Route(base + "/static/{name}", self.static),
            Route(base + "/sessions", self.sessions),
            Route(base + "/sessions/{action:str}", self.session_action, methods=["POST"]),
            Route(base + "/calls", self.calls),
            Route(base + "/calls/{call}", self.call),
            Route(base + "/calls/{call}/cancel", self.cancel, methods=["POST"]),
            Route(base + "/approvals", self.approvals),
            Route(base + "/approvals/answer", self.answer_approval, methods=["POST"]),
            Route(base + "/tools", self.tools),
            Route(base + "/tools/delete", self.delete_tool, methods=["POST"]),
            Route(base + "/doctor", self.doctor_page),
            Route(base + "/events", self.events), *upstream.routes, *oauth.routes,
        ])  # fmt: skip

    @property
    def board(self) -> CallBoard:
        board = self.bridge.board
        assert board is not None, "the console needs a bridge built with MCP_BRIDGE_CONSOLE on"
        return board

    def sign_in_link(self, origin: str) -> str:
        """A one-time link that signs the local user in (the log's, and what `mcp-codemode console` opens)."""
        return f"{origin}{CONSOLE_PATH}/sign-in?code={self.signins.mint(LOCAL)}"

    # ------------------------------------------------------------------------------------------------ the guards
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_HEADERS]
            await send(message)

        host = headers.get("host", "")
        if not host_ok(host, self.loopback):
            await PlainTextResponse("this console answers on 127.0.0.1 or localhost only", 421)(scope, receive, secured)
            return
        action = scope.get("method") not in ("GET", "HEAD")
        origin = headers.get("origin")
        if scope.get("path") == CONSOLE_PATH + "/link":  # the launcher's: never a browser's
            allowed = origin is None
        else:
            allowed = origin_ok(origin, host, self.settings.allowed_origins, required=action)
        if not allowed:
            log.warning("console: refused a %s from origin %s", scope.get("method"), origin)
            await PlainTextResponse("refused: this request did not come from the console's own pages", 403)(
                scope, receive, secured
            )
            return
        await self.router(scope, receive, secured)

    def _visitor(self, request: Request) -> Visitor | None:
        return self.signins.visitor(request.cookies.get(COOKIE))

    async def acting(self, request: Request) -> tuple[Visitor | None, dict[str, str], Response | None]:
        """An action's visitor and form, or the refusal: not signed in, or a form without this visitor's token."""
        visitor = self._visitor(request)
        form = {key: value for key, value in (await request.form()).items() if isinstance(value, str)}
        if visitor is None:
            return None, form, PlainTextResponse("sign in first", 403)
        if not csrf_ok(visitor, form.get("csrf")):
            return (
                None,
                form,
                PlainTextResponse("refused: the form's CSRF token is missing or wrong; reload the page", 403),
            )
        return visitor, form, None

    def respond(self, title: str, body: str, visitor: Visitor, *, live: bool = False, status: int = 200,
                watch: str = "") -> Response:  # fmt: skip
        version = self.board.version if live else None  # what the page shows: the stream tells of any later change
        text = pages.layout(title, body, live=version, signed_in=_shown(visitor.principal), csrf=visitor.csrf,
                            base=CONSOLE_PATH, watch=watch)  # fmt: skip
        return HTMLResponse(text, status)

    def _not_found(self, visitor: Visitor) -> Response:
        empty = '<p class="empty">No such call or session (of yours).</p>'
        return self.respond("Not found", empty, visitor, status=404)

    # ---------------------------------------------------------------------------------------------- signing in
    async def home(self, request: Request) -> Response:
        return RedirectResponse(CONSOLE_PATH + "/sessions", 303)

    async def sign_in_form(self, request: Request) -> Response:
        code = request.query_params.get("code")
        if code is not None:
            principal = self.signins.redeem(code)
            if principal is None:
                body = pages.sign_in_page(CONSOLE_PATH, bool(self.tokens), "That sign-in link was used already or "
                                          "has expired: links work once, for ten minutes.")  # fmt: skip
                return HTMLResponse(pages.layout("Sign in", body, base=CONSOLE_PATH), 403)
            return self._signed_in(request, principal)
        body = pages.sign_in_page(CONSOLE_PATH, bool(self.tokens))
        return HTMLResponse(pages.layout("Sign in", body, base=CONSOLE_PATH))

    async def sign_in_token(self, request: Request) -> Response:
        form = await request.form()
        offered = form.get("token")
        found = None
        if isinstance(offered, str) and offered:
            for token, principal in self.tokens:  # compared against all: no timing hint about which one
                if hmac.compare_digest(offered.strip().encode(), token):
                    found = principal
        if found is None:
            body = pages.sign_in_page(CONSOLE_PATH, bool(self.tokens), "That is not a token of this bridge.")
            return HTMLResponse(pages.layout("Sign in", body, base=CONSOLE_PATH), 403)
        return self._signed_in(request, found)

    def _signed_in(self, request: Request, principal: str) -> Response:
        self.signins.close(request.cookies.get(COOKIE))
        value = self.signins.open(principal)
        response = RedirectResponse(CONSOLE_PATH + "/sessions", 303)
        response.headers.append("set-cookie", cookie(value, CONSOLE_PATH, request.url.scheme == "https"))
        log.info("console: %s signed in", _shown(principal))
        return response

    async def sign_out(self, request: Request) -> Response:
        _, _, refused = await self.acting(request)
        if refused is not None:
            return refused
        self.signins.close(request.cookies.get(COOKIE))
        response = RedirectResponse(CONSOLE_PATH + "/sign-in", 303)
        response.headers.append("set-cookie", cleared_cookie(CONSOLE_PATH))
        return response

    async def link(self, request: Request) -> Response:
        """A fresh sign-in link for `mcp-codemode console`, which proves itself with the launcher's key."""
        scheme, _, offered = request.headers.get("authorization", "").partition(" ")
        key = self.launcher_key
        if not key or scheme.lower() != "bearer" or not hmac.compare_digest(offered.strip().encode(), key.encode()):
            return PlainTextResponse("refused", 403)
        return JSONResponse({"url": self.sign_in_link(f"{request.url.scheme}://{request.headers['host']}")})

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in self.assets:
            return PlainTextResponse("not found", 404)
        return Response(self.assets[name], media_type=_ASSETS[name])

    # --------------------------------------------------------------------------------------------------- pages
    def gate(self, request: Request) -> Visitor | Response:
        visitor = self._visitor(request)
        if visitor is None:
            return RedirectResponse(CONSOLE_PATH + "/sign-in", 303)
        return visitor

    async def sessions(self, request: Request) -> Response:
        visitor = self.gate(request)
        if isinstance(visitor, Response):
            return visitor
        board, bridge = self.board, self.bridge
        shown = []
        for seen in board.sessions_of(visitor.principal):
            if bridge.session_running(seen.key):
                shown.append((seen, "running"))
            elif bridge.session_hibernated(seen.key):
                shown.append((seen, "hibernated: its next call restores it"))
            elif seen.fresh_next or bridge.has_session(seen.key):
                shown.append((seen, seen.fresh_next or "no sandbox"))
            else:
                board.forget(seen.key)  # it ended (expired, evicted, closed with its connection)
        # Read now, for this page only (never per call): a cgroup's count, a process tree's RSS, a snapshot's size.
        used = await anyio.to_thread.run_sync(lambda: [bridge.session_memory(seen.key) for seen, _ in shown])
        rows = [(seen, state, memory) for (seen, state), memory in zip(shown, used, strict=True)]
        body = pages.sessions_page(rows, bridge.backend_name, time.time(), CONSOLE_PATH, visitor.csrf)
        return self.respond("Sessions", body, visitor, live=True)

    async def session_action(self, request: Request) -> Response:
        visitor, form, refused = await self.acting(request)
        if refused is not None or visitor is None:
            return refused or PlainTextResponse("sign in first", 403)
        action = request.path_params["action"]
        try:
            key = SessionKey.parse(form.get("session", ""))
        except BadSessionKey:
            return self._not_found(visitor)
        if action not in ("reset", "end") or self.board.session(key, visitor.principal) is None:
            return self._not_found(visitor)
        why = "was reset from the web console" if action == "reset" else "was ended from the web console"
        self.board.cancel_in(key, visitor.principal)  # its running call ends first, or the reset would wait for it
        await self.bridge.lose(key, why)
        if action == "reset":
            self.board.mark_fresh(key, "reset: starts fresh on its next call")
        else:
            self.board.forget(key)
        log.info("console: %s %s session %s", _shown(visitor.principal), action, key.name)
        return RedirectResponse(CONSOLE_PATH + "/sessions", 303)

    async def calls(self, request: Request) -> Response:
        visitor = self.gate(request)
        if isinstance(visitor, Response):
            return visitor
        query = request.query_params
        wanted = Search(**{name: query.get(name, "").strip()[:200]
                           for name in ("session", "server", "tool", "outcome", "since", "until")})  # fmt: skip
        path = self.settings.audit_path
        self.board.written()  # the run lines of the calls that ended, which wait to share a write, read too
        finished = await anyio.to_thread.run_sync(search, path, visitor.principal, wanted) if path else []
        kept = [c for c in self.board.finished_of(visitor.principal) if _kept_matches(c, wanted)]
        body = pages.calls_page(self.board.running_of(visitor.principal), finished, kept, wanted, path is not None,
                                time.time(), CONSOLE_PATH, visitor.csrf)  # fmt: skip
        return self.respond("Calls", body, visitor, live=True)

    async def call(self, request: Request) -> Response:
        visitor = self.gate(request)
        if isinstance(visitor, Response):
            return visitor
        call = request.path_params["call"]
        seen = self.board.call(call, visitor.principal)
        path = self.settings.audit_path
        self.board.written()
        audited = (await anyio.to_thread.run_sync(audited_calls, path, visitor.principal)).get(call) if path else None
        if seen is None and audited is None:
            return self._not_found(visitor)
        rendered = None
        if seen is not None and seen.result is not None:
            settings = self.settings
            rendered = render_result(seen.result, settings.output_mode, settings.output_limit, seen.key.name)
        body = pages.call_page(call, seen, rendered, audited, time.time(), CONSOLE_PATH, visitor.csrf)
        return self.respond(f"Call {call}", body, visitor, live=seen is not None and seen.result is None)

    async def cancel(self, request: Request) -> Response:
        visitor, _, refused = await self.acting(request)
        if refused is not None or visitor is None:
            return refused or PlainTextResponse("sign in first", 403)
        call = request.path_params["call"]
        if not self.board.cancel(call, visitor.principal):
            return self._not_found(visitor)
        log.info("console: %s cancelled call %s", _shown(visitor.principal), call)
        return RedirectResponse(f"{CONSOLE_PATH}/calls/{call}", 303)

    async def approvals(self, request: Request) -> Response:
        visitor = self.gate(request)
        if isinstance(visitor, Response):
            return visitor
        approvals = self.board.approvals
        body = pages.approvals_page(approvals.waiting_of(visitor.principal), approvals.mode, time.time(),
                                    CONSOLE_PATH, visitor.csrf)  # fmt: skip
        return self.respond("Approvals", body, visitor, live=True)

    async def answer_approval(self, request: Request) -> Response:
        """Grant or deny one waiting approval: only its owner's, only what the page showed, only once."""
        visitor, form, refused = await self.acting(request)
        if refused is not None or visitor is None:
            return refused or PlainTextResponse("sign in first", 403)
        decision = form.get("decision")
        approval, digest = form.get("approval", ""), form.get("digest", "")
        if decision not in ("grant", "deny") or not self.board.approvals.answer(
            approval, visitor.principal, digest, decision == "grant"
        ):
            return self.respond("Not found", '<p class="empty">No such call waits for your approval (it was answered, '
                              "it ended, or it is not yours).</p>", visitor, status=404)  # fmt: skip
        log.info("console: %s %s an ask_tools call", _shown(visitor.principal),
                 "approved" if decision == "grant" else "denied")  # fmt: skip
        return RedirectResponse(CONSOLE_PATH + "/approvals", 303)

    async def tools(self, request: Request) -> Response:
        """The principal's saved tools (what ``runtime.save_tool`` kept), with their source."""
        visitor = self.gate(request)
        if isinstance(visitor, Response):
            return visitor
        try:
            saved, problems = await self.bridge.saved_tools.load(visitor.principal)
        except CodemodeError as exc:
            saved, problems = [], [str(exc)]
        body = pages.tools_page(saved, problems, CONSOLE_PATH, visitor.csrf)
        return self.respond("Saved tools", body, visitor)

    async def delete_tool(self, request: Request) -> Response:
        visitor, form, refused = await self.acting(request)
        if refused is not None or visitor is None:
            return refused or PlainTextResponse("sign in first", 403)
        try:
            deleted = await self.bridge.saved_tools.delete(visitor.principal, form.get("name", ""))
        except CodemodeError:
            deleted = False
        if not deleted:
            return self._not_found(visitor)
        log.info("console: %s deleted a saved tool", _shown(visitor.principal))
        return RedirectResponse(CONSOLE_PATH + "/tools", 303)

    async def doctor_page(self, request: Request) -> Response:
        visitor = self.gate(request)
        if isinstance(visitor, Response):
            return visitor
        report = await anyio.to_thread.run_sync(self.doctor)
        return self.respond("Doctor", pages.doctor_page(report), visitor)

    async def events(self, request: Request) -> Response:
        """Server-sent events: ``change`` whenever the board changed (a session or call of anyone: the page asks
        again, and sees only its own), for ``STREAM_LIFE`` seconds; the browser then reconnects.

        From the version the page was rendered at (``since``; on a reconnect, the last event's id), so a change
        between the page's rendering and the stream's start is told at once, not lost. The Servers page also names
        the servers' state it shows (``servers``), which changes without a call: compared each second it is open."""
        if self._visitor(request) is None:
            return PlainTextResponse("sign in first", 403)
        board = self.board
        given = request.headers.get("last-event-id") or request.query_params.get("since", "")
        since = int(given) if given.isdigit() and len(given) < 19 else board.version
        servers = request.query_params.get("servers")
        upstreams = self.bridge.upstreams if servers is not None else None

        async def stream() -> AsyncIterator[str]:
            yield "retry: 1000\n\n"
            version, ends, shown = since, time.monotonic() + STREAM_LIFE, servers
            while (left := ends - time.monotonic()) > 0:
                now = await board.wait_change(version, min(left, 5.0 if upstreams is None else 1.0))
                if upstreams is not None and shown != (seen := upstreams.fingerprint()):
                    shown, version = seen, -1  # told as a change, whatever the board did
                if now != version:
                    version = now
                    yield f"id: {now}\nevent: change\ndata: {json.dumps(now)}\n\n"
                else:
                    yield ": still here\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")


def _kept_matches(call: Any, wanted: Search) -> bool:
    return (not wanted.session or wanted.session in str(call.key)) and (
        not wanted.outcome or wanted.outcome == call.outcome
    )


def _shown(principal: str) -> str:
    """How a principal is named on a page and in the log: "local", or a token's hash name (never the token)."""
    return "the local user" if principal == LOCAL else f"token {principal}"
