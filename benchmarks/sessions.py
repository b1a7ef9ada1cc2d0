"""Many sessions at once: ``run_python`` throughput and latency with 1 to 16 concurrent sessions over HTTP, and memory.

Why this exists
    A bridge served over Streamable HTTP is shared: several agents (or one agent's parallel subtasks) each keep a
    named session, a warm sandbox with its own namespace, and call into them at the same time. This script
    measures how throughput and latency change as sessions are added, what a session costs in memory while it
    sits idle, and whether the bridge's memory creeps up over many calls, each next to a baseline taken in the
    same run.

What is measured
    levels.<K> (K = 1, 2, 4, 8, 16 by default; ``--levels``)
        A fresh ``mcp-codemode serve --transport http`` on a free 127.0.0.1 port (bearer token, ``--no-discover``,
        a temporary state directory) and K official SDK clients (``mcp.Client`` over ``streamable_http_client``,
        ``--mode``, each with its own HTTP connection pool). Client i uses the named session ``s<i>``. Every
        client first makes one call into its session, all K at once (``first_call``: the first call of a new
        session while K sessions start together), then ``WARMUP_CALLS`` untimed calls; then all start together
        and call ``run_python {"code": "1", "session": "s<i>"}`` back to back, ``--calls`` calls in all split
        evenly (at least ``MIN_CALLS_PER_SESSION`` each), each timed with ``time.perf_counter`` from the call to
        the parsed result (``latency``, ``cdf_ms``: every 5th percentile, nearest rank). ``throughput_per_s``:
        completed calls divided by the window from the common start to the last client's last answer. A level
        stops early at ``--level-seconds`` (``stopped_early``). ``memory`` is a snapshot (see below) after the
        warm-up, with the K sessions idle and the K clients connected. ``cpu_ms_per_call``: CPU time (user plus
        system, from /proc and ``os.times``) spent during the timed window, divided by its calls, by the bridge
        process, by its sandbox processes, and by this process (the K clients): where a core's time goes when
        throughput stops growing.
    levels.<K>.baseline
        The same K sessions and the same calls through ``SessionManager.execute`` in this process: the sandboxes
        alone, without MCP, HTTP or a second process; the same settings and backend.
    memory
        ``at_rest``: a fresh server after it has listened and its sandbox processes have settled (a warm pool, if
        the bridge keeps one, is part of rest). ``with_idle``: after one client made one call into each of
        ``--idle`` new named sessions and disconnected, again settled. ``per_idle_session``: (with_idle -
        at_rest) / idle, for the bridge, for its sandboxes, and for both; the target is judged on both (RSS).
        ``sandbox_tree_rss_mb``: the RSS of each sandbox process tree in ``with_idle`` (median and max).
    growth
        One client, one named session, ``--growth-calls`` (default 10,000) sequential calls on a fresh server
        after ``WARMUP_CALLS``; memory snapshots every ``--growth-calls / GROWTH_SNAPSHOTS`` calls. Reported:
        the bridge's RSS and PSS at the start and end, the difference, the peak, and the same for the session's
        sandbox; ``growth_second_half`` is the growth from the snapshot nearest half the calls to the end, which
        tells memory taken once by the first calls (flat afterwards) from a leak (still growing). No threshold:
        growth is reported, not judged. Bounded by ``--growth-seconds``.

What memory is counted (Linux /proc; the script runs as a user that may read the server's /proc entries)
    bridge     the ``serve`` process itself (Python, uvicorn, the SDK, the session manager): ``VmRSS`` of
               /proc/PID/status and ``Pss`` of /proc/PID/smaps_rollup.
    sandboxes  every live descendant of the bridge (zombies skipped): for bubblewrap, each worker is ``bwrap``,
               its namespace init and the guest Python. Per process RSS and PSS, summed; ``trees`` counts the
               bridge's direct children (one per worker). RSS counts a page shared by several processes (the
               guest interpreter's code, shared libraries) once in each of them, so summed RSS overstates what
               the machine spends; PSS divides each shared page among the processes sharing it, so summed PSS is
               the closer figure for total memory. Both are reported; the issue's target names RSS, the stricter.
    A container backend's processes (podman, docker) are not descendants of the bridge and are not counted:
    use ``--backend bubblewrap`` (the default) for the memory figures.

Caveats
    The clients run in this process and share the machine's CPUs with the bridge and the sandboxes: on 2 cores
    the throughput at high K is a floor for what the bridge can do, and the baseline (everything in this process)
    is what one Python process plus the sandboxes manage. Other load on the machine inflates the latencies; see
    ``load_average_1_5_15``. Compare runs on the same machine.

Usage
    python benchmarks/sessions.py [--levels 1,2,4,8,16] [--calls N] [--idle N] [--growth-calls N]
                                  [--mode legacy|auto] [--backend NAME] [--quick] [--out FILE]

    ``--quick`` is a smoke run (few calls, 4 idle sessions, 500 growth calls; explicit flags still win). The
    JSON document goes to standard output (and to ``--out``), a short table to standard error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import math
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from common import (
    BenchmarkError,
    emit,
    fill_defaults,
    free_port,
    later_growth,
    machine_info,
    positive,
    settings_info,
    stop_server,
    summarize,
    wait_listening,
)
from mcp_codemode.errors import CodemodeError
from mcp_codemode.runs.sessions import SessionManager
from mcp_codemode.sandbox.results import ExecutionResult
from mcp_codemode.sandbox.select import AUTO_ORDER, choose_backend
from mcp_codemode.settings import Settings

CODE = "1"
TOOL = "run_python"
CALL_TIMEOUT = 30.0
WARMUP_CALLS = 10
MIN_CALLS_PER_SESSION = 20
DEFAULT_LEVELS = (1, 2, 4, 8, 16)
DEFAULT_CALLS = 800
DEFAULT_LEVEL_SECONDS = 30.0
DEFAULT_IDLE = 16
DEFAULT_GROWTH_CALLS = 10_000
DEFAULT_GROWTH_SECONDS = 240.0
GROWTH_SNAPSHOTS = 20
QUICK = {"calls": 60, "idle": 4, "growth_calls": 500}
MODES = ("legacy", "auto")
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
SETTLE_POLL_S = 0.25
SETTLE_STABLE_POLLS = 4  # the sandbox process count unchanged for this many polls in a row
SETTLE_TIMEOUT_S = 15.0
CDF_STEPS = 20  # cdf_ms holds the 0th, 5th, ..., 100th percentile
PASSED_ENV_PREFIXES = ("MCP_BRIDGE_",)
PASSED_ENV_NAMES = ("MCP_CODEMODE_SETTINGS",)

# The target: an idle session costs at most this much RSS (bridge and sandbox together, per session).
IDLE_SESSION_TARGET_MB = 30.0


def check_reply(reply: Any, what: str) -> None:
    texts = [getattr(block, "text", None) for block in reply.content]
    if reply.is_error or texts != [CODE]:
        raise BenchmarkError(f"{what}: run_python {{'code': {CODE!r}}} answered is_error={reply.is_error}, {texts!r}")


def check_execution(result: ExecutionResult, what: str) -> None:
    if not result.ok or result.value != CODE:
        raise BenchmarkError(f"{what}: executing {CODE!r} gave status {result.status!r} and value {result.value!r}")


def cdf(samples_ms: Sequence[float]) -> list[float]:
    """Every 5th percentile (nearest rank), from the minimum to the maximum."""
    ordered = sorted(samples_ms)
    points = []
    for step in range(CDF_STEPS + 1):
        rank = max(1, math.ceil(step / CDF_STEPS * len(ordered)))
        points.append(round(ordered[rank - 1], 3))
    return points


# -- memory: the bridge and its sandbox processes, from /proc ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    state: str
    name: str


def process_table() -> dict[int, Proc]:
    table: dict[int, Proc] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:  # the process ended while we looked
            continue
        head, _, tail = text.rpartition(")")
        fields = tail.split()
        if len(fields) < 2:
            continue
        pid = int(entry.name)
        table[pid] = Proc(pid, int(fields[1]), fields[0], head.partition("(")[2])
    return table


def read_kib(path: str, key: str) -> int:
    """The value in kB of ``key:`` in a /proc status-like file; 0 when the process is gone or has no such line."""
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return 0


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of one process so far (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            fields = handle.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14 and 15


def cpu_split(bridge: int) -> dict[str, float]:
    """CPU seconds so far of the bridge, of its live descendants (the sandboxes), and of this process."""
    below = [pid for tree in sandbox_trees(bridge, process_table()) for pid in tree]
    own = os.times()
    return {
        "bridge": cpu_seconds(bridge),
        "sandboxes": sum(cpu_seconds(pid) for pid in below),
        "clients": own.user + own.system,
    }


def cpu_per_call(before: dict[str, float], after: dict[str, float], calls: int) -> dict[str, float]:
    """Milliseconds of CPU per call, by part (a sandbox that ended in the window loses its share: none should)."""
    return {part: round((after[part] - before[part]) * 1000 / max(calls, 1), 3) for part in before}


def memory_of(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in KiB."""
    return read_kib(f"/proc/{pid}/status", "VmRSS"), read_kib(f"/proc/{pid}/smaps_rollup", "Pss")


