"""One registry's servers, kept on disk and brought up to date through its paging and conditional requests.

The registry's own ``search`` matches names only, and a model asks in words ("read my Airtable records"), so the
finder ranks the registry's whole list itself: this index walks ``GET /v0.1/servers?version=latest`` page by page
once, keeps every entry it could read, and from then on asks only for what changed (``updated_since`` the newest
``updatedAt`` it holds, a URL that stays the same while nothing changes, so the registry's ETag answers 304). A walk
cut short (the deadline, a failure) is resumed from its cursor by the next call; a registry that pages without end,
loops its cursors or lists more than ``MAX_ENTRIES`` is stopped and said so. Every failure keeps the index as it
was and is remembered with the time it began, for the notice ("unreachable since ...").

The file is the bridge's own (0600 under the state directory): entries as received, only those ``entries.py``
could read. Nothing here decides what the model sees; the finder does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import re
import time
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import httpx2

from ...state_files import make_private_dir, replace_private
from ...upstream.suggest import close_matches, did_you_mean
from .entries import NAME, RegistryDataError, ServerEntry, parse_server_json
from .source import ServerNotFound
from .wire import MAX_PAGE_BYTES, RegistryUnreachable, get_json

log = logging.getLogger(__name__)

PAGE_LIMIT = 100  # the API's largest page
MAX_PAGES = 400  # pages one walk reads before it is stopped as endless
MAX_ENTRIES = 40_000  # servers one registry's index holds; the official registry lists a few thousand
MAX_SERVERS_KEPT = 256  # single-server answers kept for their ETags
# Seconds before a registry that failed is asked again: a model calling find_servers() in a loop while a registry is
# down gets the cache at once instead of waiting out a timeout each time (and the registry is not hammered).
RETRY_AFTER = 30.0
FORMAT = 1


@dataclasses.dataclass
class IndexState:
    """What the index file holds (and the index in memory)."""

    entries: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # name -> list item as received
    complete: bool = False  # a walk reached the last page
    resume: str = ""  # the cursor a cut-short walk goes on from
    since: str = ""  # the newest updatedAt held: what the next update asks for
    etag: str = ""  # of the update URL's last answer
    checked_at: float = 0.0  # when the registry last answered (epoch seconds)
    failing_since: float = 0.0  # when the failures since the last answer began (0: none)
    failure: str = ""
    unreadable: int = 0  # entries of the last walk entries.py refused
    truncated: str = ""  # why a walk stopped before the end (endless, looping, too many entries)
    servers: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # one-server URL -> etag, body


class RegistryIndex:
    """The cached, incrementally updated list of one registry's latest servers, and its one-server lookups."""

    def __init__(self, base: str, cache_dir: Path, ttl: float) -> None:
        self.base = base
        self.ttl = ttl
        self._http: httpx2.AsyncClient | None = None
        self._path = cache_dir / f"{hashlib.sha256(base.encode()).hexdigest()[:24]}.json"
        self._lock = asyncio.Lock()
        self._state: IndexState | None = (
            None  # read from disk at first use: a bridge start that never finds pays nothing
        )
        self._parsed: dict[str, ServerEntry] | None = None
        self._tried = 0.0  # when this bridge last asked (a failing registry is asked again after RETRY_AFTER)

    # ---------------------------------------------------------------------------------------- reading

    @property
    def state(self) -> IndexState:
        """What is known of the registry: the cache file (up to MiBs of JSON), read the first time it is needed."""
        if self._state is None:
            self._state = self._load()
        return self._state

    def entries(self) -> list[ServerEntry]:
        """Every server the index holds, read once per change (a bad stored entry is left out)."""
        if self._parsed is None:
            parsed: dict[str, ServerEntry] = {}
            for name, item in self.state.entries.items():
                try:
                    parsed[name] = parse_server_json(item, self.base)
                except RegistryDataError:
                    continue
            self._parsed = parsed
        return list(self._parsed.values())

    def fresh(self, now: float) -> bool:
        return self.state.complete and now - self.state.checked_at < self.ttl

    async def update(self, http: httpx2.AsyncClient, deadline: float) -> None:
        """Bring the index up to date unless it is fresh; ``RegistryUnreachable`` (remembered) when it could not."""
        async with self._lock:
            now = time.time()
            if self.fresh(now):
                return
            if self.state.failing_since and now - self._tried < RETRY_AFTER:
                raise RegistryUnreachable(self.state.failure)  # asked again soon after a failure: the cache answers
            self._tried = now
            self._http = http
            walked = len(self.state.entries)
            try:
                async with asyncio.timeout_at(deadline):
                    if self.state.complete:
                        await self._changes()
                    else:
                        await self._walk()
            except TimeoutError:
                if not self.state.complete and len(self.state.entries) > walked:
                    return  # a walk that got pages is under way, not failing: the next call reads on
                self._failed("did not finish answering in time")
                raise RegistryUnreachable("did not finish answering in time") from None
            except RegistryUnreachable as exc:
                self._failed(str(exc))
                raise
            finally:
                self._http = None
                self._save()

    async def top_up(self, http: httpx2.AsyncClient, words: list[str], deadline: float) -> None:
        """Add what the registry's name search finds for ``words`` to an index not yet read to its end."""
        async with self._lock:
            try:
                async with asyncio.timeout_at(deadline):
                    for word in words:
                        params = {"search": word[:60], "version": "latest", "limit": str(PAGE_LIMIT)}
                        answer = await get_json(http, self._servers_url(), params=params, limit=MAX_PAGE_BYTES)
                        if answer.status == 200:
                            self._take(answer.body)
            except TimeoutError:
                raise RegistryUnreachable("did not answer its name search in time") from None
            finally:
                self._save()

    async def entry(self, http: httpx2.AsyncClient, name: str, version: str | None, deadline: float) -> ServerEntry:
        """The entry named exactly ``name`` (``version``, else latest), asked of the registry (conditionally)."""
        quoted = urllib.parse.quote(name, safe="")
        url = f"{self.base}/v0.1/servers/{quoted}/versions/{urllib.parse.quote(version or 'latest', safe='')}"
        kept = self.state.servers.get(url, {})
        async with self._lock:
            try:
                async with asyncio.timeout_at(deadline):
                    answer = await get_json(http, url, etag=str(kept.get("etag", "")))
            except TimeoutError:
                raise RegistryUnreachable("did not answer in time") from None
            if answer.status == 404:
                near = close_matches(name, [*self.state.entries, *await self._named_like(http, name)])
                raise ServerNotFound(
                    f"the registry {self.base} has no server named {name!r}"
                    + (f" in version {version!r}" if version else "")
                    + f".{did_you_mean(near)}",
                    fix="use the exact name (and a version) find_servers() returned",
                )
            body = kept.get("body") if answer.status == 304 else answer.body
            if answer.status == 200:
                self.state.servers.pop(url, None)
                self.state.servers[url] = {"etag": answer.etag, "body": body}
                while len(self.state.servers) > MAX_SERVERS_KEPT:
                    self.state.servers.pop(next(iter(self.state.servers)))
                self._save()
        found = parse_server_json(body, self.base)
        if found.name != name or (version is not None and found.version != version):
            raise RegistryUnreachable(f"answered {found.name!r} {found.version!r} when asked for {name!r}")
        return found

    async def _named_like(self, http: httpx2.AsyncClient, name: str) -> list[str]:
        """Names the registry's own search (a substring of the name) finds for the last part of ``name``: what a
        "did you mean" can offer before the index was ever walked. Best effort: a failure offers nothing."""
        words = re.findall(r"[a-zA-Z0-9]+", name.rsplit("/", 1)[-1]) or [name]
        params = {"search": max(words, key=len)[:60], "version": "latest", "limit": "30"}  # a misspelling spares a word
        try:
            answer = await get_json(http, self._servers_url(), params=params, limit=MAX_PAGE_BYTES)
        except RegistryUnreachable:
            return []
        servers = answer.body.get("servers") if isinstance(answer.body, dict) else None
        found = []
        for item in servers if isinstance(servers, list) else []:
            server = item.get("server") if isinstance(item, dict) else None
            named = server.get("name") if isinstance(server, dict) else None
            if isinstance(named, str) and NAME.match(named):
                found.append(named)
        return found

    # ---------------------------------------------------------------------------------------- walking

    async def _walk(self) -> None:
        """Every page of the latest versions, from the cursor a cut-short walk stopped at."""
        params = {"version": "latest", "limit": str(PAGE_LIMIT)}
        await self._pages(params, cursor=self.state.resume, walking=True)
        self.state.complete = True
        self.state.resume = ""

    async def _changes(self) -> None:
        """What changed since the newest entry held; the same URL while nothing changes, so 304 says so cheaply."""
        params = {"version": "latest", "limit": str(PAGE_LIMIT)}
        if self.state.since:
            params["updated_since"] = self.state.since
        first = await get_json(self._client(), self._servers_url(), params=params, etag=self.state.etag,
                               limit=MAX_PAGE_BYTES)  # fmt: skip
        if first.status == 304:
            self._answered()
            return
        if first.status != 200:
            raise RegistryUnreachable(f"answered HTTP {first.status} to its server list")
        cursor = self._take(first.body)
        self.state.etag = first.etag
        if cursor:
            await self._pages(params, cursor=cursor, walking=False)
        self._answered()

    async def _pages(self, params: Mapping[str, str], *, cursor: str, walking: bool) -> None:
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            if cursor in seen:
                self.state.truncated = "its cursors loop back to a page already read"
                return
            seen.add(cursor)
            answer = await get_json(self._client(), self._servers_url(), params={**params, **({"cursor": cursor} if
                                    cursor else {})}, limit=MAX_PAGE_BYTES)  # fmt: skip
            if answer.status != 200:
                raise RegistryUnreachable(f"answered HTTP {answer.status} to its server list")
            cursor = self._take(answer.body)
            if walking:
                self.state.resume = cursor
            self._answered()
            if not cursor:
                return
            if len(self.state.entries) >= MAX_ENTRIES:
                self.state.truncated = f"it lists more than {MAX_ENTRIES:,} servers; only that many are searched"
                return
        self.state.truncated = f"it sent more than {MAX_PAGES} pages in one walk"

    def _take(self, body: object) -> str:
        """Keep the readable entries of one page; its next cursor ("" at the end)."""
        if not isinstance(body, dict) or not isinstance(body.get("servers"), list):
            raise RegistryUnreachable("sent a page that is not a server list ({'servers': [...]})")
        items = body["servers"]
        if len(items) > PAGE_LIMIT:
            raise RegistryUnreachable(f"sent {len(items)} servers on a page of at most {PAGE_LIMIT}")
        for item in items:
            try:
                entry = parse_server_json(item, self.base)
            except RegistryDataError:
                self.state.unreadable += 1
                continue
            meta = item.get("_meta", {}).get("io.modelcontextprotocol.registry/official", {})
            updated = meta.get("updatedAt") if isinstance(meta, dict) else None
            if isinstance(updated, str) and len(updated) <= 40 and updated > self.state.since:
                self.state.since = updated
            if entry.status == "deleted":
                self.state.entries.pop(entry.name, None)
            elif entry.is_latest and (entry.name in self.state.entries or len(self.state.entries) < MAX_ENTRIES):
                self.state.entries[entry.name] = item
        self._parsed = None
        metadata = body.get("metadata")
        cursor = metadata.get("nextCursor") if isinstance(metadata, dict) else None
        if cursor is not None and (not isinstance(cursor, str) or len(cursor) > 1000):
            raise RegistryUnreachable("sent a next cursor that is not a short string")
        return cursor or ""

    def _client(self) -> httpx2.AsyncClient:
        assert self._http is not None, "pages are read only inside update()"
        return self._http

    def _servers_url(self) -> str:
        return f"{self.base}/v0.1/servers"

    # ---------------------------------------------------------------------------------------- the file

    def _answered(self) -> None:
        self.state.checked_at = time.time()
        self.state.failing_since, self.state.failure = 0.0, ""

    def _failed(self, why: str) -> None:
        self.state.failing_since = self.state.failing_since or time.time()
        self.state.failure = why

    def _load(self) -> IndexState:
        try:
            document = json.loads(self._path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return IndexState()
        except (OSError, ValueError, RecursionError) as exc:
            log.warning("the registry cache %s cannot be read (%s); it is built again", self._path, exc)
            return IndexState()
        if not isinstance(document, dict) or document.get("format") != FORMAT or document.get("base") != self.base:
            return IndexState()
        known = {field.name for field in dataclasses.fields(IndexState)}
        try:
            return IndexState(**{key: value for key, value in document.items() if key in known})
        except TypeError:
            return IndexState()

    def _save(self) -> None:
        try:
            make_private_dir(self._path.parent)
            fields = {field.name: getattr(self.state, field.name) for field in dataclasses.fields(IndexState)}
            text = json.dumps(
                {"format": FORMAT, "base": self.base, **fields}, ensure_ascii=False, separators=(",", ":")
            )

            def write(stream: TextIO) -> None:  # dumps, not write_json's dump: the C encoder, for MiBs of entries
                stream.write(text)

            replace_private(self._path, write)
        except OSError as exc:
            log.warning("the registry cache %s cannot be written (%s); the next start asks the registry again",
                        self._path, exc)  # fmt: skip
