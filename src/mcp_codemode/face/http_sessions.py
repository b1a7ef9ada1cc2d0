"""Handshake-era MCP sessions over HTTP: each answers only the principal that opened it, and logs never name it.

Why: a 2025-11-25 client's ``Mcp-Session-Id`` is the key to its connection, and the connection's default sandbox
belongs to it (``server.place``). Were the id alone enough, a second token holder who learned it (from a log line,
a proxy's access log, a shared debugging session) would run code in the first one's sandbox, read its files and
end its session with a DELETE. So the id is bound to the principal that opened it, and is never written in full.

The binding is the SDK's own: its session manager remembers the credential (``scope["user"]``) that opened each
session, forgets it when the session ends (DELETE, idle expiry, crash) so the record is as bounded as the sessions,
and answers any request that presents another credential exactly as it answers an unknown id (404 "Session not
found") on POST, GET and DELETE alike. Using it rather than a map of our own in the guard means one record of who
owns a session, kept and dropped by the code that creates and ends the sessions; the guard only has to say who
is asking, in the form the SDK reads (``principal_user``). Without tokens there is one principal, the local user.

Logs: the SDK's transport and session manager name sessions in full at INFO ("Created new transport with session
ID: ...", "Terminating session: ...", idle expiry, the refusal of a foreign credential). ``SessionIdTags``
rewrites every session id in their lines to a short tag (``principals.session_tag``, a truncated hash; the bridge's
own session key uses the same tag): the same session gets the same tag, so lines can still be followed, and the
tag cannot be turned back into the id. Every id the SDK mints is a uuid4's 32
hex digits; a line's run of exactly 32 hex digits is taken for one.
"""

from __future__ import annotations

import logging
import re

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken

from .principals import session_tag

# The SDK modules whose log lines name MCP sessions (a filter on a logger sees only that logger's own records).
SDK_SESSION_LOGGERS = ("mcp.server.streamable_http_manager", "mcp.server.streamable_http")
_SESSION_ID = re.compile(r"(?<![0-9a-fA-F])[0-9a-fA-F]{32}(?![0-9a-fA-F])")


def principal_user(principal: str) -> AuthenticatedUser:
    """The principal as the SDK's session manager reads it from ``scope["user"]`` to bind sessions to it.

    The access token carries the principal's name, never the bearer token itself: nothing downstream needs the
    secret, and an object that holds it is one more place it could leak from.
    """
    return AuthenticatedUser(AccessToken(token=principal, client_id=principal, scopes=[]))


class SessionIdTags(logging.Filter):
    """Rewrites MCP session ids in a log record to their tags (``session_tag``); never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        tagged = _SESSION_ID.sub(lambda found: session_tag(found.group(0)), message)
        if tagged != message:
            record.msg, record.args = tagged, None
        return True


def tag_sdk_session_logs() -> None:
    """Put ``SessionIdTags`` on the SDK's session loggers, once however often the HTTP app is built."""
    for name in SDK_SESSION_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(known, SessionIdTags) for known in logger.filters):
            logger.addFilter(SessionIdTags())
