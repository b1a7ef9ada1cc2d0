"""How much a sandbox costs: cold start of a new session, and the round trip of a call to a warm one.

Why this exists
    Code mode only pays off if running a snippet is cheap next to the model's own latency. Two numbers
    decide that: what a *new* session costs (a fresh sandboxed worker started and answering its first
    cell) and what every further call costs (one frame out, one frame back, on a worker that is already
    running). The issue sets targets for both; this script measures them on the machine it runs on, in
    one go, next to a floor that no sandbox can beat, so regressions and wins show up as numbers rather
    than impressions.

What is measured (all with ``time.perf_counter``, in milliseconds)
    floor
        ``/usr/bin/python3 -c pass`` started with ``subprocess.run`` until it exits: the price of
        starting an interpreter at all, without any sandbox.
    backends.<name>.cold_start
        From constructing a fresh ``Worker`` through ``start()`` to the result of executing ``"1"``:
        what the first call of a new session waits for (``SessionManager`` does exactly this when a
        session has no worker). Closing the worker afterwards is not timed. One unmeasured start runs
        first (``warmup_cold_start_ms``) so one-off work (staging guest files, page cache) is not
        counted as the cost of every session.
    backends.<name>.warm_call
        ``execute("1", timeout=30)`` on one started worker, repeated after a few warm-up calls.
    backends.<name>.new_session_first_call.warm_pool_<k>
        ``SessionManager.execute("1")`` in a session never used before, through a session manager with
        ``warm_pool=k``: with 2 the call takes a pre-started worker (the pool is let refill, untimed, before
        each sample); with 0 it starts its own, as ``cold_start`` plus the session manager. Same ``n``.
    backends.<name>.overhead_vs_floor_ms
        Cold-start median minus floor median: what the sandbox adds on top of starting Python.

How to read it
    Each measurement has ``median_ms`` (the typical case; compare this against targets), ``p95_ms``
    (nearest rank: the value 95 % of samples do not exceed, i.e. the tail a user notices now and then),
    ``min_ms`` (the best the machine can do; a large gap to the median means noise from other load) and
    ``n``. ``targets`` repeats the issue's goals with the measured median and ``met`` computed from it;
    a target whose backend was not measured has ``met: null``. Numbers depend on the machine (see
    ``machine``) and on the limits in force (see ``settings``), so compare runs on the same host.

Usage
    python benchmarks/sandbox.py [--n N] [--warm-n N] [--backends bubblewrap,podman] [--out FILE]

    ``--n`` overrides the sample count of the floor and of every cold start (defaults: 30 for the floor
    and bubblewrap, 15 for podman and docker); ``--warm-n`` the number of warm calls (default 500). By
    default every usable backend among bubblewrap, podman and docker is measured; a backend named in
    ``--backends`` that cannot run here ends the script with a non-zero status and the reason.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from common import BenchmarkError, Stats, emit, machine_info, positive, settings_info, summarize
from mcp_codemode.errors import CodemodeError
from mcp_codemode.runs.sessions import SessionManager
from mcp_codemode.sandbox.base import Backend
from mcp_codemode.sandbox.results import ExecutionResult
from mcp_codemode.sandbox.select import AUTO_ORDER, make_backend
from mcp_codemode.sandbox.worker import Worker
from mcp_codemode.settings import Settings

FLOOR_COMMAND = ("/usr/bin/python3", "-c", "pass")
CODE = "1"
CALL_TIMEOUT = 30.0
WARMUP_CALLS = 20
DEFAULT_COLD_N = {"bubblewrap": 30, "podman": 15, "docker": 15}
DEFAULT_FLOOR_N = 30
DEFAULT_WARM_N = 500

# The issue's targets, as limits on the median in ms: every backend's warm call, two backends' cold start.
WARM_TARGET_MS = 1.0
COLD_TARGETS_MS = {"bubblewrap": 60.0, "podman": 400.0}


def measure_floor(n: int) -> Stats:
    """Start-to-exit time of a bare interpreter: the floor every sandboxed start sits on."""
    subprocess.run(FLOOR_COMMAND, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)  # warm-up
    samples: list[float] = []
    for _ in range(n):
        started = time.perf_counter()
        subprocess.run(FLOOR_COMMAND, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        samples.append((time.perf_counter() - started) * 1000)
    return summarize(samples)


def check_result(result: ExecutionResult, backend: str, what: str) -> None:
    if not result.ok or result.value != CODE:
        detail = result.notice or (result.error.message if result.error else "") or result.stderr
        raise BenchmarkError(
            f"{backend} {what}: executing {CODE!r} gave status {result.status!r} and value {result.value!r}"
            + (f" ({detail.strip()})" if detail.strip() else "")
        )


class BackendBench:
    """Runs the cold-start and warm-call measurements of one backend."""

    def __init__(self, backend: Backend, settings: Settings) -> None:
        self.backend = backend
        self.settings = settings
        self._counter = 0
        self.sandbox_python = ""

    def _worker(self) -> Worker:
        self._counter += 1
        return Worker(self.backend, self.settings, f"bench-{self._counter}")

    async def cold_start_once(self) -> float:
        """Milliseconds from a new worker to the result of its first cell; the worker is closed untimed."""
        started = time.perf_counter()
        worker = self._worker()
        try:
            await worker.start()
            result = await worker.execute(CODE, CALL_TIMEOUT)
            elapsed = (time.perf_counter() - started) * 1000
            check_result(result, self.backend.name, "cold start")
            self.sandbox_python = worker.python_version or self.sandbox_python
        finally:
            await worker.close()
        return elapsed

    async def cold_starts(self, n: int) -> tuple[float, Stats]:
        warmup = await self.cold_start_once()
        samples = [await self.cold_start_once() for _ in range(n)]
        return warmup, summarize(samples)

    async def warm_calls(self, n: int) -> Stats:
        worker = self._worker()
        try:
            await worker.start()
            for _ in range(WARMUP_CALLS):
                check_result(await worker.execute(CODE, CALL_TIMEOUT), self.backend.name, "warm-up call")
            samples: list[float] = []
            for _ in range(n):
                started = time.perf_counter()
                result = await worker.execute(CODE, CALL_TIMEOUT)
                samples.append((time.perf_counter() - started) * 1000)
                check_result(result, self.backend.name, "warm call")
        finally:
            await worker.close()
        return summarize(samples)


async def first_calls_of_new_sessions(backend: Backend, settings: Settings, n: int, pool: int) -> Stats:
    """Milliseconds of ``SessionManager.execute("1")`` in a session never used before, with ``pool`` warm workers.

    Before each sample the pool is given time to refill (untimed), as it would between two new sessions of a
    real client; the session is discarded afterwards, untimed. ``pool=0`` is the cold path for comparison.
    """
    samples: list[float] = []
    async with SessionManager(backend, settings.replace(warm_pool=pool)) as sessions:
        for i in range(n + 1):  # the first is an unmeasured warm-up
            for _ in range(3000):  # at most 60 s: a pool that cannot fill is measured as it is
                if sessions.pool.ready >= pool:
                    break
                await asyncio.sleep(0.02)
            started = time.perf_counter()
            result = await sessions.execute(CODE, session=f"new-{i}", timeout=CALL_TIMEOUT)
            elapsed = (time.perf_counter() - started) * 1000
            check_result(result, backend.name, "first call of a new session")
            await sessions.discard(f"new-{i}")
            if i:
                samples.append(elapsed)
    return summarize(samples)


async def measure_backend(backend: Backend, settings: Settings, cold_n: int, warm_n: int) -> dict[str, Any]:
    bench = BackendBench(backend, settings)
    began = time.perf_counter()
    warmup_ms, cold = await bench.cold_starts(cold_n)
    warm = await bench.warm_calls(warm_n)
    return {
        "availability": backend.availability().reason,
        "sandbox_python": bench.sandbox_python,
        "warmup_cold_start_ms": round(warmup_ms, 3),
        "cold_start": cold,
        "warm_call": warm,
        "new_session_first_call": {
            "warm_pool_2": await first_calls_of_new_sessions(backend, settings, cold_n, 2),
            "warm_pool_0": await first_calls_of_new_sessions(backend, settings, cold_n, 0),
        },
        "elapsed_s": round(time.perf_counter() - began, 2),
    }


def select_backends(requested: str | None, settings: Settings) -> tuple[list[Backend], dict[str, str]]:
    """The backends to measure, and why each of the others was skipped.

    Explicitly requested backends must all work; otherwise ``BenchmarkError`` says which one and why.
    """
    if requested is None:
        chosen: list[Backend] = []
        skipped: dict[str, str] = {}
        for name in AUTO_ORDER:
            backend = make_backend(name, settings)
            availability = backend.availability()
            if availability.usable:
                chosen.append(backend)
            else:
                skipped[name] = availability.reason
        if not chosen:
            raise BenchmarkError(
                "no sandbox backend is usable here: " + "; ".join(f"{k}: {v}" for k, v in skipped.items())
            )
        return chosen, skipped
    names = [part.strip() for part in requested.split(",") if part.strip()]
    if not names:
        raise BenchmarkError("--backends is empty; name at least one of " + ", ".join(AUTO_ORDER))
    chosen = []
    for name in dict.fromkeys(names):
        if name not in AUTO_ORDER:
            raise BenchmarkError(f"unknown backend {name!r}; choose from {', '.join(AUTO_ORDER)}")
        backend = make_backend(name, settings)
        availability = backend.availability()
        if not availability.usable:
            fix = f" (fix: {availability.fix})" if availability.fix else ""
            raise BenchmarkError(f"the {name} backend was requested but cannot run: {availability.reason}{fix}")
        chosen.append(backend)
    return chosen, {}


def target(name: str, limit_ms: float, measured: Stats | None) -> dict[str, Any]:
    median = measured["median_ms"] if measured is not None else None
    return {
        "target": name,
        "median_limit_ms": limit_ms,
        "measured_median_ms": median,
        "met": None if median is None else median <= limit_ms,
    }


def build_targets(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = [target(f"{name} warm round trip", WARM_TARGET_MS, result["warm_call"]) for name, result in results.items()]
    for name, limit in COLD_TARGETS_MS.items():
        measured = results[name]["cold_start"] if name in results else None
        rows.append(target(f"{name} cold start", limit, measured))
    if not results:
        rows.insert(0, target("warm round trip", WARM_TARGET_MS, None))
    return rows


async def run_backends(
    backends: list[Backend], settings: Settings, cold_n: Callable[[str], int], warm_n: int
) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    for backend in backends:  # one after another: on 2 cores, parallel runs would measure each other
        results[backend.name] = await measure_backend(backend, settings, cold_n(backend.name), warm_n)
    return results


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--n",
        type=positive,
        default=None,
        help="samples for the floor and every cold start (default: 30; 15 for containers)",
    )
    parser.add_argument(
        "--warm-n",
        type=positive,
        default=DEFAULT_WARM_N,
        help=f"timed warm calls per backend (default: {DEFAULT_WARM_N})",
    )
    parser.add_argument(
        "--backends",
        default=None,
        help=f"comma-separated subset of {', '.join(AUTO_ORDER)} (default: every usable one)",
    )
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON document to this file")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    try:
        settings = Settings.load()
        backends, skipped = select_backends(args.backends, settings)
        floor_n = args.n if args.n is not None else DEFAULT_FLOOR_N
        floor = measure_floor(floor_n)

        def cold_n(name: str) -> int:
            return int(args.n) if args.n is not None else DEFAULT_COLD_N.get(name, 15)

        results = asyncio.run(run_backends(backends, settings, cold_n, args.warm_n))
    except (BenchmarkError, CodemodeError) as exc:
        print(f"benchmarks/sandbox.py: {exc}", file=sys.stderr)
        return 2
    for result in results.values():
        result["overhead_vs_floor_ms"] = round(result["cold_start"]["median_ms"] - floor["median_ms"], 3)
    targets = build_targets(results)
    decided = [row["met"] for row in targets if row["met"] is not None]
    document = {
        "benchmark": "sandbox",
        "code": CODE,
        "floor": {"command": " ".join(FLOOR_COMMAND), **floor},
        "backends": results,
        "skipped_backends": skipped,
        "targets": targets,
        "all_measured_targets_met": all(decided) if decided else None,
        "machine": machine_info(),
        "settings": settings_info(settings),
        "elapsed_s": round(time.perf_counter() - began, 2),
    }
    emit(document, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
