"""Two face replicas sharing sessions: real `mcp-codemode serve --transport http` processes on 127.0.0.1 with real
bubblewrap sandboxes and the real SDK client, the session Leases on an EMULATED Kubernetes API (kmock).

The Lease store is the stand-in (and, in the last test, the claims and the pods' exec endpoint too): there is no
Kubernetes control plane on these machines (docs/kubernetes.md says what only a cluster proves). Everything the
replicas say to each other is real: the forwarded call, its progress, its cancellation, the refusal of a wrong
token, and the takeover when the owner is killed.
"""

from __future__ import annotations

import contextlib
import signal
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

from mcp_codemode.face.replicas import INTERNAL_PATH
from mcp_codemode.sandbox.bubblewrap import BubblewrapBackend
from mcp_codemode.sandbox.kube import naming
from mcp_codemode.sandbox.kube.leases import LEASE_GROUP, LEASE_VERSION, LEASES
from tests.support.backends import require_usable, sandbox_settings
from tests.support.cells import private_state_dir
from tests.support.clients import HttpServer, http_client_for, require_bubblewrap, text_of
from tests.support.exec_endpoint import ExecEndpoint
from tests.support.kube_deps import KUBE_TEST_DEPS_PROBLEM, require_kube_test_deps
from tests.support.patience import patient
from tests.support.replicas import replica_server

if not KUBE_TEST_DEPS_PROBLEM:
    from tests.support.kube_emulator import agent_sandbox_controller, emulated_cluster, write_kubeconfig

pytestmark = [pytest.mark.anyio, pytest.mark.backend]


@contextlib.asynccontextmanager
async def replicas(tmp_path: Path, kubeconfig: Path, **settings: str) -> AsyncIterator[tuple[HttpServer, HttpServer]]:
    """Replicas a and b of one deployment, sharing sessions through Leases on the API ``kubeconfig`` names."""
    servers = [replica_server(tmp_path, kubeconfig, name, **settings) for name in ("replica-a", "replica-b")]
    try:
        for server in servers:  # in a thread: the emulator answers on this event loop meanwhile
            await anyio.to_thread.run_sync(server.start)
        yield servers[0], servers[1]
    finally:
        for server in servers:
            await anyio.to_thread.run_sync(server.stop)


@contextlib.asynccontextmanager
async def two_replicas(tmp_path: Path) -> AsyncIterator[tuple[Any, HttpServer, HttpServer]]:
    """Two replicas with local bubblewrap sandboxes; only the Leases are on the emulated API."""
    require_kube_test_deps()
    require_bubblewrap()
    async with emulated_cluster(tmp_path) as (emulator, kubeconfig):
        emulator.declare(LEASE_GROUP, LEASE_VERSION, LEASES)
        async with replicas(tmp_path, kubeconfig) as (a, b):
            yield emulator, a, b


def holders(emulator: Any) -> list[str]:
    leases = [obj.raw for obj in emulator.objects.values() if not obj.deleted and obj.get("kind") == "Lease"]
    return sorted(lease["spec"]["holderIdentity"] for lease in leases)


async def test_a_session_is_served_by_either_replica_and_survives_its_owner_only_with_a_notice(
    tmp_path: Path,
) -> None:
    async with two_replicas(tmp_path) as (emulator, a, b):
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
        assert holders(emulator) == ["replica-a", "replica-a"]

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

        # Cancelling a forwarded call interrupts it at the owner; the session's state survives.
        async with http_client_for(b.url, "auto") as on_b:
            with anyio.move_on_after(3) as waited:
                await on_b.call_tool(
                    "run_python", {"code": "while True:\n    pass", "timeout": 120, "session": "shared-auto"}
                )
            with anyio.fail_after(patient(30)):  # the loop had 120 s: an answer now proves the cancel reached a
                after = await on_b.call_tool("run_python", {"code": "x", "session": "shared-auto"})
        assert waited.cancelled_caught
        assert (after.is_error, text_of(after)) == (False, "42")

        # The internal endpoint opens to the shared token only.
        internal = a.url.removesuffix("/mcp") + INTERNAL_PATH
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

        # The owner dies: the next call through b takes the session over, fresh, and says the state was lost.
        a.stop(signal.SIGKILL)
        async with http_client_for(b.url, "auto") as on_b:
            taken = await on_b.call_tool("run_python", {"code": "'x' in globals()", "session": "shared-auto"})
            kept = await on_b.call_tool("run_python", {"code": "y = 1\ny", "session": "shared-auto"})
        assert taken.is_error is False, text_of(taken)
        assert "False" in text_of(taken) and "True" not in text_of(taken), text_of(taken)
        assert "lived on replica replica-a, which stopped answering, so its state was lost" in text_of(taken)
        assert (kept.is_error, text_of(kept)) == (False, "1")
        assert "replica-b" in holders(emulator)


def claims_of(emulator: Any) -> dict[str, str]:
    """Live claims by name, with the replica each is annotated as owned by."""
    found = [obj.raw for obj in emulator.objects.values() if not obj.deleted and obj.get("kind") == "SandboxClaim"]
    return {claim["metadata"]["name"]: claim["metadata"]["annotations"][naming.OWNER_ANNOTATION] for claim in found}


async def test_on_the_kubernetes_backend_the_dead_owners_claims_go_with_the_takeover(tmp_path: Path) -> None:
    """The replicas on MCP_BRIDGE_RUNTIME=kubernetes, all on STAND-INS: claims and Leases on the emulated API (the
    test plays agent-sandbox's controller), each claimed pod a real bubblewrap worker behind the loopback exec
    endpoint. A call through the other replica keeps the session's state; killing the owner gives the takeover
    notice and deletes the dead replica's claims; stopping the last replica leaves no claim behind."""
    require_kube_test_deps()
    with private_state_dir() as state:
        base = sandbox_settings(state_dir=state)
        require_usable(BubblewrapBackend(base))
        async with (
            emulated_cluster(tmp_path) as (emulator, _),
            agent_sandbox_controller(emulator, "mcp-codemode") as pods,
            ExecEndpoint(base, api_url=emulator.address, authorize=emulator.decide) as endpoint,
        ):
            emulator.declare(LEASE_GROUP, LEASE_VERSION, LEASES)
            kubeconfig = write_kubeconfig(tmp_path / "through-endpoint", endpoint.url)
            async with replicas(tmp_path, kubeconfig, MCP_BRIDGE_RUNTIME="kubernetes") as (a, b):
                async with http_client_for(a.url, "auto") as on_a, http_client_for(b.url, "auto") as on_b:
                    await on_a.call_tool("run_python", {"code": "x = 1", "session": "on-cluster"})
                    forwarded = await on_b.call_tool("run_python", {"code": "x + 1", "session": "on-cluster"})
                assert (forwarded.is_error, text_of(forwarded)) == (False, "2")
                assert list(claims_of(emulator).values()) == ["replica-a"] and len(pods) == 1

                a.stop(signal.SIGKILL)
                async with http_client_for(b.url, "auto") as on_b:
                    taken = await on_b.call_tool("run_python", {"code": "'x' in globals()", "session": "on-cluster"})
                assert "lived on replica replica-a, which stopped answering" in text_of(taken), text_of(taken)
                assert "False" in text_of(taken)
                assert list(claims_of(emulator).values()) == ["replica-b"], "the dead replica's claim is deleted"
            assert claims_of(emulator) == {}, "the last replica's shutdown deletes its claims"
