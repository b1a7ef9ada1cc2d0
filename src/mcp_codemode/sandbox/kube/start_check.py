"""Whether the cluster would give this face a sandbox now, for its readiness endpoint: one cheap read, kept a while.

What a claim needs of the cluster is an API server that answers this face's credentials and the ``SandboxWarmPool``
it names (a claim on a missing pool fails at once: ``WarmPoolNotFound``). One GET of that pool asks both. Its level
is not part of the answer: a claim on an empty pool still gets a sandbox, started cold (seconds instead of a
fraction of one), and every replica reads the same pool, so counting an empty pool as "not ready" would take every
replica out of its Service at once in a burst, when the cluster is busiest (a slow start beats no endpoint).

Why kept for ``TTL_S``: the kubelet probes every few seconds on every replica, and the answer changes rarely; one
read per ``TTL_S`` per replica costs the API server nothing. Concurrent probes share the read in flight, which is
bounded by ``TIMEOUT_S`` (under the probe's own timeout in deploy/kubernetes/base/face-deployment.yaml).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ...cluster.api import api_status, failures
from ...cluster.naming import GROUP, VERSION, WARM_POOLS
from ...errors import CodemodeError
from ..base import StartCheck

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

TTL_S = 10.0
TIMEOUT_S = 2.0


async def warm_pool_answers(api: ApiClient, namespace: str, name: str) -> StartCheck:
    """One GET of the warm pool, its outcome as a ``StartCheck`` (the detail names what was asked, for the log)."""
    from kubernetes_asyncio.client import CustomObjectsApi

    where = f"SandboxWarmPool {name!r} in namespace {namespace!r}"
    try:
        async with asyncio.timeout(TIMEOUT_S):
            pool: dict[str, Any] = await CustomObjectsApi(api).get_namespaced_custom_object(
                GROUP, VERSION, namespace, WARM_POOLS, name, _request_timeout=TIMEOUT_S
            )
    except failures() as exc:
        status = api_status(exc)
        if status == 404:
            return StartCheck(False, "warm-pool-missing", f"{where} is not there (404): claims on it would fail")
        if status in (401, 403):
            return StartCheck(False, "cluster-refused", f"the API server refused to read {where} ({status})")
        said = f"HTTP {status}" if status is not None else f"{type(exc).__name__}: {exc}".rstrip(": ")
        return StartCheck(False, "cluster-unreachable", f"the API server did not answer a read of {where} ({said})")
    ready = (pool.get("status") or {}).get("readyReplicas", 0)
    wanted = (pool.get("spec") or {}).get("replicas", 0)
    return StartCheck(True, detail=f"{where}: {ready} of {wanted} sandboxes ready")


class CachedStartCheck:
    """``warm_pool_answers`` at most once per ``TTL_S``, the read in flight shared by whoever asks meanwhile."""

    def __init__(self, connect: Callable[[], Awaitable[ApiClient]], namespace: str, name: str) -> None:
        """``connect``: the backend's own API client (made once, shared with its claims), not a new one per read."""
        self._connect = connect
        self._namespace = namespace
        self._name = name
        self._lock = asyncio.Lock()
        self._answer: StartCheck | None = None
        self._asked = -TTL_S

    async def __call__(self) -> StartCheck:
        async with self._lock:
            if self._answer is None or time.monotonic() - self._asked >= TTL_S:
                self._answer = await self._ask()
                self._asked = time.monotonic()
            return self._answer

    async def _ask(self) -> StartCheck:
        try:
            api = await self._connect()
        except CodemodeError as exc:  # no credentials, or the client is not installed
            return StartCheck(False, "cluster-refused", f"cannot connect to the Kubernetes API: {exc}")
        return await warm_pool_answers(api, self._namespace, self._name)
