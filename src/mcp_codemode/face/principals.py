"""Who is asking over HTTP: a bearer token's stable name, and where the HTTP guard leaves it for the MCP face.

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
