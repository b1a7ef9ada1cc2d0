"""Following one object's changes with a watch, as the API server reports them, for as long as the caller waits.

Why a watch: a claim's readiness used to be polled at 0, 0.1, 0.3, 0.7, 1.5 s..., so a claim bound at 0.8 s was seen
at 1.5 s; a watch hears of the status the moment the controller writes it, and costs one open request instead of
a read every poll.

How it keeps an API server's rules (kubernetes.io, "API concepts: efficient detection of changes"):

* it watches the one object (``fieldSelector=metadata.name=NAME``, which custom resources support), from the
  ``resourceVersion`` of the caller's last read of it (the create's answer): a change made between that read and
  the watch is replayed, not missed;
* a server ends watches on its own (``timeoutSeconds``, its ``--min-request-timeout``, a proxy's idle timeout, a
  restart): the next one starts from the last version seen (an event's or a ``BOOKMARK``'s), at once after a stream
  that brought something, after a short pause (0.1 s doubling to 1 s) after streams in a row that brought nothing
  (a proxy that cuts every stream at once must not turn the wait into a flood of requests);
* a version the server no longer keeps (410 Gone: its history spans minutes) is answered with a fresh read, whose
  object is reported as the next version, and the watch starts again from it.

Each watch asks the server to end it by the caller's deadline, so none outlives the wait on the server's side.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

from ...cluster.api import KubeApiError, api_status, explain, failures

MAX_EVENT_BYTES = 4 * 1024 * 1024  # an object is at most ~1.5 MiB in etcd; a longer line is not an event
FIRST_PAUSE = 0.1  # seconds before re-establishing after a second empty stream in a row, doubling to LAST_PAUSE
LAST_PAUSE = 1.0


def resource_version(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


async def changes(
    objects: Any,
    *,
    group: str,
    version: str,
    namespace: str,
    plural: str,
    name: str,
    since: str,
    read: Callable[[], Awaitable[dict[str, Any]]],
    deadline: float,
) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
    """Yield (event type, object) for each change of ``name`` after version ``since`` until the caller stops.

    ``objects``: a kubernetes_asyncio ``CustomObjectsApi``; ``read``: a fresh read of the object (after 410 Gone,
    reported as "MODIFIED"); ``deadline``: the event loop's time by which the caller stops waiting. The types are
    the API's (ADDED, MODIFIED, DELETED); bookmarks only move ``since``. Errors are ``KubeApiError`` with a fix.
    """
    loop = asyncio.get_running_loop()
    empty = 0  # streams in a row that ended with nothing
    while True:
        try:
            response = await objects.list_namespaced_custom_object(
                group, version, namespace, plural,
                watch=True, field_selector=f"metadata.name={name}", resource_version=since,
                allow_watch_bookmarks=True, timeout_seconds=max(1, math.ceil(deadline - loop.time())),
                _preload_content=False,
            )  # fmt: skip
        except failures() as exc:
            raise explain(exc, verb="watch", what=plural, namespace=namespace) from None
        brought = False
        expired = False
        try:
            if response.status == 410:
                expired = True
            elif response.status != 200:
                raise explain(await _answer_error(response), verb="watch", what=plural, namespace=namespace)
            else:
                async for event in _events(response):
                    kind = str(event.get("type") or "")
                    obj = event.get("object") if isinstance(event.get("object"), dict) else {}
                    assert isinstance(obj, dict)
                    if kind == "ERROR":
                        if obj.get("code") == 410:
                            expired = True
                            break
                        raise KubeApiError(
                            f"the watch of {plural} {name!r} in {namespace!r} failed: {obj.get('message') or obj}",
                            status=obj.get("code") if isinstance(obj.get("code"), int) else None,
                        )
                    since = resource_version(obj) or since
                    if kind == "BOOKMARK":
                        continue
                    brought = True
                    yield kind, obj
        except failures() as exc:  # the stream broke (the server or a proxy went away): watch again
            if api_status(exc) is not None:
                raise explain(exc, verb="watch", what=plural, namespace=namespace) from None
        finally:
            response.release()
        if expired:
            fresh = await read()
            since = resource_version(fresh)
            yield "MODIFIED", fresh
        empty = 0 if brought else empty + 1  # a read after 410 is no progress of the watch's own
        if empty > 1:
            await asyncio.sleep(min(FIRST_PAUSE * 2 ** (empty - 2), LAST_PAUSE))


async def _events(response: Any) -> AsyncIterator[dict[str, Any]]:
    """The JSON lines of a watch stream, as they arrive."""
    pending = b""
    while True:
        chunk = await response.content.readany()
        if not chunk:
            return
        pending += chunk
        *lines, pending = pending.split(b"\n")
        if len(pending) > MAX_EVENT_BYTES:
            raise KubeApiError(f"a watch event was longer than {MAX_EVENT_BYTES} bytes: not an API server's answer")
        for line in lines:
            if line.strip():
                try:
                    event = json.loads(line)
                except ValueError:
                    raise KubeApiError(f"a watch answered a line that is not JSON: {line[:200]!r}") from None
                if isinstance(event, dict):
                    yield event


async def _answer_error(response: Any) -> Exception:
    """The client's ``ApiException`` for a watch answered with an error status (the body is the API's Status)."""
    from kubernetes_asyncio.client.exceptions import ApiException

    error = ApiException(status=response.status, reason=response.reason)
    error.body = (await response.read()).decode("utf-8", "replace")
    return error
