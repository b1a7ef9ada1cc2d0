"""The web console's cost: how long its pages take with a full audit log and many sessions, and what it adds to a
``run_python`` call when nobody watches (issue 36, item 4).

What is measured
    pages
        The console's ASGI app in this process (``httpx2.ASGITransport``: no socket, no second process), signed in as
        the local user, over a real bridge (bubblewrap, started, the console on) whose board holds ``--sessions``
        sessions and whose audit log holds ``--records`` finished calls of that user (each a ``run`` line and one
        tool line, as the bridge writes them). Each page is fetched ``--fetches`` times, timed from the request to
        the whole body: ``sessions``, ``calls`` (the finished calls read back from the log, newest 200 shown), one
        call's page (``call``), both again as after a new call (``*_log_changed``: the log's tail read and parsed
        again; otherwise what was read is reused while the file is unchanged), and ``static`` (the style sheet: the
        guards and router alone, the baseline of the same run). The sessions are listed as reset from the console
        (their sandboxes closed) so that 100 of them fit a machine whose session cap is 16: a row costs the same.
    run_python
        ``Bridge.run`` of ``1`` in one session, ``--calls`` times, on three bridges in this process: the console off
        (the baseline: no board is built), on with nobody watching, and off again (``off_again``: the noise of the
        same run); in rotating blocks of 10 calls, so load on the machine falls on all alike. ``ratio_on_over_off``:
        the medians, on / off; ``noise_off_again_over_off``: off again / off, what a ratio of 1 looks like here.
        ``mean_ms`` too: the console's audit lines are written in batches (runs/audit.py), whose cost lands on few
        calls, so a median alone would hide it. ``cpu``: the same for the CPU time this thread (the bridges' event
        loop) spent on each call, which the other work on a shared machine disturbs far less than wall time.

Caveats
    The machine is shared (``load_average_1_5_15``); compare the ratios, not the milliseconds, across runs.

Usage
    python benchmarks/console.py [--records N] [--sessions N] [--fetches N] [--calls N] [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2

from common import emit, machine_info, positive, summarize
from mcp_codemode.console.app import Console
from mcp_codemode.console.audit_reader import _read
from mcp_codemode.console.signins import COOKIE
from mcp_codemode.runs.bridge import Bridge, RunRequest
from mcp_codemode.sandbox.results import ExecutionResult
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.settings import Settings

BLOCK = 10


@contextlib.contextmanager
def state_dir() -> Iterator[Path]:
    """A state directory the sandbox uid can pass through (not under a 0700 temporary folder)."""
    base = Path(tempfile.mkdtemp(prefix="mcp-codemode-bench-"))
    try:
        base.chmod(0o711)
        yield base / "state"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def write_audit(path: Path, records: int) -> str:
    """``records`` finished calls of the local user, as the bridge writes them; the id of the last one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for n in range(records):
        call, stamp = f"{n:016x}", f"2026-11-28T07:{n // 60 % 60:02d}:{n % 60:02d}.000+00:00"
        common = {"time": stamp, "call": call, "session": f"stdio:s{n % 100}", "owner": "local"}
        lines.append({**common, "server": "time", "tool": "get_current_time", "args_sha256": "0" * 64,
                      "args_bytes": 18, "outcome": "ok", "duration_ms": 12.3, "result_bytes": 200})  # fmt: skip
        lines.append({**common, "kind": "run", "outcome": "ok", "duration_ms": 40.1, "code_sha256": "0" * 64,
                      "code_bytes": 40, "output_bytes": 100, "images": 0})  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return f"{records - 1:016x}"


async def _done() -> ExecutionResult:
    return ExecutionResult("ok", stdout="done\n")


