"""Pre-started workers, so a new session's first call costs about as much as a warm call.

Starting a sandbox is most of what a new session waits for (tens of milliseconds for bubblewrap, hundreds for
a container); a pooled worker has already paid that. A pooled worker is generic: nothing session-specific is
in it until its first ``execute``, which carries the context (servers, saved tools) because it is ``fresh``.

The pool also keeps the count of *every* worker of its session manager, pooled or not, including those being
started and those being closed, and every start goes through that count: so pooled workers plus session
workers never exceed ``max_sessions``, whatever the timing. The pool only fills slots no session is using,
and a session that needs a worker takes a pooled one first, so when the cap is reached the pool shrinks (it
is drained and not refilled) instead of blocking sessions.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import itertools
import logging
import time
import weakref

import anyio

from ..errors import SessionLimitError
from ..sandbox.base import Backend
from ..sandbox.worker import Worker
from ..settings import Settings
from ..telemetry.seam import Telemetry

log = logging.getLogger("mcp_codemode.warm_pool")  # the name log lines have always shown
_BACKOFF_FIRST = 1.0  # seconds before retrying after a failed start; doubles per failure in a row
BACKOFF_MAX_S = 60.0  # the longest the filler waits between two failed starts
# A taken worker is replaced this long afterwards, not at once. Starting a sandbox forks on the event loop and
# keeps a core busy for tens of milliseconds; begun at once, it slowed the very call that took the pooled worker
# (the first call of a new session, bubblewrap: 3.4 ms median with an immediate refill, 1.2 ms with this delay).
# Taking the last pooled worker refills at once instead: sessions are arriving faster than the pool refills.
REFILL_DELAY_S = 0.05


@dataclasses.dataclass
class PoolCounters:
    """What the pool has done since it started (for tests, benchmarks and logs)."""

    started: int = 0  # workers that became ready in the pool
    taken: int = 0  # handed to a session
    discarded: int = 0  # found dead in the pool, closed and never handed out
    failed: int = 0  # starts that failed
    peak_live: int = 0  # the most workers that existed at once (pooled, in sessions, starting or closing)


class WarmPool:
    """Up to ``settings.warm_pool`` ready workers, and the cap on all workers of one session manager."""

    _ids = itertools.count(1)

    def __init__(self, backend: Backend, settings: Settings, telemetry: Telemetry | None = None) -> None:
        self.backend = backend
        self.settings = settings
        self.telemetry = telemetry or Telemetry()
        self.size = settings.warm_pool
        self.cap = settings.max_sessions
        self.counters = PoolCounters()
        self._ready: collections.deque[Worker] = collections.deque()
        self._starting: set[asyncio.Task[None]] = set()
        self._live = 0  # every worker that exists: pooled, starting, in a session, or being closed
        self._closing: set[asyncio.Task[None]] = set()  # dead pooled workers being closed
        self._changed = asyncio.Event()  # replaced on every change: a slot was freed or a worker became ready
        self._wake = asyncio.Event()
        self._refill: asyncio.TimerHandle | None = None
        self._filler: asyncio.Task[None] | None = None
        self._retired: weakref.WeakSet[Worker] = weakref.WeakSet()  # so closing one twice frees one slot
        self._failures = 0  # failed starts of the filler in a row
        # When the latest start, the filler's or a session's, failed (time.monotonic()); None once one succeeded.
        self.last_failed_start: float | None = None
        self._closed = False

    @property
    def live(self) -> int:
        """Workers that exist now, whoever holds them; never above ``cap``."""
        return self._live

    @property
    def ready(self) -> int:
        return len(self._ready)

    @property
    def starting(self) -> int:
        return len(self._starting)

    def ready_workers(self) -> tuple[Worker, ...]:
        return tuple(self._ready)

    def start(self) -> None:
        """Begin filling in the background: the bridge must not wait for sandboxes nobody asked for yet."""
        if self.size > 0 and self._filler is None and not self._closed:
            self._filler = asyncio.create_task(self._fill_forever())

    async def acquire(self, worker_id: str) -> Worker:
        """A started worker for a session: a pooled one if one is ready and alive, else a new one.

        Waits only when every slot under the cap is held by a worker that is starting or closing; either
        frees up or becomes ready within ``startup_timeout`` or a close, so the wait is bounded.
        """
        while True:
            if self._closed:
                raise SessionLimitError("the bridge is shutting down; no new sandbox can start")
            worker = await self._take()
            if worker is not None:
                return worker
            if self._claim():
                break
            changed = self._changed  # no await between the checks above and this wait: no lost wake-up
            await changed.wait()
        worker = Worker(self.backend, self.settings, worker_id)
        try:
            await self._started(worker)
        except BaseException as exc:
            if isinstance(exc, Exception):
                self.last_failed_start = time.monotonic()
            await self.retire(worker)
            raise
        self.last_failed_start = None
        if self._closed:  # the manager closed while this one started: it must not outlive the bridge
            await self.retire(worker)
            raise SessionLimitError("the bridge is shutting down; no new sandbox can start")
        return worker

    async def retire(self, worker: Worker) -> None:
        """Close a worker ``acquire`` gave out; its slot is free only once it is gone. Safe to call twice."""
        if worker in self._retired:
            return
        self._retired.add(worker)
        try:
            with anyio.CancelScope(shield=True):
                await worker.close()
        finally:
            self._release()

    async def _take(self) -> Worker | None:
        while self._ready:
            worker = self._ready.popleft()
            if self._ready:
                self._refill_soon()
            else:  # a drained pool means a burst: refill now
                self._refill_now()
            if worker.alive:
                self.counters.taken += 1
                return worker
            self._note_dead(worker)
            await self.retire(worker)
        return None

    def _refill_soon(self) -> None:
        """Wake the filler after ``REFILL_DELAY_S``, once however many workers were taken meanwhile."""
        if self._refill is None:
            self._refill = asyncio.get_running_loop().call_later(REFILL_DELAY_S, self._refill_now)

    def _refill_now(self) -> None:
        if self._refill is not None:
            self._refill.cancel()
            self._refill = None
        self._wake.set()

    def _note_dead(self, worker: Worker) -> None:
        self.counters.discarded += 1
        log.info("a pooled %s worker had died (%s); replacing it", self.backend.name, worker.death_reason())

    def _claim(self) -> bool:
        """Reserve a slot for a worker about to start; no await between the check and the count."""
        if self._live >= self.cap:
            return False
        self._live += 1
        self.counters.peak_live = max(self.counters.peak_live, self._live)
        return True

    def _release(self) -> None:
        self._live -= 1
        self._wake.set()
        self._notify()

    def _notify(self) -> None:
        """Wake every session waiting for a slot or a ready worker (synchronous, so safe in cleanup)."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def _fill_forever(self) -> None:
        while not self._closed:
            self._prune_dead()
            while len(self._ready) + len(self._starting) < self.size and self._claim():
                task = asyncio.create_task(self._start_one())
                self._starting.add(task)
                task.add_done_callback(self._starting.discard)
            self._wake.clear()
            await self._wake.wait()
            if self._failures:
                delay = min(_BACKOFF_FIRST * 2 ** (self._failures - 1), BACKOFF_MAX_S)
                await asyncio.sleep(delay)

    def _prune_dead(self) -> None:
        """Dead pooled workers are found here as well as at take time, so the pool does not sit on corpses."""
        for worker in [w for w in self._ready if not w.alive]:
            self._ready.remove(worker)
            self._note_dead(worker)
            task = asyncio.create_task(self.retire(worker))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def _start_one(self) -> None:
        worker = Worker(self.backend, self.settings, f"pool-{next(self._ids)}")
        try:
            await self._started(worker)
        except asyncio.CancelledError:
            await self.retire(worker)
            raise
        except Exception as exc:  # noqa: BLE001 - any failed start (launch, image, timeout) means back off
            self.counters.failed += 1
            self._failures += 1
            self.last_failed_start = time.monotonic()
            if self._failures == 1:
                log.warning(
                    "the warm pool could not start a %s worker (%s); retrying with back-off, and sessions "
                    "start their own workers meanwhile",
                    self.backend.name,
                    exc,
                )
            else:
                log.debug("warm pool start failed again (%d in a row): %s", self._failures, exc)
            await self.retire(worker)
            return
        if self._closed:
            await self.retire(worker)
            return
        if self._failures:
            log.info("the warm pool starts %s workers again", self.backend.name)
        self._failures = 0
        self.last_failed_start = None
        self.counters.started += 1
        self._ready.append(worker)
        self._notify()

    async def _started(self, worker: Worker) -> None:
        """Start ``worker``, counting the start and its time by backend (a cancelled one is neither)."""
        began = time.perf_counter()
        try:
            await worker.start()
        except asyncio.CancelledError:
            raise
        except BaseException:
            self.telemetry.sandbox_started(self.backend.name, time.perf_counter() - began, ok=False)
            raise
        self.telemetry.sandbox_started(self.backend.name, time.perf_counter() - began, ok=True)

    async def close(self) -> None:
        """Stop filling and close every pooled worker, including those still starting."""
        self._closed = True
        if self._refill is not None:
            self._refill.cancel()
        if self._filler is not None:
            self._filler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._filler
        starting = list(self._starting)
        for task in starting:
            task.cancel()
        await asyncio.gather(*starting, return_exceptions=True)
        ready = list(self._ready)
        self._ready.clear()
        await asyncio.gather(*(self.retire(w) for w in ready), *self._closing, return_exceptions=True)
        self._notify()
