"""Where the adder gets the one entry a person is asked about: the seam between finding and adding servers.

Finding (registries, their cache, a local catalog) and adding (consent, persistence, starting) are built apart;
the adder needs only "the entry with exactly this name (and version)", never a search result's best guess, so a
name that merely resembles another (``io.github.acme/fs`` and ``io.github.acrne/fs``) is never taken for it.
``StaticSource`` serves entries held in memory: a local catalog once read, or a test's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from ...errors import CodemodeError
from ..suggest import close_matches, did_you_mean
from .entries import ServerEntry


class ServerNotFound(CodemodeError):
    """No registry or catalog has a server of exactly this name (or this version of it)."""


class EntrySource(Protocol):
    """Anything that can hand over one exact entry (a registry client, a catalog, several of them in order)."""

    async def entry(self, name: str, version: str | None = None) -> ServerEntry:
        """The entry named exactly ``name``: ``version`` if given, else its latest; ``ServerNotFound`` if none."""
        ...


class StaticSource:
    """Entries held in memory, looked up by exact name; the latest is the one the source marks latest."""

    def __init__(self, entries: Iterable[ServerEntry], *, where: str) -> None:
        self._entries = list(entries)
        self._where = where

    async def entry(self, name: str, version: str | None = None) -> ServerEntry:
        same = [e for e in self._entries if e.name == name]
        if not same:
            near = close_matches(name, {e.name for e in self._entries})
            raise ServerNotFound(
                f"{self._where} has no server named {name!r}.{did_you_mean(near)}",
                fix="use the exact name find_servers() returned",
            )
        if version is not None:
            for candidate in same:
                if candidate.version == version:
                    return candidate
            versions = ", ".join(e.version for e in same)
            raise ServerNotFound(f"{self._where} has {name!r} only in versions {versions}", fix="pick one of them")
        latest = [e for e in same if e.is_latest]
        return (latest or same)[-1]