async def pages(settings: Settings, records: int, sessions: int, fetches: int) -> dict[str, Any]:
    assert settings.audit_path is not None
    last = write_audit(settings.audit_path, records)
    async with Bridge(settings) as bridge:
        board = bridge.board
        assert board is not None
        for n in range(sessions):
            key = SessionKey.stdio(f"s{n}")
            seen, _ = board.begin(f"{n:016x}", key, "local", "print('done')", None)
            await board.track(_done(), seen)
            board.mark_fresh(key, "reset: starts fresh on its next call")
        console = Console(bridge, settings, loopback=True, doctor=lambda: "")
        cookie = console.signins.open("local")
        transport = httpx2.ASGITransport(app=console)
        found: dict[str, Any] = {}
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8770",
                                      cookies={COOKIE: cookie}) as http:  # fmt: skip
            for name, path in (("static", "/console/static/console.css"), ("sessions", "/console/sessions"),
                               ("calls", "/console/calls"), ("call", f"/console/calls/{last}"),
                               ("calls_log_changed", "/console/calls"),
                               ("call_log_changed", f"/console/calls/{last}")):  # fmt: skip
                samples = []
                for _ in range(fetches + 2):
                    if name.endswith("_log_changed"):
                        _read.cache_clear()  # as after a new call: the log's tail read and parsed again
                    began = time.perf_counter()
                    answer = await http.get(path)
                    samples.append((time.perf_counter() - began) * 1000)
                    if answer.status_code != 200:
                        raise SystemExit(f"{path} answered {answer.status_code}: {answer.text[:300]}")
                found[name] = summarize(samples[2:]) | {"bytes": len(answer.content)}
        return found


async def run_cost(settings: Settings, calls: int) -> dict[str, Any]:
    samples: dict[str, list[float]] = {"off": [], "on": [], "off_again": []}
    cpu: dict[str, list[float]] = {name: [] for name in samples}
    async with (
        Bridge(settings.replace(console=False)) as off,
        Bridge(settings.replace(console=True)) as on,
        Bridge(settings.replace(console=False)) as off_again,
    ):
        bridges = list(zip(samples, (off, on, off_again), strict=True))
        key = SessionKey.cli("bench")
        for _, bridge in bridges:
            for _ in range(5):  # the session's sandbox started, and warm
                await bridge.run(RunRequest("1"), key)
        for block in range(max(calls // BLOCK, 1)):
            for name, bridge in bridges[block % 3 :] + bridges[: block % 3]:  # each goes first in turn
                for _ in range(BLOCK):
                    began, used = time.perf_counter(), time.thread_time()
                    await bridge.run(RunRequest("1"), key)
                    samples[name].append((time.perf_counter() - began) * 1000)
                    cpu[name].append((time.thread_time() - used) * 1000)
    found = compared(samples)
    found["cpu"] = compared(cpu)
    return found


def compared(samples: dict[str, list[float]]) -> dict[str, Any]:
    """Each variant's summary with its mean, and the ratios to ``off``: on's, and off_again's (the noise)."""
    found: dict[str, Any] = {name: summarize(values) | {"mean_ms": round(statistics.fmean(values), 3)}
                             for name, values in samples.items()}  # fmt: skip
    median = {name: float(found[name]["median_ms"]) for name in samples}
    found["ratio_on_over_off"] = round(median["on"] / median["off"], 3)
    found["noise_off_again_over_off"] = round(median["off_again"] / median["off"], 3)
    found["mean_ratio_on_over_off"] = round(found["on"]["mean_ms"] / found["off"]["mean_ms"], 3)
    found["mean_noise_off_again_over_off"] = round(found["off_again"]["mean_ms"] / found["off"]["mean_ms"], 3)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=positive, default=1000)
    parser.add_argument("--sessions", type=positive, default=100)
    parser.add_argument("--fetches", type=positive, default=30)
    parser.add_argument("--calls", type=positive, default=200)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 5 fetches, 20 calls")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.fetches, args.calls = 5, 20
    with state_dir() as state:
        settings = Settings.load(env={}, overrides={
            "runtime": "bubblewrap", "state_dir": state, "console": True, "warm_pool": 0,
            "audit_log": state / "audit" / "audit.jsonl", "discover_servers": False,
        })  # fmt: skip
        document = {
            "benchmark": "console",
            "machine": machine_info(),
            "load_average_1_5_15": list(os.getloadavg()),
            "records": args.records,
            "sessions": args.sessions,
            "pages": asyncio.run(pages(settings, args.records, args.sessions, args.fetches)),
            "run_python": asyncio.run(run_cost(settings, args.calls)),
        }
    emit(document, args.out)
    print(json.dumps({name: found["median_ms"] for name, found in document["pages"].items()}), file=sys.stderr)
    for costs in (document["run_python"], document["run_python"]["cpu"]):
        print(json.dumps({name: value for name, value in costs.items() if "_over_" in name}), file=sys.stderr)


if __name__ == "__main__":
    main()