def mib(kib: float) -> float:
    return round(kib / 1024, 2)


def sandbox_trees(bridge: int, table: dict[int, Proc]) -> list[list[int]]:
    """Each live direct child of the bridge with its live descendants: one list of pids per sandbox worker."""
    children: dict[int, list[int]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    trees = []
    for root in sorted(children.get(bridge, [])):
        tree, stack = [], [root]
        while stack:
            pid = stack.pop()
            if table[pid].state != "Z":
                tree.append(pid)
            stack.extend(children.get(pid, []))
        if tree:
            trees.append(tree)
    return trees


def snapshot(bridge: int) -> dict[str, Any]:
    """RSS and PSS (MiB) of the bridge process, of its sandbox processes, and of both."""
    table = process_table()
    bridge_rss, bridge_pss = memory_of(bridge)
    trees = sandbox_trees(bridge, table)
    tree_rss: list[int] = []
    names: dict[str, int] = {}
    sandbox_rss = sandbox_pss = 0
    for tree in trees:
        rss_sum = 0
        for pid in tree:
            rss, pss = memory_of(pid)
            rss_sum += rss
            sandbox_pss += pss
            names[table[pid].name] = names.get(table[pid].name, 0) + 1
        tree_rss.append(rss_sum)
        sandbox_rss += rss_sum
    return {
        "bridge": {"rss_mb": mib(bridge_rss), "pss_mb": mib(bridge_pss)},
        "sandboxes": {
            "trees": len(trees),
            "processes": sum(len(tree) for tree in trees),
            "process_names": dict(sorted(names.items())),
            "rss_mb": mib(sandbox_rss),
            "pss_mb": mib(sandbox_pss),
            "tree_rss_mb": [mib(value) for value in tree_rss],
        },
        "total": {"rss_mb": mib(bridge_rss + sandbox_rss), "pss_mb": mib(bridge_pss + sandbox_pss)},
    }


async def settled_snapshot(bridge: int) -> dict[str, Any]:
    """A snapshot once the number of sandbox processes has stopped changing (a pool refilling, a worker closing)."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    last, stable = -1, 0
    while time.monotonic() < deadline and stable < SETTLE_STABLE_POLLS:
        count = sum(len(tree) for tree in sandbox_trees(bridge, process_table()))
        stable = stable + 1 if count == last else 0
        last = count
        await asyncio.sleep(SETTLE_POLL_S)
    found = snapshot(bridge)
    found["settled"] = stable >= SETTLE_STABLE_POLLS
    return found


# -- the server and its clients ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Launch:
    backend: str
    mode: str
    env: dict[str, str]
    scratch: Path

    def log(self, label: str) -> Path:
        return self.scratch / f"{label}.log"

    def log_tail(self, label: str, lines: int = 20) -> str:
        try:
            text = self.log(label).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


@dataclasses.dataclass(frozen=True)
class Served:
    url: str
    token: str
    pid: int


@contextlib.asynccontextmanager
async def http_server(launch: Launch, label: str) -> AsyncIterator[Served]:
    """``mcp-codemode serve --transport http`` on a free loopback port, stopped (SIGTERM, then SIGKILL) afterwards."""
    port = free_port()
    token = secrets.token_hex(24)
    command = [
        sys.executable, "-m", "mcp_codemode", "serve", "--transport", "http", "--host", "127.0.0.1",
        "--port", str(port), "--backend", launch.backend, "--no-discover", "--log-file", str(launch.log(label)),
    ]  # fmt: skip
    env = {**os.environ, **launch.env, "MCP_BRIDGE_HTTP_TOKEN": token}  # the token stays out of the argv
    process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL)
    try:
        await wait_listening(process, port, label, lambda: launch.log_tail(label), STARTUP_TIMEOUT_S)
        yield Served(f"http://127.0.0.1:{port}/mcp", token, process.pid)
    finally:
        await stop_server(process, STOP_TIMEOUT_S)


@contextlib.asynccontextmanager
async def client_for(served: Served, mode: str) -> AsyncIterator[Client]:
    """One SDK client with a connection pool of its own, as a separate agent would have."""
    headers = {"Authorization": f"Bearer {served.token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)) as http:
        transport = streamable_http_client(served.url, http_client=http)
        async with Client(transport, mode=mode, read_timeout_seconds=CALL_TIMEOUT * 2) as client:
            yield client


async def call(client: Client, session: str, what: str) -> float:
    started = time.perf_counter()
    reply = await client.call_tool(TOOL, {"code": CODE, "session": session})
    elapsed = (time.perf_counter() - started) * 1000
    check_reply(reply, what)
    return elapsed


# -- concurrency levels ------------------------------------------------------------------------------------------


async def timed_loops(workers: Sequence[Any], per_session: int, seconds: float) -> tuple[list[float], float, bool]:
    """Run every worker's calls at once; returns all latencies, the window (s) and whether the time bound hit.

    ``workers[i]`` is an async callable timing one call of session i (ms).
    """
    start = asyncio.Event()
    deadline = 0.0
    stopped = False
    samples: list[list[float]] = [[] for _ in workers]

    async def loop(index: int) -> None:
        nonlocal stopped
        await start.wait()
        for _ in range(per_session):
            if time.perf_counter() > deadline:
                stopped = True
                return
            samples[index].append(await workers[index]())

    tasks = [asyncio.create_task(loop(index)) for index in range(len(workers))]
    await asyncio.sleep(0)
    began = time.perf_counter()
    deadline = began + seconds
    start.set()
    await asyncio.gather(*tasks)
    window = time.perf_counter() - began
    return [value for chunk in samples for value in chunk], window, stopped


def level_result(samples: list[float], window: float, stopped: bool) -> dict[str, Any]:
    return {
        "calls": len(samples),
        "window_s": round(window, 3),
        "throughput_per_s": round(len(samples) / window, 1) if window > 0 else None,
        "latency": summarize(samples),
        "cdf_ms": cdf(samples),
        "stopped_early": stopped,
    }


async def measure_level(
    launch: Launch, settings: Settings, sessions: int, calls: int, seconds: float
) -> dict[str, Any]:
    per_session = max(MIN_CALLS_PER_SESSION, math.ceil(calls / sessions))
    names = [f"s{index}" for index in range(sessions)]
    result: dict[str, Any] = {"sessions": sessions, "calls_per_session": per_session}
    began = time.perf_counter()

    # The baseline first: the sandboxes alone, in this process, the same sessions and calls.
    choice = choose_backend(settings)
    async with SessionManager(choice.backend, settings) as manager:

        def executor(name: str) -> Any:
            async def execute() -> float:
                started = time.perf_counter()
                outcome = await manager.execute(CODE, session=name, timeout=CALL_TIMEOUT)
                elapsed = (time.perf_counter() - started) * 1000
                check_execution(outcome, f"baseline session {name}")
                return elapsed

            return execute

        runners = [executor(name) for name in names]
        await asyncio.gather(*(runner() for runner in runners))
        for runner in runners:
            for _ in range(WARMUP_CALLS):
                await runner()
        result["baseline"] = level_result(*await timed_loops(runners, per_session, seconds))

    label = f"level-{sessions}"
    try:
        async with http_server(launch, label) as served, contextlib.AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(client_for(served, launch.mode)) for _ in names]

            def caller(client: Client, name: str) -> Any:
                async def one() -> float:
                    return await call(client, name, f"{label} session {name}")

                return one

            callers = [caller(client, name) for client, name in zip(clients, names, strict=True)]
            first = await asyncio.gather(*(one() for one in callers))
            result["first_call"] = summarize(first)
            for one in callers:
                for _ in range(WARMUP_CALLS):
                    await one()
            result["memory"] = await settled_snapshot(served.pid)
            cpu_before = cpu_split(served.pid)
            result.update(level_result(*await timed_loops(callers, per_session, seconds)))
            result["cpu_ms_per_call"] = cpu_per_call(cpu_before, cpu_split(served.pid), result["calls"])
    except MCPError as exc:
        raise BenchmarkError(f"{label}: the MCP server answered an error: {exc}") from None
    result["elapsed_s"] = round(time.perf_counter() - began, 2)
    return result


# -- memory at rest and per idle session ---------------------------------------------------------------------------


def per_session(before: dict[str, Any], after: dict[str, Any], count: int) -> dict[str, float]:
    def delta(part: str, key: str) -> float:
        return round((float(after[part][key]) - float(before[part][key])) / count, 2)

    return {
        "total_rss_mb": delta("total", "rss_mb"),
        "total_pss_mb": delta("total", "pss_mb"),
        "bridge_rss_mb": delta("bridge", "rss_mb"),
        "bridge_pss_mb": delta("bridge", "pss_mb"),
        "sandbox_rss_mb": delta("sandboxes", "rss_mb"),
        "sandbox_pss_mb": delta("sandboxes", "pss_mb"),
    }


async def measure_idle(launch: Launch, idle: int) -> dict[str, Any]:
    began = time.perf_counter()
    try:
        async with http_server(launch, "idle") as served:
            at_rest = await settled_snapshot(served.pid)
            async with client_for(served, launch.mode) as client:
                first = [await call(client, f"idle-{index}", f"idle session {index}") for index in range(idle)]
            with_idle = await settled_snapshot(served.pid)
    except MCPError as exc:
        raise BenchmarkError(f"idle: the MCP server answered an error: {exc}") from None
    trees = with_idle["sandboxes"]["tree_rss_mb"]
    return {
        "idle_sessions": idle,
        "at_rest": at_rest,
        "with_idle": with_idle,
        "per_idle_session": per_session(at_rest, with_idle, idle),
        "sandbox_tree_rss_mb": {
            "median": round(statistics.median(trees), 2) if trees else None,
            "max": max(trees) if trees else None,
            "n": len(trees),
        },
        "first_call": summarize(first),
        "elapsed_s": round(time.perf_counter() - began, 2),
    }


# -- growth over many calls ----------------------------------------------------------------------------------------


def growth_point(calls: int, found: dict[str, Any]) -> dict[str, Any]:
    return {
        "calls": calls,
        "bridge_rss_mb": found["bridge"]["rss_mb"],
        "bridge_pss_mb": found["bridge"]["pss_mb"],
        "sandbox_rss_mb": found["sandboxes"]["rss_mb"],
        "sandbox_pss_mb": found["sandboxes"]["pss_mb"],
        "sandbox_processes": found["sandboxes"]["processes"],
    }


async def measure_growth(launch: Launch, calls: int, seconds: float) -> dict[str, Any]:
    began = time.perf_counter()
    every = max(1, calls // GROWTH_SNAPSHOTS)
    samples: list[float] = []
    points: list[dict[str, Any]] = []
    stopped = False
    try:
        async with http_server(launch, "growth") as served, client_for(served, launch.mode) as client:
            for _ in range(WARMUP_CALLS):
                await call(client, "growth", "growth warm-up call")
            points.append(growth_point(0, snapshot(served.pid)))
            deadline = time.perf_counter() + seconds
            for done in range(1, calls + 1):
                samples.append(await call(client, "growth", "growth call"))
                if done % every == 0 or done == calls:
                    points.append(growth_point(done, snapshot(served.pid)))
                if time.perf_counter() > deadline:
                    stopped = True
                    if points[-1]["calls"] != done:
                        points.append(growth_point(done, snapshot(served.pid)))
                    break
    except MCPError as exc:
        raise BenchmarkError(f"growth: the MCP server answered an error: {exc}") from None
    first, last = points[0], points[-1]
    return {
        "calls": len(samples),
        "requested_calls": calls,
        "stopped_early": stopped,
        "latency": summarize(samples),
        "bridge_rss_mb": {
            "start": first["bridge_rss_mb"],
            "end": last["bridge_rss_mb"],
            "growth": round(last["bridge_rss_mb"] - first["bridge_rss_mb"], 2),
            "growth_second_half": later_growth(points, "bridge_rss_mb"),
            "peak": max(point["bridge_rss_mb"] for point in points),
        },
        "bridge_pss_mb": {
            "start": first["bridge_pss_mb"],
            "end": last["bridge_pss_mb"],
            "growth": round(last["bridge_pss_mb"] - first["bridge_pss_mb"], 2),
            "growth_second_half": later_growth(points, "bridge_pss_mb"),
        },
        "sandbox_rss_mb": {
            "start": first["sandbox_rss_mb"],
            "end": last["sandbox_rss_mb"],
            "growth": round(last["sandbox_rss_mb"] - first["sandbox_rss_mb"], 2),
            "growth_second_half": later_growth(points, "sandbox_rss_mb"),
        },
        "points": points,
        "elapsed_s": round(time.perf_counter() - began, 2),
    }


# -- the document --------------------------------------------------------------------------------------------------


def build_targets(memory: dict[str, Any]) -> list[dict[str, Any]]:
    measured = memory["per_idle_session"]["total_rss_mb"]
    return [
        {
            "target": f"an idle session costs ≤ {IDLE_SESSION_TARGET_MB:g} MB RSS (bridge and sandbox, per session)",
            "limit_mb": IDLE_SESSION_TARGET_MB,
            "measured_mb": measured,
            "met": measured <= IDLE_SESSION_TARGET_MB,
        }
    ]


def table(document: dict[str, Any]) -> str:
    lines = ["sessions  calls/s (baseline)   median / p95 ms (baseline)        first call median   total RSS MB"]
    for key, level in document["levels"].items():
        base = level["baseline"]
        lines.append(
            f"  {key:>4}  {level['throughput_per_s']:>7} ({base['throughput_per_s']:>7})"
            f"   {level['latency']['median_ms']:>6.2f} / {level['latency']['p95_ms']:<7.2f}"
            f" ({base['latency']['median_ms']:.2f} / {base['latency']['p95_ms']:.2f})"
            f"   {level['first_call']['median_ms']:>9.2f}   {level['memory']['total']['rss_mb']:>9.1f}"
        )
    memory = document["memory"]
    per = memory["per_idle_session"]
    lines.append(
        f"memory at rest: bridge {memory['at_rest']['bridge']['rss_mb']} MB RSS, sandboxes "
        f"{memory['at_rest']['sandboxes']['rss_mb']} MB ({memory['at_rest']['sandboxes']['trees']} workers); per idle "
        f"session: {per['total_rss_mb']} MB RSS ({per['total_pss_mb']} MB PSS) of which bridge {per['bridge_rss_mb']}"
    )
    growth = document["growth"]
    lines.append(
        f"bridge RSS over {growth['calls']} calls: {growth['bridge_rss_mb']['start']} -> "
        f"{growth['bridge_rss_mb']['end']} MB ({growth['bridge_rss_mb']['growth']:+} MB)"
    )
    for row in document["targets"]:
        lines.append(f"[{'PASS' if row['met'] else 'FAIL'}] {row['target']}: {row['measured_mb']} MB")
    return "\n".join(lines)


def levels_list(text: str) -> list[int]:
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError("--levels takes comma-separated whole numbers, e.g. 1,2,4,8,16") from None
    if not values or values[0] < 1 or values[-1] > 64:
        raise argparse.ArgumentTypeError("--levels takes numbers from 1 to 64")
    return values


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--levels",
        type=levels_list,
        default=list(DEFAULT_LEVELS),
        help="concurrent sessions to measure (default: 1,2,4,8,16)",
    )
    parser.add_argument(
        "--calls", type=positive, default=None, help=f"timed calls per level, split among its sessions "
        f"(default: {DEFAULT_CALLS}; at least {MIN_CALLS_PER_SESSION} per session)"
    )  # fmt: skip
    parser.add_argument(
        "--level-seconds",
        type=float,
        default=DEFAULT_LEVEL_SECONDS,
        help="bound on each level's timed window (default: %(default)s)",
    )
    parser.add_argument("--idle", type=positive, default=None, help=f"idle sessions opened (default: {DEFAULT_IDLE})")
    parser.add_argument(
        "--growth-calls",
        type=positive,
        default=None,
        help=f"sequential calls watched for memory growth (default: {DEFAULT_GROWTH_CALLS})",
    )
    parser.add_argument(
        "--growth-seconds",
        type=float,
        default=DEFAULT_GROWTH_SECONDS,
        help="bound on the growth run (default: %(default)s)",
    )
    parser.add_argument("--mode", choices=MODES, default="legacy", help="the clients' protocol (default: legacy)")
    parser.add_argument(
        "--backend", choices=AUTO_ORDER, default="bubblewrap", help="sandbox backend (default: %(default)s)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a smoke run: {QUICK['calls']} calls per level, {QUICK['idle']} idle sessions, "
        f"{QUICK['growth_calls']} growth calls (explicit flags still win)",
    )
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON document to this file")
    args = parser.parse_args(argv)
    full = {"calls": DEFAULT_CALLS, "idle": DEFAULT_IDLE, "growth_calls": DEFAULT_GROWTH_CALLS}
    return fill_defaults(args, QUICK, full)


async def run(args: argparse.Namespace, settings: Settings, launch: Launch) -> dict[str, Any]:
    phases: dict[str, float] = {}
    levels: dict[str, Any] = {}
    for count in args.levels:  # one after another: on 2 cores, parallel runs would measure each other
        levels[str(count)] = await measure_level(launch, settings, count, args.calls, args.level_seconds)
        phases[f"level_{count}"] = levels[str(count)]["elapsed_s"]
    memory = await measure_idle(launch, args.idle)
    phases["idle"] = memory["elapsed_s"]
    growth = await measure_growth(launch, args.growth_calls, args.growth_seconds)
    phases["growth"] = growth["elapsed_s"]
    return {"levels": levels, "memory": memory, "growth": growth, "phase_seconds": phases}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    load_before = os.getloadavg()
    try:
        with tempfile.TemporaryDirectory(prefix="sessions-bench-") as scratch:
            # A state directory of its own; the sandbox's uid must pass through its parent to the staged guest files.
            os.chmod(scratch, 0o711)
            loaded = Settings.load(overrides={"runtime": args.backend})
            room = max([*args.levels, args.idle]) + 8  # every session and a warm pool fit: no eviction while timed
            settings = loaded.replace(state_dir=Path(scratch) / "state", max_sessions=max(loaded.max_sessions, room))
            env = {
                **{k: v for k, v in os.environ.items() if k.startswith(PASSED_ENV_PREFIXES) or k in PASSED_ENV_NAMES},
                "MCP_BRIDGE_MAX_SESSIONS": str(settings.max_sessions),
                "MCP_BRIDGE_STATE_DIR": str(settings.state_dir),
            }
            launch = Launch(args.backend, args.mode, env, Path(scratch))
            measured = asyncio.run(run(args, settings, launch))
    except (BenchmarkError, CodemodeError) as exc:
        print(f"benchmarks/sessions.py: {exc}", file=sys.stderr)
        return 2
    document: dict[str, Any] = {
        "benchmark": "sessions",
        "quick": args.quick,
        "code": CODE,
        "backend": args.backend,
        "mode": args.mode,
        "warm_pool": getattr(settings, "warm_pool", None),  # None: this build has no warm pool
        "levels": measured["levels"],
        "memory": measured["memory"],
        "growth": measured["growth"],
        "targets": build_targets(measured["memory"]),
        "phase_seconds": measured["phase_seconds"],
        "machine": machine_info(),
        "load_average_1_5_15": {
            "before": [round(value, 2) for value in load_before],
            "after": [round(value, 2) for value in os.getloadavg()],
        },
        "settings": settings_info(settings),
        "elapsed_s": round(time.perf_counter() - began, 2),
    }
    document["all_targets_met"] = all(row["met"] for row in document["targets"])
    print(table(document), file=sys.stderr)
    emit(document, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
