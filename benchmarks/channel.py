"""What the byte-stream seam costs per frame: a round trip through ``PipeChannel`` against the raw pipes.

Why this exists
    Issue 22 put a ``WorkerChannel`` between the host-side worker and its child process, so a remote sandbox can
    carry the same frames over a network stream. On pipes the seam must cost nothing measurable. This benchmark
    sends a frame to an echoing child (``cat``) and reads it back, once with the calls the worker made before the
    seam (``stdin.write``, ``transport.get_write_buffer_size``, ``read_payload(stdout)``) and once with the calls
    it makes now (``channel.write``, ``channel.unsent``, ``read_payload(channel.stdout)``), interleaved sample by
    sample in one process and one child, so drift and noise hit both paths alike.

What is measured (``time.perf_counter``, milliseconds)
    ``raw`` and ``channel``: one frame's round trip per path, for two sizes (a cell's request, about 100 bytes,
    and a 64 KiB reply); ``added_ms``: the channel's median minus the raw median, per size. The target: within
    noise (the two medians within a few microseconds; ``p95`` shows how wide the noise is on this machine).

Usage
    python benchmarks/channel.py [--n N] [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from common import machine_info, summarize
from mcp_codemode.sandbox.channel import PipeChannel
from mcp_codemode.sandbox.frames import encode_frame, read_payload

DEFAULT_N = 3000
QUICK_N = 200
WARMUP = 100
SIZES = {"cell_request": 100, "reply_64k": 64 * 1024}


async def round_trip(
    write: Callable[[bytes], None], unsent: Callable[[], int], reader: asyncio.StreamReader, frame: bytes
) -> float:
    """One frame out and back through the echoing child, in milliseconds, the way the worker sends and reads."""
    started = time.perf_counter()
    write(frame)
    unsent()
    payload = await read_payload(reader, 1 << 20)
    elapsed = time.perf_counter() - started
    if payload is None or len(payload) != len(frame) - 4:
        raise RuntimeError("the echoing child returned another frame than it was sent")
    return elapsed * 1000


async def measure(n: int) -> dict[str, object]:
    process = await asyncio.create_subprocess_exec(
        "cat", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    channel = PipeChannel(process)
    results: dict[str, object] = {}
    try:
        for name, size in SIZES.items():
            frame = encode_frame({"type": "execute", "id": 1, "code": "x" * size})

            raw = functools.partial(round_trip, stdin.write, stdin.transport.get_write_buffer_size, stdout, frame)
            seam = functools.partial(round_trip, channel.write, channel.unsent, channel.stdout, frame)
            for _ in range(WARMUP):
                await raw()
                await seam()
            raw_ms: list[float] = []
            seam_ms: list[float] = []
            for index in range(n):  # alternate which path goes first, so neither always runs second
                first, second = (raw, seam) if index % 2 == 0 else (seam, raw)
                a, b = await first(), await second()
                raw_ms.append(a if first is raw else b)
                seam_ms.append(b if first is raw else a)
            raw_stats, seam_stats = summarize(raw_ms), summarize(seam_ms)
            results[name] = {
                "frame_bytes": len(frame),
                "raw": raw_stats,
                "channel": seam_stats,
                "added_ms": round(float(seam_stats["median_ms"]) - float(raw_stats["median_ms"]), 4),
            }
    finally:
        stdin.close()
        await process.wait()
    return results


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=None, help=f"round trips per path and size (default {DEFAULT_N})")
    parser.add_argument("--quick", action="store_true", help=f"a smoke run: {QUICK_N} round trips")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON document to this file")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    n = args.n or (QUICK_N if args.quick else DEFAULT_N)
    document = {"benchmark": "channel", "n": n, "machine": machine_info(), "results": asyncio.run(measure(n))}
    text = json.dumps(document, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
