"""Two face replicas sharing sessions: real `mcp-codemode serve --transport http` processes on 127.0.0.1 with real
bubblewrap sandboxes and the real SDK client, the session Leases on an EMULATED Kubernetes API (kmock).

The Lease store is the stand-in (and, in the last test, the claims and the pods' exec endpoint too): there is no
Kubernetes control plane on these machines (docs/kubernetes.md says what only a cluster proves). Everything the
replicas say to each other is real: the forwarded call, its progress, its cancellation, the refusal of a wrong
token, the wait for an owner that does not answer while its Lease is live, and the takeover once a killed owner's
Lease lapsed. The Leases are short (``LEASE``) so that a lapse comes within seconds; no assertion reads a clock:
the order of a lapse and a takeover is read from the times the replicas wrote in the Lease.
"""

from __future__ import annotations

import contextlib
import datetime
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import HEADER_MISMATCH

from mcp_codemode.cluster.leases import (
    HANDED_OVER_ANNOTATION,
    LEASE_GROUP,
    LEASE_VERSION,
    LEASES,
    lease_end,
    replica_lease_name,
)
from mcp_codemode.cluster.naming import ClaimKey
from mcp_codemode.face.replicas import INTERNAL_PATH
from tests.support.clients import HttpServer, http_client_for, require_bubblewrap, text_of
from tests.support.kube_deps import KUBE_TEST_DEPS_PROBLEM, require_kube_test_deps
from tests.support.patience import patient
from tests.support.prometheus import get, samples_of
from tests.support.replicas import PeerRelay, claims_of, replicas, replicas_on_cluster

if not KUBE_TEST_DEPS_PROBLEM:
    from tests.support.kube_emulator import emulated_cluster

pytestmark = [pytest.mark.anyio, pytest.mark.backend]
Pair = tuple[Any, HttpServer, HttpServer]  # the emulated API, replica a, replica b
LocalPair = tuple[Any, HttpServer, HttpServer, PeerRelay]  # and the relay in front of a


@contextlib.asynccontextmanager
async def two_replicas(tmp_path: Path, relay: PeerRelay) -> AsyncIterator[tuple[Any, HttpServer, HttpServer]]:
    """Two replicas with local bubblewrap sandboxes; only the Leases are on the emulated API. The others reach
    replica a only through ``relay`` (which passes everything on until a test makes it drop connections)."""
    require_kube_test_deps()
    require_bubblewrap()
    async with emulated_cluster(tmp_path) as (emulator, kubeconfig):
        emulator.declare(LEASE_GROUP, LEASE_VERSION, LEASES)
        async with replicas(tmp_path, kubeconfig, {"MCP_BRIDGE_PEER_URL": relay.url}) as (a, b):
            relay.target = a.peer_port
            yield emulator, a, b


# Two pairs of replicas serve the module, each shared by the tests of its backend: starting an API, an exec endpoint
# and two replicas was most of each test's time. Each test works in sessions of its own; the one that kills replica
# a comes last among its pair's tests (pytest runs a file's tests in order, on one xdist worker: tests/conftest.py).


@pytest.fixture(scope="module")
async def local_pair(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalPair]:
    """Replicas a and b on the local backend, a reached by the others through a relay the test can make drop."""
    tmp_path = tmp_path_factory.mktemp("local-pair")
    async with PeerRelay().serving() as relay, two_replicas(tmp_path, relay) as (emulator, a, b):
        yield emulator, a, b, relay


@pytest.fixture(scope="module")
async def cluster_pair(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Pair]:
    """Replicas a and b on the kubernetes backend (stand-ins: tests/support/replicas.py), with the short Lease."""
    async with replicas_on_cluster(tmp_path_factory.mktemp("cluster-pair")) as (emulator, a, b):
        yield emulator, a, b


def leases_of(emulator: Any) -> dict[str, dict[str, Any]]:
    """The stored Leases by name."""
    found = [obj.raw for obj in emulator.objects.values() if not obj.deleted and obj.get("kind") == "Lease"]
    return {lease["metadata"]["name"]: lease for lease in found}


def holders(emulator: Any, *sessions: str) -> list[str]:
    """The holders of these sessions' Leases (the pairs are shared: other tests' sessions are not counted)."""
    names = {ClaimKey("local", session).name for session in sessions}
    found = [lease for name, lease in leases_of(emulator).items() if name in names]
    return sorted(lease["spec"]["holderIdentity"] for lease in found)


