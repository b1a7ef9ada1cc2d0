"""``find_servers()``: ranked candidates from the registries, the local catalogs and the user's other clients.

Each call brings every registry's index up to date at once (``index.py``: conditional, incremental, resumed), all of
them within one deadline, so a registry that hangs costs a call ``registry_timeout`` seconds at most; a registry that
fails is answered from its cache, and a notice says which one, what it did and since when. The candidates are ranked
by the tool search's ranker (``tools/ranking.py``) over what ``documents.py`` makes of each entry, and what the model
reads of each is ``candidates.py``'s.

``FinderSource`` is the adder's way in (``source.EntrySource``): the same registries in order, then the catalogs, by
exact name only, asked afresh (a cached entry only when its registry cannot be reached).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import ssl
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import httpx2

from ..model import ServerConfig
from ..tools.ranking import Document, Ranker
from .candidates import available_as, configured_candidate, registry_candidate, resembles
from .catalog import Catalogs
from .documents import searchable, server_document
from .entries import RegistryDataError, ServerEntry
from .index import RegistryIndex
from .source import ServerNotFound
from .wire import RegistryUnreachable

MAX_NOTICES = 8
TOP_UP_WORDS = 3  # query words sent as name searches to a registry whose index is not read to its end yet
AVAILABLE_BOOST = 1.5  # a server the session already has outranks a slightly better match it would have to add


class RegistrySettings(Protocol):
    """What the finder reads of the bridge's settings (``registry_settings.py``), which satisfy it as they are."""

    @property
    def state_dir(self) -> Path: ...
    @property
    def registries(self) -> tuple[str, ...]: ...
    @property
    def registry_catalog(self) -> tuple[Path, ...]: ...
    @property
    def registry_ttl(self) -> float: ...
    @property
    def registry_timeout(self) -> float: ...


