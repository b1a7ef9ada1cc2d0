"""Hang guards scaled to the machine the suite runs on.

A deadline in a test means "this is stuck", never "this is slow": speed is measured in ``benchmarks/``. On a
machine that lends us a fraction of a core (seen: Python running 10 to 80 times slower than usual), a fixed 30 s
guard around a bridge start fires while nothing is wrong. So the guards that wait for processes to start or to
go away are multiplied by ``SLOWNESS``, measured once per test session by timing a fixed loop of pure Python
against what it costs on an ordinary core. The median of five trials, because such a machine is bursty (best-of-three
trials here ranged from 25 to 780 ms within a minute), which also means one measurement can miss a slow spell: the
guards that wait for a process to start are generous on their own as well (minutes, where a normal start takes
a second or two). The factor only ever lengthens a guard (it is at least 1), and the pytest header prints it, so a
slow run says so in its log.
"""

from __future__ import annotations

import statistics
import time

# sum(range(2_000_000)) takes about 25 ms on one ordinary x86-64 core with CPython 3.11.
REFERENCE_SECONDS = 0.025
CEILING = 40.0


def _measure() -> float:
    trials = []
    for _ in range(5):
        started = time.perf_counter()
        sum(range(2_000_000))
        trials.append(time.perf_counter() - started)
    return statistics.median(trials)


MEASURED_SECONDS = _measure()
SLOWNESS = min(CEILING, max(1.0, MEASURED_SECONDS / REFERENCE_SECONDS))


def patient(seconds: float) -> float:
    """``seconds`` lengthened by this machine's slowness: for hang guards only, never for a timing assertion."""
    return seconds * SLOWNESS


def describe() -> str:
    """One line for the pytest header."""
    return (
        f"hang guards x{SLOWNESS:.1f}: a fixed Python loop took {MEASURED_SECONDS * 1000:.0f} ms "
        f"(about {REFERENCE_SECONDS * 1000:.0f} ms on an ordinary core)"
    )
