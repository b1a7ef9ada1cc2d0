"""Run every benchmark, one after another, and render their results: what ``make bench`` does.

Each benchmark runs as its own subprocess (``python benchmarks/<name>.py [options] --out <dir>/<name>.json``), so
one that fails or hangs does not take the others with it; its standard error is passed through, prefixed with its
name. Then ``report.py`` writes ``<dir>/summary.md`` and the PNG plots from every JSON document in ``<dir>``.
``<dir>/run.json`` records what ran: each benchmark's command, status, run time and when it finished (entries of
benchmarks not run this time are kept, so ``--only`` refreshes part of a reference run), the total time, the
machine and the git commit.

Benchmarks run one after another, never in parallel: on 2 cores they would measure each other.

Usage
    python benchmarks/run_all.py [--quick] [--only NAMES] [--skip NAMES] [--out DIR] [--timeout S] [--render-only]

    ``--quick`` passes each benchmark its smoke-run options (too few samples to compare; the summary says so).
    ``--only`` / ``--skip`` take comma-separated names among sandbox, mcp_face, proxy, search, registry_search,
    tokens, sessions, channel, remote, replicas, startup.
    ``--render-only`` re-renders the summary and plots from the JSON already in DIR. The exit status is 0 when
    every benchmark that ran succeeded, 1 otherwise (the summary then says which failed and why).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import report
from common import machine_info

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_TIMEOUT_S = 900.0
TAIL_LINES = 30


@dataclasses.dataclass(frozen=True)
class Benchmark:
    script: str
    full: tuple[str, ...] = ()  # the benchmark's own defaults: what the reference numbers rest on
    quick: tuple[str, ...] = ("--quick",)


BENCHMARKS: dict[str, Benchmark] = {
    "sandbox": Benchmark("sandbox.py", quick=("--n", "5", "--warm-n", "50")),
    "mcp_face": Benchmark("mcp_face.py", quick=("--n", "30", "--cold-n", "3")),
    "proxy": Benchmark("proxy.py"),
    "search": Benchmark("search.py"),
    "registry_search": Benchmark("registry_search.py"),
    "tokens": Benchmark("tokens.py"),
    "sessions": Benchmark("sessions.py"),
    "channel": Benchmark("channel.py"),
    "remote": Benchmark("remote.py", quick=("--starts", "3", "--calls", "30")),
    "replicas": Benchmark("replicas.py", quick=("--calls", "20")),
    "startup": Benchmark("startup.py", quick=("--n", "3")),
}
assert tuple(BENCHMARKS) == report.BENCHMARKS


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def git_state() -> dict[str, Any]:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short=12", "HEAD")
    # The results this run writes are not changes to the code measured: a run over committed results would
    # otherwise always call itself dirty.
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)benchmarks/results")
    return {"commit": commit or None, "dirty": bool(changed)}


def names(text: str) -> list[str]:
    chosen = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    wrong = [name for name in chosen if name not in BENCHMARKS]
    if wrong or not chosen:
        raise argparse.ArgumentTypeError(f"choose among {', '.join(BENCHMARKS)} (comma-separated)")
    return chosen


def run_one(name: str, args: list[str], out: Path, timeout: float) -> dict[str, Any]:
    """Run one benchmark; its JSON lands in ``out/<name>.json`` only if it succeeded."""
    target = out / f"{name}.json"
    partial = out / f"{name}.json.partial"
    command = [sys.executable, str(HERE / BENCHMARKS[name].script), *args, "--out", str(partial)]
    print(f"[run_all] {name}: {' '.join(command[1:])}", file=sys.stderr, flush=True)
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    began = time.perf_counter()
    # A session of its own, so a timeout can stop the benchmark and the servers it started, and nothing else.
    process = subprocess.Popen(
        command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        errors="replace", start_new_session=True,
    )  # fmt: skip

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            tail.append(line.rstrip("\n"))
            print(f"[{name}] {line}", end="", file=sys.stderr, flush=True)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    status = "ok"
    try:
        returncode = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        status = "timed out"
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            returncode = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            returncode = process.wait()
    reader.join(timeout=5)
    elapsed = round(time.perf_counter() - began, 1)
    if status == "ok" and returncode != 0:
        status = "failed"
    if status == "ok":
        try:
            json.loads(partial.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            status, tail = "failed", deque([f"no valid JSON document: {exc}"])
    if status == "ok":
        partial.replace(target)
    else:
        partial.unlink(missing_ok=True)
        target.unlink(missing_ok=True)  # an older document must not pass for this run's result
    print(f"[run_all] {name}: {status} in {elapsed} s", file=sys.stderr, flush=True)
    entry: dict[str, Any] = {
        "status": status,
        "returncode": returncode,
        "elapsed_s": elapsed,
        "finished": now(),
        "args": args,
        "command": [Path(command[0]).name, *command[1:]],
    }
    if status != "ok":
        entry["stderr_tail"] = list(tail)
    return entry


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="each benchmark's smoke-run options")
    parser.add_argument("--only", type=names, default=None, help="run only these benchmarks (comma-separated)")
    parser.add_argument("--skip", type=names, default=[], help="run all but these benchmarks (comma-separated)")
    parser.add_argument(
        "--out", type=Path, default=report.RESULTS, help="where results go (default: benchmarks/results)"
    )
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per benchmark (default: %(default)s)"
    )
    parser.add_argument("--render-only", action="store_true", help="only re-render summary.md and the plots")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    ok = True
    if not args.render_only:
        run_path = args.out / "run.json"
        previous: dict[str, Any] = json.loads(run_path.read_text(encoding="utf-8")) if run_path.exists() else {}
        chosen = [name for name in (args.only or BENCHMARKS) if name not in args.skip]
        began = time.perf_counter()
        entries: dict[str, Any] = dict(previous.get("benchmarks") or {})
        for name in chosen:
            bench = BENCHMARKS[name]
            entries[name] = run_one(name, list(bench.quick if args.quick else bench.full), args.out, args.timeout)
            ok = ok and entries[name]["status"] == "ok"
        total = round(time.perf_counter() - began, 1)
        run = {
            "finished": now(),
            "quick": args.quick,
            "ran": chosen,
            "total_s": total,
            "benchmarks": {name: entries[name] for name in BENCHMARKS if name in entries},
            "machine": machine_info(),
            "git": git_state(),
        }
        run_path.write_text(json.dumps(run, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"[run_all] {len(chosen)} benchmark(s) in {total:.0f} s", file=sys.stderr)
    for path in report.render(args.out):
        print(path)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
