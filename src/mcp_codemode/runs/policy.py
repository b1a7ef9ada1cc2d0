"""Enforcing the policy at run time: the per-owner rate limiter, state the bridge keeps for its whole life.

The rules themselves (which servers and tools, the caps, the matching and the refusal sentences) are a value the
settings build, in ``policy_rules.py``; this module holds what only the bridge's guest-request service needs,
so the settings never import run-time machinery. ``Refused`` stays importable here for that service.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from ..upstream.gate import Refused as Refused  # its home is below the directory, which stores refusals


class RateLimiter:
    """A token bucket per owner: ``rate`` calls per second on average, bursts of up to ``max(rate, 1)``.

    Owners are HTTP principals (or "local"), few and long-lived, so buckets are kept for the bridge's life.
    """

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = max(rate, 1.0)
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # owner -> (tokens, when)

    def take(self, owner: str) -> bool:
        """Spend one token of ``owner``'s bucket; False (nothing spent) when it is empty."""
        if self.rate <= 0:
            return True
        now = self._clock()
        tokens, then = self._buckets.get(owner, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.rate)
        if tokens < 1:
            self._buckets[owner] = (tokens, now)
            return False
        self._buckets[owner] = (tokens - 1, now)
        return True

    def wait_hint(self) -> str:
        seconds = 1 / self.rate if self.rate > 0 else 0
        return f"about {math.ceil(seconds * 10) / 10:g} s" if seconds >= 0.1 else "a moment"