def claims_since(emulator: Any, before: dict[str, str]) -> list[str]:
    """The replicas owning the live claims made since ``before`` (claims are per worker, not per session: a test of
    a shared pair counts the ones its own sessions made)."""
    return sorted(owner for name, owner in claims_of(emulator).items() if name not in before)


def lapse_of(emulator: Any, session: str) -> datetime.datetime:
    """When the session's Lease lapses unless renewed, as its holder last wrote it."""
    spec = leases_of(emulator)[ClaimKey("local", session).name]["spec"]
    end = lease_end(spec["renewTime"], spec["leaseDurationSeconds"])
    assert end is not None, spec
    return end


def acquired(emulator: Any, session: str) -> datetime.datetime:
    spec = leases_of(emulator)[ClaimKey("local", session).name]["spec"]
    return datetime.datetime.fromisoformat(spec["acquireTime"].replace("Z", "+00:00"))


UNREACHABLE = "did not answer"  # the retryable answer while the owner's Lease is live


async def until_taken_over(url: str, session: str, code: str) -> tuple[list[str], Any]:
    """Call ``code`` in ``session`` through ``url`` until the call is no longer told that the owner did not answer;
    the answers that said so, and the first that did not."""
    told: list[str] = []
    async with http_client_for(url, "auto") as client:
        with anyio.fail_after(patient(120)):  # a hang guard: the Lease lapses within LEASE seconds
            while True:
                answer = await client.call_tool("run_python", {"code": code, "session": session})
                if UNREACHABLE not in text_of(answer):
                    return told, answer
                told.append(text_of(answer))


async def test_a_session_is_served_by_either_replica(local_pair: LocalPair) -> None:
    emulator, a, b, _ = local_pair
    # Both eras: the stateless era's named session and a handshake-era client naming one.
    for mode in ("auto", "legacy"):
        session = f"shared-{mode}"
        async with http_client_for(a.url, mode) as on_a, http_client_for(b.url, mode) as on_b:
            set_on_a = await on_a.call_tool("run_python", {"code": "import os\nx = 41", "session": session})
            read_on_b = await on_b.call_tool("run_python", {"code": "x += 1\n(x, os.getpid())", "session": session})
            read_on_a = await on_a.call_tool("run_python", {"code": "(x, os.getpid())", "session": session})
        assert set_on_a.is_error is False, text_of(set_on_a)
        assert read_on_b.is_error is False, text_of(read_on_b)
        assert text_of(read_on_b) == text_of(read_on_a), "b ran the call in a's process, not in its own"
        assert text_of(read_on_b).startswith("(42, ")
    assert holders(emulator, "shared-auto", "shared-legacy") == ["replica-a", "replica-a"]

    # A forwarded call carries its files to the owner; the owner serves the session's files, the other says where.
    async with http_client_for(b.url, "auto") as on_b, http_client_for(a.url, "auto") as on_a:
        given = {"code": "open('in.txt').read()", "session": "shared-auto"}
        files: Any = {"codemode/files": [{"path": "in.txt", "content": "via b"}]}
        forwarded = await on_b.call_tool("run_python", given, meta=files)
        on_owner = await on_a.read_resource("codemode://sessions/shared-auto/files/in.txt")
        with pytest.raises(MCPError, match="does not run on this replica"):
            await on_b.read_resource("codemode://sessions/shared-auto/files/in.txt")
    assert (forwarded.is_error, text_of(forwarded)) == (False, "'via b'")
    assert [getattr(item, "text", None) for item in on_owner.contents] == ["via b"]

    # Progress of a forwarded call reaches the client of the replica it arrived at.
    seen: list[float] = []
    said: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)
        said.append(message)

    async with http_client_for(b.url, "auto") as on_b:
        slow = await on_b.call_tool(
            "run_python",
            {"code": "import time\ntime.sleep(2)\n'slept'", "session": "shared-auto"},
            progress_callback=on_progress,
        )
    assert text_of(slow) == "'slept'"
    # At least one arrives in 2 s at a 0.2 s interval however loaded the machine; the owner's own words.
    assert seen and seen == sorted(seen), seen
    assert all(message and message.startswith("running for ") for message in said), said

    # Cancelling a forwarded call interrupts it at the owner; the session's state survives. The client cancels once
    # the owner's progress shows the loop running (the progress above proves it comes), not after a fixed wait.
    async with http_client_for(b.url, "auto") as on_b:
        with anyio.CancelScope() as waited:

            async def cancel_once_running(progress: float, total: float | None, message: str | None) -> None:
                waited.cancel()

            await on_b.call_tool(
                "run_python",
                {"code": "while True:\n    pass", "timeout": 120, "session": "shared-auto"},
                progress_callback=cancel_once_running,
            )
        with anyio.fail_after(patient(30)):  # the loop had 120 s: an answer now proves the cancel reached a
            after = await on_b.call_tool("run_python", {"code": "x", "session": "shared-auto"})
    assert waited.cancelled_caught
    assert (after.is_error, text_of(after)) == (False, "42")

    # The internal endpoint opens to the shared token only.
    internal = f"http://127.0.0.1:{a.peer_port}{INTERNAL_PATH}"
    async with httpx2.AsyncClient(timeout=patient(30.0)) as http:
        body = {"key": "p:local:shared-auto", "label": "shared-auto", "owner": "local", "code": "x"}
        wrong = await http.post(internal, json=body, headers={"Authorization": "Bearer " + "w" * 64})
        none = await http.post(internal, json=body)
    assert (wrong.status_code, none.status_code) == (401, 401)
    assert "42" not in wrong.text + none.text

    # Replicas mark `session` for SEP-2243 routing: the real 2026-07-28 client mirrors it into Mcp-Param-Session
    # (a balancer may hash on it), and the server refuses a request whose header says another session.
    calls: list[httpx2.Request] = []

    async def record(request: httpx2.Request) -> None:
        if request.headers.get("mcp-method") == "tools/call":
            calls.append(request)

    recording = httpx2.AsyncClient(timeout=patient(60.0), event_hooks={"request": [record]})
    async with recording, Client(streamable_http_client(b.url, http_client=recording), mode="auto") as routed:
        listing = await routed.list_tools()
        answer = await routed.call_tool("run_python", {"code": "x", "session": "shared-auto"})
    assert listing.tools[0].input_schema["properties"]["session"]["x-mcp-header"] == "Session"
    assert (answer.is_error, text_of(answer)) == (False, "42")
    (call,) = calls
    assert call.headers["mcp-param-session"] == "shared-auto"
    async with httpx2.AsyncClient(timeout=patient(30.0)) as http:
        other = {**call.headers, "mcp-param-session": "other"}
        forged = await http.post(b.url, content=call.content, headers=other)
    assert forged.status_code == 400 and forged.json()["error"]["code"] == HEADER_MISMATCH, forged.text


