"""When a failed upstream server is started again: the restart policy, bounded exponential backoff.

A rule of its own, kept out of the connection's state machine so it reads (and is tested) as the one small
formula it is.
"""

from __future__ import annotations

# A connection that stayed up this long counts as healthy: its crash starts the backoff from the beginning.
STABLE_AFTER = 10.0


def backoff_delay(failures: int, first: float, ceiling: float) -> float:
    """Seconds to wait before the next start after ``failures`` consecutive failures.

    The first failure is retried by the next call (a crash is often a one-off); from the second on the wait
    doubles from ``first`` up to ``ceiling``, so a server that cannot start costs little and floods no log.
    """
    if failures <= 1:
        return 0.0
    return float(min(ceiling, first * 2 ** (failures - 2)))
