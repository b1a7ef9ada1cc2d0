"""Named sessions: one warm worker and one namespace each.

Calls into one session queue behind its lock (a namespace is not thread-safe, and a notebook runs one cell
at a time); different sessions run in parallel. Sessions are created on first use, expire when idle, and
are capped in number: when the cap is reached the least recently used idle session is closed to make
room. A session whose worker died or was killed is restarted on its next call, and that call's result
says the state was lost, so the model never silently works with variables that no longer exist.

Workers come from the warm pool (``warm_pool.py``), which also counts every worker against ``max_sessions``;
every worker a session is done with goes back through it (``retire``) so the count stays true.

What a guest may ask of the host (its context, and who answers its requests during a call) comes from one
``GuestServices`` the composition root hands over when it builds the manager (the bridge gives its relay); a
call names only its owner, so no layer above has to build per-call closures for this one to pass on.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from ..errors import SessionLimitError
from ..sandbox.base import Backend
from ..sandbox.results import ExecutionResult
from ..sandbox.worker import OutputCallback, Worker
from ..settings import Settings
from ..telemetry.metrics import SessionEnd
from ..telemetry.seam import Telemetry
from ..telemetry.tracing import CALL_ID, CELL, PLACE_SESSION, START_SANDBOX, digest
from .hibernation import Hibernation
from .relay_run import Caller
from .session_names import DEFAULT_SESSION, check_session_name
from .warm_pool import WarmPool

if TYPE_CHECKING:
    from ..guest.protocol import CellContext
    from ..reply_encoding import GuestRequestHandler

log = logging.getLogger("mcp_codemode.sessions")  # the name log lines have always shown


class GuestServices(Protocol):
    """What a session's guest is given and who answers it, per owner (the bridge's ``Relay`` is one)."""

    async def context(self, owner: str, fresh: bool) -> CellContext:
        """What to send the guest with a call (``fresh``: a new sandbox, which needs everything)."""
        ...

    def for_run(self, owner: str, session: str, caller: Caller | None = None) -> GuestRequestHandler:
        """The handler of the requests one call's code makes (a fresh call budget each time); ``caller`` is the
        call's client (upstream progress goes there; its user may be asked to approve a tool call)."""
        ...


@dataclasses.dataclass
class Session:
    name: str
    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    worker: Worker | None = None
    last_used: float = dataclasses.field(default_factory=time.monotonic)
    generation: int = 0  # how many workers this session has had
    pending_notice: str = ""  # said once, on the next call (e.g. "expired while idle")
    approved: set[str] = dataclasses.field(default_factory=set)  # "asker|server/tool"s a user allowed (ask_tools)
    unconfigured: bool = False  # its worker has not been sent its context yet (a call ended before its code ran)
    restore: bool = False  # a snapshot of it was on disk when it was made: its first sandbox restores it

    @property
    def busy(self) -> bool:
        return self.lock.locked()


