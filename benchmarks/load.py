"""Many agents at once: N concurrent real MCP SDK clients on one bridge, beside the SDK's no-op server (issue 35).

Why this exists
    Every other figure here is for one client at a time (or up to 16 warm sessions calling ``1``). This one answers
    how the bridge behaves when 64 agents call it at once with a realistic mix, and whether any answer ever lands in
    the wrong session.

What runs
    N clients on each of two sides, both up for the whole run on 127.0.0.1:
    floor   the MCP SDK's own server with a no-op tool (``load_floor.py``: ``bare_server.py`` plus ``wait``), over
            Streamable HTTP for the HTTP clients and one stdio process per stdio client;
    bridge  ``mcp-codemode serve --transport http`` (bubblewrap by default) with two real upstream servers
            (server-everything's ``echo`` and mcp-server-time, started by their entry points as proxy.py does),
            and one ``mcp-codemode serve`` over stdio per stdio client, with the same upstreams.
    Clients are the SDK's ``mcp.Client``, each with its own connection (its own HTTP pool, or its own process):
    ``--stdio`` of them over stdio, the rest over HTTP, alternately in the handshake era (2025-11-25: the
    connection's own default session) and the stateless era (2026-07-28: a session named after the client). Each
    client makes its first call (which creates its session's counter) and ``WARMUP`` untimed calls; both sides'
    clients then stay connected and warm while the sides take turns in ``--windows`` short windows each
    (``--seconds`` split among them; floor, bridge, then bridge, floor, and so on), and in its side's window each
    client calls back to back until the window closes. A window ends when its clients' last calls have: the two
    sides never call at once. The mix is load_work.CYCLE (warm cells, calls to the two upstream servers, prints, an
    image) with one deliberate 1 s timeout per ``load_work.TIMEOUT_EVERY`` calls; on the floor every call is
    ``noop`` but the timeout, which is ``wait(1)``. Every answer is checked (load_work.py): its id and count must be
    the client's own.

Why alternating windows
    This machine's other load changes within a minute by more than the gap being measured: with one 30 s window
    per side, one after the other, the same code's throughput ratio came out 1.06, 0.82, 1.04 and 0.54. In windows
    of a few seconds taken in turn, a slow spell of the machine falls on both sides; the order is reversed every
    other round (ABBA) so that a steady drift within the run cancels too. The clients of the side that waits are
    idle, and each side's CPU is read over its own windows only.

How the mix is compared with the floor (the decision the issue left to us)
    The deliberate timeout's second is the workload's, not the bridge's: both sides wait it (the floor's ``wait``),
    it is taken out of both sides' throughput (each client's rate is its other calls divided by its busy time, the
    window less its time in deliberate waits up to the timeout; what a timeout call takes beyond it counts as busy)
    and its calls are left out of the latency percentiles (``timeouts`` reports how far past the timeout each
    ended). The upstream servers' own work and the sandboxed code's are not taken out: the floor answers those
    calls with a no-op, so the ratios are what a code-mode call costs next to an MCP call that does nothing.

What is reported
    Per side, over all its windows: ``throughput_per_s``, ``latency`` (p50, p95, p99, max over the non-timeout calls,
    ms) and per kind and per era, ``windows`` (each window's throughput, latency and load average), ``errors`` by
    kind (with a few details), ``cross_session`` (answers with another client's id: must be 0), ``cpu`` (seconds and
    cores used during the side's windows by its server processes, by what they started, and by this process, which
    runs all clients; ``ms_per_call`` divides them by the calls that ended in those windows: on a shared machine the
    steadiest figure of the two sides' work) and ``memory`` (RSS/PSS of the server processes and what they started,
    before, after and at the peak). ``alternation``: the windows' order and, per window pair (the two windows of a
    round), the bridge's throughput and p99 over the floor's, with their median, least and greatest. ``targets``:
    throughput >= 0.8x the floor's, p99 <= 1.5x the floor's p99 (each side over all its windows, the per-pair median
    beside it), no answer from another session. The clients share the machine with both servers: on 2 cores the
    ratios, not the absolute figures, are what to compare. With one side (``--sides``), as in the soak, it runs in
    one window of ``--seconds``.

Usage
    python benchmarks/load.py [--clients 64] [--stdio 8] [--seconds 30] [--windows 6] [--backend NAME] [--quick]
                              [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

import load_figures as figures
import load_work as work
from common import BenchmarkError, emit, fill_defaults, free_port, machine_info, positive, stop_server, wait_listening
from load_usage import Sampler, idle_cpu, servers_of_this_process, usage
from mcp_codemode.errors import CodemodeError
from mcp_codemode.sandbox.select import AUTO_ORDER
from proxy import BUILDERS
from sessions import Launch, Served, client_for, http_server, mib

HERE = Path(__file__).resolve().parent
WARMUP = ("cell", "print", "image", "everything", "time", "cell")  # every kind once: upstreams started
OPENING_AT_ONCE = 8  # clients that connect (and start a sandbox or a stdio bridge) together
QUICK = {"clients": 6, "stdio": 2, "seconds": 4.0, "windows": 2}
FULL = {"clients": 64, "stdio": 8, "seconds": 30.0, "windows": 6}


# -- the two sides -----------------------------------------------------------------------------------------------


def upstream_config(scratch: Path) -> Path:
    """The two real upstream servers of the mix, as an ``mcpServers`` file (proxy.py's entry points)."""
    entries = {}
    for name in ("everything", "time"):
        config = BUILDERS[name]().config
        entries[name] = {"command": config.command, "args": list(config.args)}
    path = scratch / "servers.json"
    path.write_text(json.dumps({"mcpServers": entries}), encoding="utf-8")
    return path


@contextlib.asynccontextmanager
async def floor_server(scratch: Path) -> AsyncIterator[Served]:
    port = free_port()
    log = scratch / "floor-http.log"
    with log.open("ab") as sink:
        process = subprocess.Popen([sys.executable, str(HERE / "load_floor.py"), "http", str(port)],
                                   stdin=subprocess.DEVNULL, stdout=sink, stderr=sink)  # fmt: skip
    try:
        await wait_listening(process, port, "floor", lambda: log.read_text(errors="replace")[-2000:], 60.0)
        yield Served(f"http://127.0.0.1:{port}/mcp", "floor-takes-any-token", process.pid)
    finally:
        await stop_server(process)


def stdio_parameters(side: work.Side, launch: Launch) -> StdioServerParameters:
    if side == "floor":
        return StdioServerParameters(command=sys.executable, args=[str(HERE / "load_floor.py"), "stdio"])
    args = ["-m", "mcp_codemode", "serve", "--backend", launch.backend, "--no-discover"]
    return StdioServerParameters(command=sys.executable, args=args, env=dict(launch.env))


@contextlib.asynccontextmanager
async def open_client(state: work.ClientState, served: Served, launch: Launch) -> AsyncIterator[Client]:
    if state.era != "stdio":
        async with client_for(served, "legacy" if state.era == "http-legacy" else "auto") as client:
            yield client
        return
    with launch.log(f"{state.side}-stdio-{state.index}").open("a", encoding="utf-8") as errlog:
        transport = stdio_client(stdio_parameters(state.side, launch), errlog=errlog)
        async with Client(transport, mode="legacy", read_timeout_seconds=work.DEFAULT_TIMEOUT_S * 2) as client:
            yield client


class Window:
    """One timed window of one side: go, the clients' stop, and what was read around it."""

    def __init__(self, clients: int, seconds: float) -> None:
        self.seconds = seconds
        self.clients = clients
        self.go = asyncio.Event()
        self.opened = -math.inf  # closed until it opens: a client released by an abort makes no call
        self.finished = 0.0
        self.stopped = 0
        self.all_stopped = asyncio.Event()
        self.outcomes: list[work.Outcome] = []
        self.before: dict[str, Any] = {}
        self.after: dict[str, Any] = {}
        self.load_1m = 0.0
        self.idle_cpu_s = 0.0

    def stopped_calling(self) -> None:
        self.stopped += 1
        if self.stopped == self.clients:
            self.all_stopped.set()

    @property
    def open(self) -> bool:
        return time.perf_counter() < self.opened + self.seconds


class Fleet:
    """One side's clients, connected and warm from before its first window to after its last, and its windows."""

    def __init__(self, side: work.Side, eras: Sequence[work.Era], served: Served, launch: Launch, rounds: int,
                 seconds: float) -> None:  # fmt: skip
        self.side = side
        self.served = served
        self.launch = launch
        self.states = [work.ClientState(index, era, side) for index, era in enumerate(eras)]
        self.windows = [Window(len(eras), seconds) for _ in range(rounds)]
        self.ready = 0
        self.all_ready = asyncio.Event()
        self.done = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []
        self.servers: list[int] = []
        self.first: dict[str, Any] = {}
        self.last: dict[str, Any] = {}
        self.sampler = Sampler([])

    def arrived(self) -> None:
        self.ready += 1
        if self.ready == len(self.states):
            self.all_ready.set()

    async def start(self, known: set[int]) -> None:
        """Connect and warm every client; the side's server processes are then this process's children not in
        ``known`` (the other side's, started before)."""
        gate = asyncio.Semaphore(OPENING_AT_ONCE)
        self.tasks = [asyncio.create_task(drive(state, self, gate)) for state in self.states]
        waiting = asyncio.create_task(self.all_ready.wait())
        await asyncio.wait([waiting, *self.tasks], return_when=asyncio.FIRST_COMPLETED)
        failed = [task for task in self.tasks if task.done() and task.exception() is not None]
        if failed:
            raise BenchmarkError(f"{self.side}: {failed[0].exception()}")
        self.servers = sorted(set(servers_of_this_process()) - known)

    async def stop(self) -> None:
        """Release every client (an aborted run's too) and wait for them to disconnect."""
        for window in self.windows:
            window.go.set()
        self.done.set()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def drive(state: work.ClientState, fleet: Fleet, gate: asyncio.Semaphore) -> None:
    """One client: connect, first call and warm-up, then in each of its side's windows calls back to back."""
    arrived = False
    try:
        async with contextlib.AsyncExitStack() as stack:
            async with gate:
                client = await stack.enter_async_context(open_client(state, fleet.served, fleet.launch))
                first = await work.one_call(client, state, "init" if state.side == "bridge" else "cell", 0.0)
                warm = [await work.one_call(client, state, kind, 0.0) for kind in WARMUP]
            for outcome in (first, *warm):
                if outcome.error is not None:
                    raise BenchmarkError(
                        f"client {state.ident} ({state.era}): a {outcome.kind} call before the "
                        f"window failed ({outcome.error}): {outcome.detail}"
                    )
            arrived = True
            fleet.arrived()
            index = 0
            for window in fleet.windows:
                await window.go.wait()
                while window.open:
                    window.outcomes.append(
                        await work.one_call(client, state, work.kind_of(index, state.offset), window.opened)
                    )
                    index += 1
                window.stopped_calling()
            await fleet.done.wait()
    finally:
        if not arrived:
            fleet.arrived()  # a client that failed to start must not keep the others waiting


async def run_window(fleet: Fleet, window: Window, label: str, opened: asyncio.Event | None,
                     waiting: Sequence[int] = ()) -> None:  # fmt: skip
    """Open one window of one side, close it, and wait until its clients' last calls have ended (each is bounded
    by its timeout plus grace), so that no call of one side runs in the other side's window. ``waiting``: the
    other side's servers, whose CPU in the window is read too (it should be nearly none)."""
    window.before = await asyncio.to_thread(usage, fleet.servers, False)
    window.idle_cpu_s = -await asyncio.to_thread(idle_cpu, waiting)
    window.load_1m = os.getloadavg()[0]
    window.opened = time.perf_counter()
    window.go.set()
    if opened is not None:
        opened.set()  # the fault harness injects its faults from here on
    print(f"[load] {fleet.side} {label}: {len(fleet.states)} clients for {window.seconds:g} s", file=sys.stderr,
          flush=True)  # fmt: skip
    while window.open:
        await asyncio.sleep(0.05)
    window.after = await asyncio.to_thread(usage, fleet.servers, False)  # the calls still in flight are not in it
    window.idle_cpu_s += await asyncio.to_thread(idle_cpu, waiting)
    await window.all_stopped.wait()
    window.finished = time.perf_counter()


async def run_fleets(fleets: Sequence[Fleet], soak_every: float | None = None,
                     opened: asyncio.Event | None = None) -> dict[str, Any]:  # fmt: skip
    """Every side's windows in the alternating order of ``load_figures.schedule``, then each side's figures."""
    by_side: dict[str, Fleet] = {fleet.side: fleet for fleet in fleets}
    rounds = len(fleets[0].windows)
    for fleet in fleets:
        fleet.first = await asyncio.to_thread(usage, fleet.servers)
        fleet.sampler = Sampler(fleet.servers, soak_every if fleet.side == "bridge" else None)
        fleet.sampler.start()
    for index, side in figures.schedule(list(by_side), rounds):
        waiting = [pid for other in fleets if other.side != side for pid in other.servers]
        await run_window(by_side[side], by_side[side].windows[index], f"window {index + 1}/{rounds}", opened, waiting)
    for fleet in fleets:
        await fleet.sampler.stop()
        fleet.last = await asyncio.to_thread(usage, fleet.servers)
    for fleet in fleets:
        await fleet.stop()
    return {fleet.side: summarize_side(fleet) for fleet in fleets}


async def run_side(side: work.Side, eras: Sequence[work.Era], seconds: float, launch: Launch, served: Served,
                   soak_every: float | None = None, opened: asyncio.Event | None = None) -> dict[str, Any]:  # fmt: skip
    """One side alone in one window (the soak, and the fault harness's background load)."""
    fleet = Fleet(side, eras, served, launch, 1, seconds)
    try:
        await fleet.start(set())
        figured: dict[str, Any] = (await run_fleets([fleet], soak_every, opened))[side]
        return figured
    finally:
        await fleet.stop()


# -- the figures -------------------------------------------------------------------------------------------------


def summarize_side(fleet: Fleet) -> dict[str, Any]:
    side, states, windows = fleet.side, fleet.states, fleet.windows
    outcomes = [outcome for window in windows for outcome in window.outcomes]
    seconds = sum(window.seconds for window in windows)
    timed = [outcome for outcome in outcomes if outcome.kind != "timeout" and outcome.error is None]
    warm_upstream = sum(1 for kind in WARMUP if kind in work.UPSTREAM_KINDS) if side == "bridge" else 0
    timeouts = [outcome for outcome in outcomes if outcome.kind == "timeout"]
    cpu = {
        part: round(sum(window.after["cpu"][part] - window.before["cpu"][part] for window in windows), 3)
        for part in fleet.first["cpu"]
    }
    ended = sum(figures.calls_ended_in(window.outcomes, window.seconds) for window in windows)
    first, last = fleet.first, fleet.last
    return {
        "side": side,
        "calls": len(outcomes),
        "window_s": round(seconds, 3),  # all its windows together
        "drain_s": round(sum(window.finished - window.opened - window.seconds for window in windows), 3),
        "throughput_per_s": figures.throughput_over(states, [(window.outcomes, window.seconds) for window in windows]),
        "latency": figures.percentiles([outcome.latency_ms for outcome in timed]),
        "latency_by_kind": {
            kind: figures.percentiles([o.latency_ms for o in timed if o.kind == kind])
            for kind in sorted({o.kind for o in timed})
        },
        "latency_by_era": {
            era: figures.percentiles([o.latency_ms for o in timed if o.era == era])
            for era in sorted({o.era for o in timed})
        },
        "windows": [
            {
                "seconds": window.seconds,
                "load_average_1m": round(window.load_1m, 2),
                "calls": len(window.outcomes),
                "throughput_per_s": figures.throughput(states, window.outcomes, window.seconds),
                "latency": figures.percentiles(
                    [o.latency_ms for o in window.outcomes if o.kind != "timeout" and o.error is None]
                ),
            }
            for window in windows
        ],
        "timeouts": {
            "calls": len(timeouts),
            "past_timeout_ms": figures.percentiles([o.latency_ms - work.TIMEOUT_S * 1000 for o in timeouts]),
        },
        "errors": figures.errors_by_kind(outcomes),
        "upstream_calls": {  # the warm-up's (one of each upstream kind per client, all answered) included
            "issued": sum(1 for o in outcomes if o.kind in work.UPSTREAM_KINDS) + warm_upstream * len(states),
            "ok": sum(1 for o in outcomes if o.kind in work.UPSTREAM_KINDS and o.error is None)
            + warm_upstream * len(states),
        },
        "late": sum(1 for outcome in outcomes if outcome.late),
        "cross_session": sum(1 for outcome in outcomes if outcome.error == "wrong_session"),
        "cpu": {
            "seconds": cpu,
            "cores": {part: round(value / seconds, 3) for part, value in cpu.items()},
            "calls_ended_in_window": ended,
            "ms_per_call": figures.per_call(cpu, ended),
            "other_side_waiting_s": round(sum(window.idle_cpu_s for window in windows), 3),
        },
        "memory": {
            "rss_mb": {
                "before": {k: mib(v) for k, v in first["rss_kib"].items()},
                "after": {k: mib(v) for k, v in last["rss_kib"].items()},
                "peak": {k: mib(v) for k, v in fleet.sampler.peak_rss_kib.items()},
            },
            "pss_mb": {"after": {k: mib(v) for k, v in last["pss_kib"].items()}},
            "processes": last["processes"],
            "fds": {"before": first["fds"], "after": last["fds"]},
        },
        **({"soak": figures.soak_figures(fleet.sampler.points, seconds)} if fleet.sampler.points else {}),
    }


# -- the run -------------------------------------------------------------------------------------------------------


async def measure(args: argparse.Namespace, launch: Launch) -> dict[str, Any]:
    """Start each side's server and connect its clients (the floor's first), then run the windows."""
    eras = work.eras_for(args.clients, args.stdio)
    rounds = args.windows if len(args.sides) == 2 else 1
    fleets: list[Fleet] = []
    async with contextlib.AsyncExitStack() as stack:
        try:
            for side in sorted(args.sides, key=["floor", "bridge"].index):
                known = set(servers_of_this_process())
                server = floor_server(launch.scratch) if side == "floor" else http_server(launch, "bridge-http")
                served = await stack.enter_async_context(server)
                fleets.append(Fleet(side, eras, served, launch, rounds, args.seconds / rounds))
                await fleets[-1].start(known)
            return await run_fleets(fleets, args.soak_every)
        finally:
            for fleet in fleets:
                await fleet.stop()


def bridge_launch(args: argparse.Namespace, scratch: Path) -> Launch:
    env = {
        # the run's own MCP_BRIDGE_* settings reach the stdio bridges too (the SDK gives those a bare environment)
        **{name: value for name, value in os.environ.items() if name.startswith("MCP_BRIDGE_")},
        "MCP_SERVERS_CONFIG": str(upstream_config(scratch)),
        "MCP_BRIDGE_MAX_SESSIONS": str(args.clients + 8),  # every client's session fits, and the warm pool
        "MCP_BRIDGE_STATE_DIR": str(scratch / "state"),
        "MCP_BRIDGE_AUDIT_LOG": str(scratch / "audit.jsonl"),
        "MCP_BRIDGE_RUNTIME": args.backend,
    }
    return Launch(args.backend, "legacy", env, scratch)


def sides_list(text: str) -> list[str]:
    chosen = [part.strip() for part in text.split(",") if part.strip()]
    if not chosen or any(part not in ("floor", "bridge") for part in chosen):
        raise argparse.ArgumentTypeError("--sides takes floor, bridge or floor,bridge")
    return chosen


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--clients", type=positive, default=None, help=f"concurrent clients (default {FULL['clients']})"
    )
    parser.add_argument("--stdio", type=int, default=None, help=f"of them over stdio (default {FULL['stdio']})")
    parser.add_argument(
        "--seconds", type=float, default=None, help=f"measured time per side (default {FULL['seconds']:g})"
    )
    parser.add_argument(
        "--windows",
        type=positive,
        default=None,
        help=f"alternating windows per side, the --seconds split among them (default {FULL['windows']})",
    )
    parser.add_argument(
        "--backend", choices=AUTO_ORDER, default="bubblewrap", help="sandbox backend (default: %(default)s)"
    )
    parser.add_argument(
        "--sides",
        type=sides_list,
        default=["floor", "bridge"],
        help="which sides to run, comma-separated (default: floor,bridge; targets need both)",
    )
    parser.add_argument(
        "--soak-every",
        type=float,
        default=None,
        help="record the bridge's memory and file descriptors every so many seconds (a soak)",
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: 6 clients (2 over stdio) for 4 s per side")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON document to this file")
    args = fill_defaults(parser.parse_args(argv), QUICK, FULL)
    if not 0 <= args.stdio <= args.clients:
        parser.error(f"--stdio must be from 0 to --clients ({args.clients}), not {args.stdio}")
    return args