async def test_an_owner_that_does_not_answer_for_a_while_keeps_its_session(
    local_pair: LocalPair,
) -> None:
    """Replica a lives and renews its Leases, but the relay that is its address drops b's connections, as a network
    blip or a full accept backlog would. b does not take the session over: it tries again while a's Lease is live,
    and then answers that a did not answer, until when its lease holds, and to try again. Nothing is lost."""
    emulator, a, b, relay = local_pair
    async with http_client_for(a.url, "auto") as on_a, http_client_for(b.url, "auto") as on_b:
        await on_a.call_tool("run_python", {"code": "x = 41", "session": "blip"})
        through = await on_b.call_tool("run_python", {"code": "x += 1\nx", "session": "blip"})
        assert (through.is_error, text_of(through)) == (False, "42")

        dropped_before = relay.dropped
        relay.drop(2)  # a blip: b's next two connections fail, the third gets through
        retried = await on_b.call_tool("run_python", {"code": "x += 1\nx", "session": "blip"})
        assert (retried.is_error, text_of(retried)) == (False, "43"), text_of(retried)
        assert holders(emulator, "blip") == ["replica-a"] and relay.dropped - dropped_before == 2

        relay.drop()  # longer than b waits
        refused = await on_b.call_tool("run_python", {"code": "x += 1\nx", "session": "blip"})
        assert refused.is_error, text_of(refused)
        assert "session 'blip' (replica-a) did not answer" in text_of(refused), text_of(refused)
        assert "its lease is live until" in text_of(refused) and "Try again" in text_of(refused)
        assert refused.structured_content["error"]["type"] == "ReplicaUnreachable"
        assert holders(emulator, "blip") == ["replica-a"], "the session was taken from a live replica"

        relay.restore()
        again = await on_b.call_tool("run_python", {"code": "x", "session": "blip"})
        on_owner = await on_a.call_tool("run_python", {"code": "x", "session": "blip"})
    assert (again.is_error, text_of(again)) == (False, "43"), "the state was lost"
    assert (on_owner.is_error, text_of(on_owner)) == (False, "43")
    assert holders(emulator, "blip") == ["replica-a"]
    assert "taken over" not in a.log_text()


