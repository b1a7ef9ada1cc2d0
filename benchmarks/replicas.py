"""What forwarding to a session's owner adds: a warm call sent to the owning replica against the same call sent to
the other replica, which forwards it (issue 22, item 4).

Two real `mcp-codemode serve --transport http` replicas on 127.0.0.1 with bubblewrap sandboxes, the real SDK client
(2026-07-28 era), one session; the session Leases live on kmock's emulated Kubernetes API (the stand-in the tests
use; tests/support/kube_emulator.py). Calls alternate between the two replicas sample by sample, so load from other
work lands on both. On a cluster add one pod-to-pod round trip to the forwarded figure.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the stand-ins live in tests/support

from tests.support.clients import HttpServer, http_client_for, text_of
from tests.support.kube_emulator import emulated_cluster

from common import emit, machine_info, positive, summarize
from mcp_codemode.cluster.leases import LEASE_GROUP, LEASE_VERSION, LEASES

SESSION = "bench"


async def _call(client: Any, code: str) -> float:
    began = time.perf_counter()
    answer = await client.call_tool("run_python", {"code": code, "session": SESSION})
    elapsed = (time.perf_counter() - began) * 1000
    if answer.is_error:
        raise SystemExit(f"benchmarks: a call to the replicas failed: {text_of(answer)}")
    return elapsed


async def owner_and_forwarded(servers: list[HttpServer], calls: int, warm_up: int = 20) -> dict[str, list[float]]:
    """Milliseconds of a warm call to the session's owner (``servers[0]``, which holds it from the first call) and of
    the same call to the other replica, which forwards it, alternating sample by sample (shared with cluster.py)."""
    samples: dict[str, list[float]] = {"owner": [], "forwarded": []}
    async with (
        http_client_for(servers[0].url, "auto", deadline=None) as owner,
        http_client_for(servers[1].url, "auto", deadline=None) as other,
    ):
        await _call(owner, "x = 1")  # the owner holds the session from here on
        for _ in range(warm_up):  # warm-up: imports, connections, the forwarding client's pool
            await _call(owner, "x")
            await _call(other, "x")
        for i in range(calls):
            order = (("owner", owner), ("forwarded", other))
            for side, client in order if i % 2 == 0 else order[::-1]:
                samples[side].append(await _call(client, "x"))
    return samples


async def measure(base: Path, calls: int) -> dict[str, Any]:
    token = uuid.uuid4().hex + uuid.uuid4().hex
    async with emulated_cluster(base) as (emulator, kubeconfig):
        emulator.declare(LEASE_GROUP, LEASE_VERSION, LEASES)
        servers = [
            HttpServer(base / f"{name}.log", MCP_BRIDGE_REPLICA=name, MCP_BRIDGE_PEER_TOKEN=token,
                       MCP_BRIDGE_PEER_PORT="{peer_port}", MCP_BRIDGE_PEER_URL="http://127.0.0.1:{peer_port}",
                       MCP_BRIDGE_KUBECONFIG=str(kubeconfig),
                       MCP_BRIDGE_WARM_POOL="0", MCP_BRIDGE_STATE_DIR=str(base / f"state-{name}"))
            for name in ("owner", "other")
        ]  # fmt: skip
        try:
            for server in servers:
                await anyio.to_thread.run_sync(server.start)
            samples = await owner_and_forwarded(servers, calls)
        finally:
            for server in servers:
                await anyio.to_thread.run_sync(server.stop)
    stats = {side: summarize(values) for side, values in samples.items()}
    return {
        "calls": calls,
        "owner": stats["owner"],
        "forwarded": stats["forwarded"],
        "added_median_ms": round(stats["forwarded"]["median_ms"] - stats["owner"]["median_ms"], 3),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--calls", type=positive, default=200, help="calls per side (default 200)")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON document to this file")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mcp-codemode-bench-") as base:
        Path(base).chmod(0o711)
        result = asyncio.run(measure(Path(base), args.calls))
    emit({"benchmark": "replicas", **result, "machine": machine_info(),
          "elapsed_s": round(time.perf_counter() - began, 2)}, args.out)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
