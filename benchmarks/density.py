"""Density: how many live idle sessions one bridge holds in a memory budget, and what each one costs.

Why this exists
    A bridge served over HTTP keeps a live sandbox per session, so what bounds how many agents one machine serves
    is memory, not CPU: an idle session costs nothing but the memory its sandbox and its bookkeeping hold. This
    script opens real sessions until a budget (4 GiB by default) for the bridge and its sandboxes is full, and
    reports how many fitted and what one costs, on bubblewrap (the count) and on podman and gVisor (the cost).

What is measured (one section per ``--backend``)
    A fresh ``mcp-codemode serve --transport http`` on a free 127.0.0.1 port (bearer token, ``--no-discover``, a
    temporary state directory, the default warm pool, a session cap above ``--max-sessions``). ``at_rest``: its
    memory once it listens and its warm pool has settled. Then ``--clients`` official SDK clients (``mcp.Client``
    over ``streamable_http_client``) open sessions, each with one call, ``run_python {"code": "n = I\\nn",
    "session": "d-I"}``: every session is a real sandbox that ran a cell and keeps a variable. ``open_call``: the
    latency of those first calls (median, p95, n). After every batch the memory is read (``points``); the batches
    shrink as the budget nears, so the count is exact to a session or two. It stops at the first of: the budget
    full (``stopped_by: budget``), ``--max-sessions`` opened, ``--seconds`` spent, or an error (its message kept).
    ``alive``: afterwards every session opened is called again (``n``) and must answer its own number: the
    sessions were live, not restarted. ``fit``: the sessions that fitted in the budget: ``counted`` when it was
    filled, else ``projected`` from the measured per-session cost (``(budget - at_rest) / per_session``).
    ``per_session``: the growth from ``at_rest`` to the last point, divided by the sessions opened, for the
    bridge, the sandboxes and both; ``sandbox_pss_kib``: each session's sandbox processes summed (median, p95, n);
    ``by_process``: the mean PSS of each kind of process (``bwrap``, ``python3``, ``conmon``, ...).

What memory is counted: summed PSS (/proc/PID/smaps_rollup), not a cgroup
    The bridge process and every live descendant (a bubblewrap sandbox is ``bwrap``, its namespace's init and the
    guest Python; a container backend's ``podman run`` client), plus, for a container backend, each container's
    ``conmon`` and everything below it (found by the bridge's ``io.mcp-codemode.bridge-pid`` label). PSS divides
    a page shared by several processes among them, so the sum is what these processes cost the machine together;
    with hundreds of sandboxes the interpreter's code and the shared libraries cost almost nothing each and what
    remains is each process's private memory. Not in PSS: the kernel's side of each process (page tables,
    reported as ``page_tables_mib``; kernel stacks, 16 KiB per thread, from ``threads``; pipe buffers), and the
    tmpfs of an empty ``/workspace`` (nothing written, nothing charged).

Caveats
    The machine runs other work (2 cores, shared): the latencies are what they were under that load, see
    ``load_average_1_5_15``; the memory figures do not depend on it. A busy sandbox, or one whose cells imported
    pandas, costs more than these idle ones: this counts sessions that wait for their next call.

Usage
    python benchmarks/density.py [--backend bubblewrap|podman|gvisor ...] [--budget 4g] [--max-sessions N]
                                 [--seconds S] [--clients K] [--quick] [--out FILE]

    ``--backend`` may be given several times (one server after another); ``gvisor`` is podman with the runsc
    OCI runtime. ``--quick`` is a smoke run (a handful of sessions). The JSON document goes to standard output
    (and to ``--out``), a short table to standard error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.shared.exceptions import MCPError

from common import BenchmarkError, emit, machine_info, positive, settings_info, summarize
from mcp_codemode.errors import CodemodeError
from mcp_codemode.sandbox.container import OWNER_LABEL
from mcp_codemode.settings import Settings
from mcp_codemode.sizes import format_size, parse_size
from sessions import Launch, Proc, client_for, http_server, process_table, sandbox_trees, settled_snapshot

BACKENDS = ("bubblewrap", "podman", "gvisor")
DEFAULT_BUDGET = "4g"
DEFAULT_MAX_SESSIONS = 1500
DEFAULT_SECONDS = 1200.0
DEFAULT_CLIENTS = 4
DEFAULT_BATCH = 50
QUICK = {"max_sessions": 4, "seconds": 120.0, "batch": 2}
CALL_TIMEOUT = 60.0
MIB = 1 << 20


def session_name(index: int) -> str:
    return f"d-{index}"


def rollup(pid: int) -> dict[str, int]:
    """The kB fields of /proc/PID/smaps_rollup (empty when the process is gone)."""
    found: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="utf-8") as handle:
            for line in handle:
                parts = line.split()
                if len(parts) == 3 and parts[2] == "kB":
                    found[parts[0].rstrip(":")] = int(parts[1])
    except OSError:
        return {}
    return found


def status_fields(pid: int) -> dict[str, int]:
    """VmPTE (kB) and Threads of /proc/PID/status."""
    found = {"VmPTE": 0, "Threads": 0}
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key in found:
                    found[key] = int(value.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return found


def container_roots(bridge: int) -> dict[str, int]:
    """The ``conmon`` pid of every container the bridge labelled as its own, by container name (none on bubblewrap)."""
    done = subprocess.run(
        ["podman", "ps", "--filter", f"label={OWNER_LABEL}={bridge}", "--format", "{{.ID}}"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    ids = done.stdout.split()
    if not ids:
        return {}
    inspected = subprocess.run(
        ["podman", "inspect", "--format", "{{.Name}} {{.State.ConmonPid}}", *ids],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    found = {}
    for line in inspected.stdout.splitlines():
        name, _, pid = line.strip().rpartition(" ")
        if pid.isdigit() and int(pid) > 0:
            found[name.lstrip("/")] = int(pid)
    return found


def container_name(pid: int) -> str:
    """The ``--name`` a ``podman run`` process was given ("" for any other process)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().decode(errors="replace").split("\0")
    except OSError:
        return ""
    return argv[argv.index("--name") + 1] if "--name" in argv[:-1] else ""


