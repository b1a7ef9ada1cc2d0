"""The tool directory: every configured server's tools, known without starting every server, and searched.

The hub knows the listing of a server it has connected to; the catalog cache (``listing_cache.py``) knows what
a server listed on an earlier run. The directory joins the two so that docs and search can answer for *every*
configured and allowed server: a live listing when there is one, else the cached one, else the server is
started in the background and searched as soon as its listing arrives.

It also keeps each server's catalog *version*, which the relay sends with every call so a session rebuilds
its proxies after a change: the version moves when the server says its tools changed, and whenever the
listing the directory serves turns out to differ from the one it served before (a cached listing replaced by
a different live one, a restarted server that came back with other tools). An equal listing moves nothing.

Calls never trust the cache: ``listing(name, live=True)`` is the listing of the running server.

Each server's prompts, resources and resource templates (its *extras*) ride along for search only: listed in the
background whenever the server gives a fresh tool listing, kept in the same cache file, and ranked in an index of
their own (``extras.py``). Reading a resource or getting a prompt always asks the running server. The module is a
little over 400 lines because listings, their cache writes and their search indexes are one state machine.

The policy (``settings.policy``, a ``Gate`` here: see ``gate.py``) is applied here, once for every view: a
refused server is not given to the hub at all (so nothing can start it, list it or search it), and a refused
tool is left out of the listing its server is served with (docs, proxies, stubs, search, counts). The
catalog cache keeps the whole listing, so a changed policy needs no refresh. Tool aliases are made from the
whole listing too: they do not move when the policy changes.

Only asyncio is supported, as for the hub; background work runs in tasks that ``aclose`` ends. The values it
hands out (``Listing``, ``SearchPage``) are in ``listing.py``, the policy's view of one listing in ``served.py``.
``reconfigure`` swaps in another set of servers while it runs (the configuration refresh).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Sequence
from types import TracebackType

from mcp import types

from ..config.refresh import Changes
from ..errors import ServerUnavailable, UpstreamCallError, UpstreamTimeout
from ..model import ServerConfig
from ..servers.failures import headline
from ..servers.hub import Hub
from ..servers.roots import Roots
from ..servers.sign_ins import FileSignIns, SignInStore
from .directory_settings import DirectorySettings
from .extras import ExtrasIndex, limited
from .gate import Gate, Refused
from .listing import NO_EXTRAS, Extras, Hit, Listing, SearchPage
from .listing_cache import CachedListing, ListingCache
from .ranking import Entry, Ranker
from .served import digest, served_listing

log = logging.getLogger("mcp_codemode.upstream.directory")  # the name log lines have always shown
_Refusal = tuple[ServerConfig, Refused]  # a server the policy refuses, and the rule that does


@dataclasses.dataclass(frozen=True)
class _Index:
    generation: int
    ranker: Ranker
    entries: list[Entry]
    aliases: dict[str, dict[str, str]]  # server -> tool name -> alias, as listed when the index was built


class ToolDirectory:
    """The hub, the catalog cache and the search index of one set of configured servers.

    Use it as an async context manager: on exit background listings are stopped, the cache writes finish,
    and the hub closes (every server process stops).
    """

    def __init__(
        self,
        servers: Sequence[ServerConfig],
        settings: DirectorySettings,
        *,
        cache: ListingCache | None = None,
        backoff: tuple[float, float] = (0.5, 30.0),
        sign_ins: SignInStore | None = None,
    ) -> None:
        """``sign_ins``: where the servers' sign-ins are (None: the files of the state directory), for the hub to
        hand each connection."""
        self.settings = settings
        self.gate: Gate = settings.policy
        self.cache = cache if cache is not None else ListingCache(settings.state_dir, settings.catalog_ttl)
        # Refused servers, by name and by alias, for the refusal a call that names one gets; the hub never sees them.
        self.refused, allowed = self._admit(servers)
        self.hub = Hub(
            allowed,
            log_dir=settings.state_dir / "logs",
            call_timeout=settings.tool_timeout,
            connect_timeout=settings.connect_timeout,
            on_tools_changed=self._tools_changed,
            on_listing=self._listed,
            backoff=backoff,
            secrets=settings.http_tokens,  # the bridge's own secrets; each server's env and headers are added
            allow_self=settings.allow_self_server,
            roots=Roots(settings.roots),
            sign_ins=sign_ins if sign_ins is not None else FileSignIns(settings.state_dir / "oauth"),
        )
        names = self.hub.names()
        self.versions: dict[str, int] = dict.fromkeys(names, 0)
        self._retired: dict[str, int] = {}  # the last version of a removed server, should it come back
        self._descriptions = {name: self.hub.config(name).description for name in names}
        self._listings: dict[str, Listing] = {}
        self._seen: dict[str, tuple[types.Tool, ...]] = {}  # the hub's last listing object per server, for a fast path
        self._changed: set[str] = set()  # said its tools changed; the new listing has not arrived yet
        self._failed: dict[str, str] = {}  # why the last background listing failed
        self._tasks: dict[str, asyncio.Task[bool]] = {}
        self._writes: dict[str, tuple[ServerConfig, tuple[types.Tool, ...], float]] = {}
        self._writer: asyncio.Task[None] | None = None
        self._loaded = False
        self._load_lock = asyncio.Lock()
        self._generation = 0  # moves whenever any listing's content changes: the search index is rebuilt
        self._indexes: dict[str | None, _Index] = {}  # by server searched (None: all)
        self._index_lock = asyncio.Lock()
        # Prompts, resources and templates, by server: cached ones first, a running server's once it listed them.
        self._extras: dict[str, Extras] = {}
        self._extras_tasks: dict[str, asyncio.Task[None]] = {}
        self._extras_indexes: dict[str | None, tuple[int, ExtrasIndex]] = {}  # by server searched, with generation
        self._extras_generation = 0
        self._closed = False

    async def __aenter__(self) -> ToolDirectory:
        await self.hub.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop background listings, finish writing the cache, close the hub; idempotent."""
        self._closed = True
        running = [task for task in [*self._tasks.values(), *self._extras_tasks.values()] if not task.done()]
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        if self._writer is not None:
            await asyncio.gather(self._writer, return_exceptions=True)
        await self.hub.aclose()

    def _admit(self, servers: Sequence[ServerConfig]) -> tuple[dict[str, _Refusal], list[ServerConfig]]:
        refused: dict[str, _Refusal] = {}
        allowed = []
        for config in servers:
            verdict = self.gate.server_refusal(config.name, config.alias)
            if verdict is None:
                allowed.append(config)
            else:
                refused.setdefault(config.alias, (config, verdict))
                refused[config.name] = (config, verdict)
        return refused, allowed

    def reconfigure(self, servers: Sequence[ServerConfig]) -> Changes:
        """Serve ``servers`` from now on (the configuration refresh; ``Hub.reconfigure`` says what happens to the
        connections). What was known of a removed or changed server is forgotten (a changed entry may list other
        tools), a new one's listing of an earlier run is read on next use, and every version that moves only goes
        up (a server removed and added again too), so sessions rebuild the proxies of what changed."""
        refused, allowed = self._admit(servers)
        found = self.hub.reconfigure(allowed)
        self.refused = refused
        for name in (*found.removed, *found.changed):
            for task in (self._tasks.pop(name, None), self._extras_tasks.pop(name, None)):
                if task is not None:
                    task.cancel()
            for known in (self._listings, self._seen, self._failed, self._extras):
                known.pop(name, None)
            self._changed.discard(name)
        for name in found.removed:
            self._retired[name] = self.versions.pop(name)
        for name in found.changed:
            self.versions[name] += 1
        for name in found.added:
            self.versions[name] = self._retired.pop(name, -1) + 1
        self._descriptions = {name: self.hub.config(name).description for name in self.hub.names()}
        self._loaded = False  # a new server's cached listing is read on the next use
        self._generation += 1
        self._extras_generation += 1
        return found

    # -- what is known -----------------------------------------------------------------------------------------

    def names(self) -> tuple[str, ...]:
        return self.hub.names()

    async def load(self) -> None:
        """Read every configured server's cached listing (once; a listing already seen live wins)."""
        if self._loaded:
            return
        async with self._load_lock:
            if self._loaded:
                return
            configs = [self.hub.config(name) for name in self.hub.names()]
            cached = await asyncio.to_thread(lambda: [self.cache.load(config) for config in configs])
            for config, found in zip(configs, cached, strict=True):  # a server reconfigured meanwhile is skipped
                current = config.name in self.versions and self.hub.config(config.name) == config
                if found is not None and config.name not in self._listings and current:
                    self._adopt(config.name, found)
            self._loaded = True

    def known(self, name: str) -> Listing | None:
        """The listing the directory would serve for ``name`` now (None: unknown); starts nothing."""
        return self._listings.get(self.hub.config(name).name)

    def is_stale(self, listing: Listing) -> bool:
        """A cached listing older than ``catalog_ttl``; a live one is kept current by ``tools/list_changed``."""
        return listing.origin == "cached" and self.cache.is_stale(listing.fetched_at)

    async def listing(self, name: str, *, live: bool = False) -> Listing:
        """A server's listing: for docs the known one (cached or live), for calls (``live``) the running server's.

        An unknown listing, or one the server said has changed, is fetched now (starting the server if
        needed); a stale cached one is served at once and refreshed in the background.
        """
        name = self.hub.config(name).name
        if not live and name not in self._changed:
            await self.load()
            known = self._listings.get(name)
            if known is not None:
                if self.is_stale(known) and self._may_fetch(name):
                    self._fetch_in_background(name)
                return known
        tools = await self.hub.tools(name)
        return self._record(name, tools)

    # -- searching ---------------------------------------------------------------------------------------------

    async def search(
        self, query: str, *, limit: int = 5, offset: int = 0, server: str | None = None, wait: float | None = 0.0,
        among: Callable[[str], bool] = lambda name: True,
    ) -> SearchPage:  # fmt: skip
        """Rank the tools of every configured server (or of ``server`` only) for ``query``; one page of hits.

        Servers whose listing is unknown are started in the background, and the search waits up to ``wait``
        seconds for their listings (0: not at all; None: until every listing this search asked for, stale
        ones included, has arrived or failed, each bounded by the connect and tool timeouts), and then, in what
        is left of that wait, for those servers' prompts and resources. What is still missing then is reported
        as pending or unavailable. Only servers ``among`` admits are started, ranked and counted: another
        principal's added servers neither start for this search nor show in its total.
        """
        only = self.hub.config(server).name if server is not None else None
        names = [name for name in ([only] if only is not None else self.hub.names()) if among(name)]
        await self.load()
        awaited: list[asyncio.Task[bool]] = []
        for name in names:
            known = self._listings.get(name)
            if known is None:
                if not self._may_fetch(name):
                    continue
                task = self._fetch_in_background(name)
                # A server that already failed here is reported as such; it is retried, but not waited for.
                if name not in self._failed or wait is None:
                    awaited.append(task)
            elif (name in self._changed or self.is_stale(known)) and self._may_fetch(name):
                task = self._fetch_in_background(name)
                if wait is None:
                    awaited.append(task)
        if awaited and (wait is None or wait > 0):
            loop = asyncio.get_running_loop()
            until = None if wait is None else loop.time() + wait
            await asyncio.wait(awaited, timeout=wait)
            # And, within the same wait, their prompts and resources, which are listed right after their tools.
            listing_extras = [
                extras for name in names if (extras := self._extras_tasks.get(name)) and not extras.done()
            ]
            left = None if until is None else until - loop.time()
            if listing_extras and (left is None or left > 0):
                await asyncio.wait(listing_extras, timeout=left)
        pending: list[str] = []
        unavailable: list[tuple[str, str]] = []
        for name in [name for name in names if name in self.versions]:  # not one removed while we waited
            if name in self._listings:
                continue
            running = self._tasks.get(name)
            if running is not None and not running.done() and name not in self._failed:
                pending.append(name)
            else:
                unavailable.append((name, self._reason(name)))
        index = await self._index(only)
        ranked = [hit for hit in index.ranker.search(query) if among(index.entries[hit[1]].server)]
        hits = []
        for score, position in ranked[offset : offset + limit]:
            entry = index.entries[position]
            hits.append(Hit(score, entry.server, entry.tool, index.aliases[entry.server][entry.tool.name]))
        searched = len(index.entries)
        also = self._extras_index(only).best(query) if offset == 0 else ()
        return SearchPage(query, len(ranked), offset, tuple(hits), tuple(pending), tuple(unavailable), searched, also)

    def extras(self, name: str) -> Extras:
        """The prompts, resources and templates ``name`` listed last (cached or live; empty when unknown)."""
        return self._extras.get(self.hub.config(name).name, NO_EXTRAS)

    def _extras_index(self, server: str | None) -> ExtrasIndex:
        """The index over the searched servers' extras, rebuilt only after some server's extras changed (they are
        few next to tools, so it is built in place)."""
        built = self._extras_indexes.get(server)
        if built is not None and built[0] == self._extras_generation:
            return built[1]
        names = [server] if server is not None else list(self.hub.names())
        servers = []
        for name in names:
            config = self.hub.config(name)
            servers.append((name, config.alias, self._descriptions.get(name, ""), self._extras.get(name, NO_EXTRAS)))
        index = ExtrasIndex(servers, self.gate)
        self._extras_indexes[server] = (self._extras_generation, index)
        return index

    async def _index(self, server: str | None) -> _Index:
        """The search index over every known listing (or one server's), rebuilt only after a listing changed.

        Building it costs about 0.2 s per 1,000 tools, so it is built in a thread, one build at a time.
        """
        async with self._index_lock:
            built = self._indexes.get(server)
            if built is not None and built.generation == self._generation:
                return built
            generation = self._generation
            names = [server] if server is not None else list(self.hub.names())
            listings = [self._listings[name] for name in names if name in self._listings]
            entries = [
                Entry(listing.server, tool, self._descriptions.get(listing.server, ""))
                for listing in listings
                for tool in listing.tools
            ]
            ranker = await asyncio.to_thread(Ranker, entries)
            aliases = {listing.server: listing.aliases for listing in listings}
            built = self._indexes[server] = _Index(generation, ranker, entries, aliases)
            # Indexes of older generations are dropped as soon as one of the new generation exists.
            for key in [key for key, index in self._indexes.items() if index.generation != generation]:
                del self._indexes[key]
            return built

    def _reason(self, name: str) -> str:
        """Why a server could not be listed, in one line: no stderr, and no value of its ``env`` or ``headers``."""
        state = self.hub.state(name)
        if state.status == "failed" and state.error:
            reason = headline(state.error)
            if state.retry_in:
                reason += f" (retried in {state.retry_in:.0f} s)"
        else:
            reason = self._failed.get(name) or "its tools could not be listed"
        config = self.hub.config(name)
        # Longest first, so a value that contains another is hidden whole.
        for value in sorted({*config.env.values(), *config.headers.values()}, key=len, reverse=True):
            if len(value) >= 4:
                reason = reason.replace(value, "<hidden>")
        return reason

    # -- keeping listings current ------------------------------------------------------------------------------

    def _may_fetch(self, name: str) -> bool:
        """Whether a background listing may start: the server runs or is starting, or may be (re)started now."""
        if self._closed:
            return False
        return self.hub.state(name).status in ("ready", "connecting") or self.hub.may_start(name)

    def _fetch_in_background(self, name: str) -> asyncio.Task[bool]:
        task = self._tasks.get(name)
        if task is None or task.done():
            task = asyncio.get_running_loop().create_task(self._fetch(name), name=f"mcp-codemode listing {name}")
            self._tasks[name] = task
        return task

    async def _fetch(self, name: str) -> bool:
        try:
            tools = await self.hub.tools(name)
        except (ServerUnavailable, UpstreamCallError, UpstreamTimeout) as exc:
            self._failed[name] = headline(str(exc))
            log.info("listing the tools of %r failed: %s", name, self._failed[name])
            return False
        except Exception as exc:  # a background listing must never take the bridge down
            self._failed[name] = f"{type(exc).__name__}: {exc}"
            log.exception("listing the tools of %r failed", name)
            return False
        self._record(name, tools)
        return True

    def _tools_changed(self, name: str) -> None:
        """Hub callback on ``notifications/tools/list_changed``: sessions refetch, the listing is fetched again."""
        self.versions[name] = self.versions.get(name, 0) + 1
        self._changed.add(name)
        if not self._closed:
            with contextlib.suppress(RuntimeError):  # no running loop: the next use lists it
                self._fetch_in_background(name)

    def _listed(self, name: str, tools: tuple[types.Tool, ...]) -> None:
        """Hub callback: a server gave a fresh listing (first connection, restart, or after a change)."""
        self._record(name, tools)

    def _record(self, name: str, tools: tuple[types.Tool, ...]) -> Listing:
        """Make ``tools`` (just listed by the running server) the listing served for ``name``."""
        seen = self._seen.get(name)
        current = self._listings.get(name)
        if seen is tools and current is not None and current.origin == "live" and name not in self._changed:
            return current
        self._seen[name] = tools
        self._changed.discard(name)
        self._failed.pop(name, None)
        now = self.cache.now()
        listed = digest(tools)
        if current is not None and current.digest == listed:
            # The same listing: keep the objects sessions already have, and note that it is live and fresh.
            listing = dataclasses.replace(current, origin="live", fetched_at=now)
        else:
            listing = served_listing(self.hub.config(name), tuple(tools), "live", now, listed, self.gate)
            self._generation += 1
            if current is not None:
                self.versions[name] = self.versions.get(name, 0) + 1
        self._listings[name] = listing
        self._schedule_write(name, tuple(tools), now)
        self._fetch_extras_in_background(name)
        return listing

    def _fetch_extras_in_background(self, name: str) -> None:
        """List the running server's prompts, resources and templates, for search (never for calls, which ask the
        server itself); one listing at a time per server."""
        running = self._extras_tasks.get(name)
        if self._closed or (running is not None and not running.done()):
            return
        with contextlib.suppress(RuntimeError):  # no running loop: the next listing fetches them
            self._extras_tasks[name] = asyncio.get_running_loop().create_task(
                self._fetch_extras(name), name=f"mcp-codemode extras {name}"
            )

    async def _fetch_extras(self, name: str) -> None:
        found: list[tuple[object, ...]] = []
        for what, listing in (("prompts", self.hub.list_prompts), ("resources", self.hub.list_resources),
                              ("resource templates", self.hub.list_resource_templates)):  # fmt: skip
            try:
                # Only from a running server: a listing for search never starts one, nor takes the report of its
                # crash that the next call is owed (a crash under this listing is that call's to tell).
                found.append(limited(await listing(name, background=True)))
            except (ServerUnavailable, UpstreamCallError, UpstreamTimeout) as exc:
                # Search goes on without them; calls report the server's errors themselves.
                log.info("listing the %s of %r failed: %s", what, name, headline(str(exc)))
                found.append(())
            except Exception:  # a background listing must never take the bridge down
                log.exception("listing the %s of %r failed", what, name)
                found.append(())
        extras = Extras(*found)  # type: ignore[arg-type]
        if extras == self._extras.get(name, NO_EXTRAS):
            return
        self._extras[name] = extras
        self._extras_generation += 1
        current, tools = self._listings.get(name), self._seen.get(name)
        if current is not None and tools is not None:
            self._schedule_write(name, tuple(tools), current.fetched_at)

    def _adopt(self, name: str, cached: CachedListing) -> None:
        config, found = self.hub.config(name), cached.tools
        self._listings[name] = served_listing(config, found, "cached", cached.fetched_at, digest(found), self.gate)
        self._generation += 1
        if cached.extras and name not in self._extras:
            self._extras[name] = cached.extras
            self._extras_generation += 1

    def _schedule_write(self, name: str, tools: tuple[types.Tool, ...], fetched_at: float) -> None:
        if self._closed:
            return
        self._writes[name] = (self.hub.config(name), tools, fetched_at)
        if self._writer is None or self._writer.done():
            try:
                self._writer = asyncio.get_running_loop().create_task(self._write_all())
            except RuntimeError:
                self._writes.pop(name, None)

    async def _write_all(self) -> None:
        """Write queued listings one at a time, off the event loop; the latest listing of a server wins."""
        while self._writes:
            name = next(iter(self._writes))
            config, tools, fetched_at = self._writes.pop(name)
            extras = self._extras.get(name, NO_EXTRAS)
            try:
                await asyncio.to_thread(self.cache.store, config, tools, fetched_at, extras)
            except OSError as exc:
                log.warning("catalog cache: cannot keep the tools of %r: %s", name, exc)
