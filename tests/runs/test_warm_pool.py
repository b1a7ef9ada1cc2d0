"""The warm pool on real backends: pooled workers are used, refilled, capped, replaced, and closed.

Nothing here measures time: a pooled worker is proven by identity and by the pool's counters, and the cap by
sampling both the pool's own count and the sandboxes that really exist (cgroups, containers).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from mcp_codemode.errors import SettingsError
from mcp_codemode.runs.readiness import facts_of, judge
from mcp_codemode.runs.sessions import SessionManager
from mcp_codemode.sandbox import cgroups
from mcp_codemode.sandbox.select import make_backend
from mcp_codemode.settings import Settings
from tests.support.backends import ONE_BACKEND, sandbox_settings
from tests.support.cells import GuestServicesStub
from tests.support.processes import our_containers

if TYPE_CHECKING:
    from mcp_codemode.guest.protocol import CellContext

sandboxed = pytest.mark.usefixtures("no_orphans")  # every test that starts sandboxes checks none is left
WithSessions = Callable[..., Any]
CLOSE_BOUND_S = 120.0  # a bound that turns a hang into a failure; not a timing check


async def settle(condition: Callable[[], bool], seconds: float = 60.0) -> None:
    """Wait until ``condition`` holds: a bounded wait for the background fill, not a timing test."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():
        assert loop.time() < deadline, "the warm pool did not reach the expected state"
        await asyncio.sleep(0.02)


@sandboxed
@ONE_BACKEND
def test_a_new_sessions_first_call_uses_a_pooled_worker_and_the_pool_refills(with_sessions: WithSessions) -> None:
    fresh_flags: list[bool] = []

    def context(fresh: bool) -> CellContext:
        fresh_flags.append(fresh)
        return {}

    async def body(s: SessionManager) -> None:
        await settle(lambda: s.pool.ready == 2)
        pooled = s.pool.ready_workers()
        s.services = GuestServicesStub(context)
        first = await s.execute("x = 41\nx + 1", session="new")
        assert first.status == "ok" and first.value == "42", first
        assert s.worker("new") in pooled, "the first call did not run in a pooled worker"
        assert s.pool.counters.taken == 1
        assert judge(facts_of(s, "", s.settings.max_sessions, stopping=False)).ready
        assert fresh_flags == [True], "a pooled worker must get the session's context, like any fresh worker"
        await settle(lambda: s.pool.ready == 2)
        assert s.pool.counters.started == 3
        assert all(w.alive and w is not s.worker("new") for w in s.pool.ready_workers())
        second = await s.execute("x", session="new")
        assert second.value == "41" and fresh_flags == [True, False]

    with_sessions(body, warm_pool=2)


@sandboxed
@ONE_BACKEND
def test_a_taken_worker_is_replaced_after_the_call_not_during_it(with_sessions: WithSessions) -> None:
    """The replacement starts ``REFILL_DELAY_S`` later: a start forks on the event loop and takes a core, which
    slowed the very call that took the pooled worker; but taking the last one refills at once. Checked by state
    after a few turns of the event loop."""

    async def body(s: SessionManager) -> None:
        await settle(lambda: s.pool.ready == 2)
        worker = await s.pool.acquire("taken")
        try:
            for _ in range(5):  # let the loop run: an immediate refill would have begun by now
                await asyncio.sleep(0)
            assert (s.pool.ready, s.pool.starting) == (1, 0), "a replacement started while the taker still ran"
            await settle(lambda: s.pool.ready == 2)
            assert s.pool.counters.started == 3
            # Taking the last pooled ones is a burst: the pool refills at once.
            burst = [await s.pool.acquire("burst-1"), await s.pool.acquire("burst-2")]
            for _ in range(5):
                await asyncio.sleep(0)
            assert (s.pool.ready, s.pool.starting) == (0, 2), "a drained pool must refill at once"
            for taken in burst:
                await s.pool.retire(taken)
        finally:
            await s.pool.retire(worker)

    with_sessions(body, warm_pool=2)


@sandboxed
@ONE_BACKEND
def test_reset_and_a_crashed_sessions_restart_take_from_the_pool(with_sessions: WithSessions) -> None:
    async def body(s: SessionManager) -> None:
        await s.execute("x = 1", session="a")
        await settle(lambda: s.pool.ready == 2)
        pooled, taken = s.pool.ready_workers(), s.pool.counters.taken
        after_reset = await s.execute("'x' in dir()", session="a", reset=True)
        assert after_reset.value == "False" and "reset" in after_reset.notice
        assert s.worker("a") in pooled
        await settle(lambda: s.pool.ready == 2)
        pooled = s.pool.ready_workers()
        crashed = await s.execute("import os\nos._exit(3)", session="a")
        assert crashed.status == "crashed" and crashed.state_lost
        restarted = await s.execute("'restarted'", session="a")
        assert restarted.value == "'restarted'"
        assert s.worker("a") in pooled
        assert s.pool.counters.taken == taken + 2

    with_sessions(body, warm_pool=2)


