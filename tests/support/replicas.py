"""Face replicas that share sessions, as the replica tests start them: ``serve`` processes with Leases on an API."""

from __future__ import annotations

import uuid
from pathlib import Path

from .clients import HttpServer

PEER_TOKEN = uuid.uuid4().hex + uuid.uuid4().hex  # the secret every replica of one test deployment shares


def replica_server(tmp_path: Path, kubeconfig: Path, name: str, **settings: str) -> HttpServer:
    """Replica ``name`` of the deployment (not started), sharing sessions through Leases on ``kubeconfig``'s API."""
    return HttpServer(
        tmp_path / f"{name}.log",
        MCP_BRIDGE_REPLICA=name,
        MCP_BRIDGE_PEER_TOKEN=PEER_TOKEN,
        MCP_BRIDGE_PEER_URL="http://127.0.0.1:{port}",
        MCP_BRIDGE_KUBECONFIG=str(kubeconfig),
        MCP_BRIDGE_WARM_POOL="0",
        MCP_BRIDGE_PROGRESS_INTERVAL="0.2",
        # The cancel test needs the interrupt to win, not the hard kill that follows a missed grace: a starved
        # machine can stall the guest for seconds (seen here: the default 2 s lost to a stall, state gone).
        MCP_BRIDGE_INTERRUPT_GRACE="30",
        **settings,
    )
