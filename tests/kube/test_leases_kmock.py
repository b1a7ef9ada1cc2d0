"""Session Leases (which face replica owns a session) against an EMULATED Kubernetes API, through the real client.

Not a cluster (tests/support/kube_emulator.py): the emulator stores Leases and, like an API server, applies a patch
that names a resourceVersion only to that version. What is real: kubernetes_asyncio's requests and every decision
the bridge takes on the answers. Time is moved by hand; nothing here waits for a lease to lapse.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_codemode.cluster.api import connect
from mcp_codemode.cluster.leases import (
    HANDED_OVER_ANNOTATION,
    LEASE_GROUP,
    LEASE_VERSION,
    LEASES,
    PEER_URL_ANNOTATION,
    SessionLeases,
    lease_signing_key,
    peer_url_annotations,
    replica_lease_name,
)
from mcp_codemode.cluster.naming import ClaimKey
from tests.support.kube_deps import KUBE_TEST_DEPS_PROBLEM, require_kube_test_deps

if not KUBE_TEST_DEPS_PROBLEM:
    from tests.support.kube_emulator import emulated_cluster

pytestmark = [pytest.mark.anyio, pytest.mark.backend]  # a real loopback server and client
NAMESPACE = "mcp-codemode"
KEY = ClaimKey("principal-1", "analysis")
SIGNING_KEY = lease_signing_key("p" * 40)


class Clock:
    def __init__(self) -> None:
        self.now = datetime.datetime(2026, 11, 27, 12, 0, 0, tzinfo=datetime.UTC)

    def advance(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[Any, Path]]:
    require_kube_test_deps()
    async with emulated_cluster(tmp_path) as (emulator, kubeconfig):
        emulator.declare(LEASE_GROUP, LEASE_VERSION, LEASES)
        yield emulator, kubeconfig


async def replica(kubeconfig: Path, name: str, clock: Clock) -> SessionLeases:
    api = await connect(kubeconfig, "")
    return SessionLeases(
        api,
        namespace=NAMESPACE,
        replica=name,
        url=f"http://{name}:8765",
        key=SIGNING_KEY,
        duration=30,
        now=lambda: clock.now,
    )


def stored_leases(emulator: Any) -> list[dict[str, Any]]:
    return [obj.raw for obj in emulator.objects.values() if not obj.deleted and obj.get("kind") == "Lease"]


async def test_the_first_replica_holds_a_session_and_the_others_are_told_where(cluster: tuple[Any, Path]) -> None:
    emulator, kubeconfig = cluster
    clock = Clock()
    a, b = await replica(kubeconfig, "a", clock), await replica(kubeconfig, "b", clock)
    first = await a.holder(KEY)
    again = await a.holder(KEY)
    seen_by_b = await b.holder(KEY)
    assert (first.replica, again.replica) == ("a", "a")
    assert (seen_by_b.replica, seen_by_b.url, seen_by_b.expired) == ("a", "http://a:8765", False)
    assert KEY.name in a.owned and KEY.name not in b.owned
    (lease,) = stored_leases(emulator)
    assert lease["metadata"]["name"] == KEY.name
    assert "principal-1" not in str(lease) and "analysis" not in str(lease), "only hashes reach the cluster"
    assert lease["metadata"]["annotations"] == peer_url_annotations(SIGNING_KEY, "a", "http://a:8765")
    assert lease["spec"]["holderIdentity"] == "a" and lease["spec"]["leaseDurationSeconds"] == 30


async def test_a_lapsed_lease_is_taken_over_and_the_old_holder_learns_it_on_renewal(cluster: tuple[Any, Path]) -> None:
    _, kubeconfig = cluster
    clock = Clock()
    a, b = await replica(kubeconfig, "a", clock), await replica(kubeconfig, "b", clock)
    await a.holder(KEY)
    clock.advance(20)
    assert (await b.holder(KEY)).replica == "a", "a lease within its duration stays with its holder"
    clock.advance(20)  # 40 s since a's last renewal: lapsed
    taken = await b.holder(KEY)
    assert (taken.replica, taken.taken_from) == ("b", "a")
    third = await replica(kubeconfig, "c", clock)
    assert (await third.holder(KEY)).url == "http://b:8765", "the takeover signs the new holder's address"
    assert await a.renew() == [KEY]
    assert KEY.name not in a.owned
    assert await b.renew() == []


async def test_renewal_keeps_a_lease_from_lapsing(cluster: tuple[Any, Path]) -> None:
    _, kubeconfig = cluster
    clock = Clock()
    a, b = await replica(kubeconfig, "a", clock), await replica(kubeconfig, "b", clock)
    await a.holder(KEY)
    for _ in range(4):
        clock.advance(20)
        assert await a.renew() == []
    assert (await b.holder(KEY)).replica == "a"


async def test_two_replicas_taking_over_at_once_end_with_one_holder(cluster: tuple[Any, Path]) -> None:
    """Both read the same lapsed Lease and patch it with the version they read: the API applies one patch."""
    emulator, kubeconfig = cluster
    clock = Clock()
    a, b, c = [await replica(kubeconfig, name, clock) for name in "abc"]
    await a.holder(KEY)
    previous = await b.holder(KEY)
    assert previous.replica == "a"
    results = {}

    async def take(leases: SessionLeases) -> None:
        results[leases.replica] = await leases.take_over(KEY, previous)

    async with anyio.create_task_group() as group:
        group.start_soon(take, b)
        group.start_soon(take, c)
    winners = {holder.replica for holder in results.values()}
    assert len(winners) == 1 and winners <= {"b", "c"}, results
    (lease,) = stored_leases(emulator)
    assert lease["spec"]["holderIdentity"] in winners
    assert sum(KEY.name in leases.owned for leases in (b, c)) == 1


async def test_a_session_handed_over_at_shutdown_is_taken_at_once_and_says_where_it_lived(
    cluster: tuple[Any, Path],
) -> None:
    """A replica that stops keeps its session Leases, marked as given up: the next replica takes one over without
    waiting for a lapse (the clock does not move here), and knows the state went with a replica that stopped."""
    emulator, kubeconfig = cluster
    clock = Clock()
    a, b = await replica(kubeconfig, "a", clock), await replica(kubeconfig, "b", clock)
    await a.holder(KEY)
    await b.hand_over(KEY)  # not b's: nothing happens
    assert (await b.holder(KEY)).replica == "a"
    await a.release_all()
    (lease,) = stored_leases(emulator)  # the liveness Lease is gone, the session's stays, marked
    assert HANDED_OVER_ANNOTATION in lease["metadata"]["annotations"] and lease["spec"]["leaseDurationSeconds"] == 1
    taken = await b.holder(KEY)
    assert (taken.replica, taken.taken_from, taken.handed_over) == ("b", "a", True)
    (lease,) = stored_leases(emulator)
    assert HANDED_OVER_ANNOTATION not in lease["metadata"]["annotations"]  # b's now, an ordinary Lease
    assert lease["spec"]["leaseDurationSeconds"] == 30


async def test_an_address_someone_rewrote_is_not_given_out_and_renewal_restores_it(cluster: tuple[Any, Path]) -> None:
    """Someone who can write Leases points one at their own listener: no replica takes that for the holder's address
    (it would send the peer token there); the holder's next renewal writes its signed address back."""
    emulator, kubeconfig = cluster
    clock = Clock()
    a, b = await replica(kubeconfig, "a", clock), await replica(kubeconfig, "b", clock)
    await a.holder(KEY)
    emulator.annotate(emulator.declare(LEASE_GROUP, LEASE_VERSION, LEASES), NAMESPACE, KEY.name,
                      {PEER_URL_ANNOTATION: "http://attacker.example:80"})  # fmt: skip
    seen = await b.holder(KEY)
    assert (seen.replica, seen.url, seen.unverified) == ("a", "", "http://attacker.example:80")
    assert await a.renew() == []
    assert (await b.holder(KEY)).url == "http://a:8765"