def session_groups(bridge: int, table: dict[int, Proc], containers: bool) -> list[list[int]]:
    """Each session's processes: a bubblewrap sandbox's tree below the bridge; for a container, the bridge's
    ``podman run`` client with the container's ``conmon`` tree, matched by the container's name."""
    groups = sandbox_trees(bridge, table)
    if not containers:
        return groups
    roots = container_roots(bridge)
    merged = []
    for group in groups:
        conmon = roots.pop(container_name(group[0]), None)
        merged.append(group + (descendants(conmon, table) if conmon is not None else []))
    return merged + [descendants(conmon, table) for conmon in roots.values()]


def descendants(root: int, table: dict[int, Proc]) -> list[int]:
    children: dict[int, list[int]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        if pid in table and table[pid].state != "Z":
            found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def measure(bridge: int, containers: bool) -> dict[str, Any]:
    """Summed PSS of the bridge, of its sandboxes (one group of processes per session), and of both."""
    table = process_table()
    groups = session_groups(bridge, table, containers)
    bridge_pss = rollup(bridge).get("Pss", 0)
    bridge_status = status_fields(bridge)
    group_pss: list[int] = []
    by_name: dict[str, list[int]] = {}
    page_tables = bridge_status["VmPTE"]
    threads = bridge_status["Threads"]
    for group in groups:
        total = 0
        for pid in group:
            pss = rollup(pid).get("Pss", 0)
            total += pss
            by_name.setdefault(table[pid].name, []).append(pss)
            fields = status_fields(pid)
            page_tables += fields["VmPTE"]
            threads += fields["Threads"]
        group_pss.append(total)
    sandboxes = sum(group_pss)
    return {
        "bridge_pss_kib": bridge_pss,
        "bridge_threads": bridge_status["Threads"],
        "sandbox_pss_kib": sandboxes,
        "total_pss_kib": bridge_pss + sandboxes,
        "groups": len(groups),
        "processes": sum(len(group) for group in groups),
        "threads": threads,
        "page_tables_kib": page_tables,
        "group_pss_kib": group_pss,
        "by_process": {name: {"n": len(values), "mean_pss_kib": round(statistics.mean(values))}
                       for name, values in sorted(by_name.items())},
    }  # fmt: skip


def point(sessions: int, found: dict[str, Any], began: float) -> dict[str, Any]:
    keys = ("total_pss_kib", "bridge_pss_kib", "sandbox_pss_kib", "processes", "threads", "page_tables_kib")
    return {"sessions": sessions, **{key: found[key] for key in keys}, "elapsed_s": round(time.monotonic() - began, 1)}


async def open_sessions(clients: list[Client], first: int, count: int) -> list[float]:
    """Open sessions ``first`` .. ``first + count - 1``, spread over the clients; each one's first call in ms."""
    queue = list(range(first, first + count))
    samples: list[float] = []

    async def drive(client: Client) -> None:
        while queue:
            index = queue.pop(0)
            started = time.perf_counter()
            reply = await client.call_tool("run_python", {"code": f"n = {index}\nn", "session": session_name(index)})
            samples.append((time.perf_counter() - started) * 1000)
            texts = [getattr(block, "text", None) for block in reply.content]
            if reply.is_error or texts != [str(index)]:
                raise BenchmarkError(f"opening session {session_name(index)}: {texts!r}")

    await asyncio.gather(*(drive(client) for client in clients))
    return samples


async def check_alive(clients: list[Client], count: int, deadline: float) -> dict[str, Any]:
    """Call every opened session again: each must still hold its own ``n`` (no restart, no other's state)."""
    queue = list(range(count))
    wrong: list[str] = []
    checked = 0

    async def drive(client: Client) -> None:
        nonlocal checked
        while queue and time.monotonic() < deadline:
            index = queue.pop(0)
            reply = await client.call_tool("run_python", {"code": "n", "session": session_name(index)})
            texts = [getattr(block, "text", None) for block in reply.content]
            checked += 1
            if reply.is_error or texts != [str(index)]:
                wrong.append(f"{session_name(index)}: {texts!r}")

    await asyncio.gather(*(drive(client) for client in clients))
    return {"sessions": count, "checked": checked, "ok": checked - len(wrong), "wrong": wrong[:5]}


def next_batch(found: dict[str, Any], budget: int, slope_kib: float, batch: int) -> int:
    """Half the sessions the remaining room holds at the recent cost per session, between 1 and ``batch``."""
    room = budget // 1024 - found["total_pss_kib"]
    if slope_kib <= 0:
        return batch
    return max(1, min(batch, int(room / slope_kib / 2)))


async def fill(launch: Launch, args: argparse.Namespace, budget: int) -> dict[str, Any]:
    began = time.monotonic()
    deadline = began + args.seconds
    containers = launch.backend != "bubblewrap"
    result: dict[str, Any] = {"backend": launch.backend}
    async with http_server(launch, f"density-{launch.backend}") as served, contextlib.AsyncExitStack() as stack:
        await settled_snapshot(served.pid)
        rest = await asyncio.to_thread(measure, served.pid, containers)
        clients = [await stack.enter_async_context(client_for(served, launch.mode)) for _ in range(args.clients)]
        points = [point(0, rest, began)]
        samples: list[float] = []
        opened, stopped_by, error = 0, "max_sessions", None
        found, step = rest, min(args.batch, args.max_sessions)
        while opened < args.max_sessions:
            if time.monotonic() > deadline:
                stopped_by = "time_limit"
                break
            count = min(step, args.max_sessions - opened)
            try:
                samples += await open_sessions(clients[:count], opened, count)
            except (BenchmarkError, MCPError, OSError) as exc:
                stopped_by, error = "error", f"{type(exc).__name__}: {exc}"
                break
            opened += count
            found = await asyncio.to_thread(measure, served.pid, containers)
            points.append(point(opened, found, began))
            if found["total_pss_kib"] * 1024 >= budget:
                stopped_by = "budget"
                break
            slope = (found["total_pss_kib"] - rest["total_pss_kib"]) / opened
            step = next_batch(found, budget, slope, args.batch)
        alive = await check_alive(clients, opened, time.monotonic() + max(60.0, args.seconds / 4))
    if opened == 0:
        raise BenchmarkError(f"{launch.backend}: no session opened ({error})")
    result.update(summarize_fill(rest, found, points, opened, budget, stopped_by))
    result.update(open_call=summarize(samples), alive=alive, error=error, elapsed_s=round(time.monotonic() - began, 1))
    return result


def summarize_fill(
    rest: dict[str, Any], last: dict[str, Any], points: list[dict[str, Any]], opened: int, budget: int, stopped: str
) -> dict[str, Any]:
    def per(key: str) -> float:
        return round(float(last[key] - rest[key]) / opened / 1024, 3)

    per_session = {
        "total_pss_mib": per("total_pss_kib"),
        "bridge_pss_mib": per("bridge_pss_kib"),
        "sandbox_pss_mib": per("sandbox_pss_kib"),
        "threads": round((last["threads"] - rest["threads"]) / opened, 2),
        "page_tables_mib": per("page_tables_kib"),
    }
    if stopped == "budget":  # the last point under the budget is the count that fitted
        under = [p["sessions"] for p in points if p["total_pss_kib"] * 1024 < budget]
        fit = {"sessions": max(under, default=0), "how": "counted"}
    else:
        room = budget / 1024 - rest["total_pss_kib"]
        fit = {"sessions": int(room / (per_session["total_pss_mib"] * 1024)), "how": "projected"}
    groups = sorted(last["group_pss_kib"])
    return {
        "budget": format_size(budget),
        "budget_bytes": budget,
        "stopped_by": stopped,
        "sessions_opened": opened,
        "fit": fit,
        "at_rest": {key: value for key, value in rest.items() if key != "group_pss_kib"},
        "at_end": {key: value for key, value in last.items() if key != "group_pss_kib"},
        "per_session": per_session,
        "sandbox_pss_kib": {
            "median": statistics.median(groups) if groups else None,
            "p95": groups[max(0, -(-len(groups) * 95 // 100) - 1)] if groups else None,
            "n": len(groups),
        },
        "points": points,
    }


def launch_for(backend: str, scratch: Path, cap: int, seconds: float, mode: str) -> Launch:
    """The server's environment: its own state directory, room for every session, no idle expiry meanwhile."""
    state = scratch / backend / "state"
    state.parent.mkdir(parents=True)
    env = {
        **{key: value for key, value in os.environ.items() if key.startswith("MCP_BRIDGE_")},
        "MCP_BRIDGE_STATE_DIR": str(state),
        "MCP_BRIDGE_MAX_SESSIONS": str(cap),
        "MCP_BRIDGE_SESSION_IDLE_TIMEOUT": str(int(seconds * 2 + 600)),
    }
    if backend == "gvisor":
        env["MCP_BRIDGE_OCI_RUNTIME"] = "runsc"
    return Launch("podman" if backend == "gvisor" else backend, mode, env, scratch / backend)


def table(document: dict[str, Any]) -> str:
    lines = ["backend      opened  fit (how)          per session MiB (bridge + sandbox)  open call median/p95 ms"]
    for name, section in document["backends"].items():
        if "failed" in section:
            lines.append(f"{name:<12} failed: {section['failed'][:200]}")
            continue
        per, fit, call = section["per_session"], section["fit"], section["open_call"]
        lines.append(
            f"{name:<12} {section['sessions_opened']:>6}  {fit['sessions']:>6} ({fit['how']:<9})"
            f"  {per['total_pss_mib']:>6.2f} ({per['bridge_pss_mib']:.2f} + {per['sandbox_pss_mib']:.2f})"
            f"           {call['median_ms']:.1f} / {call['p95_ms']:.1f}   stopped by {section['stopped_by']}"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--backend", action="append", choices=BACKENDS, help="default: bubblewrap; repeatable")
    parser.add_argument("--budget", default=DEFAULT_BUDGET, help="memory budget (default: %(default)s)")
    parser.add_argument("--max-sessions", type=positive, default=None, help=f"default: {DEFAULT_MAX_SESSIONS}")
    parser.add_argument("--seconds", type=float, default=None, help=f"time limit per backend ({DEFAULT_SECONDS:g})")
    parser.add_argument("--clients", type=positive, default=DEFAULT_CLIENTS, help="clients opening sessions at once")
    parser.add_argument("--batch", type=positive, default=None, help=f"sessions between readings ({DEFAULT_BATCH})")
    parser.add_argument("--mode", choices=("legacy", "auto"), default="legacy", help="the clients' protocol")
    parser.add_argument("--quick", action="store_true", help="a smoke run: a handful of sessions")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON document to this file")
    args = parser.parse_args(argv)
    full = {"max_sessions": DEFAULT_MAX_SESSIONS, "seconds": DEFAULT_SECONDS, "batch": DEFAULT_BATCH}
    for name, value in (QUICK if args.quick else full).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.backend = args.backend or ["bubblewrap"]
    try:
        args.budget_bytes = parse_size(args.budget)
    except ValueError:
        parser.error(f"--budget {args.budget!r} is not a size such as 4g or 512m")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    load_before = os.getloadavg()
    sections: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="density-bench-") as scratch:
            os.chmod(scratch, 0o711)  # the sandbox's uid passes through it to the staged guest files
            settings = Settings.load()
            cap = min(10_000, args.max_sessions + settings.warm_pool + 8)
            for backend in args.backend:  # one that fails keeps its error and the others still run
                launch = launch_for(backend, Path(scratch), cap, args.seconds, args.mode)
                try:
                    sections[backend] = asyncio.run(fill(launch, args, args.budget_bytes))
                except (BenchmarkError, CodemodeError, MCPError) as exc:
                    print(f"benchmarks/density.py: {backend}: {exc}", file=sys.stderr)
                    sections[backend] = {"backend": backend, "failed": str(exc)}
    except (BenchmarkError, CodemodeError) as exc:
        print(f"benchmarks/density.py: {exc}", file=sys.stderr)
        return 2
    document: dict[str, Any] = {
        "benchmark": "density",
        "quick": args.quick,
        "memory_counted": "summed PSS of the bridge and of every sandbox process (/proc/PID/smaps_rollup)",
        "budget": format_size(args.budget_bytes),
        "max_sessions": args.max_sessions,
        "seconds": args.seconds,
        "clients": args.clients,
        "backends": sections,
        "machine": {
            **machine_info(),
            "memory_total_mib": os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // MIB,
        },
        "load_average_1_5_15": {
            "before": [round(value, 2) for value in load_before],
            "after": [round(value, 2) for value in os.getloadavg()],
        },
        "settings": settings_info(settings),
        "elapsed_s": round(time.perf_counter() - began, 2),
    }
    emit(document, args.out)
    print(table(document), file=sys.stderr)
    return 1 if any("failed" in section for section in sections.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