class SessionManager:
    """Owns every live session of one bridge; ``close()`` leaves no worker behind."""

    def __init__(
        self,
        backend: Backend,
        settings: Settings,
        summary: str | None = None,
        services: GuestServices | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        """``summary``: the capability text every worker's guest is given; ``services``: what the guest is given and
        who answers its requests (None for either: nothing, as in tests of the sessions alone); ``telemetry``: where
        waits, starts and closed sessions are counted."""
        self.backend = backend
        self.settings = settings
        self.summary = summary
        self.services = services
        self._sessions: dict[str, Session] = {}
        self._forgotten: dict[str, str] = {}  # names closed by expiry/eviction -> why, for the next call
        # Sessions written to disk instead of closed (hibernation.py; None: off), and those being written now.
        self.hibernation = Hibernation.of(settings)
        self._hibernating: dict[str, asyncio.Event] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._closed = False
        self.telemetry = telemetry or Telemetry()
        self.pool = WarmPool(backend, settings, self.telemetry)

    async def __aenter__(self) -> SessionManager:
        with contextlib.suppress(Exception):
            removed = await self.backend.reap_orphans()
            if removed:
                log.info("removed %d leftover sandbox(es) of a bridge that died", removed)
        self._reaper = asyncio.create_task(self._expire_idle_forever())
        if self.backend.keepalive_interval is not None:
            self._keeper = asyncio.create_task(self._keep_channels_open(self.backend.keepalive_interval))
        self.pool.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def names(self) -> list[str]:
        return sorted(self._sessions)

    @property
    def closed(self) -> bool:
        """Whether ``close`` began: no session is placed any more."""
        return self._closed

    def has_room(self) -> bool:
        """Whether a new session would be placed now without waiting for one to end: the cap is not reached, or an
        idle session can be closed for it (``_get``). Busy sessions are never closed for another."""
        return len(self._sessions) < self.settings.max_sessions or any(not s.busy for s in self._sessions.values())

    def worker(self, name: str) -> Worker | None:
        """The session's current worker, if it has one (tests and diagnostics)."""
        entry = self._sessions.get(name)
        return entry.worker if entry is not None else None

    def live_worker(self, name: str, *, use: bool = True) -> Worker | None:
        """The session's worker when it runs; ``use``: for a request of the client's (a file), which counts as use
        of the session, keeping it from expiring (a listing of the sessions does not)."""
        entry = self._sessions.get(name)
        if entry is None or entry.worker is None or not entry.worker.alive:
            return None
        if use:
            entry.last_used = time.monotonic()
        return entry.worker

    def asleep(self, name: str) -> bool:
        """Whether session ``name`` sleeps on disk, or is being written there now: it left the live sessions before
        its snapshot is there, and a look in between must not take it for ended."""
        hibernation = self.hibernation
        return hibernation is not None and (name in self._hibernating or hibernation.has(name))

    def memory(self, name: str) -> int | None:
        """The bytes session ``name`` takes: its running sandbox's memory, or its snapshot's size on disk when it
        sleeps; None when unknown (no sandbox, or a backend that cannot say). Blocking reads of /sys or /proc."""
        worker = self.live_worker(name, use=False)
        if worker is not None:
            return worker.memory()
        return self.hibernation.size(name) if self.hibernation is not None else None

    async def execute(
        self,
        code: str,
        *,
        session: str = DEFAULT_SESSION,
        timeout: float | None = None,
        reset: bool = False,
        on_output: OutputCallback | None = None,
        owner: str = "local",
        caller: Caller | None = None,
        prepare: Callable[[Worker], Awaitable[object]] | None = None,
    ) -> ExecutionResult:
        """Run ``code`` in ``session`` for ``owner`` (whose context and requests the services answer); ``caller``
        is the call's client. The tools its user allowed for the rest of the session are kept with the session.
        ``prepare`` gets the session's worker before the code runs (the call's files go in); what it raises ends
        the call before the code runs, the session kept."""
        check_session_name(session)
        arrived = time.perf_counter()
        tracing = self.telemetry.tracing
        with tracing.span(PLACE_SESSION):  # the session found or made (room made for it), and the call's turn in it
            entry = await self._get(session)
            await entry.lock.acquire()
        try:
            entry.last_used = time.monotonic()
            notices: list[str] = []
            if entry.pending_notice:
                notices.append(entry.pending_notice)
                entry.pending_notice = ""
            if reset and self.hibernation is not None:
                self.hibernation.drop(session)
                entry.restore = False
            if reset and entry.worker is not None:
                await self._retire_worker(entry)
                notices.append("The session was reset: it starts with a fresh namespace.")
            if entry.worker is None or not entry.worker.alive:
                stopped = await self._retire_worker(entry)
                if stopped is not None:
                    notices.append(
                        f"The previous sandbox of this session had stopped ({stopped.death_reason()}); "
                        "this call runs in a fresh one with an empty namespace."
                    )
                with tracing.span(START_SANDBOX, attributes={"mcp_codemode.backend": self.backend.name}):
                    entry.worker = await self._start_worker(session, entry)
                entry.unconfigured = True
                if entry.restore:
                    entry.restore = False
                    notices.append(await self._restore(session, entry))
            self.telemetry.sandbox_waited(time.perf_counter() - arrived)
            if prepare is not None:
                try:
                    await prepare(entry.worker)
                except BaseException:
                    entry.pending_notice = " ".join(notices)  # said by the next call instead
                    raise
            fresh, entry.unconfigured = entry.unconfigured, False
            with_approvals = dataclasses.replace(caller or Caller(), approved=entry.approved)
            with tracing.span(CELL, attributes={"mcp_codemode.call.id": CALL_ID.get()}) as span:
                if tracing.digests:
                    digest(span, "mcp_codemode.code", code.encode("utf-8", "surrogatepass"))
                result = await entry.worker.execute(
                    code,
                    self.settings.clamp_timeout(timeout),
                    on_output,
                    self.summary,
                    context=await self.services.context(owner, fresh) if self.services is not None else None,
                    relay=self.services.for_run(owner, session, with_approvals) if self.services is not None else None,
                )
                span.set("mcp_codemode.cell.status", result.status)
                if result.status != "ok":
                    span.fail(result.status)  # error (the code raised), timeout or crashed: never the code's words
            entry.last_used = time.monotonic()
            if result.state_lost:
                await self._retire_worker(entry)
        finally:
            entry.lock.release()
        if notices:
            joined = " ".join([*notices, result.notice]).strip()
            result = dataclasses.replace(result, notice=joined)
        return result

    async def _restore(self, session: str, entry: Session) -> str:
        """Bring the session's snapshot into its new sandbox; the notice that says what came back, or why nothing
        did. A sandbox whose restore failed half way is replaced, so the call starts clean as the notice says."""
        assert self.hibernation is not None and entry.worker is not None
        outcome, notice = await self.hibernation.restore(session, entry.worker)
        if outcome == "failed":
            await self._retire_worker(entry)
            entry.worker = await self._start_worker(session, entry)
        return notice

    async def _retire_worker(self, entry: Session) -> Worker | None:
        """Detach the session's worker first (so nothing hands it out again), then close it through the pool."""
        worker, entry.worker = entry.worker, None
        if worker is not None:
            await self.pool.retire(worker)
        return worker

    async def _start_worker(self, session: str, entry: Session) -> Worker:
        """A ready worker from the pool if there is one, else a new one (named after the session)."""
        entry.generation += 1
        return await self.pool.acquire(f"{_slug(session)}-{entry.generation}")

    async def _get(self, name: str) -> Session:
        """The session ``name``, created if new; room is made first when the cap is reached.

        Checked again after every eviction (which awaits the victim's close): meanwhile another call may have
        taken the freed place, or created this very session. Adding regardless once let sessions outnumber
        the cap, and the extra one's call waited for a worker that no idle session ever gives back.
        """
        while True:
            entry = self._sessions.get(name)
            if entry is not None:
                return entry
            hibernating = self._hibernating.get(name)
            if hibernating is not None:  # being written to disk: its snapshot is read once it is whole
                await hibernating.wait()
                continue
            if len(self._sessions) < self.settings.max_sessions:
                break
            await self._evict_one()
        entry = Session(name)
        reason = self._forgotten.pop(name, "")
        if self.hibernation is not None and self.hibernation.has(name):
            entry.restore = True  # the restore's notice says what happened, in place of why it was closed
        elif reason:
            # No name in the text: callers may use internal keys, and the model knows which session it asked for.
            entry.pending_notice = f"This session {reason}; this call starts it fresh with an empty namespace."
        self._sessions[name] = entry
        return entry

    async def _evict_one(self) -> None:
        idle = [s for s in self._sessions.values() if not s.busy]
        if not idle:
            raise SessionLimitError(
                f"all {self.settings.max_sessions} sessions are busy; wait for one to finish, or raise "
                "MCP_BRIDGE_MAX_SESSIONS"
            )
        victim = min(idle, key=lambda s: s.last_used)
        await self._drop(victim, "was closed to make room for another (the session limit was reached)", "evicted",
                         keep="it was closed to make room for another session")  # fmt: skip

    async def _drop(self, entry: Session, why: str, reason: SessionEnd, keep: str = "") -> None:
        """Close ``entry``; ``keep``: hibernate it first (saying why in the snapshot), when hibernation is on."""
        if self._sessions.pop(entry.name, None) is not None:
            self.telemetry.session_closed(reason)
        if keep and self.hibernation is not None and entry.worker is not None:
            written = self._hibernating[entry.name] = asyncio.Event()
            try:
                if await self.hibernation.hibernate(entry.name, entry.worker, keep):
                    await self._retire_worker(entry)
                    return
            finally:
                self._hibernating.pop(entry.name, None)
                written.set()
        self._forgotten[entry.name] = why
        while len(self._forgotten) > 4 * self.settings.max_sessions:
            self._forgotten.pop(next(iter(self._forgotten)))
        await self._retire_worker(entry)

    async def discard(self, name: str) -> None:
        """Close a session for good, without a notice for a later call (a client's default whose MCP session ended)."""
        entry = self._sessions.get(name)
        if entry is None:
            return
        async with entry.lock:
            await self._drop(entry, "", "ended")
        self._forgotten.pop(name, None)
        if self.hibernation is not None:
            self.hibernation.drop(name)

    async def lose(self, name: str, why: str, keep: bool = False) -> None:
        """Close ``name`` if it lives here, or mark it when it does not, so its next call here starts it fresh and
        says ``why`` (a session taken over from a replica that is gone, or taken by another replica). ``keep``: this
        replica hands it over as it stops, so it is hibernated first (when hibernation is on) for the next owner."""
        entry = self._sessions.get(name)
        if entry is None:
            self._forgotten[name] = why
            return
        async with entry.lock:
            await self._drop(entry, why, "moved", keep="its replica shut down" if keep else "")

    async def settle(self) -> None:
        """Return once every call running or queued now has ended (a replica that stops lets them finish): each
        session's lock is taken in turn, which waits for its calls; none is closed."""
        for entry in list(self._sessions.values()):
            async with entry.lock:
                pass

    async def expire_idle(self) -> int:
        """Close sessions idle for longer than the configured time; returns how many were closed."""
        limit = self.settings.session_idle_timeout
        now = time.monotonic()
        stale = [s for s in self._sessions.values() if not s.busy and now - s.last_used > limit]
        closed = 0
        for entry in stale:
            # Each drop awaits (a hibernation takes a while): a session called meanwhile is not closed under its call.
            if entry.busy or self._sessions.get(entry.name) is not entry or time.monotonic() - entry.last_used <= limit:
                continue
            await self._drop(entry, f"expired after {limit:g} s without use", "expired",
                             keep=f"it idled out after {limit:g} s")  # fmt: skip
            closed += 1
        return closed

    async def _expire_idle_forever(self) -> None:
        interval = min(max(self.settings.session_idle_timeout / 4, 0.5), 60)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire_idle()
                if self.hibernation is not None and self.hibernation.sweep_due():
                    await self.hibernation.sweep()  # snapshots past their age or count bound
            except Exception:  # the reaper must outlive one bad close
                log.exception("idle session expiry failed")

    async def _keep_channels_open(self, interval: float) -> None:
        """Send every live worker, pooled or in a session, busy or idle, a frame the guest drops.

        A quiet cell (``time.sleep(600)``) sends nothing either way, so busy workers get it too; the guest reads
        frames while a cell runs.
        """
        while True:
            await asyncio.sleep(interval)
            for worker in (*self.pool.ready_workers(), *(s.worker for s in self._sessions.values() if s.worker)):
                try:
                    worker.keepalive()
                except Exception:  # one worker's broken channel must not stop the others' keepalives
                    log.debug("keepalive to worker %s failed", worker.worker_id, exc_info=True)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for task in (self._reaper, self._keeper):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.hibernation is not None:
            await self._hibernate_all(self.hibernation)
        workers = [s.worker for s in self._sessions.values() if s.worker is not None]
        self._sessions.clear()
        await asyncio.gather(self.pool.close(), *(self.pool.retire(w) for w in workers), return_exceptions=True)
        with contextlib.suppress(Exception):
            await self.backend.close()

    async def _hibernate_all(self, hibernation: Hibernation) -> None:
        """Write every idle session to disk as the bridge stops, a few at a time (a busy one is cut, as before)."""
        turns = asyncio.Semaphore(4)

        async def keep(entry: Session) -> None:
            async with turns:
                if entry.worker is not None and not entry.busy:
                    await hibernation.hibernate(entry.name, entry.worker, "the bridge stopped")

        await asyncio.gather(*(keep(s) for s in list(self._sessions.values())), return_exceptions=True)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:40]