def _real_sandboxes(backend_name: str) -> Callable[[], int]:
    """Count the sandboxes of this process as the host sees them, independent of the pool's own count."""
    if backend_name == "podman":
        prefix = f"mcp-codemode-{os.getpid()}-"
        return lambda: sum(1 for name in our_containers() if name.startswith(prefix))
    parents = list(cgroups.probe().parents.values())[:1]
    return lambda: sum(1 for parent in parents for group in parent.glob(f"w-{os.getpid()}-*") if _running(group))


def _running(group: Path) -> bool:
    """Whether a worker's cgroup still holds a process that is not a zombie.

    A closed worker's group can outlive it for a moment: its processes are killed, but the host's init may take
    a second to reap bwrap's zombies, and the group cannot be removed before (it is swept later). Such a group
    holds no running sandbox, so it does not count against max_sessions.
    """
    try:
        pids = (group / "cgroup.procs").read_text().split()
    except OSError:
        return False
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            return True
    return False


@sandboxed
def test_pool_plus_sessions_never_exceed_max_sessions(with_sessions: WithSessions, backend_name: str) -> None:
    count_real = _real_sandboxes(backend_name)
    real_samples: list[int] = []
    stop = threading.Event()

    def sample_host() -> None:
        while not stop.is_set():
            real_samples.append(count_real())
            stop.wait(0.01)

    async def body(s: SessionManager) -> tuple[list[int], int]:
        counted: list[int] = []

        async def sample_pool() -> None:
            while True:
                counted.append(s.pool.live)
                await asyncio.sleep(0.002)

        sampler = asyncio.create_task(sample_pool())
        await settle(lambda: s.pool.ready == 2)
        names = ["one", "two", "three"]
        results = await asyncio.gather(*(s.execute(f"'{n}'", session=n) for n in names))
        assert [r.value for r in results] == [f"'{n}'" for n in names]
        results = await asyncio.gather(*(s.execute("1", session=n, reset=True) for n in names))
        assert all(r.status == "ok" for r in results), results
        await s.expire_idle()  # nothing is idle that long: nothing may change
        taken = s.pool.counters.taken
        sampler.cancel()
        assert s.pool.live == 3 and s.pool.ready == 0, "with every slot in a session, the pool must be empty"
        return counted, taken

    watcher = threading.Thread(target=sample_host)
    watcher.start()
    try:
        counted, taken = with_sessions(body, max_sessions=3, warm_pool=2)
    finally:
        stop.set()
        watcher.join()
    assert max(counted) <= 3, f"the pool's count of workers went above max_sessions: {max(counted)}"
    assert max(real_samples) <= 3, f"more sandboxes than max_sessions existed at once: {max(real_samples)}"
    assert taken >= 2, "the two pooled workers should have gone to the first sessions"


@sandboxed
@ONE_BACKEND
def test_warm_pool_zero_starts_no_pooled_worker(with_sessions: WithSessions) -> None:
    async def body(s: SessionManager) -> None:
        result = await s.execute("'cold'", session="solo")
        assert result.value == "'cold'"
        worker = s.worker("solo")
        assert worker is not None and worker.worker_id == "solo-1"
        await asyncio.sleep(0.2)  # room for a (wrong) background start; the assertion is on counts, not time
        assert (s.pool.counters.started, s.pool.ready, s.pool.starting, s.pool.live) == (0, 0, 0, 1)

    with_sessions(body, warm_pool=0)


@sandboxed
@ONE_BACKEND
def test_a_dead_pooled_worker_is_replaced_and_never_handed_out(with_sessions: WithSessions) -> None:
    async def body(s: SessionManager) -> None:
        await settle(lambda: s.pool.ready == 2)
        dead = s.pool.ready_workers()
        for worker in dead:
            await worker.kill()
        assert not any(w.alive for w in dead)
        result = await s.execute("'alive'", session="after")
        assert result.status == "ok" and result.value == "'alive'", result
        assert result.notice == "", "a session must not see the pool's dead workers"
        assert s.worker("after") not in dead
        assert s.pool.counters.discarded == 2
        await settle(lambda: s.pool.ready == 2)
        assert all(w.alive and w not in dead for w in s.pool.ready_workers())
        assert s.pool.live == 3

    with_sessions(body, warm_pool=2)


@sandboxed
def test_closing_while_the_pool_is_still_starting_leaves_nothing(backend_name: str) -> None:
    """Closing mid-start, at different points of the starts (cgroup creation, the spawn, the wait for ready).

    Once the start got fast, closing here sometimes hung for good and left bubblewrap's inner process behind:
    cancelling asyncio's spawn waits for pipes that the half-started sandbox still holds. Each round is bounded,
    so a hang fails the test instead of stalling the suite; ``no_orphans`` checks what is left afterwards.
    """
    # Two pooled starts per round are enough to close mid-start; more only made each round's containers pile up.
    settings = sandbox_settings(runtime=backend_name, warm_pool=2)
    backend = make_backend(backend_name, settings)

    async def round_of(turns: int) -> None:
        async with SessionManager(backend, settings):
            for _ in range(turns):  # the fill has begun; close a little further into the starts each round
                await asyncio.sleep(0)

    for turns in range(8):
        asyncio.run(asyncio.wait_for(round_of(turns), CLOSE_BOUND_S))


