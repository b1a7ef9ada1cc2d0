"""Faults under load (issue 35, item 3): what each fault does to a call and to the sessions it did not hit.

What runs
    ``mcp-codemode serve --transport http`` (bubblewrap) with the two upstream servers of load.py, and
    ``--clients`` background clients running load.py's mix for ``--seconds``: the sessions no fault is aimed at.
    While they run, the faults below are injected one after another, each on victim sessions of its own (clients
    of the stateless era, each naming its session, so a victim can come back to it on a new connection):
    kill_idle       SIGKILL an idle session's sandbox worker (its guest Python), then call it
    kill_mid_call   SIGKILL a worker while its cell runs
    stop            SIGSTOP a worker while its cell runs (the call has a 2 s timeout)
    upstream_killed SIGKILL the server-everything process, then call it until it answers again
    upstream_hangs  SIGSTOP mcp-server-time for a while (the bridge's tool timeout is 5 s here), then SIGCONT it
    workspace_full  a cell writes to /workspace until the disk is full (16 MiB here), then removes the file
    memory          a cell allocates until its memory runs out (256 MiB here)
    client_drop     a client drops its connection while its cell runs, then its session is called again
    fd_limit        the bridge's RLIMIT_NOFILE set to what it holds plus 12, new clients connect, then restored
    A victim's sandbox is found from the host by a marker file its session writes in its own /workspace
    (/proc/PID/root/workspace/...), never by guessing.

What is checked (``checks``)
    every call (background and victims') ended with its result or an error within its timeout plus
    load_work.GRACE_S; the background sessions kept their state (no lost state, no wrong count, no answer from
    another session); after the bridge stopped, no process it started is alive and no cgroup of its workers is left
    (claims exist only on the kubernetes backend: none here); the audit log holds one record per upstream call, no
    call twice: at least the calls that succeeded and at most those issued (a call whose answer the client never
    saw may or may not have reached its server). Each fault's record says what the call answered.

Usage
    python benchmarks/faults.py [--clients 12] [--seconds 120] [--only NAMES] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import glob
import json
import os
import resource
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

import load
import load_usage
import load_work as work
from common import BenchmarkError, emit, machine_info, positive
from mcp_codemode.errors import CodemodeError
from sessions import Launch, Served, client_for, http_server

FAULT_ENV = {
    "MCP_BRIDGE_TOOL_TIMEOUT": "5",
    "MCP_BRIDGE_WORKSPACE_SIZE": "16m",
    "MCP_BRIDGE_MEMORY": "256m",
    "MCP_BRIDGE_INTERRUPT_GRACE": "2",
}
SLEEP = "import time\ntime.sleep(20)"
FILL = (
    "_f = open('/workspace/fill.bin', 'wb')\ntry:\n    while True:\n        _f.write(b'0' * (1 << 20))\n"
    "        _f.flush()\nfinally:\n    _f.close()"
)
EAT = "_x = []\nwhile True:\n    _x.append(bytearray(16 << 20))"


class Harness:
    """The bridge under test, its victims and what every victim call answered."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.bridge = served.pid
        self.calls: list[dict[str, Any]] = []
        self.upstream = {"issued": 0, "ok": 0}
        self.seen: dict[int, str] = {}  # every process the bridge started: pid -> /proc start time
        self.opened = 0.0
        self._next = 900

    def victim(self) -> work.ClientState:
        self._next += 1
        return work.ClientState(self._next, "http-modern", "bridge")

    def client(self) -> contextlib.AbstractAsyncContextManager[Client]:
        return client_for(self.served, "auto")

    async def standard(self, client: Client, state: work.ClientState, kind: str) -> work.Outcome:
        outcome = await work.one_call(client, state, kind, 0.0)
        if kind in work.UPSTREAM_KINDS:
            self.upstream["issued"] += 1
            self.upstream["ok"] += outcome.error is None
        self.calls.append({"kind": kind, "session": state.ident, "latency_ms": round(outcome.latency_ms, 1),
                           "error": outcome.error, "text": outcome.detail,
                           "in_time": not outcome.late and outcome.error != "late"})  # fmt: skip
        return outcome

    async def custom(self, client: Client, state: work.ClientState, code: str, timeout: int) -> dict[str, Any]:
        """A cell of the fault's own, bounded by its timeout plus GRACE_S; what it answered."""
        began = time.perf_counter()
        record: dict[str, Any] = {"kind": code.splitlines()[0][:40], "session": state.ident, "timeout_s": timeout}
        try:
            with anyio.fail_after(timeout + work.GRACE_S):
                reply = await client.call_tool("run_python", {"code": code, "session": state.ident,
                                                              "timeout": timeout})  # fmt: skip
            record["error"] = "is_error" if reply.is_error else None
            record["text"] = " ".join(getattr(block, "text", "") for block in reply.content)[-400:]
        except TimeoutError:
            record["error"], record["text"] = "late", f"no answer within {timeout + work.GRACE_S:g} s"
        except Exception as exc:  # noqa: BLE001 - a failed call is what is recorded
            record["error"], record["text"] = f"exception:{type(exc).__name__}", str(exc)[-400:]
        elapsed = time.perf_counter() - began
        record["latency_ms"] = round(elapsed * 1000, 1)
        record["in_time"] = elapsed <= timeout + work.GRACE_S and record["error"] != "late"
        self.calls.append(record)
        return record

    async def ready(self, client: Client, state: work.ClientState) -> None:
        """The victim's session exists, with its counter and the marker its sandbox is found by."""
        await self.standard(client, state, "init")
        await self.custom(client, state, f"open('/workspace/.victim-{state.ident}', 'w').close()", 10)

    def guest(self, state: work.ClientState) -> int:
        """The victim's guest Python on the host: the descendant of the bridge that sees its marker."""
        for pid in load_usage.descendants([self.bridge]):
            if os.path.exists(f"/proc/{pid}/root/workspace/.victim-{state.ident}") and comm(pid).startswith("python"):
                return pid
        raise BenchmarkError(f"no sandbox of session {state.ident} was found below the bridge (pid {self.bridge})")

    def upstream_server(self, needle: str) -> int:
        """The upstream server itself, not the launcher shell the bridge starts it under (whose argv names it too)."""
        for pid in load_usage.descendants([self.bridge]):
            if needle in cmdline(pid) and comm(pid) != "sh":
                return pid
        raise BenchmarkError(f"no upstream process matching {needle!r} runs below the bridge")

    def track(self) -> None:
        for pid in load_usage.descendants([self.bridge]):
            self.seen.setdefault(pid, start_time(pid))


