"""Progress while a call runs: many clients drop a call that stays silent, so the face reports the time elapsed,
and passes on, as progress of the same call, what upstream servers report about the tools the code calls.

One ``ProgressLine`` per call, for the two places that report it: the face to its own client, and the replica
that owns a session to the replica that forwarded it the call (which passes it on to its client). MCP requires
a progress token's values to increase, so the heartbeat's seconds and the upstream news share one scale: the
time elapsed, nudged up when two reports would otherwise carry the same value.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import anyio

Report = Callable[[float, float | None, str | None], Awaitable[None]]
log = logging.getLogger(__name__)


class ProgressLine:
    """One call's progress as its client sees it: increasing values (the seconds elapsed), each with a message."""

    def __init__(self, timeout: float, report: Report) -> None:
        self.timeout = timeout
        self._report = report
        self._started = time.monotonic()
        self._last = 0.0

    async def beat(self) -> None:
        elapsed = time.monotonic() - self._started
        await self._send(f"running for {elapsed:.0f} s of at most {self.timeout:g} s")

    async def news(self, text: str) -> None:
        """A line from upstream (``server/tool: message (3/10)``); a client that went away is not our problem
        here (the call notices), so a failure to send is swallowed."""
        try:
            await self._send(text)
        except Exception:  # see the docstring
            log.debug("progress notification failed", exc_info=True)

    async def _send(self, message: str) -> None:
        value = max(time.monotonic() - self._started, self._last + 0.001)
        self._last = value
        await self._report(value, self.timeout, message)


async def heartbeat(timeout: float, interval: float, report: Report | ProgressLine) -> None:
    """Report the seconds elapsed every ``interval`` until cancelled; an exception from ``report`` ends it."""
    line = report if isinstance(report, ProgressLine) else ProgressLine(timeout, report)
    while True:
        await anyio.sleep(interval)
        await line.beat()
