"""``remote.py --kubeconfig PATH``: the kubernetes backend measured on a cluster (issue 32, item 7).

Four figures, each ``n`` samples (at least 30 unless ``--quick``), with median and p95:

* **cold claim**: create a ``SandboxClaim`` until it is bound (Ready seen through the watch, its pod found), on a
  warm pool with no sandbox in it: a ``SandboxWarmPool`` of 0 replicas this benchmark creates for its run from the
  same template as the warm pool (and deletes after), so agent-sandbox starts a sandbox for each claim. Scaling the
  real pool to 0 would do the same, but would cold-start the sessions of everyone using the cluster meanwhile.
  ``--cold-pool NAME`` names an empty pool of your own instead (nothing is created then).
* **warm-pool claim**: the same on the warm pool, each claim made once the pool is full again (``readyReplicas``
  reaching ``replicas``), so it adopts a booted sandbox.
* **warm call** and **warm-pool first call**: ``SessionManager.execute("1")`` in a session that has run before
  (a cell's round trip over the exec stream through the API server), and in a new session whose worker the
  bridge's own warm pool (``MCP_BRIDGE_WARM_POOL``) had already claimed and attached, interleaved sample by sample.
  What the first call adds over a warm call is the target's "over the cell time".
* **forwarded call**: two face replicas this benchmark starts on this machine (``serve --transport http``, on
  ``MCP_BRIDGE_RUNTIME=kubernetes`` with this kubeconfig: their sandboxes and Leases are the cluster's), a warm
  call sent to the session's owner and the same call to the other replica, which forwards it, alternating. What is
  measurable from outside a cluster is what forwarding adds on the replicas' side (the peer channel and the owner's
  endpoint); the hop between two pods is the cluster network's round trip on top, and a balancer that hashes on the
  session avoids it. The face pods deployed in the cluster are not used: from outside, a Service cannot be told
  which pod to reach.

Targets (issue 32): cold claim at most 1.5 s, the warm-pool first call at most 10 ms over a warm call, forwarding at
most 1 ms, each on the medians. ``--stand-in`` runs the same code against the emulated API server and the loopback
exec endpoint of the tests (a bubblewrap worker behind each exec stream; the test's controller binds every claim
at once, warm or cold): it proves the code path, and its figures are not a cluster's (the output says so).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from common import Stats, summarize
from mcp_codemode.cluster import naming
from mcp_codemode.cluster.api import connect
from mcp_codemode.cluster.leases import LEASE_GROUP, LEASE_VERSION, LEASES
from mcp_codemode.runs.sessions import SessionManager
from mcp_codemode.sandbox.kube.backend import KubernetesBackend
from mcp_codemode.sandbox.kube.claims import ClaimStore
from mcp_codemode.settings import Settings
from replicas import SESSION, owner_and_forwarded

COLD_TARGET_MS = 1500.0
FIRST_CALL_OVER_WARM_MS = 10.0
FORWARDING_MS = 1.0
BENCH_LABEL = "mcp-codemode-benchmark"


@contextlib.asynccontextmanager
async def cold_pool(api: Any, namespace: str, warm_pool: str, name: str) -> AsyncIterator[str]:
    """An empty warm pool of the warm pool's template, for this run only; ``name`` given: that one, as it is."""
    from kubernetes_asyncio.client import CustomObjectsApi

    if name:
        yield name
        return
    objects = CustomObjectsApi(api)
    pool = await objects.get_namespaced_custom_object(naming.GROUP, naming.VERSION, namespace, naming.WARM_POOLS,
                                                      warm_pool)  # fmt: skip
    template = pool["spec"]["sandboxTemplateRef"]["name"]
    created = f"{warm_pool}-bench-cold-{uuid.uuid4().hex[:6]}"
    body = {"apiVersion": f"{naming.GROUP}/{naming.VERSION}", "kind": "SandboxWarmPool",
            "metadata": {"name": created, "namespace": namespace, "labels": {naming.MANAGED_BY: BENCH_LABEL}},
            "spec": {"replicas": 0, "sandboxTemplateRef": {"name": template}}}  # fmt: skip
    try:
        await objects.create_namespaced_custom_object(naming.GROUP, naming.VERSION, namespace, naming.WARM_POOLS, body)
    except Exception as exc:  # noqa: BLE001 - said with the way around it
        raise SystemExit(
            f"benchmarks/remote.py: cannot create the empty warm pool {created} for the cold claims ({exc}); use a "
            "kubeconfig that may create sandboxwarmpools in the namespace, or name an empty pool with --cold-pool"
        ) from None
    try:
        yield created
    finally:
        with contextlib.suppress(Exception):
            await objects.delete_namespaced_custom_object(naming.GROUP, naming.VERSION, namespace,
                                                          naming.WARM_POOLS, created)  # fmt: skip