def comm(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/comm").read_text().strip()
    return ""


def cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    return ""


def start_time(pid: int) -> str:
    """The process's start time (field 22 of /proc/PID/stat): tells a reused pid from the process we saw."""
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19]
    return ""


def says(record: dict[str, Any] | work.Outcome, *words: str) -> bool:
    text = record.detail if isinstance(record, work.Outcome) else record.get("text", "")
    return all(word.lower() in text.lower() for word in words)


# -- the faults --------------------------------------------------------------------------------------------------


async def kill_idle(h: Harness) -> dict[str, Any]:
    state = h.victim()
    async with h.client() as client:
        await h.ready(client, state)
        os.kill(h.guest(state), signal.SIGKILL)
        await asyncio.sleep(0.5)
        after = await h.standard(client, state, "cell")
        again = await h.standard(client, state, "cell")  # the fresh session starts its count again
    return {"after": after.detail, "ok": after.error == "state_lost" and says(after, "fresh")
            and again.error is None}  # fmt: skip


async def _mid_call(h: Harness, sig: signal.Signals, timeout: int) -> dict[str, Any]:
    state = h.victim()
    async with h.client() as client:
        await h.ready(client, state)
        call = asyncio.create_task(h.custom(client, state, SLEEP, timeout))
        await asyncio.sleep(0.7)
        os.kill(h.guest(state), sig)
        record = await call
        after = await h.standard(client, state, "cell")
    return {"call": record, "after": after.detail or "ok",
            "ok": record["in_time"] and record["error"] == "is_error" and says(record, "lost")}  # fmt: skip


async def kill_mid_call(h: Harness) -> dict[str, Any]:
    return await _mid_call(h, signal.SIGKILL, 30)


async def stop(h: Harness) -> dict[str, Any]:
    return await _mid_call(h, signal.SIGSTOP, 2)


async def upstream_killed(h: Harness) -> dict[str, Any]:
    state = h.victim()
    answers: list[work.Outcome] = []
    async with h.client() as client:
        await h.ready(client, state)
        os.kill(h.upstream_server("server-everything"), signal.SIGKILL)
        for _ in range(20):
            answers.append(await h.standard(client, state, "everything"))
            if answers[-1].error is None:
                break
            await asyncio.sleep(0.5)
    failed = [answer for answer in answers if answer.error is not None]
    return {"failed_calls": len(failed), "first_error": failed[0].detail if failed else None,
            "answered_again": answers[-1].error is None,
            "ok": all(not answer.late for answer in answers) and answers[-1].error is None}  # fmt: skip


