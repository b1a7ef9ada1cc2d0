"""Face replicas that share sessions, as the replica tests start them: ``serve`` processes with Leases on an API,
and a relay that makes one unreachable for a while without stopping it."""

from __future__ import annotations

import asyncio
import contextlib
import math
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from .clients import HttpServer

PEER_TOKEN = uuid.uuid4().hex + uuid.uuid4().hex  # the secret every replica of one test deployment shares


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
