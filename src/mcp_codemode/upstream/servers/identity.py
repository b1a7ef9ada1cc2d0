"""Asking a connected server who it is, and refusing it when it says it is a code-mode bridge.

Apart from the connection (``connection.py``) because it is one question asked once per start, over the
client, and apart from ``selfref.py`` (which config discovery imports) because it needs the MCP client: the
connection closes what this refuses.
"""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ..config.selfref import SELF_SERVER_SETTING, bridge_identity

# How long a server connected at a named 2026-era version may take to say who it is (see server_info). A nested
# bridge on a loaded 2-core machine took over 5 s to answer (and so was not recognised, and was used); a server
# that never answers costs this once per start, so it errs long.
IDENTITY_WAIT = 15.0


async def refusal_of(client: Client, protocol: str, *, allow_self: bool) -> str:
    """Why this connection must not be used: the server says it is a code-mode bridge ("" if it is not).

    The bridge is usually in the very files it reads, and not always recognisably (a wrapper script, its
    HTTP URL): proxying it would nest code mode inside code mode, and a copy it started would read the
    same files and start another. The name in ``serverInfo`` is checked in either protocol era (a
    2026-era server may not give one; then nothing can be told).
    """
    if allow_self:
        return ""
    info = await server_info(client, protocol)
    if info is None:
        return ""
    bridge = bridge_identity(info.name)
    if bridge is None:
        return ""
    return (
        f"it is {bridge} (its serverInfo says {info.name} {info.version}), which would nest code mode inside "
        f"code mode: skipped, and not started again; set {SELF_SERVER_SETTING} to use it anyway"
    )


async def server_info(client: Client, protocol: str) -> types.Implementation | None:
    """The name and version the server gave itself, asking it once if connecting did not.

    ``initialize`` and the ``server/discover`` of ``protocol: auto`` carry it. A 2026-era version named
    in the config is adopted without a word to the server, so the hub sends the ``server/discover`` the
    client skipped, bounded by ``IDENTITY_WAIT``: a server that does not answer it is not recognised,
    and is otherwise used as it would have been.
    """
    info = client.server_info
    if info is not None or protocol in ("legacy", "auto"):
        return info
    raw: dict[str, Any] | None = None
    with anyio.move_on_after(IDENTITY_WAIT), contextlib.suppress(MCPError):
        raw = await client.session.send_discover(client.protocol_version)
    meta = raw.get("_meta") if raw is not None else None
    stamp = meta.get(types.SERVER_INFO_META_KEY) if isinstance(meta, dict) else None
    if stamp is None:
        return None
    try:
        return types.Implementation.model_validate(stamp)
    except ValidationError:
        return None
