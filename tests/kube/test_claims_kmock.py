"""SandboxClaim lifecycle against an EMULATED Kubernetes API (kmock on 127.0.0.1), through the real client.

Not a cluster: no controller, pods or admission run here (tests/support/kube_emulator.py says what the emulator
is and is not; docs/kubernetes.md what only a real cluster proves). The test plays agent-sandbox's controller by
writing status. What is real: kubernetes_asyncio's requests and the bridge's handling of every answer, and every
object the bridge stored is checked against the vendored CRD's schema for the version it used.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_codemode.cluster import naming
from mcp_codemode.cluster.api import KubeApiError, connect
from mcp_codemode.errors import SandboxUnavailable
from mcp_codemode.sandbox.kube.claims import ClaimNotReady, ClaimStore
from tests.support.kube_deps import KUBE_TEST_DEPS_PROBLEM, require_kube_test_deps
from tests.support.patience import patient

if not KUBE_TEST_DEPS_PROBLEM:
    from tests.support.kube_emulator import ClusterEmulator, crd_schema, emulated_cluster, schema_problems

# A real loopback server and client: "backend" keeps it out of the process-free pure run.
pytestmark = [pytest.mark.anyio, pytest.mark.backend]

NAMESPACE = "mcp-codemode"
POOL = "mcp-codemode-sandbox"
NOW = datetime.datetime(2026, 11, 26, 12, 0, 0, tzinfo=datetime.UTC)


class Clock:
    """Wall and monotonic time the test moves by hand."""

    def __init__(self) -> None:
        self.wall = NOW
        self.mono = 1000.0

    def advance(self, seconds: float) -> None:
        self.wall += datetime.timedelta(seconds=seconds)
        self.mono += seconds


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[Any, Path]]:
    require_kube_test_deps()
    async with emulated_cluster(tmp_path) as (emulator, kubeconfig):
        yield emulator, kubeconfig


def declare_agent_sandbox(emulator: ClusterEmulator) -> tuple[Any, Any]:
    claims = emulator.declare(naming.GROUP, naming.VERSION, naming.CLAIMS)
    sandboxes = emulator.declare(naming.SANDBOX_GROUP, naming.VERSION, naming.SANDBOXES)
    return claims, sandboxes


async def store_for(kubeconfig: Path, replica: str, clock: Clock, ttl: float = 1200.0) -> ClaimStore:
    api = await connect(kubeconfig, "")
    return ClaimStore(
        api,
        namespace=NAMESPACE,
        warm_pool=POOL,
        replica=replica,
        ttl=ttl,
        refresh_interval=60.0,
        now=lambda: clock.wall,
        monotonic=lambda: clock.mono,
    )


def assert_schema_valid(emulator: ClusterEmulator, resource: Any, crd_file: str) -> None:
    objects = emulator.stored(resource)
    assert objects, "nothing was stored, so nothing was checked"
    assert schema_problems(objects, crd_schema(crd_file, naming.VERSION)) == []


CLAIM_CRD = "extensions.agents.x-k8s.io_sandboxclaims.yaml"


def not_ready(emulator: ClusterEmulator, claims: Any, claim: str) -> None:
    """Play the controller: the claim's sandbox is being made (a reason that passes)."""
    emulator.write_status(claims, NAMESPACE, claim, {"conditions": [{
        "type": "Ready", "status": "False", "reason": "SandboxNotReady", "message": "Sandbox is not ready",
        "lastTransitionTime": "2026-11-26T12:00:01Z",
    }]})  # fmt: skip


def bind(emulator: ClusterEmulator, claims: Any, sandboxes: Any, claim: str, sandbox: str, pod: str | None) -> None:
    """Play the controller: a Sandbox (adopted from the warm pool when ``pod`` is given) and a Ready claim."""
    meta: dict[str, Any] = {"name": sandbox, "namespace": NAMESPACE}
    if pod is not None:
        meta["annotations"] = {naming.POD_NAME_ANNOTATION: pod}
    emulator.objects[sandboxes, NAMESPACE, sandbox] = {
        "apiVersion": f"{naming.SANDBOX_GROUP}/{naming.VERSION}",
        "kind": "Sandbox",
        "metadata": meta,
        "spec": {"podTemplate": {"spec": {"containers": [{"name": "guest", "image": "x"}]}}},
    }
    emulator.write_status(
        claims,
        NAMESPACE,
        claim,
        {
            "sandbox": {"name": sandbox},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "DependenciesReady",
                    "message": "",
                    "lastTransitionTime": "2026-11-26T12:00:01Z",
                }
            ],
        },
    )