def alternation(args: argparse.Namespace, sides: dict[str, Any]) -> dict[str, Any]:
    """How the two sides took turns, and the bridge's figures over the floor's pair by pair."""
    return {
        "windows_per_side": args.windows,
        "window_s": round(args.seconds / args.windows, 3),
        "order": [side for _, side in figures.schedule(["floor", "bridge"], args.windows)],
        **figures.pairs(sides["floor"]["windows"], sides["bridge"]["windows"]),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    load_before = os.getloadavg()
    try:
        with tempfile.TemporaryDirectory(prefix="load-bench-") as scratch:
            os.chmod(scratch, 0o711)  # the sandbox's uid passes through it to the staged guest files
            sides = asyncio.run(measure(args, bridge_launch(args, Path(scratch))))
    except (BenchmarkError, CodemodeError) as exc:
        print(f"benchmarks/load.py: {exc}", file=sys.stderr)
        return 2
    document: dict[str, Any] = {
        "benchmark": "load",
        "quick": args.quick,
        "clients": args.clients,
        "eras": {era: work.eras_for(args.clients, args.stdio).count(era) for era in work.ERAS},
        "backend": args.backend,
        "mix": {"cycle": list(work.CYCLE), "timeout_every": work.TIMEOUT_EVERY, "timeout_s": work.TIMEOUT_S},
        **sides,
        **({"alternation": alternation(args, sides)} if len(sides) == 2 else {}),
        "targets": [
            *(figures.targets(sides["bridge"], sides["floor"], alternation(args, sides)) if len(sides) == 2 else []),
            *sides.get("bridge", {}).get("soak", {}).get("targets", []),
        ],
        "machine": machine_info(),
        "load_average_1_5_15": {
            "before": [round(v, 2) for v in load_before],
            "after": [round(v, 2) for v in os.getloadavg()],
        },
        "elapsed_s": round(time.perf_counter() - began, 2),
    }
    document["all_targets_met"] = bool(document["targets"]) and all(row["met"] for row in document["targets"])
    for row in document["targets"]:
        print(f"[{'PASS' if row['met'] else 'FAIL'}] {row['target']}: {row['measured']}", file=sys.stderr)
    emit(document, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