async def upstream_hangs(h: Harness) -> dict[str, Any]:
    state = h.victim()
    server = h.upstream_server("mcp-server-time")
    async with h.client() as client:
        await h.ready(client, state)
        os.kill(server, signal.SIGSTOP)
        try:
            hung = await h.standard(client, state, "time")
        finally:
            os.kill(server, signal.SIGCONT)
        after = await h.standard(client, state, "time")
    return {"while_hung": hung.detail, "latency_ms": round(hung.latency_ms), "after": after.error or "ok",
            "ok": hung.error is not None and not hung.late and says(hung, "time")}  # fmt: skip


async def workspace_full(h: Harness) -> dict[str, Any]:
    state = h.victim()
    async with h.client() as client:
        await h.ready(client, state)
        full = await h.custom(client, state, FILL, 30)
        await h.custom(client, state, "import os\nos.remove('/workspace/fill.bin')", 10)
        after = await h.standard(client, state, "cell")
    return {"call": full, "state_kept": after.error is None,
            "ok": full["in_time"] and says(full, "No space left") and after.error is None}  # fmt: skip


async def memory(h: Harness) -> dict[str, Any]:
    state = h.victim()
    async with h.client() as client:
        await h.ready(client, state)
        eaten = await h.custom(client, state, EAT, 30)
        after = await h.standard(client, state, "cell")
    clear = says(eaten, "MemoryError") or says(eaten, "out of memory")
    return {"call": eaten, "after": after.error or "ok", "ok": eaten["in_time"] and clear}


async def client_drop(h: Harness) -> dict[str, Any]:
    state = h.victim()
    started = asyncio.Event()

    async def doomed() -> None:
        async with h.client() as client:
            await h.ready(client, state)
            started.set()
            await client.call_tool("run_python", {"code": SLEEP, "session": state.ident, "timeout": 30})

    task = asyncio.create_task(doomed())
    await started.wait()
    await asyncio.sleep(1.0)
    task.cancel()  # the client goes away: its HTTP connection closes with the call in flight
    with contextlib.suppress(asyncio.CancelledError):
        await task
    state.synced = False  # the dropped call's step is unknown: read the count
    async with h.client() as client:
        back = await h.standard(client, state, "cell")
    return {"back": back.error or "ok", "latency_ms": round(back.latency_ms), "ok": back.error is None}


async def fd_limit(h: Harness) -> dict[str, Any]:
    soft, hard = resource.prlimit(h.bridge, resource.RLIMIT_NOFILE)
    held = len(os.listdir(f"/proc/{h.bridge}/fd"))
    resource.prlimit(h.bridge, resource.RLIMIT_NOFILE, (held + 12, hard))
    outcomes: list[work.Outcome | BaseException] = []
    try:

        async def newcomer() -> work.Outcome:
            state = h.victim()
            async with h.client() as client:
                await h.standard(client, state, "init")
                return await h.standard(client, state, "cell")

        outcomes = list(await asyncio.gather(*(newcomer() for _ in range(8)), return_exceptions=True))
    finally:
        resource.prlimit(h.bridge, resource.RLIMIT_NOFILE, (soft, hard))
    state = h.victim()
    async with h.client() as client:
        await h.standard(client, state, "init")
        after = await h.standard(client, state, "cell")
    refused = [repr(item)[-200:] for item in outcomes if isinstance(item, BaseException)]
    errors = [item.detail for item in outcomes if isinstance(item, work.Outcome) and item.error is not None]
    clear = all(says(item, "open files") for item in outcomes if isinstance(item, work.Outcome) and item.error)
    return {"limit": held + 12, "served": sum(1 for item in outcomes if isinstance(item, work.Outcome)
                                              and item.error is None),
            "refused_connections": refused[:3], "errors": errors[:3], "after": after.error or "ok",
            "ok": after.error is None and clear}  # fmt: skip


FAULTS: dict[str, Callable[[Harness], Awaitable[dict[str, Any]]]] = {
    "kill_idle": kill_idle, "kill_mid_call": kill_mid_call, "stop": stop, "upstream_killed": upstream_killed,
    "upstream_hangs": upstream_hangs, "workspace_full": workspace_full, "memory": memory,
    "client_drop": client_drop, "fd_limit": fd_limit,
}  # fmt: skip


# -- the run -------------------------------------------------------------------------------------------------------


