"""The bridge-wide budget of session-file bytes that reads hold in host memory at once.

Each read of a session file holds the whole file on the host (it goes to the client as one MCP message), plus its
encoding; with no bound across sessions, four sessions reading eight 32 MiB files each peaked at 1.9 GB. So a read
first reserves its file's size here and waits, first come first served, until it fits; a read that cannot get its
room within ``wait`` seconds is refused, naming the setting to raise. Apart from ``session_files`` because the
budget is the bridge's, shared by every session, while that module is about one file request at a time.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator

from ..errors import CodemodeError
from ..sizes import format_size


class ReadBudgetExceeded(CodemodeError):
    """A read waited too long for room in the budget; the message says how much was in flight and what to set."""


class ReadBudget:
    """Bytes reserved by the reads in flight, at most ``limit``; ``peak`` is the most ever reserved at once.

    Released without awaiting anything, so a read cancelled at any point gives its room back."""

    def __init__(self, limit: int, wait: float) -> None:
        self.limit = limit
        self.wait = wait
        self.in_flight = 0
        self.peak = 0
        self.waited = 0  # reads that had to wait for room
        self._line: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    @contextlib.asynccontextmanager
    async def hold(self, size: int, what: str) -> AsyncIterator[None]:
        """Reserve ``size`` bytes for the body of the block (``size`` is at most ``limit``: the per-read cap is)."""
        size = min(size, self.limit)
        if self._line or self.in_flight + size > self.limit:
            await self._wait_for_room(size, what)
        else:
            self._take(size)
        try:
            yield
        finally:
            self.in_flight -= size
            self._grant()

    async def _wait_for_room(self, size: int, what: str) -> None:
        self.waited += 1
        entry = (size, asyncio.get_running_loop().create_future())
        self._line.append(entry)
        try:
            async with asyncio.timeout(self.wait):
                await entry[1]
        except BaseException as exc:
            if entry[1].done() and not entry[1].cancelled():  # given room just as it was cancelled: give it back
                self.in_flight -= size
            else:
                entry[1].cancel()
                with contextlib.suppress(ValueError):
                    self._line.remove(entry)
            self._grant()
            if isinstance(exc, TimeoutError):
                raise ReadBudgetExceeded(
                    f"{what} needs {size:,} bytes of host memory, and reads of other session files held "
                    f"{self.in_flight:,} of the bridge's {format_size(self.limit)} (MCP_BRIDGE_FILE_READ_BUDGET) for "
                    f"{self.wait:g} s: retry shortly, or raise that budget"
                ) from None
            raise

    def _take(self, size: int) -> None:
        self.in_flight += size
        self.peak = max(self.peak, self.in_flight)

    def _grant(self) -> None:
        """Give room to the waiting reads, first come first served, as far as it goes."""
        while self._line and self.in_flight + self._line[0][0] <= self.limit:
            size, ready = self._line.popleft()
            if not ready.done():
                self._take(size)
                ready.set_result(None)
