"""Who is asking over HTTP: a bearer token's stable name, where the HTTP guard leaves it for the MCP face, and the
tag that names an MCP session id where the id must not be written (a handshake-era connection's own default session
is keyed by it: ``placement.connection_key``).

Why a module of its own: the HTTP guard (``web.py``) names the principal and the MCP face (``server.py``) reads
it to scope sessions; keeping the agreement here lets the web layer stand below the server instead of importing
it for one constant, so serving HTTP never has to load the tool's code to know where a principal goes.
"""

from __future__ import annotations

import hashlib

PRINCIPAL_STATE_KEY = "mcp_codemode_principal"  # in the ASGI scope's state, set by the HTTP guard


def principal_of(token: str) -> str:
    """A stable, non-secret name for a token: sessions stay with it when the token list is reordered."""
    return "t-" + hashlib.sha256(token.encode()).hexdigest()[:12]


def session_tag(session_id: str) -> str:
    """A short, stable, non-reversible name for an MCP session id, where the id itself must not be written.

    Logs name a session by it (``http_sessions.SessionIdTags``), and so does the bridge's session key
    (``placement.connection_key``), which reaches the audit log and worker names: the id opens the session to
    whoever holds it and the principal's token, so it is kept in the SDK's memory and nowhere else. 64 bits: no two
    live sessions share a tag.
    """
    return "s-" + hashlib.sha256(session_id.encode("utf-8", "surrogateescape")).hexdigest()[:16]
