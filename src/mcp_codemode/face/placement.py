"""Which session a call lands in, and who owns it: the rules every call and every files URI is placed by.

Which session a call lands in (documented in docs/clients.md, "Sessions"), first rule that applies:

1. The ``session`` argument names it.
2. Over HTTP, an ``Mcp-Codemode-Session`` header names it, the same way: a client (or the user, in the
   client's configuration) gives a connection its own default without the model having to pass anything.
3. stdio: the process serves one client, so its default session is simply its own.
4. HTTP, handshake era (2025-11-25): the default session belongs to the MCP session id of the connection
   and closes when that MCP session ends.
5. HTTP, stateless era (2026-07-28): there is no connection to belong to, so the call runs in its
   principal's session named ``default``, exactly as a call with ``session: "default"`` would.

A name is always scoped by the principal (the bearer token used; without tokens, which only loopback
allows, the local user): two tokens never share a session, and every local tokenless client reaches the
same names. So all stateless clients of one token, or all local tokenless ones, share one default session
unless they send the header; every call has an owner, and none runs in a throwaway sandbox.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from mcp.server.context import ServerRequestContext

from ..runs.bridge import Bridge
from ..session_keys import SessionKey
from .principals import PRINCIPAL_STATE_KEY, session_tag
from .render import cut_middle
from .tool import SESSION_RE, InvalidArguments

Transport = Literal["stdio", "http"]
_CLOSES_KEY = "mcp_codemode_closes"  # in the SDK connection's state: the session its teardown closes
SESSION_HEADER = "Mcp-Codemode-Session"
_SESSION_HEADER_KEY = SESSION_HEADER.lower().encode()  # ASGI gives header names in lower case, as bytes
DEFAULT_NAME = "default"


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where one call runs: the bridge's session key, the name the caller is shown, and who owns it."""

    key: SessionKey
    label: str  # the session's name as the client knows it ("default" when it named none)
    owner: str  # the principal: a token's, or "local"
    per_connection: bool = False  # a handshake-era default, closed when its MCP session ends


def place(ctx: ServerRequestContext[Any, Any], transport: Transport, named: str | None) -> Placement:
    """The session a call runs in, by the rules of the module docstring.

    Raises ``InvalidArguments`` for a session header that is not a valid name: the call is refused with a
    message the model can pass on (the header is the user's configuration, so only the user can fix it).
    """
    if transport == "stdio":
        return Placement(SessionKey.stdio(named or DEFAULT_NAME), named or DEFAULT_NAME, "local")
    owner = principal_of(ctx) or "local"
    name = named or session_header(ctx)
    if name is not None:
        return Placement(SessionKey.principal(owner, name), name, owner)
    session_id = getattr(connection_of(ctx), "session_id", None)
    if isinstance(session_id, str) and session_id:
        return Placement(connection_key(session_id), DEFAULT_NAME, owner, per_connection=True)
    return Placement(SessionKey.principal(owner, DEFAULT_NAME), DEFAULT_NAME, owner)


def connection_key(session_id: str) -> SessionKey:
    """The key of a handshake-era connection's default session: its MCP session id's tag, never the id itself."""
    return SessionKey.connection(session_tag(session_id))


def session_header(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The session the ``Mcp-Codemode-Session`` header names, if the request has one (HTTP only)."""
    scope = getattr(ctx.request, "scope", None) or {}
    raw: list[tuple[bytes, bytes]] = scope.get("headers") or []
    values = sorted(
        {value.decode("latin-1").strip() for key, value in raw if key.lower() == _SESSION_HEADER_KEY} - {""}
    )
    if not values:
        return None
    if len(values) > 1:
        raise InvalidArguments(
            f"the request has {len(values)} different {SESSION_HEADER} headers "
            f"({', '.join(repr(cut_middle(value, 40)) for value in values[:3])}); send one, in the client's "
            "configuration of this server"
        )
    value = values[0]
    if not SESSION_RE.fullmatch(value):
        raise InvalidArguments(
            f"the {SESSION_HEADER} header {cut_middle(value, 80)!r} is not a valid session name: use 1-64 "
            "letters, digits, '_', '.', '@' or '-', starting with a letter or digit (for example analysis-1), in "
            "the client's configuration of this server; a call can also name its session with the `session` "
            "argument"
        )
    return value


def principal_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The bearer-token principal the HTTP guard put in the request's scope (None without a token)."""
    scope = getattr(ctx.request, "scope", None) or {}
    principal = (scope.get("state") or {}).get(PRINCIPAL_STATE_KEY)
    return principal if isinstance(principal, str) and principal else None


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Any:
    """The SDK's per-client Connection (its id, its teardown stack); reached through the request's session."""
    return getattr(ctx.session, "_connection", None)


def close_with_connection(ctx: ServerRequestContext[Any, Any], bridge: Bridge, key: SessionKey) -> None:
    """Close the client's default sandbox when its MCP session ends, not only when it idles out."""
    connection = connection_of(ctx)
    state = getattr(connection, "state", None)
    stack = getattr(connection, "exit_stack", None)
    if not isinstance(state, dict) or stack is None or state.get(_CLOSES_KEY) == key:
        return
    state[_CLOSES_KEY] = key
    stack.push_async_callback(bridge.discard, key)
