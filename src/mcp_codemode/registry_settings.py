"""Where ``find_servers()`` looks for servers nobody configured yet: the MCP registries, a local catalog, the cache.

Apart from ``settings_fields.py`` because they are a group read by one part (``upstream/registry/``) and that table is
near its size bound; the rows are plain tuples the table turns into its ``Field`` entries, as the console's are.

A registry's entries reach the model, and with a person's consent a command line, so the parsers are strict about
where they may come from: a registry is an ``https://`` address (``http://`` only on this machine's loopback, where no
one between could rewrite an entry), without a query or fragment the API's own parameters would collide with. Off is
a value: an air-gapped site lists no registry and names its own catalog file instead (docs/configuration.md).
"""

from __future__ import annotations

import ipaddress
import os
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .setting_parsers import float_in

OFFICIAL_REGISTRY = "https://registry.modelcontextprotocol.io"
DEFAULT_REGISTRY_TTL = 3600.0  # seconds a registry's index is used before it is asked again (conditionally)
DEFAULT_REGISTRY_TIMEOUT = 15.0  # seconds one find_servers() call may wait for one registry, whatever it sends
_OFF = ("", "off", "none", "0", "false", "no")


def registries(text: str) -> tuple[str, ...]:
    """Base URLs, comma-separated, in the order they are asked; ``off`` (or empty) for none."""
    if text.strip().lower() in _OFF:
        return ()
    found: list[str] = []
    for item in text.split(","):
        if not item.strip():
            continue
        base = item.strip().rstrip("/")
        parts = urllib.parse.urlsplit(base)
        if parts.scheme not in ("https", "http") or not parts.hostname or parts.query or parts.fragment:
            raise ValueError(text)
        if parts.username or parts.password:
            raise ValueError(text)  # a credential in a URL ends up in logs and notices
        if parts.scheme == "http" and not _loopback(parts.hostname):
            raise ValueError(text)
        found.append(base)
    return tuple(dict.fromkeys(found))


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def catalog_paths(text: str) -> tuple[Path, ...]:
    """Catalog files, separated as PATH is; each absolute (or under ``~``), since the bridge's cwd is a client's."""
    paths = tuple(Path(item.strip()).expanduser() for item in text.split(os.pathsep) if item.strip())
    if any(not path.is_absolute() for path in paths):
        raise ValueError(text)
    return paths


_REGISTRIES = (
    "comma-separated registry base URLs, asked in order: https:// (http:// only on 127.0.0.1, ::1 or localhost), no "
    "query or credentials; off for none"
)
_CATALOG = (
    "absolute paths of local catalog files (JSON arrays of server.json objects or registry list items), separated by "
    f"{os.pathsep!r}"
)
#: (name, variable, parser, what it expects, an example): the rows settings_fields.py adds to its table.
REGISTRY_FIELDS: tuple[tuple[str, str, Callable[[str], Any], str, str], ...] = (
    ("registries", "MCP_BRIDGE_REGISTRIES", registries, _REGISTRIES, f"{OFFICIAL_REGISTRY},https://mcp.example.org"),
    ("registry_catalog", "MCP_BRIDGE_REGISTRY_CATALOG", catalog_paths, _CATALOG, "/etc/mcp-codemode/catalog.json"),
    (
        "registry_ttl",
        "MCP_BRIDGE_REGISTRY_TTL",
        float_in(0, 30 * 86400),
        "seconds a registry's cached index is used before it is asked again, 0 to 2592000 (0: every call asks, "
        "conditionally)",
        "3600",
    ),
    (
        "registry_timeout",
        "MCP_BRIDGE_REGISTRY_TIMEOUT",
        float_in(1, 300),
        "seconds one find_servers() call waits for one registry, 1 to 300 (then it answers from the cache)",
        "15",
    ),
)