async def test_the_api_client_never_reads_the_users_netrc(
    cluster: tuple[Any, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kubernetes_asyncio's session trusted the environment, so aiohttp read ~/.netrc before each request: an entry
    for the API server's host beside the kubeconfig's bearer token failed every request ("Cannot combine
    AUTHORIZATION header with AUTH argument"), and the bridge read a file of the user's it has no business with."""
    _, kubeconfig = cluster
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password not-for-the-bridge\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))  # where aiohttp looks first
    leases = await replica(kubeconfig, "a", Clock())
    assert (await leases.holder(KEY)).replica == "a"


async def test_a_replica_is_dead_only_once_its_liveness_lease_lapsed(cluster: tuple[Any, Path]) -> None:
    """Each renewal round renews the replica's own liveness Lease; others read it before deleting its sandboxes."""
    emulator, kubeconfig = cluster
    clock = Clock()
    a, b = await replica(kubeconfig, "a", clock), await replica(kubeconfig, "b", clock)
    assert await b.replica_lapsed("a") is False, "no liveness Lease proves nothing: a never started, or stopped cleanly"
    await a.holder(KEY)
    assert await a.renew() == []
    names = sorted(lease["metadata"]["name"] for lease in stored_leases(emulator))
    assert names == sorted([KEY.name, replica_lease_name("a")])
    clock.advance(25)
    assert await b.replica_lapsed("a") is False
    assert await a.renew() == []  # the round renews the liveness Lease too
    clock.advance(25)
    assert await b.replica_lapsed("a") is False
    clock.advance(10)  # 35 s since a's last round: a is dead
    assert await b.replica_lapsed("a") is True
    await b.forget_replica("a")
    assert [lease["metadata"]["name"] for lease in stored_leases(emulator)] == [KEY.name]
    await a.renew()  # a came back after all (it was stopped, not dead): its liveness Lease is written again
    assert await b.replica_lapsed("a") is False
    await a.release_all()
    assert [lease["metadata"]["name"] for lease in stored_leases(emulator)] == [KEY.name], (
        "a replica that stops cleanly deletes its liveness Lease and hands its sessions over"
    )
