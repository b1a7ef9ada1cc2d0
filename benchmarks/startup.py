"""Start-up: from spawning ``mcp-codemode serve`` to its first answer over stdio, next to a bare MCP SDK server.

Why this exists
    Every stdio client launch waits for the server's first answer, and so does every LangChain ``get_tools()``
    call, which starts a server per call. Issue 38's target: the bridge answers no later than a bare SDK server
    with one no-op tool (``bare_server.py``), run by the same interpreter in the same run. Most of any Python MCP
    server's start is importing the SDK; what the bridge adds (its own modules, choosing the sandbox, the warm
    pool) has to come after its first answer, and its first call must not get slower for it.

What is measured (milliseconds, ``time.perf_counter`` in this process)
    Per era and per server (``ours``: ``python -m mcp_codemode serve``; ``bare``: ``python bare_server.py``),
    ``--n`` starts, interleaved (ours, bare, bare, ours, ...) so that load from elsewhere on the machine lands
    on both. The era decides the client's first request: ``legacy`` sends ``initialize`` (2025-11-25), ``modern``
    sends ``server/discover`` with the 2026-07-28 envelope, as ``mcp.Client(mode="auto")`` does.

    ``first_answer``: from spawning the process (the request is written at once) to reading its answer.
    As soon as it is read (and ``notifications/initialized`` sent, in the legacy era), ``tools/list`` and the first
    ``tools/call`` (``run_python`` with ``"1"``; the bare server's no-op) are sent together, as a client that lists
    and calls at once would. ``listing``: from spawning to the listing's answer (what LangChain's ``get_tools()``
    waits for); ``first_call``: from spawning to the call's answer; ``first_call_after_answer``: its part after
    the first answer. Each server exits when its standard input closes; that is not timed.
    ``ratio``: ours' median over bare's, per era and figure. The README's start-up figure is
    ``ratio.legacy.first_answer``; ``targets`` says whether it is at most 1.

Usage
    python benchmarks/startup.py [--n N] [--eras legacy,modern] [--backend NAME] [--discover] [--out FILE]

    ``--n`` starts per server and era (default 20). The bridge runs with ``--no-discover`` and no ``--config``
    unless ``--discover`` is given (then it reads this user's MCP client config files, as a real launch does).
    Like the SDK's stdio client, servers get only HOME, LOGNAME, PATH, SHELL, TERM and USER, plus every
    ``MCP_BRIDGE_*`` variable, ``MCP_CODEMODE_SETTINGS`` and ``XDG_STATE_HOME`` of this environment.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from common import BenchmarkError, emit, machine_info, passed_environment, positive, summarize

HERE = Path(__file__).resolve().parent
BARE = HERE / "bare_server.py"
ERAS = ("legacy", "modern")
DEFAULT_N = 20
ANSWER_TIMEOUT_S = 180.0  # a hang guard: a start on a starved 2-core machine has taken tens of seconds
EXIT_TIMEOUT_S = 30.0
SDK_ENVIRONMENT = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
MODERN_VERSION = "2026-07-28"
LEGACY_VERSION = "2025-11-25"
CLIENT = {"name": "startup-benchmark", "version": "1"}
CALLS = {"ours": ("run_python", {"code": "1"}, "1"), "bare": ("noop", {}, "ok")}
FIGURES = ("first_answer", "listing", "first_call", "first_call_after_answer")


def envelope(era: str, params: dict[str, Any]) -> dict[str, Any]:
    """A request's params as the era wants them: the 2026-07-28 envelope on every request, or nothing added."""
    if era == "legacy":
        return params
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientInfo": CLIENT,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return {**params, "_meta": meta}


def line(message: dict[str, Any]) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode()


def first_request(era: str) -> bytes:
    if era == "legacy":
        params = {"protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": CLIENT}
        return line({"id": 1, "method": "initialize", "params": params})
    return line({"id": 1, "method": "server/discover", "params": envelope(era, {})})


async def reply_to(process: asyncio.subprocess.Process, request_id: int, what: str) -> dict[str, Any]:
    """The answer to ``request_id`` (notifications before it are skipped); an error answer fails the benchmark."""
    assert process.stdout is not None
    while True:
        raw = await asyncio.wait_for(process.stdout.readline(), ANSWER_TIMEOUT_S)
        if not raw:
            raise BenchmarkError(f"{what}: the server closed its output (exit status {process.returncode})")
        message: dict[str, Any] = json.loads(raw)
        if message.get("id") != request_id:
            continue
        if "result" not in message:
            raise BenchmarkError(f"{what}: the server answered {message}")
        result: dict[str, Any] = message["result"]
        return result


