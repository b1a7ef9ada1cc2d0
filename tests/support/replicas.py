"""Face replicas that share sessions, as the replica tests start them: ``serve`` processes with Leases on an API,
the same on the kubernetes backend against stand-ins, and a relay that makes one unreachable for a while without
stopping it."""

from __future__ import annotations

import asyncio
import contextlib
import math
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio

from mcp_codemode.cluster import naming
from mcp_codemode.cluster.leases import LEASE_GROUP, LEASE_VERSION, LEASES
from mcp_codemode.sandbox.bubblewrap import BubblewrapBackend

from .backends import require_usable, sandbox_settings
from .cells import private_state_dir
from .clients import HttpServer
from .exec_endpoint import ExecEndpoint
from .kube_deps import KUBE_TEST_DEPS_PROBLEM, require_kube_test_deps
from .patience import patient

if not KUBE_TEST_DEPS_PROBLEM:
    from .kube_emulator import agent_sandbox_controller, emulated_cluster, write_kubeconfig

PEER_TOKEN = uuid.uuid4().hex + uuid.uuid4().hex  # the secret every replica of one test deployment shares
# Seconds a replica's hold lasts unrenewed (the least the setting allows, longer on a slow machine): a killed
# owner's sessions are taken over within this, and a live one renews three times in it.
LEASE = str(max(5, round(patient(5))))


def replica_server(tmp_path: Path, kubeconfig: Path, name: str, **settings: str) -> HttpServer:
    """Replica ``name`` of the deployment (not started), sharing sessions through Leases on ``kubeconfig``'s API.

    ``settings`` may replace the defaults below (MCP_BRIDGE_PEER_URL: where the others reach its peer port)."""
    defaults = {
        "MCP_BRIDGE_REPLICA": name,
        "MCP_BRIDGE_PEER_TOKEN": PEER_TOKEN,
        "MCP_BRIDGE_PEER_PORT": "{peer_port}",
        "MCP_BRIDGE_PEER_URL": "http://127.0.0.1:{peer_port}",
        "MCP_BRIDGE_KUBECONFIG": str(kubeconfig),
        "MCP_BRIDGE_WARM_POOL": "0",
        "MCP_BRIDGE_PROGRESS_INTERVAL": "0.2",
        # The cancel test needs the interrupt to win, not the hard kill that follows a missed grace: a starved
        # machine can stall the guest for seconds (seen here: the default 2 s lost to a stall, state gone).
        "MCP_BRIDGE_INTERRUPT_GRACE": "30",
    }
    return HttpServer(tmp_path / f"{name}.log", **(defaults | settings))


@contextlib.asynccontextmanager
async def replicas(tmp_path: Path, kubeconfig: Path, a_settings: dict[str, str] | None = None,
                   **settings: str) -> AsyncIterator[tuple[HttpServer, HttpServer]]:  # fmt: skip
    """Replicas a and b of one deployment, sharing sessions through Leases on the API ``kubeconfig`` names;
    ``a_settings``: replica a's own (where the others reach it)."""
    servers = [
        replica_server(tmp_path, kubeconfig, name, **({"MCP_BRIDGE_SESSION_LEASE": LEASE} | settings | own))
        for name, own in (("replica-a", a_settings or {}), ("replica-b", {}))
    ]
    try:
        await _each(servers, HttpServer.start)
        yield servers[0], servers[1]
    finally:
        await _each(servers, HttpServer.stop)


async def _each(servers: list[HttpServer], step: Callable[[HttpServer], object]) -> None:
    """``step`` on every replica at once, each in a thread: the emulator answers on this event loop meanwhile, and
    one replica's start (or drain) need not wait for the other's."""
    async with anyio.create_task_group() as group:
        for server in servers:
            group.start_soon(anyio.to_thread.run_sync, step, server)


def claims_of(emulator: Any) -> dict[str, str]:
    """Live claims by name, with the replica each is annotated as owned by."""
    found = [obj.raw for obj in emulator.objects.values() if not obj.deleted and obj.get("kind") == "SandboxClaim"]
    return {claim["metadata"]["name"]: claim["metadata"]["annotations"][naming.OWNER_ANNOTATION] for claim in found}


@contextlib.asynccontextmanager
async def replicas_on_cluster(tmp_path: Path, **settings: str) -> AsyncIterator[tuple[Any, HttpServer, HttpServer]]:
    """The replicas on MCP_BRIDGE_RUNTIME=kubernetes, all on STAND-INS: claims and Leases on the emulated API (the
    test plays agent-sandbox's controller), each claimed pod a real bubblewrap worker behind the loopback exec
    endpoint. Once both are stopped, it checks that the last one's shutdown left no claim."""
    require_kube_test_deps()
    with private_state_dir() as state:
        base = sandbox_settings(state_dir=state)
        require_usable(BubblewrapBackend(base))
        async with (
            emulated_cluster(tmp_path) as (emulator, _),
            agent_sandbox_controller(emulator, "mcp-codemode"),
            ExecEndpoint(base, api_url=emulator.address, authorize=emulator.decide) as endpoint,
        ):
            emulator.declare(LEASE_GROUP, LEASE_VERSION, LEASES)
            kubeconfig = write_kubeconfig(tmp_path / "through-endpoint", endpoint.url)
            async with replicas(tmp_path, kubeconfig, None, MCP_BRIDGE_RUNTIME="kubernetes", **settings) as (a, b):
                yield emulator, a, b
            assert claims_of(emulator) == {}, "the last replica's shutdown deletes its claims"


class PeerRelay:
    """A TCP relay on 127.0.0.1 in front of a replica's port, named as that replica's MCP_BRIDGE_PEER_URL, that the
    test can make drop connections: the replica behind it lives on and renews its Leases, but the others cannot
    reach it, as through a network blip or a full accept backlog. A dropped connection is accepted and closed at
    once, before any answer, which the forwarding replica sees as it sees a refused one (``PeerUnreachable``)."""

    def __init__(self) -> None:
        self.port = 0
        self.target = 0  # the replica's peer port, once it listens
        self.dropping = 0.0  # connections still to drop (math.inf: until ``restore``)
        self.dropped = 0
        self._open: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def drop(self, count: float = math.inf) -> None:
        """Drop the next ``count`` connections, and cut the ones open now (the forwarding replica keeps them)."""
        self.dropping = count
        for writer in list(self._open):
            writer.close()

    def restore(self) -> None:
        self.dropping = 0

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[PeerRelay]:
        server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        async with server:
            try:
                yield self
            finally:
                self.drop(0)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.dropping > 0 or not self.target:
            self.dropping -= 1
            self.dropped += 1
            writer.close()
            return
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.close()
            return
        self._open |= {writer, upstream_writer}
        try:
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        finally:
            self._open -= {writer, upstream_writer}
            writer.close()
            upstream_writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()
