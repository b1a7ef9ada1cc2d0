"""Watch streams for the emulated API server (kube_emulator.py): what ``?watch=true`` answers on a real one.

kmock (0.8) streams a watch as every stored object ADDED, then whatever its bus carries, and ignores the parameters
our client relies on: ``resourceVersion`` (events after that version only, so nothing written between a create and
the watch is missed), ``fieldSelector=metadata.name=NAME`` (one object), ``timeoutSeconds`` (the server ends the
stream, which the client must re-establish), ``allowWatchBookmarks``; and changes the tests make as the controller
(``write_status``) never reach its bus. So the emulator serves watches from here instead, as an API server does:

* every change gets the next resourceVersion and is kept in ``events`` (HTTP creates, patches and deletes, and the
  emulator's ``write_status``/``annotate``); a watch from version N replays the matching events after N, then
  streams new ones; without a version (or "0") it starts with the matching objects as ADDED;
* a version older than ``oldest`` (``compact``: an API server keeps a few minutes of history) is answered with an
  ``ERROR`` event carrying a 410 ``Expired`` Status, and the stream ends, as the watch cache does;
* ``close`` ends every open stream now (after a ``BOOKMARK`` with the current version when the client allowed
  bookmarks), as an API server does when a watch times out or it shuts down; ``timeoutSeconds`` ends one by itself;
* ``opened`` records each watch's parameters, so a test can wait for one and count them.

Not modelled: label selectors on watches, field selectors other than ``metadata.name``/``metadata.namespace`` (a
real server refuses them for custom resources too: 400), periodic bookmarks, ``sendInitialEvents``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
from typing import Any

import aiohttp.web

WATCH_VALUES = {"true", "1"}  # strconv.ParseBool's true values the clients send (kubernetes_asyncio sends "True")


def is_watch(method: str, params: Any) -> bool:
    """Whether a request is a watch: a GET with ``watch`` true in any spelling an API server accepts."""
    return method.upper() == "GET" and str(params.get("watch", "")).lower() in WATCH_VALUES


@dataclasses.dataclass(frozen=True)
class Event:
    """One change of one object, at the version the API server gave it."""

    version: int
    resource: Any  # kmock.resource
    namespace: str | None
    name: str
    kind: str  # ADDED, MODIFIED, DELETED
    obj: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Closed:
    """The end of a stream, with the version a BOOKMARK before it carries (None: no bookmark)."""

    bookmark: int | None


class WatchStreams:
    """The emulator's versions, its history of changes, and the watch streams it serves from them."""

    def __init__(self) -> None:
        self._versions = itertools.count(1)
        self.version = 0  # the last version given out
        self.events: list[Event] = []
        self.oldest = 0  # watches from a version below this are answered 410 Gone
        self.opened: list[dict[str, str]] = []  # the parameters of every watch served, in order
        self._queues: set[asyncio.Queue[Event | Closed]] = set()

    def next_version(self) -> str:
        self.version = next(self._versions)
        return str(self.version)

    def record(self, resource: Any, namespace: str | None, kind: str, obj: dict[str, Any]) -> None:
        """A change was made: keep it and hand it to every open stream (``obj`` carries the version the change
        got from ``next_version``)."""
        version = int(obj["metadata"]["resourceVersion"])
        name = str((obj.get("metadata") or {}).get("name") or "")
        event = Event(version, resource, namespace, name, kind, json.loads(json.dumps(obj)))
        self.events.append(event)
        for queue in self._queues:
            queue.put_nowait(event)

    def compact(self) -> None:
        """Forget the history up to now: a watch from any version before the current one gets 410 Gone."""
        self.oldest = self.version

    def close(self, *, bookmark: bool = True) -> None:
        """End every open stream, as a server does when watches time out (``bookmark``: after a BOOKMARK, to the
        clients that allow them), or as a proxy that cuts them does (no bookmark)."""
        for queue in self._queues:
            queue.put_nowait(Closed(self.version if bookmark else None))

    @property
    def open_streams(self) -> int:
        return len(self._queues)

    async def serve(
        self, raw: aiohttp.web.BaseRequest, resource: Any, namespace: str | None, stored: list[dict[str, Any]]
    ) -> aiohttp.web.StreamResponse:
        """Answer one watch request on ``resource`` (``stored``: its live objects now, for a watch from no version)."""
        params = raw.query
        name = None
        for term in filter(None, params.get("fieldSelector", "").split(",")):
            field, _, value = term.partition("=")
            value = value.removeprefix("=")  # "==" means "=" in a field selector
            if field == "metadata.name":
                name = value
            elif field == "metadata.namespace":
                namespace = value
            else:
                return _status(400, "BadRequest", f'field label not supported: "{field}"')

        def matches(event: Event) -> bool:
            return (
                event.resource == resource
                and (namespace is None or event.namespace == namespace)
                and (name is None or event.name == name)
            )

        since = params.get("resourceVersion", "")
        if since in ("", "0"):
            start = self.version
            backlog = [
                Event(start, resource, namespace, str(obj["metadata"]["name"]), "ADDED", obj)
                for obj in stored
                if name is None or obj.get("metadata", {}).get("name") == name
            ]
        elif not since.isdigit():
            return _status(400, "BadRequest", f"invalid resourceVersion {since!r}")
        else:
            start = int(since)
            backlog = [event for event in self.events if event.version > start and matches(event)]
        gone = since not in ("", "0") and start < self.oldest
        timeout = float(params.get("timeoutSeconds") or 1800)
        bookmarks = params.get("allowWatchBookmarks", "").lower() in WATCH_VALUES
        queue: asyncio.Queue[Event | Closed] = asyncio.Queue()
        self._queues.add(queue)  # with the backlog above, before any await: no change falls between the two
        self.opened.append(dict(params))
        response = aiohttp.web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        try:
            await response.prepare(raw)
            if gone:
                expired = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410,
                           "message": f"too old resource version: {start} ({self.oldest})"}  # fmt: skip
                await _send(response, "ERROR", expired)
                return response
            for event in backlog:
                await _send(response, event.kind, event.obj)
            sent = max([start, *(event.version for event in backlog)])
            loop = asyncio.get_running_loop()
            end = loop.time() + timeout
            while True:
                change = await _next(queue, raw, end - loop.time())
                if isinstance(change, Closed):
                    if bookmarks and change.bookmark is not None:  # every change up to it was in the queue before
                        await _send(response, "BOOKMARK", {"metadata": {"resourceVersion": str(change.bookmark)}})
                    return response
                if change.version > sent and matches(change):
                    await _send(response, change.kind, change.obj)
                    sent = change.version
        except (ConnectionError, asyncio.CancelledError):
            return response
        finally:
            self._queues.discard(queue)
            with contextlib.suppress(ConnectionError, RuntimeError):
                await response.write_eof()


async def _next(queue: asyncio.Queue[Event | Closed], raw: aiohttp.web.BaseRequest, remaining: float) -> (
    Event | Closed
):  # fmt: skip
    """The next change, or ``Closed`` when the stream should end: closed, timed out (no bookmark: a server sends one
    now and then, not at each timeout), or the client went away (checked every 0.2 s, since aiohttp does not cancel a
    handler whose client hung up)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + remaining
    while True:
        if raw.transport is None or raw.transport.is_closing():
            return Closed(None)
        left = end - loop.time()
        if left <= 0:
            return Closed(None)
        with contextlib.suppress(TimeoutError):
            return await asyncio.wait_for(queue.get(), min(left, 0.2))


async def _send(response: aiohttp.web.StreamResponse, kind: str, obj: dict[str, Any]) -> None:
    await response.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")


def _status(code: int, reason: str, message: str) -> aiohttp.web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}  # fmt: skip
    return aiohttp.web.json_response(body, status=code)