async def inject(h: Harness, names: Sequence[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name in names:
        h.track()
        began = time.perf_counter()
        try:
            found[name] = await FAULTS[name](h)
        except BenchmarkError as exc:
            found[name] = {"ok": False, "harness_error": str(exc)}
        found[name]["window_s"] = [round(began - h.opened, 1), round(time.perf_counter() - h.opened, 1)]
        h.track()
        print(f"[faults] {name}: {'ok' if found[name]['ok'] else 'NOT OK'}", file=sys.stderr, flush=True)
    return found


async def tracking(h: Harness) -> None:
    while True:
        await asyncio.to_thread(h.track)
        await asyncio.sleep(0.5)


def audit_check(path: Path, issued: int, ok: int) -> dict[str, Any]:
    lines = [json.loads(line) for file in sorted(path.parent.glob(path.name + "*")) for line in file.open()]
    per_call: dict[str, int] = {}
    for line in lines:
        per_call[line.get("call", "")] = per_call.get(line.get("call", ""), 0) + 1
    twice = sorted(call for call, count in per_call.items() if count > 1)
    return {"records": len(lines), "upstream_calls_ok": ok, "upstream_calls_issued": issued, "calls_twice": twice[:5],
            "ok": not twice and ok <= len(lines) <= issued}  # fmt: skip


def leftovers(h: Harness) -> dict[str, Any]:
    alive = [f"{pid} {cmdline(pid)[:120]}" for pid, began in h.seen.items() if began and start_time(pid) == began]
    groups = glob.glob(f"/sys/fs/cgroup/**/w-{h.bridge}-*", recursive=True)
    return {"processes_seen": len(h.seen), "alive_after_stop": alive[:10], "cgroups_left": groups[:10],
            "claims": "none on bubblewrap", "ok": not alive and not groups}  # fmt: skip


async def measure(args: argparse.Namespace, launch: Launch) -> dict[str, Any]:
    eras = work.eras_for(args.clients, 0)
    opened = asyncio.Event()
    async with http_server(launch, "faults") as served:
        h = Harness(served)
        watcher = asyncio.create_task(tracking(h))
        background = asyncio.create_task(load.run_side("bridge", eras, args.seconds, launch, served, opened=opened))
        await asyncio.wait([background, asyncio.create_task(opened.wait())], return_when=asyncio.FIRST_COMPLETED)
        h.opened = time.perf_counter()  # the background's window: its calls' times and the faults' share it
        if background.done():
            background.result()  # the clients could not start: say why
        faults = await inject(h, args.only)
        side = await background
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        h.track()
    await asyncio.sleep(2.0)  # the bridge is stopped: give the kernel a moment to reap what it left
    upstream = side["upstream_calls"]
    audit = audit_check(Path(launch.env["MCP_BRIDGE_AUDIT_LOG"]), upstream["issued"] + h.upstream["issued"],
                        upstream["ok"] + h.upstream["ok"])  # fmt: skip
    errors = side["errors"]["by_kind"]
    in_time = side["late"] == 0 and all(call["in_time"] for call in h.calls)
    kept = not {"state_lost", "wrong_count"} & set(errors) and side["cross_session"] == 0
    left = leftovers(h)
    checks = {"every_call_in_time": in_time, "unhit_sessions_kept_state": kept, "nothing_left_behind": left,
              "audit_one_record_per_call": audit}  # fmt: skip
    all_ok = all(fault["ok"] for fault in faults.values()) and in_time and kept and left["ok"] and audit["ok"]
    return {"faults": faults, "background": side, "victim_calls": h.calls, "checks": checks, "all_ok": all_ok}


def names(text: str) -> list[str]:
    chosen = [part.strip() for part in text.split(",") if part.strip()]
    if not chosen or any(name not in FAULTS for name in chosen):
        raise argparse.ArgumentTypeError(f"choose among {', '.join(FAULTS)} (comma-separated)")
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--clients", type=positive, default=12, help="background clients (default 12)")
    parser.add_argument("--seconds", type=float, default=120.0, help="the background window (default 120)")
    parser.add_argument("--only", type=names, default=list(FAULTS), help="these faults only (comma-separated)")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON document to this file")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="faults-bench-") as scratch:
            os.chmod(scratch, 0o711)
            launch = load.bridge_launch(argparse.Namespace(clients=args.clients + 24, backend="bubblewrap"),
                                        Path(scratch))  # fmt: skip
            launch.env.update(FAULT_ENV)
            found = asyncio.run(measure(args, launch))
    except (BenchmarkError, CodemodeError) as exc:
        print(f"benchmarks/faults.py: {exc}", file=sys.stderr)
        return 2
    emit({"benchmark": "faults", "clients": args.clients, "seconds": args.seconds, "settings": FAULT_ENV, **found,
          "machine": machine_info(), "load_average_1": round(os.getloadavg()[0], 2),
          "elapsed_s": round(time.perf_counter() - began, 2)}, args.out)  # fmt: skip
    return 0 if found["all_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
