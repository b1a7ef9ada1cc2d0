"""What each side of ``benchmarks/load.py`` costs: CPU and memory of its server processes and what they started.

Why a module of its own: reading ``/proc`` for a side's processes is the same whether one side runs or two take
turns, and it is kept apart from the driver of the clients and windows.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Sequence
from typing import Any

from sessions import cpu_seconds, memory_of, mib, process_table, read_kib

SAMPLE_EVERY_S = 5.0  # the peak's sampling: it runs in the clients' process, so it must stay cheap


def servers_of_this_process() -> list[int]:
    """This process's direct children: the HTTP server and each stdio server."""
    own = os.getpid()
    return sorted(proc.pid for proc in process_table().values() if proc.ppid == own and proc.state != "Z")


def descendants(roots: Sequence[int]) -> list[int]:
    """Every live process below ``roots`` (sandboxes, upstream servers): what the servers started."""
    table = process_table()
    children: dict[int, list[int]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found, stack = [], [pid for root in roots for pid in children.get(root, [])]
    while stack:
        pid = stack.pop()
        if table[pid].state != "Z":
            found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def usage(servers: Sequence[int], pss: bool = True) -> dict[str, Any]:
    """CPU seconds and memory (KiB) so far: of one side's server processes, of what they started, and of this
    process (which runs both sides' clients, but only the side whose window is open calls).

    ``pss=False`` reads RSS alone (PSS reported as 0): reading smaps_rollup walks every mapping of every process,
    which for the bridge's 200 sandbox processes cost the clients' process more CPU than the floor's 9 did, and the
    clients share that process.
    """
    below = descendants(servers)
    own = os.times()

    def of(pid: int) -> tuple[int, int]:
        return memory_of(pid) if pss else (read_kib(f"/proc/{pid}/status", "VmRSS"), 0)

    memory = {"servers": [of(pid) for pid in servers], "started": [of(pid) for pid in below]}
    return {
        "cpu": {
            "servers": sum(map(cpu_seconds, servers)),
            "started": sum(map(cpu_seconds, below)),
            "clients": own.user + own.system,
        },
        "rss_kib": {part: sum(rss for rss, _ in values) for part, values in memory.items()},
        "pss_kib": {part: sum(pss for _, pss in values) for part, values in memory.items()},
        "processes": {"servers": len(servers), "started": len(below)},
        "fds": {"servers": sum(map(open_fds, servers))},
    }


def open_fds(pid: int) -> int:
    """How many file descriptors a process holds (0 when it is gone)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


class Sampler:
    """Memory of one side's servers (and what they started) every SAMPLE_EVERY_S while the windows run: the peak,
    and with ``every`` a point every so many seconds (the soak's series: memory and file descriptors over time)."""

    def __init__(self, servers: Sequence[int], every: float | None = None) -> None:
        self.servers = servers
        self.peak_rss_kib = {"servers": 0, "started": 0}
        self.every = every
        self.points: list[dict[str, Any]] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        began = last = time.perf_counter()
        while True:
            now = time.perf_counter()
            point = self.every is not None and (not self.points or now - last >= self.every)
            found = await asyncio.to_thread(usage, self.servers, point)
            for part, value in found["rss_kib"].items():
                self.peak_rss_kib[part] = max(self.peak_rss_kib[part], value)
            if point:
                last = now
                self.points.append({
                    "t_s": round(now - began, 1),
                    "servers_rss_mb": mib(found["rss_kib"]["servers"]),
                    "servers_pss_mb": mib(found["pss_kib"]["servers"]),
                    "started_rss_mb": mib(found["rss_kib"]["started"]),
                    "servers_fds": found["fds"]["servers"],
                    "started_processes": found["processes"]["started"],
                })  # fmt: skip
            await asyncio.sleep(SAMPLE_EVERY_S)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def idle_cpu(servers: Sequence[int]) -> float:
    """CPU seconds so far of the waiting side's servers and what they started: what it takes from the open side."""
    return sum(map(cpu_seconds, [*servers, *descendants(servers)]))
