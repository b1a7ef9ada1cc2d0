"""Adding servers from a registry: ``add_server``, ``remove_server`` and ``added_servers``.

Standard library only. Code names a registry entry (as ``find_servers()`` returned it); the bridge derives how it
runs, asks the person, and on their yes installs and starts it. The proxy ``mcp_<alias>`` is bound at once, so the
server's tools are usable in the same cell. Nothing here can choose a command, its arguments or its environment.
"""

from __future__ import annotations

from . import _proxies
from ._rpc import rpc

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


async def add_server(name: str, version: str | None = None, *, alias: str | None = None) -> dict[str, Any]:
    """Ask the person to add the registry server ``name`` (its latest version, or ``version``), and on their yes
    start it and bind its proxy ``mcp_<alias>`` in this namespace; returns its name, alias and transport.

    Raises ``ApprovalDenied`` when the person says no (or cannot be asked), ``PolicyError`` when the bridge does not
    let code propose it, ``ArgumentError`` for a name no registry has (with the closest names).
    """
    params: dict[str, Any] = {"name": name}
    if version is not None:
        params["version"] = version
    if alias is not None:
        params["alias"] = alias
    entry = await rpc.arequest("add_server", **params)
    if isinstance(entry, dict) and isinstance(entry.get("name"), str):
        catalog = _proxies.catalog
        servers = [s for s in catalog.servers if s["name"] != entry["name"]]
        servers.append({key: entry[key] for key in ("name", "alias", "transport", "description") if key in entry})
        versions = dict(catalog.versions)
        if isinstance(entry.get("version"), int):
            versions[entry["name"]] = entry["version"]
        catalog.configure(servers, versions)
        catalog.rebind()
    return entry  # type: ignore[no-any-return]


async def remove_server(name: str) -> bool:
    """Stop and forget a server this principal added (by name or alias); False when there is none such."""
    removed = await rpc.arequest("remove_server", name=name)
    if removed is True:
        catalog = _proxies.catalog
        catalog.configure([s for s in catalog.servers if name not in (s["name"], s.get("alias"))], catalog.versions)
        catalog.rebind()
    return bool(removed)


async def added_servers() -> list[dict[str, Any]]:
    """The servers this principal added: name, alias, transport, the registry entry and version, when."""
    found = await rpc.arequest("added_servers")
    return [entry for entry in found if isinstance(entry, dict)] if isinstance(found, list) else []