@dataclasses.dataclass(frozen=True)
class Configured:
    """The servers the bridge serves (for "already available"), and those the user's clients configure that it
    does not start, each with why."""

    served: tuple[ServerConfig, ...] = ()
    elsewhere: tuple[tuple[ServerConfig, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class Found:
    """The answer to one ``find_servers()``: the candidates, best first, and what the model should know besides."""

    candidates: list[dict[str, Any]]
    notices: list[str]


@dataclasses.dataclass(frozen=True)
class _Candidate:
    name: str
    document: Document
    entry: ServerEntry | None = None
    found_in: str = ""
    config: ServerConfig | None = None
    why: str = ""


class Finder:
    """Finds servers to add; one per bridge, its indexes kept on disk under the state directory."""

    def __init__(self, settings: RegistrySettings, transport: httpx2.AsyncBaseTransport | None = None) -> None:
        cache = settings.state_dir / "registry-cache"
        self.indexes = [RegistryIndex(base, cache, settings.registry_ttl) for base in settings.registries]
        self.catalogs = Catalogs(settings.registry_catalog)
        self.timeout = settings.registry_timeout
        self._transport = transport  # tests hand one in; the bridge uses httpx's own
        self._ranked: tuple[object, list[_Candidate], Ranker] | None = None
        self._tls: ssl.SSLContext | None = None  # loading the CA store costs ~0.1 s: once per bridge, not per call

    def http(self) -> httpx2.AsyncClient:
        """A client for one call: no redirects (an entry must come from the registry named), bounded waits."""
        timeout = httpx2.Timeout(min(self.timeout, 10.0), connect=min(self.timeout, 5.0))
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return httpx2.AsyncClient(timeout=timeout, follow_redirects=False, transport=self._transport, verify=self._tls)

    async def find(self, query: str, limit: int, configured: Configured) -> Found:
        notices: list[str] = []
        if self.indexes:
            await self._update(query)
            for index in self.indexes:
                notices += _index_notices(index)
        for read in self.catalogs.read():
            notices += read.problems
        if not self.indexes and not self.catalogs.paths:
            notices.append("no registry or catalog is configured (MCP_BRIDGE_REGISTRIES is off and "
                           "MCP_BRIDGE_REGISTRY_CATALOG is empty): only servers other clients configure are "
                           "found")  # fmt: skip
        candidates, ranker = self._ranker(configured)
        hits = ranker.search(query)[: limit * 3]
        # What the session already has comes first among close matches: the model need not add anything.
        boosted = [(score * (AVAILABLE_BOOST if self._available(candidates[index], configured) else 1.0), index)
                   for score, index in hits]  # fmt: skip
        boosted.sort(key=lambda hit: (-hit[0], hit[1]))
        served_names = [config.name for config in configured.served]
        shown = [candidates[index] for _, index in boosted[:limit]]
        found = [self._render(candidate, configured, served_names, shown) for candidate in shown]
        if not found:
            notices.append(f"no server matched {query[:80]!r}; try other words (what the server works with, such as "
                           "'github issues' or 'postgres')")  # fmt: skip
        if len(notices) > MAX_NOTICES:
            notices = [*notices[: MAX_NOTICES - 1], f"... and {len(notices) - MAX_NOTICES + 1} more notices"]
        return Found(found, notices)

    async def _update(self, query: str) -> None:
        """Every index brought up to date within the deadline. While one is still being walked for the first time,
        the walk gets two thirds of it and the registry's own name search the rest, for the query's longest words:
        a first call on a large registry then still finds what is named in the query."""
        start = asyncio.get_running_loop().time()
        deadline = start + self.timeout
        walking = any(not index.state.complete for index in self.indexes)
        async with self.http() as http:
            updates = (
                index.update(http, start + self.timeout * 2 / 3 if walking else deadline) for index in self.indexes
            )
            outcomes = await asyncio.gather(*updates, return_exceptions=True)
            unfinished = [index for index in self.indexes if not index.state.complete and not index.state.failing_since]
            words = sorted(set(re.findall(r"[a-zA-Z0-9]{3,}", query)), key=len, reverse=True)[:TOP_UP_WORDS]
            if unfinished and words:
                outcomes += await asyncio.gather(*(index.top_up(http, words, deadline) for index in unfinished),
                                                 return_exceptions=True)  # fmt: skip
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, RegistryUnreachable):
                raise outcome

    def _ranker(self, configured: Configured) -> tuple[list[_Candidate], Ranker]:
        """The candidates and their index, built again only when one of their sources changed."""
        catalog_entries = self.catalogs.entries()
        key = (
            tuple((index.state.since, len(index.state.entries), index.state.resume) for index in self.indexes),
            tuple(id(entry) for entry in catalog_entries),
            tuple(config for config, _ in configured.elsewhere),
        )
        if self._ranked is not None and self._ranked[0] == key:
            return self._ranked[1], self._ranked[2]
        candidates: list[_Candidate] = []
        seen: set[str] = set()
        for index in self.indexes:
            candidates += _entries(index.entries(), f"registry {index.base}", seen)
        candidates += _entries([entry for entry in catalog_entries if entry.is_latest], "", seen, catalog=True)
        for config, why in configured.elsewhere:
            if config.name not in seen:
                seen.add(config.name)
                document = Document(name=config.name, description=config.description, title=config.target)
                candidates.append(_Candidate(config.name, document, config=config, why=why))
        ranker = Ranker([candidate.document for candidate in candidates])
        self._ranked = (key, candidates, ranker)
        return candidates, ranker

    @staticmethod
    def _available(candidate: _Candidate, configured: Configured) -> bool:
        return candidate.entry is not None and available_as(candidate.entry, configured.served) is not None

    def _render(self, candidate: _Candidate, configured: Configured, served_names: list[str],
                shown: Sequence[_Candidate]) -> dict[str, Any]:  # fmt: skip
        if candidate.entry is not None:
            available = available_as(candidate.entry, configured.served)
            rendered = registry_candidate(candidate.entry, candidate.found_in, available)
        else:
            assert candidate.config is not None
            available = None
            rendered = configured_candidate(candidate.config, candidate.why)
        others = [*([] if available else served_names), *(other.name for other in shown)]
        alike = resembles(candidate.name, others)
        if alike:
            rendered["resembles"] = alike
        return rendered

    def source(self) -> FinderSource:
        return FinderSource(self)


def _entries(entries: Sequence[ServerEntry], found_in: str, seen: set[str], catalog: bool = False) -> list[_Candidate]:
    return [_Candidate(entry.name, server_document(entry), entry=entry, found_in=entry.source if catalog else found_in)
            for entry in searchable(entries, seen)]  # fmt: skip


def _index_notices(index: RegistryIndex) -> list[str]:
    state = index.state
    notices = []
    held = len(state.entries)
    if state.failing_since:
        cached = (f"answered from its cache of {_when(state.checked_at)} ({held:,} servers)" if held
                  else "it has no cache yet, so none of its servers are listed")  # fmt: skip
        notices.append(f"the registry {index.base} {state.failure} (failing since {_when(state.failing_since)}); "
                       f"{cached}")  # fmt: skip
    elif not state.complete:
        notices.append(f"the registry {index.base} has been read in part ({held:,} servers so far); the next call "
                       "reads on")  # fmt: skip
    if state.truncated:
        notices.append(f"the registry {index.base} was not read to its end: {state.truncated}")
    if state.unreadable:
        notices.append(f"the registry {index.base} sent {state.unreadable:,} entries that could not be read; they "
                       "are left out")  # fmt: skip
    return notices


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M UTC")


class FinderSource:
    """The bridge's ``EntrySource``: its registries in order, then its catalogs; the exact name, version or latest."""

    def __init__(self, finder: Finder) -> None:
        self._finder = finder

    async def entry(self, name: str, version: str | None = None) -> ServerEntry:
        misses: list[str] = []
        if self._finder.indexes:
            deadline = asyncio.get_running_loop().time() + self._finder.timeout
            async with self._finder.http() as http:
                for index in self._finder.indexes:
                    try:
                        return await index.entry(http, name, version, deadline)
                    except ServerNotFound as exc:
                        misses.append(str(exc).split(";")[0])
                    except (RegistryUnreachable, RegistryDataError) as exc:
                        cached = _cached(index, name, version)
                        if cached is not None:
                            return cached
                        misses.append(f"the registry {index.base} {exc}")
        if self._finder.catalogs.paths:
            try:
                return await self._finder.catalogs.source().entry(name, version)
            except ServerNotFound as exc:
                misses.append(str(exc).split(";")[0])
        raise ServerNotFound(
            f"no registry or catalog has {name!r}"
            + (f" in version {version!r}" if version else "")
            + ": "
            + ("; ".join(misses) or "none is configured (MCP_BRIDGE_REGISTRIES, MCP_BRIDGE_REGISTRY_CATALOG)"),
            fix="use the exact name (and version) find_servers() returned",
        )


def _cached(index: RegistryIndex, name: str, version: str | None) -> ServerEntry | None:
    for entry in index.entries():
        if entry.name == name and (version is None or entry.version == version):
            return entry
    return None
