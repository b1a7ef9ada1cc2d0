"""The listing the directory serves for a server's tools: the policy applied, aliases made, and a digest to compare.

Apart from the directory, which decides *when* a listing changes, because this is a pure function of one server's
tools and the policy: what sandboxed code is shown (docs, proxies, stubs, search, counts), and what is kept aside
for refusals only. Aliases are made from the whole listing, so they do not move when the policy changes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from mcp import types

from ..model import ServerConfig
from . import catalog
from .gate import Gate, Refused
from .listing import Listing, Origin
from .listing_cache import wire


def served_listing(
    config: ServerConfig, tools: tuple[types.Tool, ...], origin: Origin, fetched_at: float, digest: str, gate: Gate
) -> Listing:
    """The listing served for ``tools``: the policy's refused tools are kept aside, for refusals only."""
    every_alias = catalog.tool_aliases(tools)
    shown: list[types.Tool] = []
    refused: dict[str, Refused] = {}
    for tool in tools:
        alias = every_alias[tool.name]
        verdict = gate.tool_refusal(config.name, config.alias, tool.name, alias, tool.annotations)
        if verdict is None:
            shown.append(tool)
        else:
            refused.setdefault(alias, verdict)
            refused[tool.name] = verdict
    aliases = {tool.name: every_alias[tool.name] for tool in shown}
    lookup = {aliases[tool.name]: tool for tool in shown} | {tool.name: tool for tool in shown}
    hidden = tuple(tool.name for tool in tools if tool.name not in aliases)
    return Listing(config.name, tuple(shown), origin, fetched_at, digest, aliases, lookup, refused, hidden)


def digest(tools: Sequence[types.Tool]) -> str:
    """What tells two listings apart: the tools as they travel, hashed (an equal listing keeps its objects)."""
    text = json.dumps(wire(tools), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