async def test_a_dead_owners_session_is_taken_over_once_its_lease_lapsed_only_with_a_notice(
    local_pair: LocalPair,
) -> None:
    """The owner dies: once its Lease lapsed (not before), a call through b takes the session over, fresh, and says
    the state was lost; until then b answers that the owner did not answer and keeps off the session. (It kills
    replica a: the last test of the local pair.)"""
    emulator, a, b, _ = local_pair
    async with http_client_for(a.url, "auto") as on_a:
        kept_on_a = await on_a.call_tool("run_python", {"code": "x = 1", "session": "doomed"})
    assert (kept_on_a.is_error, holders(emulator, "doomed")) == (False, ["replica-a"]), text_of(kept_on_a)
    a.stop(signal.SIGKILL)
    lapses = lapse_of(emulator, "doomed")
    told, taken = await until_taken_over(b.url, "doomed", "'x' in globals()")
    assert acquired(emulator, "doomed") > lapses, "b took the session while a's Lease was live"
    assert all("its lease is live until" in text and "Try again" in text for text in told), told
    async with http_client_for(b.url, "auto") as on_b:
        kept = await on_b.call_tool("run_python", {"code": "y = 1\ny", "session": "doomed"})
    assert taken.is_error is False, text_of(taken)
    assert "False" in text_of(taken) and "True" not in text_of(taken), text_of(taken)
    assert "lived on replica replica-a, which stopped answering, so its state was lost" in text_of(taken)
    assert (kept.is_error, text_of(kept)) == (False, "1")
    assert holders(emulator, "doomed") == ["replica-b"]
    # b's metrics count the calls it sent to a and the session it took over (the pair's only takeover).
    status, exposition = get(b.url.removesuffix("/mcp") + "/metrics")
    counted = samples_of(exposition)
    assert status == 200 and counted[("mcp_codemode_session_takeovers_total", ())] == 1, exposition
    assert counted[("mcp_codemode_forwarded_calls_total", ())] >= 1


async def test_a_session_lease_lapsing_on_a_live_replica_takes_that_session_only(
    cluster_pair: Pair,
) -> None:
    """One session's Lease lapses while its replica lives on (here the test sets its duration to 0, so no renewal
    keeps it; a Lease whose release failed is left unrenewed the same way). The other replica takes that session
    over, but a's liveness Lease is live, so none of a's sandboxes is deleted: its other session keeps its state,
    and a ends the lost session's sandbox itself once its renewal finds the Lease taken."""
    emulator, a, b = cluster_pair
    before = claims_of(emulator)
    async with http_client_for(a.url, "auto") as on_a:
        for session in ("kept", "moved"):
            await on_a.call_tool("run_python", {"code": "x = 1", "session": session})
    assert claims_since(emulator, before) == ["replica-a", "replica-a"]
    leases = emulator.declare(LEASE_GROUP, LEASE_VERSION, LEASES)
    emulator.objects[leases, "mcp-codemode", ClaimKey("local", "moved").name].patch(
        {"spec": {"leaseDurationSeconds": 0}}
    )

    async with http_client_for(b.url, "auto") as on_b:
        taken = await on_b.call_tool("run_python", {"code": "'x' in globals()", "session": "moved"})
    assert "lived on replica replica-a" in text_of(taken) and "False" in text_of(taken), text_of(taken)
    assert "replica-a" in claims_since(emulator, before), "b deleted the sandboxes of a replica that lives"
    assert holders(emulator, "kept", "moved") == ["replica-a", "replica-b"]

    with anyio.fail_after(patient(60)):  # a's next renewal (a third of LEASE) finds "moved" taken
        while claims_since(emulator, before) != ["replica-a", "replica-b"]:
            await anyio.sleep(0.1)
    async with http_client_for(a.url, "auto") as on_a:
        still = await on_a.call_tool("run_python", {"code": "x", "session": "kept"})
    assert (still.is_error, text_of(still)) == (False, "1")


