"""What the pods/exec stream adds over local pipes: worker start, a cell's round trip, a cell with one relayed call.

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
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the stand-in lives in tests/support

from tests.support.exec_endpoint import ExecEndpoint, LoopbackExecBackend

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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--starts", type=positive, default=20, help="worker starts per side (default 20)")
    parser.add_argument("--calls", type=positive, default=300, help="cells of each kind per side (default 300)")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON document to this file")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mcp-codemode-bench-") as base:
        Path(base).chmod(0o711)  # the sandbox uid must pass through to the staged guest
        settings = Settings.load().replace(state_dir=Path(base) / "state")
        result = asyncio.run(measure(settings, args.starts, args.calls))
    emit({"benchmark": "remote", **result, "machine": machine_info(),
          "elapsed_s": round(time.perf_counter() - began, 2)}, args.out)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
