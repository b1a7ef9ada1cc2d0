"""The readiness rules (runs/readiness.py) as pure logic: which facts make a bridge not ready, in which order, and
that the backend is asked only when nothing else decided. The facts of a real session manager are read in
tests/runs/test_warm_pool.py (a backend whose starts fail) and end to end in tests/face/test_probes_e2e.py."""

from __future__ import annotations

import dataclasses
import logging
from types import SimpleNamespace
from typing import Any, cast

import pytest

from mcp_codemode.runs.readiness import (
    FAILED_START_HOLD_S,
    REASONS,
    ChangeLog,
    Facts,
    Readiness,
    judge,
    readiness_of,
)
from mcp_codemode.runs.sessions import SessionManager
from mcp_codemode.sandbox.base import StartCheck

READY = Facts(
    started=True, stopping=False, backend_error="", cap=4, has_room=True, pooled=0, failed_start_age=None
)  # fmt: skip
UNREACHABLE = StartCheck(False, "cluster-unreachable", "the API server at https://10.0.0.1:6443 did not answer")


def test_a_running_bridge_with_room_is_ready() -> None:
    assert judge(READY) == Readiness(True, None, "")


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"stopping": True, "backend_error": "no bwrap", "has_room": False}, "stopping"),
        ({"backend_error": "No sandbox can run code on this machine", "started": False}, "no-sandbox-backend"),
        ({"started": False}, "starting"),
        ({"has_room": False, "pooled": 2}, "session-cap-reached"),
        ({"failed_start_age": 1.0, "backend": UNREACHABLE}, "sandbox-start-failing"),
        ({"backend": UNREACHABLE}, "cluster-unreachable"),
        ({"backend": StartCheck(False, "warm-pool-missing")}, "warm-pool-missing"),
    ],
)
def test_each_fact_makes_the_bridge_not_ready_and_the_first_one_names_the_reason(
    changes: dict[str, Any], reason: str
) -> None:
    verdict = judge(dataclasses.replace(READY, **changes))
    assert (verdict.ready, verdict.reason) == (False, reason)
    assert verdict.reason in REASONS


def test_a_pooled_sandbox_makes_it_ready_though_starts_fail_and_the_cluster_is_away() -> None:
    """Handing out a pooled sandbox asks the backend nothing: a new session can be taken now."""
    verdict = judge(dataclasses.replace(READY, pooled=1, failed_start_age=1.0, backend=UNREACHABLE))
    assert verdict.ready


def test_a_failed_start_counts_only_for_the_hold_after_it() -> None:
    """Without a warm pool nothing retries by itself: after the hold, sessions may try again."""
    recent = judge(dataclasses.replace(READY, failed_start_age=FAILED_START_HOLD_S - 1))
    old = judge(dataclasses.replace(READY, failed_start_age=FAILED_START_HOLD_S + 1))
    assert (recent.ready, recent.reason, old.ready) == (False, "sandbox-start-failing", True)


def test_the_hold_outlasts_the_pools_longest_back_off_so_a_failing_pool_never_looks_ready_between_retries() -> None:
    from mcp_codemode.runs.warm_pool import BACKOFF_MAX_S

    assert FAILED_START_HOLD_S > BACKOFF_MAX_S


def test_reasons_are_plain_words_that_can_name_nothing() -> None:
    assert all(reason.replace("-", "").isalpha() and reason.islower() for reason in REASONS), REASONS


class _Backend:
    def __init__(self, answer: StartCheck) -> None:
        self.answer = answer
        self.asked = 0

    async def start_check(self) -> StartCheck:
        self.asked += 1
        return self.answer


def _sessions(backend: _Backend, *, pooled: int = 0, room: bool = True) -> SessionManager:
    """Stands in for a session manager: only what ``readiness_of`` reads of one."""
    pool = SimpleNamespace(ready=pooled, last_failed_start=None)
    return cast("SessionManager", SimpleNamespace(pool=pool, closed=False, has_room=lambda: room, backend=backend))


@pytest.mark.anyio
async def test_the_backend_is_asked_only_when_nothing_else_decided() -> None:
    backend = _Backend(UNREACHABLE)
    full = await readiness_of(_sessions(backend, room=False), "", 4, stopping=False)
    pooled = await readiness_of(_sessions(backend, pooled=1), "", 4, stopping=False)
    stopping = await readiness_of(_sessions(backend), "", 4, stopping=True)
    assert (full.reason, pooled.ready, stopping.reason, backend.asked) == ("session-cap-reached", True, "stopping", 0)
    asked = await readiness_of(_sessions(backend), "", 4, stopping=False)
    assert (asked.reason, backend.asked) == ("cluster-unreachable", 1)
    assert (await readiness_of(None, "", 4, stopping=False)).reason == "starting"


def test_the_log_says_each_change_once_with_the_detail_the_answer_leaves_out(caplog: pytest.LogCaptureFixture) -> None:
    changes = ChangeLog()
    busy = Readiness(False, "session-cap-reached", "all 4 sessions (MCP_BRIDGE_MAX_SESSIONS) are busy")
    with caplog.at_level(logging.INFO, logger="mcp_codemode.readiness"):
        for verdict in (Readiness(True), busy, busy, busy, Readiness(True), Readiness(True)):
            changes.note(verdict)
    said = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert said == [
        (logging.WARNING, f"not ready for new sessions (session-cap-reached): {busy.detail}"),
        (logging.INFO, "ready for new sessions again"),
    ]
