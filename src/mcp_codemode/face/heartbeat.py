"""Progress while a call runs: many clients drop a call that stays silent, so the face reports the time elapsed.

One loop for the two places that report it: the face to its own client, and the replica that owns a session to
the replica that forwarded it the call (which passes it on to its client).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio

Report = Callable[[float, float | None, str | None], Awaitable[None]]


async def heartbeat(timeout: float, interval: float, report: Report) -> None:
    """Report the seconds elapsed every ``interval`` until cancelled; an exception from ``report`` ends it."""
    started = time.monotonic()
    while True:
        await anyio.sleep(interval)
        elapsed = time.monotonic() - started
        await report(elapsed, timeout, f"running for {elapsed:.0f} s of at most {timeout:g} s")
