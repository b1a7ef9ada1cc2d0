"""Attacks on the replicas' peer channel: a Lease pointed at an attacker's listener, hostile bodies at the endpoint.

One real ``serve --transport http`` replica (replica-b) with its session Leases on an EMULATED Kubernetes API (kmock,
as in test_replicas.py); the attacker is whoever can write Leases in the namespace (without the peer token), or
whoever holds the peer token and sends the endpoint bodies no replica sends. No sandbox starts: every call here is
refused before code would run.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import pytest

from mcp_codemode.cluster.api import connect
from mcp_codemode.cluster.leases import LEASE_GROUP, LEASE_VERSION, LEASES, PEER_URL_ANNOTATION, micro_time
from mcp_codemode.cluster.naming import ClaimKey
from mcp_codemode.face.forwarded_calls import SIGNATURE_HEADER, request_signing_key, sign_forwarded
from mcp_codemode.face.replicas import INTERNAL_PATH
from mcp_codemode.settings import Settings
from tests.support.clients import HttpServer, http_client_for, text_of
from tests.support.kube_deps import KUBE_TEST_DEPS_PROBLEM, require_kube_test_deps
from tests.support.patience import patient
from tests.support.replicas import PEER_TOKEN, replica_server

if not KUBE_TEST_DEPS_PROBLEM:
    from tests.support.kube_emulator import emulated_cluster

pytestmark = [pytest.mark.anyio, pytest.mark.backend]
NAMESPACE = Settings().kube_namespace  # where the replicas keep their Leases by default


@pytest.fixture(scope="module")
async def replica_b(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[HttpServer, Path]]:
    """Replica b on the emulated API, and the kubeconfig an attacker with Lease rights would use.

    One for the module: each attack leaves the replica as it found it (a refused call, a planted Lease of its own
    session name, a nonce of its own), and a replica and an API server per attack were most of this file's time.
    """
    require_kube_test_deps()
    tmp_path = tmp_path_factory.mktemp("replica-b")
    async with emulated_cluster(tmp_path) as (emulator, kubeconfig):
        emulator.declare(LEASE_GROUP, LEASE_VERSION, LEASES)
        server = replica_server(tmp_path, kubeconfig, "replica-b")
        await anyio.to_thread.run_sync(server.start)  # in a thread: the emulator answers on this loop meanwhile
        try:
            yield server, kubeconfig
        finally:
            await anyio.to_thread.run_sync(server.stop)


async def plant_lease(kubeconfig: Path, session: str, url: str) -> str:
    """Write the session's Lease as an attacker would: held by a replica that seems alive, at the attacker's URL."""
    from kubernetes_asyncio.client import CustomObjectsApi

    key = ClaimKey("local", session)
    now = micro_time(datetime.datetime.now(datetime.UTC))
    lease = {
        "apiVersion": f"{LEASE_GROUP}/{LEASE_VERSION}", "kind": "Lease",
        "metadata": {"name": key.name, "namespace": NAMESPACE, "labels": key.labels(),
                     "annotations": {PEER_URL_ANNOTATION: url}},
        "spec": {"holderIdentity": "replica-a", "leaseDurationSeconds": 3600, "acquireTime": now, "renewTime": now},
    }  # fmt: skip
    api = await connect(kubeconfig, "")
    try:
        leases = CustomObjectsApi(api)
        await leases.create_namespaced_custom_object(LEASE_GROUP, LEASE_VERSION, NAMESPACE, LEASES, lease)
    finally:
        await api.close()
    return key.name


async def test_a_lease_pointed_at_an_attackers_listener_gets_no_connection(
    replica_b: tuple[HttpServer, Path],
) -> None:
    server, kubeconfig = replica_b
    received: list[bytes] = []

    async def record(stream: anyio.abc.SocketStream) -> None:
        received.append(b"(connected)")
        with anyio.move_on_after(patient(5)):
            async for chunk in stream:
                received.append(chunk)
        await stream.aclose()

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    lease_name = await plant_lease(kubeconfig, "stolen", f"http://127.0.0.1:{port}")
    async with anyio.create_task_group() as group:
        group.start_soon(listener.serve, record)
        async with http_client_for(server.url, "auto") as client:
            answer = await client.call_tool("run_python", {"code": "'ran'", "session": "stolen"})
        group.cancel_scope.cancel()
    assert PEER_TOKEN.encode() not in b"".join(received), "the peer token went to the Lease's address"
    assert received == [], "the replica connected to an address nobody signed"
    assert answer.is_error, text_of(answer)
    assert "not signed" in text_of(answer) and "MCP_BRIDGE_PEER_TOKEN" in text_of(answer), text_of(answer)
    log = server.log_text()
    assert f"Lease {NAMESPACE}/{lease_name}" in log and f"127.0.0.1:{port}" in log, log


def forwarded(**changes: Any) -> dict[str, Any]:
    body = {"key": "p:local:hostile", "label": "hostile", "owner": "local", "code": "1", "timeout": 30}
    body.update(changes)
    return body


def signed(body: bytes, now: float | None = None) -> dict[str, str]:
    """Headers of a call signed as a replica signs it: the peer token's key over the time, a nonce and the body."""
    signature = sign_forwarded(request_signing_key(PEER_TOKEN), body, now)
    return {SIGNATURE_HEADER: signature, "Content-Type": "application/json"}