async def pool_full(api: Any, namespace: str, pool: str, patience: float) -> None:
    """Return once the warm pool has every sandbox it wants ready (read every 0.2 s: the harness, not the product)."""
    from kubernetes_asyncio.client import CustomObjectsApi

    objects = CustomObjectsApi(api)
    ready = wanted = 0
    try:
        with anyio.fail_after(patience):
            while True:
                found = await objects.get_namespaced_custom_object(naming.GROUP, naming.VERSION, namespace,
                                                                   naming.WARM_POOLS, pool)  # fmt: skip
                wanted = int((found.get("spec") or {}).get("replicas") or 0)
                ready = int((found.get("status") or {}).get("readyReplicas") or 0)
                if wanted and ready >= wanted:
                    return
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise SystemExit(
            f"benchmarks/remote.py: SandboxWarmPool {pool} was not full within {patience:g} s ({ready} of {wanted} "
            f"ready), so a claim could not be told warm; see `kubectl describe sandboxwarmpool {pool} -n {namespace}`"
        ) from None


async def claims(store: ClaimStore, kind: str, n: int, deadline: float, before: Callable[[], Awaitable[None]]) -> (
    Stats
):  # fmt: skip
    """Milliseconds from creating a claim to its being bound with its pod found; each claim deleted after."""
    samples = []
    for i in range(n):
        await before()
        began = time.perf_counter()
        claim = await store.acquire(naming.ClaimKey(f"benchmark:{store.replica}", f"{kind}:{i}"))
        try:
            await store.wait_bound(claim.name, deadline, claim.seen)
            samples.append((time.perf_counter() - began) * 1000)
        finally:
            await store.release(claim.name)
    return summarize(samples)


async def calls(settings: Settings, n: int, patience: float) -> tuple[Stats, Stats]:
    """(warm call, warm-pool first call), interleaved: see the module docstring. The bridge's pool is the base
    Deployment's (2), and each round waits until it is full again, so no refill runs during the timed calls."""
    warm: list[float] = []
    first: list[float] = []
    pool = 2
    async with SessionManager(KubernetesBackend(settings), settings.replace(warm_pool=pool)) as sessions:
        for i in range(n + 1):  # the first round is a warm-up, unmeasured
            with anyio.fail_after(patience):
                while sessions.pool.ready < pool:  # the harness's wait, read every 20 ms
                    await asyncio.sleep(0.02)
            began = time.perf_counter()
            _check(await sessions.execute("1", session="warm", timeout=60), "warm call")
            middle = time.perf_counter()
            _check(await sessions.execute("1", session=f"new-{i}", timeout=60), "warm-pool first call")
            if i:
                warm.append((middle - began) * 1000)
                first.append((time.perf_counter() - middle) * 1000)
            await sessions.discard(f"new-{i}")
    return summarize(warm), summarize(first)


def _check(result: Any, what: str) -> None:
    if result.status != "ok" or result.value != "1":
        raise SystemExit(f"benchmarks/remote.py: a {what} failed: {result.status} {result.notice}")