async def one_start(
    command: Sequence[str], env: dict[str, str], era: str, server: str, log: IO[bytes]
) -> dict[str, float]:
    """One process: its first answer, its listing and its first call, in seconds from the spawn."""
    tool, arguments, expected = CALLS[server]
    what = f"{server} ({era})"
    began = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log, env=env
    )
    assert process.stdin is not None
    try:
        process.stdin.write(first_request(era))
        await reply_to(process, 1, f"{what} first answer")
        answered = time.perf_counter()
        if era == "legacy":
            process.stdin.write(line({"method": "notifications/initialized"}))
        call = envelope(era, {"name": tool, "arguments": arguments})
        process.stdin.write(line({"id": 2, "method": "tools/list", "params": envelope(era, {})}))
        process.stdin.write(line({"id": 3, "method": "tools/call", "params": call}))
        listing = await reply_to(process, 2, f"{what} listing")
        listed = time.perf_counter()
        result = await reply_to(process, 3, f"{what} first call")
        called = time.perf_counter()
        if [item.get("name") for item in listing.get("tools", [])] != [tool]:
            raise BenchmarkError(f"{what}: the listing is {listing}")
        texts = [block.get("text") for block in result.get("content", [])]
        if result.get("isError") or texts != [expected]:
            raise BenchmarkError(f"{what}: the first call answered {result}")
    finally:
        with contextlib.suppress(OSError):
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), EXIT_TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()
    return {
        "first_answer": answered - began,
        "listing": listed - began,
        "first_call": called - began,
        "first_call_after_answer": called - answered,
    }


def commands(args: argparse.Namespace, log_dir: Path) -> dict[str, list[str]]:
    ours = [sys.executable, "-m", "mcp_codemode", "serve", "--log-file", str(log_dir / "ours.log")]
    if args.backend:
        ours += ["--backend", args.backend]
    if not args.discover:
        ours.append("--no-discover")
    return {"ours": ours, "bare": [sys.executable, str(BARE)]}


def environment() -> dict[str, str]:
    """What the SDK's stdio client passes a server, plus the bridge's own settings from this environment."""
    return {**{name: os.environ[name] for name in SDK_ENVIRONMENT if name in os.environ}, **passed_environment()}


async def measure(args: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    servers = commands(args, log_dir)
    env = environment()
    samples: dict[str, dict[str, dict[str, list[float]]]] = {
        era: {server: {figure: [] for figure in FIGURES} for server in servers} for era in args.eras
    }
    with (log_dir / "servers.log").open("ab") as log:
        for round_ in range(args.n):
            for era in args.eras:
                order = ("ours", "bare") if round_ % 2 == 0 else ("bare", "ours")
                for server in order:
                    timed = await one_start(servers[server], env, era, server, log)
                    for figure, seconds in timed.items():
                        samples[era][server][figure].append(seconds * 1000)
    return {
        era: {server: {name: summarize(values) for name, values in figures.items()} for server, figures in by.items()}
        for era, by in samples.items()
    }


def ratios(series: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {
        era: {
            name: round(by["ours"][name]["median_ms"] / by["bare"][name]["median_ms"], 3)
            for name in ("first_answer", "listing", "first_call")
        }
        for era, by in series.items()
    }


def eras(text: str) -> list[str]:
    names = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not names or any(name not in ERAS for name in names):
        raise argparse.ArgumentTypeError(f"--eras takes a comma-separated subset of {','.join(ERAS)}")
    return names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--n", type=positive, default=DEFAULT_N, help=f"starts per server and era ({DEFAULT_N})")
    parser.add_argument("--eras", type=eras, default=list(ERAS), help="comma-separated subset of legacy,modern")
    parser.add_argument("--backend", default=None, help="the bridge's sandbox backend (default: what auto picks)")
    parser.add_argument("--discover", action="store_true", help="let the bridge read this user's client configs")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON document to this file")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="startup-bench-") as log_dir:
            series = asyncio.run(measure(args, Path(log_dir)))
    except BenchmarkError as exc:
        print(f"benchmarks/startup.py: {exc}", file=sys.stderr)
        return 2
    ratio = ratios(series)
    targets = [
        {
            "target": f"first answer no later than a bare SDK server's ({era})",
            "ratio": ratio[era]["first_answer"],
            "met": ratio[era]["first_answer"] <= 1.0,
        }
        for era in series
    ]
    document = {
        "benchmark": "startup",
        "n": args.n,
        "discover": args.discover,
        "series": series,
        "ratio": ratio,
        "targets": targets,
        "machine": machine_info(),
        "elapsed_s": round(time.perf_counter() - began, 2),
    }
    emit(document, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
