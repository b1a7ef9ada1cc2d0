"""What the web console shows of the calls that run here: the sessions they ran in, the calls running now (which
the console may cancel), and the last calls that ended, with their code and result.

Why a part of the run service: every call, whatever face it came through, passes ``Bridge.run``, which is the one
place that knows a call's session, owner, code and result together; the console (console/) only reads this board
through the bridge. The bridge builds a board only when the console is on: with it off, a call pays for nothing of
this. With it on and nobody watching, a call costs one entry (which is also its news function), a few dictionary
and list writes and one audit line, which joins the lines of the calls that ended just before it in one queued
entry and waits to share a write with them (``AuditLog.write(soon=False)``): a page flushes the log before it reads
it. Its session is counted when a page asks (``_count``), not on the call. A call is cancelled from the console
through its own task (``Task.cancel``, taken back with ``Task.uncancel`` once the call has ended with the result
that says so), not through a cancel scope of its own, which would cost every call more than all the rest of the
board together.

Everything here is kept per owner (an HTTP principal, or "local"), and every question names the owner asking, so
one token's holder never learns of another's sessions or calls. The finished calls' code and results are kept in
memory only (the last ``KEPT``), never written: the audit log stays free of code and output, as it always was
(runs/audit.py); what it gains is one ``run`` line per call (its outcome, duration, sizes and the code's sha256).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hashlib
import time
from collections.abc import Awaitable, Callable
from json.encoder import encode_basestring as _text  # json's own escaping of a string, quotes and all
from typing import Any

import anyio

from ..sandbox.results import ExecutionResult, GuestError
from ..session_keys import SessionKey
from ..telemetry.tracing import SPAN_IDS
from .approvals import Approvals
from .audit import AuditLog, stamp
from .relay_run import Caller, News

SEEN_BOUND = 1000  # sessions remembered before those that ended are forgotten
KEPT = 200  # finished calls whose code and result stay in memory for the console
BATCH = 64  # run lines queued in the audit log as one entry, at most (``_RunLines``)
CANCELLED_NOTE = "The call was cancelled from the web console; the session's state was kept."
CANCELLED = "Cancelled"  # the error type a call cancelled from the console ends with, as its client reads it


@dataclasses.dataclass(slots=True)
class SessionSeen:
    """A session a call ran in, as the console shows it."""

    key: SessionKey
    owner: str
    created: float  # time.time() of its first call here
    last_call: float
    calls: int = 0
    fresh_next: str = ""  # why its next call starts fresh (reset from the console), "" otherwise


@dataclasses.dataclass(slots=True)
class CallSeen:
    """One call, running or ended; ``result`` is set once it ended."""

    call: str  # the call id (telemetry/tracing.py), as its audit and log lines carry it
    key: SessionKey
    owner: str
    code: str
    started: float  # time.time()
    trace_id: str = ""
    task: asyncio.Task[Any] | None = dataclasses.field(default=None, repr=False)  # the one it runs in, while it runs
    cancelled_by_console: bool = False
    result: ExecutionResult | None = None
    outcome: str = ""
    duration: float = 0.0
    progress: str = ""  # the latest progress line its client was sent, or would have been (``begin``)
    board: CallBoard | None = dataclasses.field(default=None, repr=False, compare=False)  # while it runs there
    passed_on: News | None = dataclasses.field(default=None, repr=False, compare=False)  # its client's own news

    async def __call__(self, line: str) -> None:
        """The call's news: kept as its latest progress while it runs, and passed on as before (a client that
        asked for no progress still gets none). The entry is its own news function, so that a call with the
        console on makes no closure for it; kept, not queued: a page that watches reads the latest when drawn."""
        board = self.board
        if board is not None:
            self.progress = line
            board._bump()
        if self.passed_on is not None:
            await self.passed_on(line)


class CallBoard:
    """The sessions, running calls and recent calls of one bridge, per owner; ``changed`` wakes whoever watches."""

    def __init__(self, audit: AuditLog, alive: Callable[[SessionKey], bool], kept: int = KEPT,
                 approvers: str = "client") -> None:  # fmt: skip
        """``alive``: whether a session still has a sandbox here, so the board forgets those that ended;
        ``approvers``: who answers ``ask_tools`` questions (``runs/approvals.py``), whose waiting ones it shows."""
        self.audit = audit
        self.alive = alive
        self.sessions: dict[SessionKey, SessionSeen] = {}
        self._uncounted: list[CallSeen] = []  # calls begun since the sessions were last counted (``_count``)
        self._lines = _RunLines()  # the run lines queued last, while they wait and nothing was queued after them
        self._queued = 0  # ``audit.queued`` once they were
        self.running: dict[str, CallSeen] = {}
        self.finished: collections.deque[CallSeen] = collections.deque(maxlen=kept)
        self.version = 0
        self._changed: asyncio.Event | None = None
        self.approvals = Approvals(approvers, self._bump)

    def begin(self, call: str, key: SessionKey, owner: str, code: str,
              caller: Caller | None) -> tuple[CallSeen, Caller]:  # fmt: skip
        """Call ``call`` seen running, and ``caller`` with its news (upstream progress and log lines, an approval's
        wait) kept as the call's latest progress too; ``track`` runs it. Apart from ``track`` so that the
        bridge's one await of a call wraps nothing more than it must."""
        entry = CallSeen(call, key, owner, code, time.time(), SPAN_IDS.get()[0], asyncio.current_task(), board=self,
                         passed_on=caller.news if caller is not None else None)  # fmt: skip
        self.running[call] = entry
        self._uncounted.append(entry)
        if len(self._uncounted) >= KEPT:
            self._count()
        self.version += 1  # _bump's work inline: a page that watches is rare, a call is not
        if self._changed is not None:
            self._wake()
        return entry, caller.telling(entry) if caller is not None else Caller(entry)

    async def track(self, work: Awaitable[ExecutionResult], entry: CallSeen) -> ExecutionResult:
        """Run ``work`` (the call ``begin`` saw) on the board: cancellable from the console, and kept once it
        ended. A cancel from the console ends it with a result that says so, which its client receives."""
        outcome, result, owed = "bridge_error", None, True  # owed: the console's cancel, once it made one
        task = entry.task
        began = time.perf_counter()
        try:
            result = await work
            outcome = result.status
            return result
        except asyncio.CancelledError:
            outcome = "cancelled"
            if not entry.cancelled_by_console or task is None:
                raise
            owed = False
            if task.uncancel() > 0:
                raise  # the caller cancelled too: that goes on up
            result = ExecutionResult("error", error=GuestError(CANCELLED, CANCELLED_NOTE, ""), notice=CANCELLED_NOTE)
            return result
        finally:
            if owed and entry.cancelled_by_console and task is not None:
                task.uncancel()  # the call ended before the cancel reached it, or swallowed it: taken back all the same
            entry.task = entry.board = None
            entry.result, entry.outcome, entry.duration = result, outcome, time.perf_counter() - began
            self.running.pop(entry.call, None)
            self.finished.append(entry)
            lines = self._lines
            if not lines.written and len(lines) < BATCH and self.audit.queued == self._queued:
                lines.append(entry)  # its line joins those still waiting, which no other line was queued after
            elif self.audit.path is not None:  # built when the log is written, with the lines of calls that follow
                self._lines = _RunLines(entry)
                self.audit.write(self._lines, soon=False)
                self._queued = self.audit.queued
            self.version += 1
            if self._changed is not None:
                self._wake()

    def written(self) -> None:
        """The lines of the calls that ended are in the audit log now, for a page about to read it."""
        self.audit.flush()

    def cancel(self, call: str, owner: str) -> bool:
        """Cancel ``owner``'s running call ``call``; False when there is none such (ended, or another's)."""
        entry = self.running.get(call)
        if entry is None or entry.owner != owner or entry.task is None:
            return False
        if not entry.cancelled_by_console:  # once: the task owes one uncancel per cancel
            entry.cancelled_by_console = True
            entry.task.cancel(CANCELLED_NOTE)
        return True

    def cancel_in(self, key: SessionKey, owner: str) -> int:
        """Cancel ``owner``'s calls running in ``key`` (a reset or end would wait for them); how many there were."""
        return sum(self.cancel(c.call, owner) for c in list(self.running.values()) if c.key == key)

    def _count(self) -> None:
        """The calls begun since a page last asked counted into their sessions: a page asks rarely, a call comes
        often, and a session's bookkeeping (its key hashed, its entry found and updated) cost a call more than
        anything else the board did for it, on a busy machine several microseconds, so it is done here in one go."""
        for entry in self._uncounted:
            key = entry.key
            seen = self.sessions.get(key)
            if seen is None or seen.owner != entry.owner:
                if len(self.sessions) >= SEEN_BOUND:
                    self.sessions = {k: s for k, s in self.sessions.items() if self.alive(k) or s.fresh_next}
                seen = self.sessions[key] = SessionSeen(key, entry.owner, entry.started, entry.started)
            seen.last_call, seen.fresh_next = entry.started, ""
            seen.calls += 1
        self._uncounted.clear()

    def sessions_of(self, owner: str) -> list[SessionSeen]:
        self._count()
        return sorted((s for s in self.sessions.values() if s.owner == owner), key=lambda s: -s.last_call)

    def session(self, key: SessionKey, owner: str) -> SessionSeen | None:
        self._count()
        seen = self.sessions.get(key)
        return seen if seen is not None and seen.owner == owner else None

    def forget(self, key: SessionKey) -> None:
        self._count()
        if self.sessions.pop(key, None) is not None:
            self._bump()

    def mark_fresh(self, key: SessionKey, why: str) -> None:
        self._count()
        seen = self.sessions.get(key)
        if seen is not None:
            seen.fresh_next = why
            self._bump()

    def running_of(self, owner: str) -> list[CallSeen]:
        return sorted((c for c in self.running.values() if c.owner == owner), key=lambda c: c.started)

    def finished_of(self, owner: str) -> list[CallSeen]:
        return [entry for entry in reversed(self.finished) if entry.owner == owner]

    def call(self, call: str, owner: str) -> CallSeen | None:
        """``owner``'s call ``call``, running or among the last ended; None for any other (another owner's too)."""
        entry = self.running.get(call) or next((e for e in self.finished if e.call == call), None)
        return entry if entry is not None and entry.owner == owner else None

    async def wait_change(self, since: int, timeout: float) -> int:
        """The board's version once it differs from ``since`` (or after ``timeout`` seconds, unchanged)."""
        if self.version == since:
            if self._changed is None:
                self._changed = asyncio.Event()
            changed = self._changed
            with anyio.move_on_after(timeout):
                await changed.wait()
        return self.version

    def _bump(self) -> None:
        self.version += 1
        self._wake()

    def _wake(self) -> None:
        """Wake the pages that wait for a change, if one does."""
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()


