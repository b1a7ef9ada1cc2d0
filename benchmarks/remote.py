"""What the pods/exec stream adds over local pipes: worker start, a cell's round trip, a cell with one relayed call;
with ``--kubeconfig PATH``, the kubernetes backend on a cluster (claims cold and warm, calls, forwarding:
benchmarks/cluster.py), and with ``--stand-in`` the same against the tests' stand-ins.

Both sides run in the same process and the same run, interleaved sample by sample, so load from other work on the
machine lands on both: a real bubblewrap worker over pipes (the bubblewrap backend) and one behind the loopback
exec stand-in (tests/support/exec_endpoint.py: a 127.0.0.1 WebSocket speaking v5.channel.k8s.io, driven by the
same ExecChannel the kubernetes backend uses). No apiserver or kubelet hop is in it: on a cluster add their
network round trips. Issue 22's target: the stream adds at most 0.3 ms per call (median).
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
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the stand-in lives in tests/support

from tests.support.exec_endpoint import ExecEndpoint, LoopbackExecBackend

import cluster
from common import emit, machine_info, positive, summarize
from mcp_codemode.sandbox.base import Backend
from mcp_codemode.sandbox.bubblewrap import BubblewrapBackend
from mcp_codemode.sandbox.worker import Worker
from mcp_codemode.settings import Settings

if TYPE_CHECKING:
    from mcp_codemode.guest.protocol import CallFrame
    from mcp_codemode.reply_encoding import Reply

RELAYED = "from mcp import runtime\nruntime.call_tool_sync('echo', 'say', {'text': 'hi'}, raw=True)"
TARGET_MS = 0.3


async def _echo(message: CallFrame) -> Reply:
    return {"ok": True, "value": {"content": [{"type": "text", "text": "hi"}], "isError": False}}


async def _start(backend: Backend, settings: Settings, name: str) -> tuple[Worker, float]:
    worker = Worker(backend, settings, name)
    began = time.perf_counter()
    await worker.start()
    return worker, (time.perf_counter() - began) * 1000


async def _cell(worker: Worker, code: str, relay: bool) -> float:
    began = time.perf_counter()
    result = await worker.execute(code, 30, relay=_echo if relay else None)
    elapsed = (time.perf_counter() - began) * 1000
    if result.status != "ok":
        raise SystemExit(f"benchmarks/remote.py: a cell failed: {result.status} {result.notice}")
    return elapsed


async def measure(settings: Settings, starts: int, calls: int) -> dict[str, Any]:
    pipes = BubblewrapBackend(settings)
    if not pipes.availability().usable:
        raise SystemExit(f"benchmarks/remote.py: bubblewrap unusable: {pipes.availability().reason}")
    samples: dict[str, dict[str, list[float]]] = {
        side: {"start": [], "cell": [], "relayed_cell": []} for side in ("pipes", "exec")
    }
    async with ExecEndpoint(settings) as endpoint:
        backends: dict[str, Backend] = {"pipes": pipes, "exec": LoopbackExecBackend(endpoint)}
        for i in range(starts):
            for side in ("pipes", "exec") if i % 2 == 0 else ("exec", "pipes"):
                worker, ms = await _start(backends[side], settings, f"start-{side}-{i}")
                samples[side]["start"].append(ms)
                await worker.close()
        workers = {side: (await _start(backend, settings, f"warm-{side}"))[0] for side, backend in backends.items()}
        try:
            for worker in workers.values():  # warm-up: first imports, first relayed call
                for _ in range(20):
                    await _cell(worker, "1", False)
                    await _cell(worker, RELAYED, True)
            for i in range(calls):
                for side in ("pipes", "exec") if i % 2 == 0 else ("exec", "pipes"):
                    samples[side]["cell"].append(await _cell(workers[side], "1", False))
                    samples[side]["relayed_cell"].append(await _cell(workers[side], RELAYED, True))
        finally:
            for worker in workers.values():
                await worker.close()
    stats = {side: {kind: summarize(values) for kind, values in kinds.items()} for side, kinds in samples.items()}
    added = {
        kind: round(stats["exec"][kind]["median_ms"] - stats["pipes"][kind]["median_ms"], 3)
        for kind in ("start", "cell", "relayed_cell")
    }
    return {
        "pipes": stats["pipes"],
        "exec_stand_in": stats["exec"],
        "added_median_ms": added,
        "targets": [
            {"name": f"exec stream adds <= {TARGET_MS} ms per {kind} (median)", "median_limit_ms": TARGET_MS,
             "measured_median_ms": added[kind], "met": added[kind] <= TARGET_MS}
            for kind in ("cell", "relayed_cell")
        ],
    }  # fmt: skip


STAND_IN = (
    "stand-in: the emulated API server of the tests (kmock), whose stand-in controller binds every claim at once, cold "
    "or warm, and the loopback exec endpoint with a bubblewrap worker behind each stream; these are not cluster figures"
)


async def on_stand_ins(base: Path, settings: Settings, n: int) -> dict[str, Any]:
    """benchmarks/cluster.py's measurement against the tests' stand-ins: it proves the code path end to end."""
    from tests.support.kube_emulator import agent_sandbox_controller, emulated_cluster, write_kubeconfig
    from tests.support.kube_manifests import Grants

    from mcp_codemode.cluster import naming

    namespace, pool = settings.kube_namespace, settings.kube_warm_pool
    async with (
        emulated_cluster(base) as (emulator, _),
        agent_sandbox_controller(emulator, namespace),
        ExecEndpoint(settings, api_url=emulator.address, authorize=emulator.decide) as endpoint,
    ):
        everything = (frozenset({"*"}), frozenset({"*"}), frozenset({"*"}), frozenset[str]())  # an operator: all
        emulator.grants = Grants(namespace, "system:admin", (everything,))
        emulator.declare(naming.LEASE_GROUP, naming.LEASE_VERSION, naming.LEASES)
        pools = emulator.declare(naming.GROUP, naming.VERSION, naming.WARM_POOLS)
        emulator.objects[pools, namespace, pool] = {
            "apiVersion": f"{naming.GROUP}/{naming.VERSION}", "kind": "SandboxWarmPool",
            "metadata": {"name": pool, "namespace": namespace},
            "spec": {"replicas": 2, "sandboxTemplateRef": {"name": pool}}, "status": {"readyReplicas": 2},
        }  # fmt: skip
        kubeconfig = write_kubeconfig(base / "through-endpoint", endpoint.url)
        found = await cluster.measure(kubeconfig, settings.replace(kube_config=kubeconfig), base, n)
    return {**found, "api_server": "emulated", "what": STAND_IN}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--starts", type=positive, default=20, help="worker starts per side (default 20)")
    parser.add_argument("--calls", type=positive, default=300, help="cells of each kind per side (default 300)")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON document to this file")
    on_cluster = parser.add_argument_group("on a cluster (benchmarks/cluster.py)")
    on_cluster.add_argument("--kubeconfig", type=Path, help="measure on the cluster this kubeconfig reaches")
    on_cluster.add_argument("--context", default="", help="a context of the kubeconfig (default: its current one)")
    on_cluster.add_argument("--namespace", default="mcp-codemode", help="where deploy/kubernetes/base is applied")
    on_cluster.add_argument("--warm-pool", default="mcp-codemode-sandbox", help="the SandboxWarmPool to claim from")
    on_cluster.add_argument("--cold-pool", default="", help="an empty SandboxWarmPool for the cold claims (default: "
                            "one of 0 replicas is created for the run and deleted after)")  # fmt: skip
    on_cluster.add_argument("--n", type=positive, default=30, help="samples of each figure (default 30, at least 30)")
    on_cluster.add_argument("--quick", action="store_true", help="allow --n below 30 (for tests: not figures)")
    stand_in = "the same on the tests' emulated API server and exec endpoint: the code path, not cluster figures"
    on_cluster.add_argument("--stand-in", action="store_true", help=stand_in)
    args = parser.parse_args(argv)
    if args.kubeconfig is not None and args.stand_in:
        parser.error("--kubeconfig measures a cluster, --stand-in the stand-ins: give one")
    if (args.kubeconfig is not None or args.stand_in) and args.n < 30 and not args.quick:
        parser.error(f"--n {args.n}: a median and p95 of fewer than 30 samples say little; give --quick to run anyway")
    if args.kubeconfig is not None or args.stand_in:
        return run_on_cluster(args)
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mcp-codemode-bench-") as base:
        Path(base).chmod(0o711)  # the sandbox uid must pass through to the staged guest
        settings = Settings.load().replace(state_dir=Path(base) / "state")
        result = asyncio.run(measure(settings, args.starts, args.calls))
    emit({"benchmark": "remote", **result, "machine": machine_info(),
          "elapsed_s": round(time.perf_counter() - began, 2)}, args.out)  # fmt: skip
    return 0


def run_on_cluster(args: argparse.Namespace) -> int:
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mcp-codemode-bench-") as base:
        Path(base).chmod(0o711)  # the stand-in's sandbox uid must pass through to the staged guest
        settings = Settings.load().replace(
            state_dir=Path(base) / "state", kube_namespace=args.namespace, kube_warm_pool=args.warm_pool,
            kube_context=args.context, kube_config=args.kubeconfig, replica=f"bench-{uuid.uuid4().hex[:8]}",
        )  # fmt: skip
        if args.stand_in:
            result = asyncio.run(on_stand_ins(Path(base), settings, args.n))
        else:
            result = asyncio.run(cluster.measure(args.kubeconfig, settings, Path(base), args.n, args.cold_pool))
    emit({"benchmark": "remote-cluster", **result, "quick": args.quick, "machine": machine_info(),
          "elapsed_s": round(time.perf_counter() - began, 2)}, args.out)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