@sandboxed
def test_closing_a_full_pool_and_sessions_leaves_nothing(with_sessions: WithSessions) -> None:
    async def body(s: SessionManager) -> None:
        await s.execute("1", session="a")
        await settle(lambda: s.pool.ready == 3)

    with_sessions(body, warm_pool=3)


@sandboxed
def test_a_backend_that_cannot_start_workers_does_not_make_the_pool_spin(
    with_sessions: WithSessions, backend_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Real failures: the container image does not exist, or the "interpreter" exits at once.
    broken: dict[str, Any] = (
        {"image": "mcp-codemode-no-such-image:latest"}
        if backend_name == "podman"
        else {"sandbox_python": Path("/bin/false")}
    )

    async def body(s: SessionManager) -> int:
        await settle(lambda: s.pool.counters.failed >= 1)
        # What /readyz says of it: no new session can be taken, because starts fail (runs/readiness.py).
        verdict = judge(facts_of(s, "", s.settings.max_sessions, stopping=False))
        assert (verdict.ready, verdict.reason) == (False, "sandbox-start-failing"), verdict
        await asyncio.sleep(2.5)  # a spinning pool would fail hundreds of times meanwhile
        failed = s.pool.counters.failed
        # Failed starts give their slots back: between retries nothing is left counted. (Sampled at one moment,
        # a slow machine caught retries in flight; a leaked slot would never reach 0.)
        await settle(lambda: s.pool.live == 0)
        return failed

    with caplog.at_level(logging.INFO, logger="mcp_codemode.runs.warm_pool"):
        failed = with_sessions(body, warm_pool=2, **broken)
    assert 1 <= failed <= 8, f"the pool retried {failed} times in a few seconds: it must back off"
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "could not start" in warnings[0].getMessage()


@sandboxed
@ONE_BACKEND
def test_a_backend_whose_channels_close_when_silent_gets_keepalives_to_every_worker(backend_name: str) -> None:
    """A remote backend's streams are cut when silent (kubernetes: keepalive_interval 60 s). Here a real local
    backend is given a short interval: pooled, idle and busy-but-quiet workers all receive the frame, and the guest
    drops it without losing a session's state or disturbing a running cell."""
    settings = sandbox_settings(runtime=backend_name, warm_pool=1)
    backend = make_backend(backend_name, settings)
    backend.keepalive_interval = 0.05

    async def main() -> tuple[Any, ...]:
        async with SessionManager(backend, settings) as s:
            await s.execute("x = 41", session="idle")
            quiet = asyncio.create_task(s.execute("import time\ntime.sleep(2)\n'slept'", session="busy"))
            await settle(lambda: s.worker("busy") is not None)  # its worker may still be starting (podman)
            idle_worker, busy_worker = s.worker("idle"), s.worker("busy")
            assert idle_worker is not None and busy_worker is not None
            await settle(lambda: s.pool.ready == 1 and all(w.keepalives_sent >= 3 for w in s.pool.ready_workers()))
            await settle(lambda: idle_worker.keepalives_sent >= 3 and busy_worker.keepalives_sent >= 3)
            slept = await quiet
            kept = await s.execute("x + 1", session="idle")
            return slept, kept, idle_worker.alive

    slept, kept, alive = asyncio.run(main())
    assert slept.status == "ok" and slept.value == "'slept'", slept
    assert kept.status == "ok" and kept.value == "42", kept
    assert alive


def test_local_backends_need_no_keepalive() -> None:
    """Pipes never close when silent: the local backends send nothing extra down them."""
    for name in ("bubblewrap", "podman"):
        assert make_backend(name, sandbox_settings(runtime=name)).keepalive_interval is None


@pytest.mark.parametrize("raw", ["-1", "65", "two", "1.5", ""])
def test_bad_warm_pool_values_are_refused_with_the_rule(raw: str) -> None:
    with pytest.raises(SettingsError, match=r"MCP_BRIDGE_WARM_POOL='.*' is not valid: expected .*0 to 64"):
        Settings.load(env={"MCP_BRIDGE_WARM_POOL": raw})


def test_warm_pool_setting_is_read_from_env_and_file(tmp_path: Path) -> None:
    assert Settings.load(env={}).warm_pool == 2
    assert Settings.load(env={"MCP_BRIDGE_WARM_POOL": " 0 "}).warm_pool == 0
    settings_file = tmp_path / "s.toml"
    settings_file.write_text("warm_pool = 5\n", encoding="utf-8")
    assert Settings.load(env={}, settings_file=settings_file).warm_pool == 5