async def test_emulated_api_create_wait_and_find_the_adopted_pod(cluster: tuple[Any, Path]) -> None:
    emulator, kubeconfig = cluster
    claims, sandboxes = declare_agent_sandbox(emulator)
    clock = Clock()
    store = await store_for(kubeconfig, "replica-a", clock)
    key = naming.ClaimKey("alice", "notebook")

    claim = await store.acquire(key)
    assert (claim.name, claim.adopted_from) == (key.name, None)
    (stored,) = emulator.stored(claims)
    assert stored["metadata"]["labels"] == key.labels()
    assert stored["metadata"]["annotations"] == {naming.OWNER_ANNOTATION: "replica-a"}
    assert stored["spec"] == {
        "warmPoolRef": {"name": POOL},
        "lifecycle": {"shutdownTime": "2026-11-26T12:20:00Z", "shutdownPolicy": "Delete"},
    }
    assert "alice" not in str(stored) and "notebook" not in str(stored)  # only hashes reach the cluster

    bind(emulator, claims, sandboxes, key.name, "sbx-1", pod="mcp-codemode-sandbox-warm-7x2")
    bound = await store.wait_bound(key.name, deadline=5)
    assert (bound.sandbox, bound.pod) == ("sbx-1", "mcp-codemode-sandbox-warm-7x2")
    assert_schema_valid(emulator, claims, CLAIM_CRD)


async def test_emulated_api_a_cold_sandbox_pod_is_named_after_the_sandbox(cluster: tuple[Any, Path]) -> None:
    emulator, kubeconfig = cluster
    claims, sandboxes = declare_agent_sandbox(emulator)
    store = await store_for(kubeconfig, "replica-a", Clock())
    claim = await store.acquire(naming.ClaimKey("alice", "cold"))
    bind(emulator, claims, sandboxes, claim.name, "sbx-cold", pod=None)
    assert (await store.wait_bound(claim.name, deadline=5)).pod == "sbx-cold"


async def test_emulated_api_two_replicas_race_for_one_session_and_the_second_adopts(
    cluster: tuple[Any, Path],
) -> None:
    emulator, kubeconfig = cluster
    claims, _ = declare_agent_sandbox(emulator)
    clock = Clock()
    first = await store_for(kubeconfig, "replica-a", clock)
    second = await store_for(kubeconfig, "replica-b", clock)
    key = naming.ClaimKey("alice", "shared")

    made = await first.acquire(key)
    clock.advance(30)
    adopted = await second.acquire(key)
    assert made.name == adopted.name == key.name
    assert (made.adopted_from, adopted.adopted_from) == (None, "replica-a")
    (stored,) = emulator.stored(claims)  # one claim, not two
    assert stored["metadata"]["annotations"][naming.OWNER_ANNOTATION] == "replica-b"
    assert stored["spec"]["lifecycle"]["shutdownTime"] == "2026-11-26T12:20:30Z"  # adoption pushes it too
    assert await first.owned() == [] and await second.owned() == [key.name]
    assert_schema_valid(emulator, claims, CLAIM_CRD)


async def test_emulated_api_use_pushes_shutdown_time_at_most_once_a_minute(cluster: tuple[Any, Path]) -> None:
    emulator, kubeconfig = cluster
    claims, _ = declare_agent_sandbox(emulator)
    clock = Clock()
    store = await store_for(kubeconfig, "replica-a", clock)
    claim = await store.acquire(naming.ClaimKey("alice", "busy"))

    def shutdown() -> str:
        (stored,) = emulator.stored(claims)
        return str(stored["spec"]["lifecycle"]["shutdownTime"])

    clock.advance(20)
    assert await store.touch(claim.name) is False  # created 20 s ago: not due
    assert shutdown() == "2026-11-26T12:20:00Z"
    clock.advance(45)
    assert await store.touch(claim.name) is True
    assert shutdown() == "2026-11-26T12:21:05Z"
    assert emulator.patch_types == ["application/merge-patch+json"]  # a JSON patch would be refused by a server
    assert_schema_valid(emulator, claims, CLAIM_CRD)


