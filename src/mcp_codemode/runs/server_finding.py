"""The relay's ``find_servers`` request: servers sandboxed code could ask the person to add.

Apart from ``relay.py`` (which only dispatches to ``answer``) because it stands on parts the other requests do not:
the registries and catalogs of ``upstream/registry/`` and the user's client configuration files. Those files are read
again on each call (they change while the bridge runs), in a thread, with every client's defaults even when this
bridge was told to read only the files it was given: a server configured for Claude Desktop but not here is exactly
what the agent is looking for. They are the local user's files, so only the local owner's calls see them (a token's
principal on the HTTP face is someone else); servers the policy refuses are never named, as everywhere else. The
bridge hands in what it alone knows, its discovery and where it was read from (``Bridge.__init__``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..settings import Settings
from ..upstream.config.discovery import ConfigSources
from ..upstream.model import Discovery, ServerConfig
from ..upstream.registry.added import LOCAL  # the owner of stdio calls and of HTTP calls without tokens
from ..upstream.registry.finder import Configured, Finder, FinderSource
from ..upstream.tools.directory import ToolDirectory
from .relay_params import MAX_QUERY, checked_int, checked_text, refuse_unknown

if TYPE_CHECKING:
    from ..guest.protocol import CallFrame

FIND_KEYS = frozenset({"type", "id", "op", "query", "limit"})
MAX_FOUND = 50


class ServerFinding:
    """Answers ``find_servers``; ``source`` is the same registries and catalogs for the adder, by exact name."""

    def __init__(self, directory: ToolDirectory, settings: Settings) -> None:
        self.directory = directory
        self.policy = settings.policy
        self.finder = Finder(settings)
        self.discovery: Callable[[], Discovery] = Discovery  # the bridge's, once it hands it in
        self.sources: ConfigSources | None = None

    @property
    def source(self) -> FinderSource:
        return self.finder.source()

    async def answer(self, owner: str, message: CallFrame) -> dict[str, Any]:
        refuse_unknown(message, FIND_KEYS, "find_servers", "query and limit")
        query = checked_text(message.get("query"), "query", MAX_QUERY)
        limit = checked_int(message.get("limit", 10), "limit", 1, MAX_FOUND)
        configured = await asyncio.to_thread(self._configured, owner == LOCAL)
        found = await self.finder.find(query, limit, configured)
        return {"servers": found.candidates, "notices": found.notices}

    def _configured(self, local: bool) -> Configured:
        """What the bridge serves, and what the user's clients configure that it does not run (and may name): to the
        local user only, whose files they are; a principal of the HTTP face (a token's) is someone else."""
        hub = self.directory.hub
        served = tuple(hub.config(name) for name in hub.names())
        if not local:
            return Configured(served=served)
        taken = {config.name for config in served} | set(self.directory.refused)
        discovery = self.discovery()
        elsewhere: list[tuple[ServerConfig, str]] = []
        others = [discovery]
        if self.sources is not None and not self.sources.use_defaults:  # else the bridge's discovery read them all
            others.append(dataclasses.replace(self.sources, use_defaults=True, explicit=()).discover())
        for found in others:
            for config in found.servers:
                if config.name not in taken:
                    elsewhere.append((config, "configured for another client; this bridge reads only the files it "
                                      "is given"))  # fmt: skip
                    taken.add(config.name)
            for skipped in found.skipped:
                if skipped.config.name not in taken and skipped.reason.startswith("disabled"):
                    elsewhere.append((skipped.config, skipped.reason))
                    taken.add(skipped.config.name)
        allowed = [(config, why) for config, why in elsewhere if self.policy.server_refusal(config.name,
                   config.alias) is None]  # fmt: skip
        return Configured(served=served, elsewhere=tuple(allowed))
