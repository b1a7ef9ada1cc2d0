"""Hang guards scaled to the machine the suite runs on.

A deadline in a test means "this is stuck", never "this is slow": speed is measured in ``benchmarks/``. On a
machine that lends us a fraction of a core (seen: Python running 10 to 80 times slower than usual), a fixed 30 s
guard around a bridge start fires while nothing is wrong. So the guards that wait for processes to start or to
go away are multiplied by ``SLOWNESS``, measured once per pytest process against what the same work costs on an
ordinary machine, from two probes, the larger winning:

- one quarter-second loop of pure Python. It must be that long: such a machine runs in bursts, full speed for tens
  of milliseconds and then stalled, so a short loop (we used five of 50 ms) fits inside a burst and reports x1.1
  on a machine that runs a long one 20 times slower;
- three starts of a Python interpreter (the median). Process starts are what most tests wait on, and they suffer
  more than pure Python does on a starved VM (seen: 1.9 s for ``python -c pass``, against about 20 ms).

One measurement can still miss a slow spell, so the guards that wait for a process to start are generous on their
own as well (minutes, where a normal start takes a second or two). The factor only ever lengthens a guard (it is
at least 1), and the pytest header prints it, so a slow run says so in its log.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

# On one ordinary x86-64 core with CPython 3.11: sum(range(20_000_000)) about 0.25 s; starting the interpreter
# (site included, nothing imported) about 20 ms.
REFERENCE_LOOP_SECONDS = 0.25
REFERENCE_START_SECONDS = 0.02
CEILING = 40.0


def _loop() -> float:
    started = time.perf_counter()
    sum(range(20_000_000))
    return time.perf_counter() - started


def _start() -> float:
    trials = []
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=False, timeout=600)
        trials.append(time.perf_counter() - started)
    return statistics.median(trials)


LOOP_SECONDS = _loop()
START_SECONDS = _start()
SLOWNESS = min(CEILING, max(1.0, LOOP_SECONDS / REFERENCE_LOOP_SECONDS, START_SECONDS / REFERENCE_START_SECONDS))


def patient(seconds: float) -> float:
    """``seconds`` lengthened by this machine's slowness: for hang guards only, never for a timing assertion."""
    return seconds * SLOWNESS


def describe() -> str:
    """One line for the pytest header."""
    return (
        f"hang guards x{SLOWNESS:.1f}: a fixed Python loop took {LOOP_SECONDS * 1000:.0f} ms "
        f"(about {REFERENCE_LOOP_SECONDS * 1000:.0f} ms on an ordinary core), starting Python "
        f"{START_SECONDS * 1000:.0f} ms (about {REFERENCE_START_SECONDS * 1000:.0f} ms)"
    )
