"""The figures ``benchmarks/load.py`` reports, from what its clients saw: pure arithmetic over the outcomes.

Why a module of its own: the load benchmark's driver (its processes, clients and windows) and what it makes of the
outcomes change for different reasons, and the arithmetic is what the unit tests check without starting anything.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

import load_work as work

TARGET_THROUGHPUT = 0.8
TARGET_P99 = 1.5
SOAK_SETTLE_S = 600.0
SOAK_LIMIT_PCT = 5.0


def percentiles(samples: Sequence[float]) -> dict[str, float | int]:
    """p50, p95, p99 (nearest rank) and the maximum of ``samples`` (ms)."""
    ordered = sorted(samples)
    if not ordered:
        return {"n": 0}

    def rank(share: float) -> float:
        return round(ordered[max(1, math.ceil(share * len(ordered))) - 1], 3)

    return {"p50_ms": rank(0.5), "p95_ms": rank(0.95), "p99_ms": rank(0.99), "max_ms": round(ordered[-1], 3),
            "n": len(ordered)}  # fmt: skip


def schedule(sides: Sequence[str], rounds: int) -> list[tuple[int, str]]:
    """The windows' order: one window of each side per round, the order reversed every other round (ABBA).

    Alternating cancels the machine's slow spells that last longer than a round; reversing the order cancels a
    steady drift within the run too, which a fixed order would charge to the side that always goes second.
    """
    return [(index, side) for index in range(rounds) for side in (sides if index % 2 == 0 else sides[::-1])]


def throughput(states: Sequence[work.ClientState], outcomes: Sequence[work.Outcome], window: float) -> float:
    """Calls per second in one window, the deliberate waits taken out: the sum of each client's rate."""
    return throughput_over(states, [(outcomes, window)])


def throughput_over(states: Sequence[work.ClientState],
                    windows: Sequence[tuple[Sequence[work.Outcome], float]]) -> float:  # fmt: skip
    """Calls per second over several windows: each client's calls over its busy time in all of them.

    A client's busy time in a window is the window (or until its last call ended, if later) less its time in
    deliberate waits, up to the timeout: that second is the workload's, and both sides wait it.
    """
    total = 0.0
    for state in states:
        calls, busy = 0, 0.0
        for outcomes, window in windows:
            mine = [outcome for outcome in outcomes if outcome.client == state.index]
            if not mine:
                continue
            span = max(window, max(outcome.started + outcome.latency_ms / 1000 for outcome in mine))
            waited = sum(min(o.latency_ms / 1000, work.TIMEOUT_S) for o in mine if o.kind == "timeout")
            calls += sum(1 for outcome in mine if outcome.kind != "timeout")
            busy += span - waited
        if busy > 0:
            total += calls / max(busy, 1e-9)
    return round(total, 1)


def calls_ended_in(outcomes: Sequence[work.Outcome], window: float) -> int:
    """The calls whose whole cost fell inside the window the CPU was read over (deliberate timeouts included)."""
    return sum(1 for outcome in outcomes if outcome.started + outcome.latency_ms / 1000 <= window)


def per_call(cpu: dict[str, float], calls: int) -> dict[str, float]:
    """CPU ms per call of each part and in all: the figure a busy machine moves least, unlike calls per second.

    On saturated cores a side's throughput follows its total CPU per call (servers, what they started and the
    clients), so this is what says which side does more work per call, however busy the machine was.
    """
    parts = {part: round(value * 1000 / calls, 3) if calls else 0.0 for part, value in cpu.items()}
    return {**parts, "total": round(sum(cpu.values()) * 1000 / calls, 3) if calls else 0.0}