async def test_on_the_kubernetes_backend_the_dead_owners_claims_go_with_the_takeover(
    cluster_pair: Pair,
) -> None:
    """A call through the other replica keeps the session's state; the owner killed, the other replica takes the
    session over once its Lease lapsed, gives the takeover notice and deletes the dead replica's claims (every one,
    not only the session's) and its liveness Lease; stopping the last replica leaves no claim behind (checked as the
    pair stops). It kills replica a: the last test of the pair on the cluster."""
    emulator, a, b = cluster_pair
    before = claims_of(emulator)
    async with http_client_for(a.url, "auto") as on_a, http_client_for(b.url, "auto") as on_b:
        await on_a.call_tool("run_python", {"code": "x = 1", "session": "on-cluster"})
        forwarded = await on_b.call_tool("run_python", {"code": "x + 1", "session": "on-cluster"})
    assert (forwarded.is_error, text_of(forwarded)) == (False, "2")
    assert claims_since(emulator, before) == ["replica-a"]

    a.stop(signal.SIGKILL)
    lapses = lapse_of(emulator, "on-cluster")
    told, taken = await until_taken_over(b.url, "on-cluster", "'x' in globals()")
    assert acquired(emulator, "on-cluster") > lapses, "b took the session while a's Lease was live"
    assert all("(replica-a) did not answer" in text for text in told), told
    assert "lived on replica replica-a, which stopped answering" in text_of(taken), text_of(taken)
    assert "False" in text_of(taken)
    assert set(claims_of(emulator).values()) == {"replica-b"}, "the dead replica's claims are deleted"
    assert replica_lease_name("replica-a") not in leases_of(emulator), "and its liveness Lease"


async def test_a_replica_told_to_stop_finishes_its_call_and_hands_its_sessions_over_at_once(tmp_path: Path) -> None:
    """SIGTERM, as a rollout, a node drain or a scale-down sends it. Replica a stops accepting connections (its
    readiness probe fails), finishes the call running in it, hands its sessions over and deletes its claims: the next
    call through b takes the session over at once (the Lease is long: waiting for it to lapse would first answer
    "did not answer" for a third of it) and says the state went with a replica that shut down. No claim is left."""
    lease = str(round(patient(60)))
    async with replicas_on_cluster(tmp_path, MCP_BRIDGE_SESSION_LEASE=lease) as (emulator, a, b):
        async with http_client_for(a.url, "auto") as on_a, http_client_for(b.url, "auto") as on_b:
            await on_a.call_tool("run_python", {"code": "x = 1", "session": "rolled"})
            forwarded = await on_b.call_tool("run_python", {"code": "x + 1", "session": "rolled"})
            await on_a.call_tool("run_python", {"code": "import time", "session": "busy"})
            assert (forwarded.is_error, text_of(forwarded)) == (False, "2")
            running = anyio.Event()
            busy: list[Any] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                running.set()

            async def call_busy() -> None:
                code = f"time.sleep({patient(3):.1f})\n'done'"
                args = {"code": code, "session": "busy", "timeout": 120}
                busy.append(await on_a.call_tool("run_python", args, progress_callback=on_progress))

            async with anyio.create_task_group() as group:
                group.start_soon(call_busy)
                with anyio.fail_after(patient(60)):
                    await running.wait()  # the cell runs in a's sandbox
                a.process.send_signal(signal.SIGTERM) if a.process is not None else None
                with anyio.fail_after(patient(60)):
                    while accepts(a.port):  # what the readinessProbe (tcpSocket) sees
                        await anyio.sleep(0.02)
                assert not busy, "the call ended before the replica was told to stop: nothing was shown"
                taken = await on_b.call_tool("run_python", {"code": "'x' in globals()", "session": "rolled"})
        (done,) = busy
        assert (done.is_error, text_of(done)) == (False, "'done'"), "the running call was cut"
        assert taken.is_error is False and "False" in text_of(taken), text_of(taken)
        shut = "lived on replica replica-a, which shut down (a rollout, a drain or a scale-down), so its state was lost"
        assert shut in text_of(taken) and UNREACHABLE not in text_of(taken), text_of(taken)
        assert a.process is not None and await anyio.to_thread.run_sync(a.process.wait, patient(120)) == 0
        assert list(claims_of(emulator).values()) == ["replica-b"], "a deleted its claims, b made one"
        assert replica_lease_name("replica-a") not in leases_of(emulator), "a ended its liveness Lease"
        left = leases_of(emulator)[ClaimKey("local", "busy").name]["metadata"]["annotations"]
        assert HANDED_OVER_ANNOTATION in left, "the busy session was handed over once its call ended"
        async with http_client_for(b.url, "auto") as on_b:
            moved = await on_b.call_tool("run_python", {"code": "'time' in globals()", "session": "busy"})
        assert shut in text_of(moved) and "False" in text_of(moved), text_of(moved)


def accepts(port: int) -> bool:
    """Whether 127.0.0.1:port accepts a connection, as a tcpSocket probe asks."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
        return True
    return False
