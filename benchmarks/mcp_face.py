"""What the MCP face costs: a ``run_python`` round trip through a real MCP client, next to the sandbox alone.

Why this exists
    ``benchmarks/sandbox.py`` shows that a warm sandbox answers in a fraction of a millisecond. An agent
    never talks to the sandbox directly, though: every call crosses an MCP client, a transport (stdio or
    Streamable HTTP), the SDK's server, argument checks, the bridge and result rendering, and back. This
    script measures that whole path with the official SDK client, in both protocol eras, and in the same
    run measures the sandbox's own round trip, so the difference (what the MCP layer adds) is a number
    rather than a guess.

What is measured (all with ``time.perf_counter``, in milliseconds)
    baseline.sandbox_warm
        ``SessionManager.execute("1")`` on one warm session, in this process, on the backend the
        server uses: the sandbox's own round trip, with no MCP and no bridge.
    baseline.bridge_warm
        ``Bridge.run(RunRequest("1"))`` in this process: the sandbox plus what the bridge adds (it ships
        the capability summary with every call), still without MCP. With its metrics on, the default.
    baseline.bridge_warm_metrics_off
        The same on a second bridge with ``MCP_BRIDGE_METRICS=false``, the two measured in alternating blocks
        of ``METRICS_BLOCK`` calls; ``baseline.metrics_on_minus_off_ms`` is the difference of their medians.
        ``baseline.metrics_record_us`` times the seam alone: what recording one warm call that made one
        upstream tool call costs, in microseconds.
    baseline.bridge_warm_tracing_on
        The same on a third bridge, in the same alternating blocks, with its metrics on and its traces on
        (``MCP_BRIDGE_TRACING=on``, every call sampled), exporting over OTLP/HTTP to a sink in this process that
        takes each batch and answers 200 (the SDK's batch thread encodes and posts them, as to a collector);
        ``baseline.tracing_on_minus_off_ms`` is its median minus the metrics-on bridge's (tracing off, the
        default). ``baseline.trace_record_us`` times the spans of one warm call that made one upstream tool call
        alone (placing the session, the cell and the client span), in microseconds, without the export.
    baseline.inprocess_mcp_warm.<mode>
        ``mcp.Client(server)`` on the very ``Server`` object that ``serve`` runs, in this process: the SDK's
        client and server and our face, without a transport or a process boundary (``legacy`` passes
        JSON-RPC messages over memory streams; ``auto`` uses the SDK's direct dispatcher, without JSON).
    baseline.sandbox_cold
        ``SessionManager.execute("1")`` on a session name never used before, one every ``COLD_PACE_S``
        seconds: the first call of a new session when the warm pool has had time to refill, so it takes a
        pooled worker (or, with ``MCP_BRIDGE_WARM_POOL=0``, starts one).
    baseline.sandbox_cold_burst
        The same with the new sessions back to back: a burst of sessions drains a pool of 2 and most of
        them wait for a start. No target applies; it shows what a burst costs.
    series.<transport>/<mode>
        One ``mcp-codemode serve`` process per series, driven by ``mcp.Client(..., mode=mode)``.
        ``transport`` is ``stdio`` (the client starts the server as its subprocess) or ``http`` (the
        script starts ``serve --transport http`` on a free 127.0.0.1 port with a bearer token, and stops
        it afterwards). ``mode`` is ``legacy`` (the 2025-11-25 ``initialize`` handshake) or ``auto`` (the
        client probes ``server/discover`` and speaks the stateless 2026-07-28 protocol);
        ``protocol_version`` says what was negotiated.

        ``warm_call``: ``call_tool("run_python", {"code": "1"})`` in the client's default session,
        timed from the call to the parsed result, after ``WARMUP_CALLS`` untimed calls. Over HTTP a
        stateless (``auto``) client's default session is its token's (see server.py).
        ``ping``: an MCP ``ping`` round trip (handshake era only; the stateless protocol has none): the
        transport and SDK floor with no tool behind it.
        ``cold_call``: ``{"code": "1", "session": "cold-<i>"}`` with a name never used before, one every
        ``COLD_PACE_S`` seconds: what the first call of a new session waits for through MCP, with a warm
        pool (the issue's target). ``cold_burst``: the same back to back (``burst-<i>``), the drained pool.
        One unmeasured cold call runs first.
        ``connect_ms``: one sample of entering ``Client`` (for stdio this includes starting the server).
        ``overhead_ms``: this series' median minus a baseline median. ``warm_vs_sandbox`` is the
        headline, what the MCP layer adds to a warm call; ``warm_vs_bridge`` leaves the bridge out;
        ``warm_vs_inprocess_mcp`` is the share of the transport and the process boundary;
        ``cold_vs_sandbox`` compares the first call of a new session. ``warm_vs_sandbox_min`` is the
        same difference between the minimums: less disturbed by other load on the machine, so compare
        it with the median figure when a run looks noisy.

How to read it
    Each measurement has ``median_ms``, ``p95_ms`` (nearest rank), ``min_ms`` and ``n``, as in
    ``benchmarks/sandbox.py``. ``targets`` repeats the goal "the MCP layer adds at most 2 ms to the
    median over stdio" for each protocol mode, with ``met`` computed from the measured overhead. Series
    run one after another (on 2 cores, parallel runs would measure each other); compare runs on the
    same machine.

Usage
    python benchmarks/mcp_face.py [--n N] [--cold-n N] [--transports stdio,http] [--modes legacy,auto]
                                  [--backend NAME] [--profile-server DIR] [--out FILE]

    ``--n`` sets the timed warm calls (and pings) per series and for the baselines (default 200);
    ``--cold-n`` the first calls of new sessions, paced and in a burst (default 15 each, at most 100: each
    stays a warm sandbox
    until the series ends, and the server's ``MCP_BRIDGE_MAX_SESSIONS`` is raised to fit them, so no
    eviction lands in a timed call). ``--backend`` picks the sandbox (default: what ``auto`` chooses).
    ``--profile-server DIR`` runs each server under ``cProfile`` and writes ``DIR/<transport>-<mode>.prof``
    (the numbers of such a run are inflated by the profiler; the document says so).

    The SDK's stdio client passes only HOME, LOGNAME, PATH, SHELL, TERM and USER to the server; this
    script also passes every ``MCP_BRIDGE_*`` variable, ``MCP_CODEMODE_SETTINGS`` and ``XDG_STATE_HOME``
    of its own environment, so the server and the baseline run with the same settings.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import http.server
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from common import (
    BenchmarkError,
    Stats,
    emit,
    free_port,
    machine_info,
    passed_environment,
    positive,
    settings_info,
    stop_server,
    summarize,
    wait_listening,
)
from mcp_codemode.errors import CodemodeError
from mcp_codemode.face.server import build_server
from mcp_codemode.observability_settings import OtelExport
from mcp_codemode.runs.bridge import Bridge, RunRequest
from mcp_codemode.runs.sessions import SessionManager
from mcp_codemode.sandbox.results import ExecutionResult
from mcp_codemode.sandbox.select import AUTO_ORDER, choose_backend
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.settings import Settings
from mcp_codemode.telemetry.seam import Recording, tracing
from mcp_codemode.telemetry.tracing import CELL, PLACE_SESSION

CODE = "1"
TOOL = "run_python"
CALL_TIMEOUT = 30.0
WARMUP_CALLS = 10
DEFAULT_N = 200
DEFAULT_COLD_N = 15
MAX_COLD_N = 100
TRANSPORTS = ("stdio", "http")
MODES = ("legacy", "auto")
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0

# ``python -m cProfile`` loses the profile of a process that a signal ends (uvicorn re-raises SIGTERM after its own
# shutdown). This launcher turns an unhandled SIGTERM into SystemExit, so the profile is written either way.
PROFILED_SERVER = """
import cProfile, signal, sys
from mcp_codemode.cli.main import main
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
profile = cProfile.Profile()
try:
    profile.runcall(main, sys.argv[2:])