HOSTILE_BODIES = {
    "NaN timeout": json.dumps(forwarded(timeout=float("nan"))),  # Python's json writes NaN, and reads it
    "infinite timeout": json.dumps(forwarded()).replace('"timeout": 30', '"timeout": 1e999'),
    "negative timeout": json.dumps(forwarded(timeout=-1)),
    "boolean timeout": json.dumps(forwarded(timeout=True)),
    "string reset": json.dumps(forwarded(reset="no")),
    "deep nesting": json.dumps(forwarded()).replace('"1"', "[" * 100_000 + "]" * 100_000),
}


async def test_the_peer_endpoint_answers_hostile_bodies_with_400_naming_the_field(
    replica_b: tuple[HttpServer, Path],
) -> None:
    """With the peer token, as a replica would send them: each gets 400 and says what is wrong, none a 500."""
    server, _ = replica_b
    internal = f"http://127.0.0.1:{server.peer_port}{INTERNAL_PATH}"
    answers = {}
    async with httpx2.AsyncClient(timeout=patient(30.0)) as http:
        for what, body in HOSTILE_BODIES.items():
            answer = await http.post(internal, content=body, headers=signed(body.encode()))
            answers[what] = (answer.status_code, answer.text[:300])
    named = {what: "`timeout`" if "timeout" in what else "`reset`" if "reset" in what else "nested too deeply"
             for what in HOSTILE_BODIES}  # fmt: skip
    assert {what: status for what, (status, _) in answers.items()} == dict.fromkeys(HOSTILE_BODIES, 400), answers
    for what, (_, text) in answers.items():
        assert named[what] in json.loads(text)["error"], (what, text)
    assert "Traceback" not in server.log_text()


async def test_a_captured_forwarded_call_cannot_be_replayed_changed_or_sent_late_and_the_token_is_never_sent(
    replica_b: tuple[HttpServer, Path],
) -> None:
    """Whoever captures a forwarded call on the cluster network (issue 32): the bearer token it used to carry opened
    the endpoint to any principal; a signed call is good once, for a minute, for its own body. The body here is
    signed but refused by the strict reader (400), so no sandbox starts: what matters is that the signature let
    it through once, and never again."""
    server, _ = replica_b
    internal = f"http://127.0.0.1:{server.peer_port}{INTERNAL_PATH}"
    body = json.dumps(forwarded(timeout=-1)).encode()
    headers = signed(body)
    other_principal = json.dumps(forwarded(timeout=-1, owner="t-0123456789ab")).encode()
    async with httpx2.AsyncClient(timeout=patient(30.0)) as http:
        first = await http.post(internal, content=body, headers=headers)
        replayed = await http.post(internal, content=body, headers=headers)
        changed = await http.post(internal, content=other_principal, headers=signed(body))
        stale = await http.post(internal, content=body, headers=signed(body, now=1_700_000_000))
        bearer = await http.post(internal, content=body, headers={"Authorization": f"Bearer {PEER_TOKEN}"})
    assert first.status_code == 400 and "`timeout`" in first.json()["error"], first.text
    assert (replayed.status_code, changed.status_code, stale.status_code, bearer.status_code) == (401,) * 4
    assert "already taken once" in replayed.json()["error"], replayed.text
    assert "does not match" in changed.json()["error"], changed.text
    assert "outside ±60 s" in stale.json()["error"], stale.text
    assert "must carry Mcp-Codemode-Peer-Signature" in bearer.json()["error"], bearer.text


async def test_forwarded_calls_have_a_port_of_their_own_and_the_mcp_port_never_takes_one(
    replica_b: tuple[HttpServer, Path],
) -> None:
    """The peer endpoint used to be a path on the MCP port, behind the same Service as the clients; now it is the
    only thing on MCP_BRIDGE_PEER_PORT (which a NetworkPolicy opens to the face pods alone), and the MCP port answers
    a signed forwarded call as any unknown path."""
    server, _ = replica_b
    body = json.dumps(forwarded(timeout=-1)).encode()
    on_mcp_port = server.url.removesuffix("/mcp") + INTERNAL_PATH
    on_peer_port = f"http://127.0.0.1:{server.peer_port}"
    async with httpx2.AsyncClient(timeout=patient(30.0)) as http:
        refused = await http.post(on_mcp_port, content=body, headers=signed(body))
        taken = await http.post(on_peer_port + INTERNAL_PATH, content=body, headers=signed(body))
        mcp_on_peer_port = await http.post(on_peer_port + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert refused.status_code == 404, refused.text
    assert taken.status_code == 400 and "`timeout`" in taken.json()["error"], taken.text  # read: the signature held
    assert mcp_on_peer_port.status_code == 404 and "other replicas only" in mcp_on_peer_port.text
