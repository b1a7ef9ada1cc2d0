"""Who is signed in to the console: one-time sign-in codes, the cookie sessions they become, and each session's
CSRF token.

Why a module of its own: this is the console's whole idea of identity, kept apart from the pages so it can be read
(and tested) alone. A browser cannot send the bearer token an MCP client sends, so a person signs in once, with a
one-time link (from the bridge's log or `mcp-codemode console`) or, on an HTTP face with tokens, by giving their
token, and the console remembers them by a cookie. The cookie names a random id held here, in memory: nothing
about the principal is in it, a restart signs everyone out, and it is HttpOnly, SameSite=Strict and scoped to the
console's path (``cookie``). Codes are kept by their sha256 only, used once, and expire in ``CODE_TTL``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable

CODE_TTL = 600.0  # seconds a sign-in link may wait to be used
SESSION_IDLE = 12 * 3600.0  # a console session unused this long is signed out
MAX_SESSIONS = 64  # console sessions kept at once; the oldest goes first
MAX_CODES = 64
COOKIE = "mcp_codemode_console"


@dataclasses.dataclass
class Visitor:
    """A signed-in browser: whose sessions it sees, and the token its forms must carry."""

    principal: str
    csrf: str
    last_seen: float


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).digest()


class SignIns:
    """The console's sign-ins; ``clock`` is ``time.monotonic`` but in tests of expiry."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._codes: dict[bytes, tuple[str, float]] = {}  # sha256(code) -> (principal, expires)
        self._visitors: dict[bytes, Visitor] = {}  # sha256(cookie value) -> visitor

    def mint(self, principal: str) -> str:
        """A fresh one-time code that signs in as ``principal`` within ``CODE_TTL``."""
        now = self.clock()
        self._codes = {key: entry for key, entry in self._codes.items() if entry[1] > now}
        while len(self._codes) >= MAX_CODES:
            self._codes.pop(next(iter(self._codes)))
        code = secrets.token_urlsafe(24)
        self._codes[_digest(code)] = (principal, now + CODE_TTL)
        return code

    def redeem(self, code: str) -> str | None:
        """The principal ``code`` signs in as, once: a used, expired or unknown code gives None."""
        entry = self._codes.pop(_digest(code), None)
        if entry is None or entry[1] <= self.clock():
            return None
        return entry[0]

    def open(self, principal: str) -> str:
        """A new console session for ``principal``; its cookie value (shown to nobody but the browser)."""
        now = self.clock()
        self._visitors = {key: v for key, v in self._visitors.items() if now - v.last_seen < SESSION_IDLE}
        while len(self._visitors) >= MAX_SESSIONS:
            oldest = min(self._visitors, key=lambda key: self._visitors[key].last_seen)
            del self._visitors[oldest]
        value = secrets.token_urlsafe(32)
        self._visitors[_digest(value)] = Visitor(principal, secrets.token_urlsafe(24), now)
        return value

    def visitor(self, cookie: str | None) -> Visitor | None:
        """Who ``cookie`` belongs to, or None (none, unknown, or idle too long)."""
        if not cookie:
            return None
        key = _digest(cookie)
        visitor = self._visitors.get(key)
        now = self.clock()
        if visitor is None or now - visitor.last_seen >= SESSION_IDLE:
            self._visitors.pop(key, None)
            return None
        visitor.last_seen = now
        return visitor

    def close(self, cookie: str | None) -> None:
        if cookie:
            self._visitors.pop(_digest(cookie), None)


def csrf_ok(visitor: Visitor, offered: str | None) -> bool:
    """Whether a form's token is this visitor's (compared in constant time)."""
    return bool(offered) and hmac.compare_digest(visitor.csrf.encode(), (offered or "").encode())


def cookie(value: str, path: str, secure: bool) -> str:
    """The Set-Cookie value: HttpOnly (no script reads it), SameSite=Strict (no other site's page sends it), and
    scoped to the console's path (the MCP endpoint beside it never sees it)."""
    flags = f"{COOKIE}={value}; Path={path}; HttpOnly; SameSite=Strict"
    return flags + ("; Secure" if secure else "")


def cleared_cookie(path: str) -> str:
    return f"{COOKIE}=; Path={path}; HttpOnly; SameSite=Strict; Max-Age=0"