except SystemExit:
    pass
finally:
    profile.dump_stats(sys.argv[1])
"""

# Seconds between two paced new sessions: several times a pool refill here (a bubblewrap start is about 40 ms, a
# podman one about 160 ms, and the pool starts its workers in parallel), so each paced call finds a warm pool.
COLD_PACE_S = 0.3
# Warm calls per block when bridges with metrics on and off (and tracing on) alternate (measure_bridges).
METRICS_BLOCK = 20

# The goal, as a limit on median(e2e warm call) - median(sandbox warm call), checked for every stdio series.
STDIO_OVERHEAD_TARGET_MS = 2.0


def check_execution(result: ExecutionResult, what: str) -> None:
    if not result.ok or result.value != CODE:
        detail = result.notice or (result.error.message if result.error else "") or result.stderr
        raise BenchmarkError(
            f"{what}: executing {CODE!r} gave status {result.status!r} and value {result.value!r}"
            + (f" ({detail.strip()})" if detail.strip() else "")
        )


def check_reply(reply: Any, what: str) -> None:
    """The tool result must be a success whose text is exactly the value of ``CODE``."""
    texts = [getattr(block, "text", None) for block in reply.content]
    if reply.is_error or texts != [CODE]:
        raise BenchmarkError(f"{what}: run_python {{'code': {CODE!r}}} answered is_error={reply.is_error}, {texts!r}")


# -- baseline: the same backend, in this process, without MCP ------------------------------------------------


async def paced(measure: Callable[..., Awaitable[float]], *args: Any) -> float:
    """One measurement after ``COLD_PACE_S`` of rest (untimed), so the warm pool has refilled."""
    await asyncio.sleep(COLD_PACE_S)
    return await measure(*args)


async def measure_baseline(settings: Settings, n: int, cold_n: int, modes: Sequence[str]) -> dict[str, Any]:
    choice = choose_backend(settings)
    result: dict[str, Any] = {"backend": choice.backend.name, "reason": choice.reason}
    async with SessionManager(choice.backend, settings) as sessions:

        async def execute(session: str) -> float:
            started = time.perf_counter()
            outcome = await sessions.execute(CODE, session=session, timeout=CALL_TIMEOUT)
            elapsed = (time.perf_counter() - started) * 1000
            check_execution(outcome, f"baseline session {session}")
            return elapsed

        for _ in range(WARMUP_CALLS):
            await execute("bench")
        result["sandbox_warm"] = summarize([await execute("bench") for _ in range(n)])
        await execute("cold-warmup")
        result["sandbox_cold"] = summarize([await paced(execute, f"cold-{index}") for index in range(cold_n)])
        result["sandbox_cold_burst"] = summarize([await execute(f"burst-{index}") for index in range(cold_n)])
    on, off = settings.replace(metrics=True, tracing=False), settings.replace(metrics=False, tracing=False)
    with otlp_sink() as endpoint:
        otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_TRACES_SAMPLER": "always_on"}
        traced = settings.replace(metrics=True, tracing=True, otel=otel)
        async with Bridge(on) as bridge, Bridge(off) as quiet, Bridge(traced) as tracing:
            warm = await measure_bridges({"on": bridge, "off": quiet, "traced": tracing}, n)
            result["bridge_warm"], result["bridge_warm_metrics_off"] = warm["on"], warm["off"]
            result["bridge_warm_tracing_on"] = warm["traced"]
            result["metrics_on_minus_off_ms"] = round(warm["on"]["median_ms"] - warm["off"]["median_ms"], 3)
            result["tracing_on_minus_off_ms"] = round(warm["traced"]["median_ms"] - warm["on"]["median_ms"], 3)
            result["inprocess_mcp_warm"] = {mode: await measure_inprocess(bridge, mode, n) for mode in modes}
    result["metrics_record_us"] = record_cost_us()
    result["trace_record_us"] = trace_cost_us()
    return result


@contextlib.contextmanager
def otlp_sink() -> Iterator[str]:
    """An OTLP/HTTP endpoint on loopback that takes every batch and answers 200, in a thread: where the traced
    bridge exports, so the export's work (encoding, posting) is done as it would be to a collector."""

    class Sink(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def trace_cost_us(rounds: int = 5_000) -> float:
    """Microseconds the spans of one warm call that made one upstream tool call cost (as the sessions and the guard
    open them), every one sampled and none exported, timed alone."""
    traced = tracing(True, OtelExport(exporter="none", sampler="always_on"))
    started = time.perf_counter()
    for _ in range(rounds):
        with traced.span(PLACE_SESSION):
            pass
        with traced.span(CELL, attributes={"mcp_codemode.call.id": "0123456789abcdef"}) as cell:
            captured = traced.captured()
            method = {"mcp.method.name": "tools/call"}
            with traced.resumed(captured), traced.span("tools/call", "client", method) as use:
                use.rename("tools/call echo")
                use.set("gen_ai.tool.name", "echo")
            cell.set("mcp_codemode.cell.status", "ok")
    return round((time.perf_counter() - started) / rounds * 1e6, 2)


async def measure_bridges(bridges: dict[str, Bridge], n: int) -> dict[str, Stats]:
    """Warm ``Bridge.run`` on each bridge, in alternating blocks of ``METRICS_BLOCK`` calls (the order turned each
    round), so a drift of the machine's speed lands on every bridge alike rather than on whichever ran last."""
    request = RunRequest(code=CODE)
    samples: dict[str, list[float]] = {name: [] for name in bridges}

    async def run(bridge: Bridge) -> float:
        started = time.perf_counter()
        outcome = await bridge.run(request, SessionKey.stdio("default"))
        elapsed = (time.perf_counter() - started) * 1000
        check_execution(outcome, "baseline bridge")
        return elapsed

    for bridge in bridges.values():
        for _ in range(WARMUP_CALLS):
            await run(bridge)
    order = list(bridges)
    for block in range(-(-n // METRICS_BLOCK)):
        for name in order if block % 2 == 0 else reversed(order):
            size = min(METRICS_BLOCK, n - block * METRICS_BLOCK)
            samples[name].extend([await run(bridges[name]) for _ in range(size)])
    return {name: summarize(taken) for name, taken in samples.items()}


def record_cost_us(rounds: int = 20_000) -> float:
    """Microseconds the metrics of one warm call that made one upstream tool call cost (the seam's methods as the
    bridge and the guard call them), timed alone."""
    recording = Recording()
    started = time.perf_counter()
    for _ in range(rounds):
        recording.sandbox_waited(0.0001)
        recording.upstream_used("tool", "everything", "echo", "ok", 0.0004)
        recording.call_ended("ok", 0.001, 12)
    return round((time.perf_counter() - started) / rounds * 1e6, 2)


async def measure_inprocess(bridge: Bridge, mode: str, n: int) -> Stats:
    """The SDK client and server in one process, no transport: legacy runs JSON-RPC over memory streams, auto
    the SDK's direct dispatcher (no JSON at all)."""
    async with Client(build_server(bridge, "stdio"), mode=mode) as client:

        async def call() -> float:
            started = time.perf_counter()
            reply = await client.call_tool(TOOL, {"code": CODE})
            elapsed = (time.perf_counter() - started) * 1000
            check_reply(reply, f"in-process MCP ({mode})")
            return elapsed

        for _ in range(WARMUP_CALLS):
            await call()
        return summarize([await call() for _ in range(n)])


# -- the MCP face: a real server process, a real SDK client ---------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ServerLaunch:
    """How to start ``mcp-codemode serve`` the same way for every series."""

    backend: str
    env: dict[str, str]  # what the server gets on top of the SDK's minimal environment
    log_dir: Path
    profile_dir: Path | None

    def command(self, series: str, extra: Sequence[str]) -> list[str]:
        log_file = self.log_dir / f"{series}.log"
        serve = ["serve", "--backend", self.backend, "--log-file", str(log_file), *extra]
        if self.profile_dir is None:
            return [sys.executable, "-m", "mcp_codemode", *serve]
        return [sys.executable, "-c", PROFILED_SERVER, str(self.profile_dir / f"{series}.prof"), *serve]

    def log_tail(self, series: str, lines: int = 20) -> str:
        try:
            text = (self.log_dir / f"{series}.log").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


@contextlib.asynccontextmanager
async def http_server(launch: ServerLaunch, series: str, token: str) -> AsyncIterator[str]:
    """Start ``serve --transport http`` on a free loopback port; yields the endpoint URL."""
    port = free_port()
    command = launch.command(series, ["--transport", "http", "--host", "127.0.0.1", "--port", str(port)])
    env = {**os.environ, **launch.env, "MCP_BRIDGE_HTTP_TOKEN": token}  # the token stays out of the argv
    process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL)
    try:
        await wait_listening(process, port, series, lambda: launch.log_tail(series), STARTUP_TIMEOUT_S)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        await stop_server(process, STOP_TIMEOUT_S)


@contextlib.asynccontextmanager
async def connect(launch: ServerLaunch, transport: str, mode: str) -> AsyncIterator[tuple[Client, float]]:
    """A connected ``Client`` for one series, and how long entering it took (ms)."""
    series = f"{transport}-{mode}"
    if transport == "stdio":
        command, *args = launch.command(series, [])
        params = StdioServerParameters(command=command, args=args, env=launch.env)
        started = time.perf_counter()
        async with Client(params, mode=mode, read_timeout_seconds=CALL_TIMEOUT * 2) as client:
            yield client, (time.perf_counter() - started) * 1000
        return
    token = secrets.token_hex(24)
    async with http_server(launch, series, token) as url:
        headers = {"Authorization": f"Bearer {token}"}
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
            started = time.perf_counter()
            transport_cm = streamable_http_client(url, http_client=http)
            async with Client(transport_cm, mode=mode, read_timeout_seconds=CALL_TIMEOUT * 2) as client:
                yield client, (time.perf_counter() - started) * 1000


async def measure_series(launch: ServerLaunch, transport: str, mode: str, n: int, cold_n: int) -> dict[str, Any]:
    series = f"{transport}/{mode}"
    began = time.perf_counter()
    result: dict[str, Any] = {"transport": transport, "mode": mode}
    try:
        async with connect(launch, transport, mode) as (client, connect_ms):
            result["protocol_version"] = client.protocol_version
            result["connect_ms"] = round(connect_ms, 3)
            warm_arguments = {"code": CODE}

            async def call(arguments: dict[str, Any], what: str) -> float:
                started = time.perf_counter()
                reply = await client.call_tool(TOOL, arguments)
                elapsed = (time.perf_counter() - started) * 1000
                check_reply(reply, f"{series} {what}")
                return elapsed

            for _ in range(WARMUP_CALLS):
                await call(warm_arguments, "warm-up call")
            result["warm_call"] = summarize([await call(warm_arguments, "warm call") for _ in range(n)])
            result["ping"] = await measure_ping(client, n)
            await call({"code": CODE, "session": "cold-warmup"}, "cold warm-up call")
            cold = [
                await paced(call, {"code": CODE, "session": f"cold-{index}"}, "cold call") for index in range(cold_n)
            ]
            result["cold_call"] = summarize(cold)
            burst = [await call({"code": CODE, "session": f"burst-{index}"}, "burst call") for index in range(cold_n)]
            result["cold_burst"] = summarize(burst)
    except MCPError as exc:
        raise BenchmarkError(f"{series}: the MCP server answered an error: {exc}") from None
    result["elapsed_s"] = round(time.perf_counter() - began, 2)
    return result


async def measure_ping(client: Client, n: int) -> Stats | None:
    """MCP ``ping`` round trips, or ``None`` where the negotiated protocol has no ``ping`` (stateless era)."""
    try:
        await client.session.send_ping()
    except MCPError:
        return None
    samples: list[float] = []
    for _ in range(n):
        started = time.perf_counter()
        await client.session.send_ping()
        samples.append((time.perf_counter() - started) * 1000)
    return summarize(samples)


# -- the document ---------------------------------------------------------------------------------------------


def add_overheads(series: dict[str, dict[str, Any]], baseline: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Median differences against the in-process baselines, per series; also returned as a flat summary."""
    summary: dict[str, dict[str, float]] = {}
    for name, result in series.items():
        warm = result["warm_call"]["median_ms"]
        overhead = {
            "warm_vs_sandbox": warm - baseline["sandbox_warm"]["median_ms"],
            "warm_vs_sandbox_min": result["warm_call"]["min_ms"] - baseline["sandbox_warm"]["min_ms"],
            "warm_vs_bridge": warm - baseline["bridge_warm"]["median_ms"],
            "warm_vs_inprocess_mcp": warm - baseline["inprocess_mcp_warm"][result["mode"]]["median_ms"],
            "cold_vs_sandbox": result["cold_call"]["median_ms"] - baseline["sandbox_cold"]["median_ms"],
        }
        result["overhead_ms"] = {key: round(value, 3) for key, value in overhead.items()}
        summary[name] = result["overhead_ms"]
    return summary


def build_targets(series: dict[str, dict[str, Any]], modes: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for mode in modes:
        measured = series.get(f"stdio/{mode}")
        overhead = measured["overhead_ms"]["warm_vs_sandbox"] if measured is not None else None
        rows.append(
            {
                "target": f"MCP layer adds ≤ {STDIO_OVERHEAD_TARGET_MS:g} ms median over stdio ({mode})",
                "overhead_limit_ms": STDIO_OVERHEAD_TARGET_MS,
                "measured_overhead_ms": overhead,
                "met": None if overhead is None else overhead <= STDIO_OVERHEAD_TARGET_MS,
            }
        )
    return rows


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str] = {}
    for package in ("mcp", "mcp-codemode", "uvicorn", "starlette", "httpx2", "anyio"):
        with contextlib.suppress(PackageNotFoundError):
            found[package] = version(package)
    return found


def selection(text: str, choices: Sequence[str], flag: str) -> list[str]:
    names = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    wrong = [name for name in names if name not in choices]
    if wrong or not names:
        raise argparse.ArgumentTypeError(f"{flag} takes a comma-separated subset of {', '.join(choices)}")
    return names


def cold_count(text: str) -> int:
    value = positive(text)
    if value > MAX_COLD_N:
        raise argparse.ArgumentTypeError(
            f"at most {MAX_COLD_N}: each new session stays a warm sandbox until its series ends"
        )
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--n", type=positive, default=DEFAULT_N, help=f"timed warm calls per series (default: {DEFAULT_N})"
    )
    parser.add_argument(
        "--cold-n",
        type=cold_count,
        default=DEFAULT_COLD_N,
        help=f"first calls of new sessions (default: {DEFAULT_COLD_N})",
    )
    parser.add_argument(
        "--transports",
        type=lambda text: selection(text, TRANSPORTS, "--transports"),
        default=list(TRANSPORTS),
        help="comma-separated subset of stdio,http (default: both)",
    )
    parser.add_argument(
        "--modes",
        type=lambda text: selection(text, MODES, "--modes"),
        default=list(MODES),
        help="comma-separated subset of legacy,auto (default: both)",
    )
    parser.add_argument(
        "--backend", choices=AUTO_ORDER, default=None, help="sandbox backend (default: what auto picks)"
    )
    parser.add_argument("--profile-server", type=Path, default=None, metavar="DIR", help="run servers under cProfile")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON document to this file")
    return parser.parse_args(argv)


async def run(args: argparse.Namespace, settings: Settings, log_dir: Path) -> dict[str, Any]:
    baseline = await measure_baseline(settings, args.n, args.cold_n, args.modes)
    env = {**passed_environment(), "MCP_BRIDGE_MAX_SESSIONS": str(settings.max_sessions)}
    launch = ServerLaunch(baseline["backend"], env, log_dir, args.profile_server)
    series: dict[str, dict[str, Any]] = {}
    for transport in args.transports:  # one after another: on 2 cores, parallel runs would measure each other
        for mode in args.modes:
            series[f"{transport}/{mode}"] = await measure_series(launch, transport, mode, args.n, args.cold_n)
    return {"baseline": baseline, "series": series, "cold_pace_s": COLD_PACE_S, "warm_pool": settings.warm_pool}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    try:
        loaded = Settings.load(overrides={"runtime": args.backend})
        # Every cold call opens a session that stays warm; room for all of them keeps eviction out of the timings.
        settings = dataclasses.replace(loaded, max_sessions=max(loaded.max_sessions, 2 * args.cold_n + 4))
        if args.profile_server is not None:
            args.profile_server.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="mcp-face-bench-") as log_dir:
            measured = asyncio.run(run(args, settings, Path(log_dir)))
    except (BenchmarkError, CodemodeError) as exc:
        print(f"benchmarks/mcp_face.py: {exc}", file=sys.stderr)
        return 2
    baseline, series = measured["baseline"], measured["series"]
    overhead = add_overheads(series, baseline)
    targets = build_targets(series, args.modes)
    decided = [row["met"] for row in targets if row["met"] is not None]
    document = {
        "benchmark": "mcp_face",
        "code": CODE,
        "backend": baseline["backend"],
        "profiled": args.profile_server is not None,
        "baseline": baseline,
        "series": series,
        "overhead_ms": overhead,
        "targets": targets,
        "all_measured_targets_met": all(decided) if decided else None,
        "machine": machine_info(),
        "versions": versions(),
        "settings": settings_info(settings),
        "elapsed_s": round(time.perf_counter() - began, 2),
    }
    emit(document, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