async def forwarded(kubeconfig: Path, settings: Settings, base: Path, n: int) -> tuple[Stats, Stats]:
    """(owner call, forwarded call) with two replicas started here on the cluster's backend, alternating."""
    from tests.support.clients import HttpServer

    token = uuid.uuid4().hex + uuid.uuid4().hex
    run = uuid.uuid4().hex[:6]
    servers = [
        HttpServer(base / f"{name}.log", MCP_BRIDGE_RUNTIME="kubernetes", MCP_BRIDGE_KUBECONFIG=str(kubeconfig),
                   MCP_BRIDGE_KUBE_CONTEXT=settings.kube_context, MCP_BRIDGE_KUBE_NAMESPACE=settings.kube_namespace,
                   MCP_BRIDGE_KUBE_WARM_POOL=settings.kube_warm_pool, MCP_BRIDGE_REPLICA=f"bench-{name}-{run}",
                   MCP_BRIDGE_PEER_TOKEN=token, MCP_BRIDGE_PEER_PORT="{peer_port}",
                   MCP_BRIDGE_PEER_URL="http://127.0.0.1:{peer_port}", MCP_BRIDGE_WARM_POOL="0",
                   MCP_BRIDGE_STATE_DIR=str(base / f"state-{name}"))
        for name in ("owner", "other")
    ]  # fmt: skip
    try:
        for server in servers:
            await anyio.to_thread.run_sync(server.start)
        samples = await owner_and_forwarded(servers, n, warm_up=10)
    finally:
        for server in servers:
            await anyio.to_thread.run_sync(server.stop)
        await _forget_session_lease(kubeconfig, settings)
    return summarize(samples["owner"]), summarize(samples["forwarded"])


async def _forget_session_lease(kubeconfig: Path, settings: Settings) -> None:
    """The replicas hand the session over when they stop (its Lease stays, for a next call): delete it."""
    from kubernetes_asyncio.client import CustomObjectsApi

    api = await connect(kubeconfig, settings.kube_context)
    try:
        with contextlib.suppress(Exception):
            await CustomObjectsApi(api).delete_namespaced_custom_object(
                LEASE_GROUP,
                LEASE_VERSION,
                settings.kube_namespace,
                LEASES,
                naming.ClaimKey("local", SESSION).name,
            )
    finally:
        await api.close()


def target(name: str, limit_ms: float, measured_ms: float) -> dict[str, Any]:
    return {"name": name, "median_limit_ms": limit_ms, "measured_median_ms": round(measured_ms, 3),
            "met": measured_ms <= limit_ms}  # fmt: skip


async def measure(kubeconfig: Path, settings: Settings, base: Path, n: int, cold_pool_name: str = "") -> (
    dict[str, Any]
):  # fmt: skip
    """Every figure of the module docstring against the cluster ``kubeconfig`` reaches (``settings``: namespace, warm
    pool, context; this run's replica name); ``base``: a directory for the replicas' logs and state."""
    patience = max(120.0, settings.startup_timeout * 2)
    api = await connect(kubeconfig, settings.kube_context)
    try:
        namespace, pool = settings.kube_namespace, settings.kube_warm_pool
        async with cold_pool(api, namespace, pool, cold_pool_name) as empty:
            cold_store = ClaimStore(api, namespace=namespace, warm_pool=empty, replica=settings.replica, ttl=600)
            warm_store = ClaimStore(api, namespace=namespace, warm_pool=pool, replica=settings.replica, ttl=600)

            async def nothing() -> None:
                return None

            async def full() -> None:
                await pool_full(api, namespace, pool, patience)

            cold = await claims(cold_store, "cold", n, settings.startup_timeout, nothing)
            warm_claim = await claims(warm_store, "warm", n, settings.startup_timeout, full)
        server = str(api.configuration.host)
    finally:
        await api.close()
    warm, first = await calls(settings, n, patience)
    owner, through = await forwarded(kubeconfig, settings, base, n)
    over_warm = first["median_ms"] - warm["median_ms"]
    forwarding = through["median_ms"] - owner["median_ms"]
    return {
        "api_server": server,
        "what": "cluster",
        "namespace": namespace,
        "warm_pool": pool,
        "cold_pool": cold_pool_name or "(created for the run, 0 replicas, deleted after)",
        "n": n,
        "cold_claim": cold,
        "warm_pool_claim": warm_claim,
        "warm_call": warm,
        "warm_pool_first_call": first,
        "owner_call": owner,
        "forwarded_call": through,
        "added_median_ms": {
            "warm_pool_first_call_over_warm_call": round(over_warm, 3),
            "forwarding": round(forwarding, 3),
        },
        "targets": [
            target(f"cold claim <= {COLD_TARGET_MS:g} ms", COLD_TARGET_MS, float(cold["median_ms"])),
            target(
                f"warm-pool first call <= {FIRST_CALL_OVER_WARM_MS:g} ms over a warm call",
                FIRST_CALL_OVER_WARM_MS,
                over_warm,
            ),
            target(f"forwarding adds <= {FORWARDING_MS:g} ms", FORWARDING_MS, forwarding),
        ],
    }
