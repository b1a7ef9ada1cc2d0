"""What every benchmark here shares: the statistics we report and the description of the machine.

Kept in one place so that every benchmark's JSON reads the same way (median, nearest-rank p95, minimum, n).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import socket
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mcp_codemode.settings import Settings
from mcp_codemode.sizes import format_size

Stats = dict[str, float | int]


class BenchmarkError(Exception):
    """The benchmark cannot run or produced a wrong result; the message says which and why."""


def summarize(samples_ms: Sequence[float]) -> Stats:
    """Median, nearest-rank p95 and minimum of ``samples_ms``, rounded to microseconds."""
    if not samples_ms:
        raise ValueError("no samples")
    ordered = sorted(samples_ms)
    rank = math.ceil(0.95 * len(ordered))  # nearest rank: smallest value with >= 95 % of samples at or below
    return {
        "median_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[rank - 1], 3),
        "min_ms": round(ordered[0], 3),
        "n": len(ordered),
    }


def machine_info() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "nproc": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "kernel": platform.release(),
        "machine": platform.machine(),
        "system": platform.system(),
    }


def settings_info(settings: Settings) -> dict[str, Any]:
    """The settings that change what a benchmark measures, and where each came from."""
    return {
        "memory": format_size(settings.memory),
        "memory_bytes": settings.memory,
        "pids": settings.pids,
        "cpus": settings.cpus,
        "image": settings.image,
        "oci_runtime": settings.oci_runtime or None,
        "sandbox_python": str(settings.sandbox_python) if settings.sandbox_python else None,
        "max_sessions": settings.max_sessions,
        "output_mode": settings.output_mode,
        "log_level": settings.log_level,
        "sources": dict(settings.sources),
    }


def passed_environment() -> dict[str, str]:
    """The bridge's own settings in this environment, for a server the benchmark starts: the SDK's stdio client
    would pass it only HOME, LOGNAME, PATH, SHELL, TERM and USER, so the server and an in-process baseline could
    otherwise run with different settings."""
    return {
        name: value
        for name, value in os.environ.items()
        if name.startswith("MCP_BRIDGE_") or name in ("MCP_CODEMODE_SETTINGS", "XDG_STATE_HOME")
    }


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1")
    return value


def emit(document: dict[str, Any], out: Path | None) -> None:
    """Print the result document as JSON, and also write it to ``out`` when given."""
    text = json.dumps(document, indent=2, ensure_ascii=False)
    print(text)
    if out is not None:
        out.write_text(text + "\n", encoding="utf-8")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def wait_listening(
    process: subprocess.Popen[bytes], port: int, label: str, log_tail: Callable[[], str], timeout: float
) -> None:
    """Return once a server the benchmark started accepts connections on ``port``; its log's tail if it died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BenchmarkError(
                f"{label}: the HTTP server exited with status {process.returncode} before listening on port {port}"
                f"\n{log_tail()}"
            )
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        await asyncio.sleep(0.05)
    raise BenchmarkError(f"{label}: the HTTP server did not listen on port {port} within {timeout:g} s")


async def stop_server(process: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    """SIGTERM a server the benchmark started, then SIGKILL it if it has not stopped within ``timeout`` s."""
    if process.poll() is None:
        process.terminate()
        try:
            await asyncio.to_thread(process.wait, timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait)


def fill_defaults(args: argparse.Namespace, quick: Mapping[str, Any], full: Mapping[str, Any]) -> argparse.Namespace:
    """Give every option left unset (None) its ``--quick`` or full-run default; explicit flags win either way."""
    for name, value in (quick if args.quick else full).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def later_growth(points: Sequence[dict[str, Any]], key: str) -> float:
    """How much ``key`` grew from the snapshot nearest half the calls to the last one.

    Memory that a process takes once (allocator arenas, caches filled by the first calls) shows in the whole
    run's growth; a leak keeps growing in the second half too, so this separates the two.
    """
    middle = points[-1]["calls"] / 2
    half = min(points, key=lambda point: abs(point["calls"] - middle))
    return round(float(points[-1][key]) - float(half[key]), 2)