def errors_by_kind(outcomes: Sequence[work.Outcome]) -> dict[str, Any]:
    counted: dict[str, int] = {}
    details: dict[str, list[str]] = {}
    for outcome in outcomes:
        if outcome.error is None:
            continue
        counted[outcome.error] = counted.get(outcome.error, 0) + 1
        if len(details.setdefault(outcome.error, [])) < 3:
            details[outcome.error].append(f"{outcome.era} {outcome.kind} at {outcome.started:.1f} s: {outcome.detail}")
    return {"count": sum(counted.values()), "by_kind": counted, "examples": details}


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, or None when either is missing or the denominator is 0."""
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 3)


def spread(values: Sequence[float | None]) -> dict[str, Any]:
    """Median, least and greatest of the values that exist, and how many there were."""
    present = [value for value in values if value is not None]
    if not present:
        return {"n": 0}
    return {"median": round(statistics.median(present), 3), "min": min(present), "max": max(present), "n": len(present)}


def pairs(floor: Sequence[dict[str, Any]], bridge: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The bridge's figures over the floor's, window pair by window pair (the two windows of one round).

    The two windows of a pair are seconds apart, so each ratio is taken on the machine as it was then; their median
    and spread say how much of a run's ratio is the machine's doing.
    """
    throughput = [ratio(b["throughput_per_s"], f["throughput_per_s"]) for f, b in zip(floor, bridge, strict=True)]
    p99 = [ratio(b["latency"].get("p99_ms"), f["latency"].get("p99_ms")) for f, b in zip(floor, bridge, strict=True)]
    rows = [
        {"round": index, "throughput_per_s": {"floor": f["throughput_per_s"], "bridge": b["throughput_per_s"]},
         "throughput_ratio": throughput[index], "p99_ratio": p99[index]}
        for index, (f, b) in enumerate(zip(floor, bridge, strict=True))
    ]  # fmt: skip
    return {"throughput_ratio": spread(throughput), "p99_ratio": spread(p99), "pairs": rows}


def soak_figures(points: Sequence[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """Growth of the servers' memory and file descriptors from the end of the settling (a third of the window, at
    most SOAK_SETTLE_S: pools fill, caches warm) to the window's end; the issue's target is under 5 %."""
    settle = min(SOAK_SETTLE_S, seconds / 3)
    base = next(point for point in points if point["t_s"] >= settle or point is points[-1])
    end = points[-1]

    def growth(key: str) -> float:
        return round((end[key] - base[key]) * 100 / base[key], 2) if base[key] else 0.0

    memory = max(growth("servers_pss_mb"), growth("servers_rss_mb"))
    fds = growth("servers_fds")
    return {
        "settle_s": round(settle, 1),
        "from": base,
        "to": end,
        "pss_growth_pct": growth("servers_pss_mb"),
        "rss_growth_pct": growth("servers_rss_mb"),
        "fds_growth_pct": fds,
        "fds_max_after_settle": max(point["servers_fds"] for point in points if point["t_s"] >= base["t_s"]),
        "targets": [
            {"target": f"memory grows under {SOAK_LIMIT_PCT:g} %", "measured": memory, "met": memory < SOAK_LIMIT_PCT},
            {
                "target": f"file descriptors grow under {SOAK_LIMIT_PCT:g} %",
                "measured": fds,
                "met": fds < SOAK_LIMIT_PCT,
            },
        ],
        "points": list(points),
    }


def targets(bridge: dict[str, Any], floor: dict[str, Any], paired: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets on each side's figures over all its windows, with the per-pair median beside them."""
    throughput_ratio = bridge["throughput_per_s"] / floor["throughput_per_s"] if floor["throughput_per_s"] else 0.0
    p99 = bridge["latency"].get("p99_ms", math.inf) / max(floor["latency"].get("p99_ms", math.inf), 1e-9)
    return [
        {"target": f"throughput >= {TARGET_THROUGHPUT}x the no-op floor's", "measured": round(throughput_ratio, 3),
         "met": throughput_ratio >= TARGET_THROUGHPUT, "per_pair": paired["throughput_ratio"]},
        {"target": f"p99 <= {TARGET_P99}x the no-op floor's p99", "measured": round(p99, 3), "met": p99 <= TARGET_P99,
         "per_pair": paired["p99_ratio"]},
        {"target": "no answer from another session", "measured": bridge["cross_session"],
         "met": bridge["cross_session"] == 0},
    ]  # fmt: skip