async def test_emulated_api_kill_deletes_the_claim_and_a_second_delete_is_harmless(cluster: tuple[Any, Path]) -> None:
    emulator, kubeconfig = cluster
    claims, _ = declare_agent_sandbox(emulator)
    store = await store_for(kubeconfig, "replica-a", Clock())
    claim = await store.acquire(naming.ClaimKey("alice", "doomed"))
    assert await store.release(claim.name) is True
    assert emulator.stored(claims) == []
    assert await store.release(claim.name) is False


async def test_emulated_api_sweep_deletes_only_this_replicas_orphans(cluster: tuple[Any, Path]) -> None:
    emulator, kubeconfig = cluster
    claims, _ = declare_agent_sandbox(emulator)
    clock = Clock()
    mine = await store_for(kubeconfig, "replica-a", clock)
    theirs = await store_for(kubeconfig, "replica-b", clock)
    live = await mine.acquire(naming.ClaimKey("alice", "live"))
    orphan = await mine.acquire(naming.ClaimKey("alice", "orphan"))
    other = await theirs.acquire(naming.ClaimKey("bob", "theirs"))
    emulator.objects[claims, NAMESPACE, "someone-elses"] = {
        "apiVersion": f"{naming.GROUP}/{naming.VERSION}",
        "kind": "SandboxClaim",
        "metadata": {"name": "someone-elses", "namespace": NAMESPACE,
                     "annotations": {naming.OWNER_ANNOTATION: "replica-a"}},  # not labelled as ours
        "spec": {"warmPoolRef": {"name": POOL}},
    }  # fmt: skip

    assert await mine.sweep({live.name}) == [orphan.name]
    left = sorted(obj["metadata"]["name"] for obj in emulator.stored(claims))
    assert left == sorted([live.name, other.name, "someone-elses"])


async def test_emulated_api_a_missing_warm_pool_fails_at_once_with_its_fix(cluster: tuple[Any, Path]) -> None:
    emulator, kubeconfig = cluster
    claims, _ = declare_agent_sandbox(emulator)
    clock = Clock()
    store = await store_for(kubeconfig, "replica-a", clock)
    claim = await store.acquire(naming.ClaimKey("alice", "nopool"))
    emulator.write_status(claims, NAMESPACE, claim.name, {"conditions": [{
        "type": "Ready", "status": "False", "reason": "WarmPoolNotFound",
        "message": f'SandboxWarmPool "{POOL}" not found', "lastTransitionTime": "2026-11-26T12:00:01Z",
    }]})  # fmt: skip
    with pytest.raises(ClaimNotReady) as caught:
        await store.wait_bound(claim.name, deadline=3600)  # a final reason does not wait for the deadline
    assert "WarmPoolNotFound" in str(caught.value) and "MCP_BRIDGE_KUBE_WARM_POOL" in str(caught.value)


async def test_emulated_api_a_claim_that_stays_unbound_times_out_with_what_it_saw(cluster: tuple[Any, Path]) -> None:
    emulator, kubeconfig = cluster
    claims, _ = declare_agent_sandbox(emulator)
    store = await store_for(kubeconfig, "replica-a", Clock())
    claim = await store.acquire(naming.ClaimKey("alice", "slow"))
    not_ready(emulator, claims, claim.name)
    seen = await store.get(claim.name)  # the status is read before the wait, so the message can only come from it
    with pytest.raises(ClaimNotReady) as caught:
        await store.wait_bound(claim.name, deadline=0.05, seen=seen)
    assert "not ready within 0.05 s" in str(caught.value) and "SandboxNotReady" in str(caught.value)
    assert "kubectl describe sandboxclaim" in str(caught.value)


