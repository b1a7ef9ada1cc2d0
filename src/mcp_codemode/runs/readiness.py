"""Whether this bridge could take a new session now, and if not, why: what ``/readyz`` answers (face/probes.py).

A new session needs a place under ``MCP_BRIDGE_MAX_SESSIONS`` (or an idle session to close for it: busy ones are
never closed) and a sandbox: a pooled one, or one the backend starts. The answer comes from what the bridge already
knows, never from trying: the kubelet probes every few seconds, and a trial sandbox per probe would cost more than
the sessions it guards. So a start counts as failing from the latest failed start (the warm pool keeps when, for
its own starts and the sessions') until a start succeeds, but for ``FAILED_START_HOLD_S`` at most: the pool's filler
retries at least every ``BACKOFF_MAX_S`` and renews it, and without a pool the bridge is tried again by real
sessions once the hold ends (rather than refusing them for good after one bad start). A ready pooled sandbox makes
the bridge ready whatever the backend says, since handing it out asks the backend nothing. Only then is the backend
asked, cheaply and from what it keeps (``Backend.start_check``: the cluster's API server and its warm pool).

The answer's ``reason`` is one word of ``REASONS``, a closed set, because ``/readyz`` is open to anyone who reaches
the port (the kubelet sends no token); the ``detail`` (hosts, namespaces, a backend's error) goes to the log, once
per change, never into the answer.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Literal, get_args

from ..sandbox.base import StartCheck, StartProblem
from .sessions import SessionManager
from .warm_pool import BACKOFF_MAX_S

log = logging.getLogger("mcp_codemode.readiness")
FAILED_START_HOLD_S = BACKOFF_MAX_S + 10.0
Reason = Literal[
    "starting", "stopping", "no-sandbox-backend", "session-cap-reached", "sandbox-start-failing", StartProblem
]
REASONS: frozenset[str] = frozenset(get_args(Reason))


@dataclasses.dataclass(frozen=True)
class Readiness:
    """``reason`` (None when ready) may be shown to anyone; ``detail`` only to the operator."""

    ready: bool
    reason: Reason | None = None
    detail: str = ""


@dataclasses.dataclass(frozen=True)
class Facts:
    """What the rules read, gathered by ``facts_of`` (tests give their own)."""

    started: bool  # the session manager runs
    stopping: bool
    backend_error: str  # why no sandbox can run here at all; "" when one can
    cap: int
    has_room: bool
    pooled: int  # warm sandboxes ready to hand out
    failed_start_age: float | None  # seconds since the latest start failed; None when the latest succeeded
    backend: StartCheck = dataclasses.field(default_factory=lambda: StartCheck(ok=True))


def judge(facts: Facts) -> Readiness:
    """The rules of the module docstring, in the order an operator would fix them."""
    if facts.stopping:
        return Readiness(False, "stopping", "the bridge is shutting down and places no new session")
    if facts.backend_error:
        return Readiness(False, "no-sandbox-backend", facts.backend_error)
    if not facts.started:
        return Readiness(False, "starting", "the sessions are not running yet")
    if not facts.has_room:
        busy = f"all {facts.cap} sessions (MCP_BRIDGE_MAX_SESSIONS) are busy, none idle to close"
        return Readiness(False, "session-cap-reached", busy)
    if facts.pooled:
        return Readiness(True, detail=f"{facts.pooled} pooled sandbox(es) ready")
    age = facts.failed_start_age
    if age is not None and age < FAILED_START_HOLD_S:
        failing = f"the latest sandbox start failed {age:.0f} s ago (the log says why) and none is pooled"
        return Readiness(False, "sandbox-start-failing", failing)
    if not facts.backend.ok:
        return Readiness(False, facts.backend.problem or "cluster-unreachable", facts.backend.detail)
    return Readiness(True, detail=facts.backend.detail)


def facts_of(sessions: SessionManager | None, backend_error: str, cap: int, stopping: bool) -> Facts:
    """The facts of a bridge's session manager (None: not running), without the backend's ``start_check``."""
    failed = sessions.pool.last_failed_start if sessions is not None else None
    return Facts(
        started=sessions is not None,
        stopping=stopping or (sessions is not None and sessions.closed),
        backend_error=backend_error,
        cap=cap,
        has_room=sessions is not None and sessions.has_room(),
        pooled=sessions.pool.ready if sessions is not None else 0,
        failed_start_age=None if failed is None else time.monotonic() - failed,
    )


async def readiness_of(sessions: SessionManager | None, backend_error: str, cap: int, stopping: bool) -> Readiness:
    """``judge`` on a bridge's facts; the backend is asked only when nothing else already decided."""
    facts = facts_of(sessions, backend_error, cap, stopping)
    verdict = judge(facts)
    if verdict.ready and not facts.pooled and sessions is not None:
        verdict = judge(dataclasses.replace(facts, backend=await sessions.backend.start_check()))
    return verdict


class ChangeLog:
    """Logs the readiness when its reason changes, not on every probe: the detail the answer leaves out is here."""

    def __init__(self) -> None:
        self._last: Reason | None = None  # ready: a bridge that starts ready says nothing

    def note(self, verdict: Readiness) -> Readiness:
        if verdict.reason != self._last:
            if verdict.ready:
                log.info("ready for new sessions again")
            else:
                log.warning("not ready for new sessions (%s): %s", verdict.reason, verdict.detail)
            self._last = verdict.reason
        return verdict