class _RunLines(list[CallSeen]):
    """The ``run`` lines of calls that ended one after another, queued in the audit log as one entry: a line
    queued on its own cost a call more than the rest of what the board does for it. A call's line joins the
    last such entry while that waits, is the last thing queued (so the log keeps its order) and holds fewer
    than ``BATCH`` (so one entry stays small beside the size bound that rotates the log)."""

    __slots__ = ("written",)

    def __init__(self, *entries: CallSeen) -> None:
        super().__init__(entries)
        self.written = not entries  # an empty one stands for none: the next line starts its own

    def __call__(self) -> bytes:
        self.written = True
        return b"".join([_run_line(entry) for entry in self])


def _run_line(entry: CallSeen) -> bytes:
    """The call's ``run`` line: what the console lists of finished calls, beside its tool lines.

    Written out here rather than by ``json``, which costs a line three times as much and the console's calls would
    be its only users: the fields are fixed, the numbers are Python's own reprs (as ``json`` writes them), and the
    text that comes from outside (the session's name, the owner) is escaped by ``json``'s own function."""
    code = entry.code.encode("utf-8", "surrogatepass")
    result = entry.result
    output = len((result.stdout + result.stderr).encode("utf-8", "surrogatepass")) if result is not None else None
    sizes = f'"code_bytes":{len(code)},"output_bytes":{"null" if output is None else output},'
    images = len(result.images) if result is not None else 0
    line = (f'{{"time":"{stamp(entry.started)}","call":{_text(entry.call)},"session":{_text(str(entry.key))},'
            f'"owner":{_text(entry.owner)},"kind":"run","outcome":{_text(entry.outcome)},'
            f'"duration_ms":{round(entry.duration * 1000, 1)!r},"code_sha256":"{hashlib.sha256(code).hexdigest()}",'
            f'{sizes}"images":{images}')  # fmt: skip
    if entry.trace_id:
        line += f',"trace_id":{_text(entry.trace_id)}'
    return (line + "}\n").encode("utf-8", "replace")