async def test_emulated_api_crd_not_installed_names_the_fix(cluster: tuple[Any, Path]) -> None:
    _, kubeconfig = cluster  # nothing declared: the API server does not serve sandboxclaims
    store = await store_for(kubeconfig, "replica-a", Clock())
    with pytest.raises(KubeApiError) as caught:
        await store.acquire(naming.ClaimKey("alice", "nocrd"))
    assert caught.value.status == 404
    assert "does not serve sandboxclaims" in str(caught.value) and "agent-sandbox" in str(caught.value)


async def test_emulated_api_rbac_refusal_names_the_verb_and_the_check(cluster: tuple[Any, Path]) -> None:
    emulator, kubeconfig = cluster
    declare_agent_sandbox(emulator)
    forbidden = {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
        "message": 'sandboxclaims.extensions.agents.x-k8s.io is forbidden: User "bridge" cannot create resource',
    }  # fmt: skip
    emulator["post"] << 403 << forbidden
    store = await store_for(kubeconfig, "replica-a", Clock())
    with pytest.raises(KubeApiError) as caught:
        await store.acquire(naming.ClaimKey("alice", "denied"))
    assert caught.value.status == 403
    assert "RBAC forbids this bridge to create sandboxclaims" in str(caught.value)
    assert "kubectl auth can-i create sandboxclaims -n mcp-codemode" in str(caught.value)


async def test_a_named_kubeconfig_that_does_not_load_says_which_setting(tmp_path: Path) -> None:
    require_kube_test_deps()
    with pytest.raises(SandboxUnavailable) as caught:
        await connect(tmp_path / "absent", "")
    assert "MCP_BRIDGE_KUBECONFIG" in str(caught.value)


# Readiness is watched: these count the requests the emulator served, so a poll would show as reads of the claim.
CLAIM_READ = ("get", naming.GROUP, naming.CLAIMS, "")
CLAIM_WATCH = ("watch", naming.GROUP, naming.CLAIMS, "")


def served(emulator: ClusterEmulator, attributes: tuple[str, str, str, str]) -> int:
    return sum(1 for asked, ok in emulator.decisions if ok and asked == attributes)


async def until_watched(emulator: ClusterEmulator, count: int) -> None:
    """Wait until the emulator has served ``count`` watches and one is open (a hang guard, not a timing)."""
    with anyio.fail_after(patient(30)):
        while len(emulator.watching.opened) < count or not emulator.watching.open_streams:
            await anyio.sleep(0.01)


async def test_emulated_api_a_claim_bound_while_watched_is_seen_without_a_read(cluster: tuple[Any, Path]) -> None:
    emulator, kubeconfig = cluster
    claims, sandboxes = declare_agent_sandbox(emulator)
    store = await store_for(kubeconfig, "replica-a", Clock())
    claim = await store.acquire(naming.ClaimKey("alice", "watched"))
    other = await store.acquire(naming.ClaimKey("alice", "other"))
    waiting = asyncio.create_task(store.wait_bound(claim.name, deadline=patient(60), seen=claim.seen))
    await until_watched(emulator, 1)
    bind(emulator, claims, sandboxes, other.name, "sbx-other", pod="pod-other")  # not this watch's claim
    not_ready(emulator, claims, claim.name)
    bind(emulator, claims, sandboxes, claim.name, "sbx-1", pod="pod-1")
    with anyio.fail_after(patient(30)):
        bound = await waiting
    assert (bound.sandbox, bound.pod) == ("sbx-1", "pod-1")
    assert (served(emulator, CLAIM_READ), served(emulator, CLAIM_WATCH)) == (0, 1)  # one watch, no polling
    (params,) = emulator.watching.opened
    assert params["fieldSelector"] == f"metadata.name={claim.name}"
    assert claim.seen is not None and params["resourceVersion"] == claim.seen["metadata"]["resourceVersion"]


async def test_emulated_api_a_status_written_before_the_watch_began_is_not_missed(cluster: tuple[Any, Path]) -> None:
    """The watch starts from the version the create answered with: a controller that binds the claim before the
    watch is open (a warm pool binds in a fraction of a second) is replayed, not missed."""
    emulator, kubeconfig = cluster
    claims, sandboxes = declare_agent_sandbox(emulator)
    store = await store_for(kubeconfig, "replica-a", Clock())
    claim = await store.acquire(naming.ClaimKey("alice", "early"))
    bind(emulator, claims, sandboxes, claim.name, "sbx-early", pod="pod-early")
    with anyio.fail_after(patient(30)):
        bound = await store.wait_bound(claim.name, deadline=patient(60), seen=claim.seen)
    assert bound.pod == "pod-early"
    assert (served(emulator, CLAIM_READ), served(emulator, CLAIM_WATCH)) == (0, 1)


@pytest.mark.parametrize("bookmark", [True, False], ids=["timed-out-with-a-bookmark", "cut-by-a-proxy"])
async def test_emulated_api_a_watch_the_server_ends_is_watched_again_from_where_it_was(
    cluster: tuple[Any, Path], bookmark: bool
) -> None:
    """The server ends the stream (its timeout, with a BOOKMARK of the version it reached; or a proxy cutting it,
    with nothing) and the claim binds meanwhile: the next watch starts from the last version the client saw."""
    emulator, kubeconfig = cluster
    claims, sandboxes = declare_agent_sandbox(emulator)
    store = await store_for(kubeconfig, "replica-a", Clock())
    claim = await store.acquire(naming.ClaimKey("alice", "ended"))
    waiting = asyncio.create_task(store.wait_bound(claim.name, deadline=patient(60), seen=claim.seen))
    await until_watched(emulator, 1)
    await store.acquire(naming.ClaimKey("alice", "unrelated"))  # the server's version moves on, not this claim's
    emulator.watching.close(bookmark=bookmark)
    bind(emulator, claims, sandboxes, claim.name, "sbx-2", pod="pod-2")
    with anyio.fail_after(patient(30)):
        bound = await waiting
    assert bound.pod == "pod-2"
    first, second = (int(params["resourceVersion"]) for params in emulator.watching.opened)
    assert second > first if bookmark else second == first
    assert served(emulator, CLAIM_READ) == 0


async def test_emulated_api_an_expired_version_is_read_afresh_and_watched_from_there(
    cluster: tuple[Any, Path],
) -> None:
    """410 Gone: the server no longer keeps the version the watch asks for (its history spans minutes)."""
    emulator, kubeconfig = cluster
    claims, sandboxes = declare_agent_sandbox(emulator)
    store = await store_for(kubeconfig, "replica-a", Clock())
    claim = await store.acquire(naming.ClaimKey("alice", "expired"))
    not_ready(emulator, claims, claim.name)
    emulator.watching.compact()
    waiting = asyncio.create_task(store.wait_bound(claim.name, deadline=patient(60), seen=claim.seen))
    await until_watched(emulator, 2)
    bind(emulator, claims, sandboxes, claim.name, "sbx-3", pod="pod-3")
    with anyio.fail_after(patient(30)):
        bound = await waiting
    assert bound.pod == "pod-3"
    assert (served(emulator, CLAIM_READ), served(emulator, CLAIM_WATCH)) == (1, 2)
    first, second = (int(params["resourceVersion"]) for params in emulator.watching.opened)
    assert second > first  # from the fresh read's version


async def test_emulated_api_a_claim_deleted_while_watched_fails_the_wait_at_once(cluster: tuple[Any, Path]) -> None:
    emulator, kubeconfig = cluster
    declare_agent_sandbox(emulator)
    store = await store_for(kubeconfig, "replica-a", Clock())
    claim = await store.acquire(naming.ClaimKey("alice", "deleted"))
    waiting = asyncio.create_task(store.wait_bound(claim.name, deadline=3600, seen=claim.seen))
    await until_watched(emulator, 1)
    await store.release(claim.name)
    with anyio.fail_after(patient(30)), pytest.raises(ClaimNotReady) as caught:
        await waiting
    assert "was deleted while the bridge waited for it" in str(caught.value)
