"""What a replica that shares sessions does when told to stop: a rollout, a node drain and a scale-down all send the
pod SIGTERM (after its preStop hook), wait ``terminationGracePeriodSeconds``, then kill it.

The rule: lose nothing more than the replica's going loses anyway, and let the others take over at once, not after
a lease. In order (``drain``, run once uvicorn has stopped accepting connections on both ports, so the pod is no
longer ready and no new client or replica reaches it):

1. **No new session here.** A call that reaches this replica on a connection it already had runs only where
   another live replica holds its session (forwarded there); otherwise it is answered ``ReplicaStopping``, which
   says to call again: the next call lands on another replica, which takes the session over. A forwarded call from
   another replica is answered 503, which it takes as "not answering" and retries until this replica gave the
   session up. So this replica never holds or takes a session once it began to stop.
2. **Running calls finish.** Each session this replica holds is handed over as soon as the call running in it (if
   any) has ended: the session is closed here (its sandbox, and so its claim, deleted), then its Lease is marked as
   given up (``SessionLeases.hand_over``), so the next call anywhere takes it over at once and tells the client that
   its state went with this replica (with ``MCP_BRIDGE_HIBERNATE`` on, the session is hibernated before its Lease is
   given up, and the taker restores it from the store the replicas share). Idle sessions go at once; busy ones when
   their call ends. Calls this replica forwards elsewhere, and calls in sessions only this replica can serve (a
   handshake-era connection's own), run to their end too. All of it is bounded by the longest a call may run
   (``MCP_BRIDGE_MAX_TIMEOUT`` and the interrupt grace) and a margin; past that the replica goes on stopping and
   what still runs is cut.
3. **Then the rest** (``SessionRouter.open``): whatever it still holds is handed over, every sandbox it owns is
   closed (so its claims are deleted by the replica that made them: it knows which are its, and no other replica
   may delete a live replica's claims), and only then its liveness Lease is deleted. Killed before that (the grace
   period ran out), its liveness Lease lapses and whoever takes one of its sessions over deletes the claims left.

Why the sandboxes are not left for the taker: claims are per worker, not per session, so a taker could only delete
all of a replica's claims, which it may do only once that replica is dead (its liveness Lease lapsed, a lease later);
until then they would hold sandboxes, quota and memory for nothing. The stopping replica ends them in milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Protocol

import mcp_types as types

from ..cluster.leases import SessionLeases
from ..cluster.naming import ClaimKey
from ..runs.bridge import Bridge
from ..session_keys import SessionKey
from ..settings import Settings
from .render import error_result

log = logging.getLogger("mcp_codemode.replicas")
MARGIN_S = 10.0  # beyond the longest call: its worker's start and the answer's way back


class InFlight:
    """How many calls of one kind are running, and a way to wait until none is."""

    def __init__(self, on_start: Callable[[], object] = lambda: None) -> None:
        """``on_start`` is called as each call starts (the metrics count the calls forwarded)."""
        self.count = 0
        self._on_start = on_start
        self._none = asyncio.Event()
        self._none.set()

    @contextlib.contextmanager
    def track(self) -> Iterator[None]:
        self._on_start()
        self.count += 1
        self._none.clear()
        try:
            yield
        finally:
            self.count -= 1
            if not self.count:
                self._none.set()

    async def idle(self) -> None:
        await self._none.wait()


class SessionRouter(Protocol):
    """What stopping needs of ``replicas.SessionRouter`` (named here by what it reads: replicas imports this)."""

    stopping: bool
    settings: Settings
    bridge: Bridge
    leases: SessionLeases
    forwarding: InFlight

    def held_sessions(self) -> list[tuple[ClaimKey, SessionKey | None]]: ...


def stopping_result() -> types.CallToolResult:
    return error_result(
        "this replica is shutting down (a rollout, a node drain or a scale-down) and takes no more calls in shared "
        "sessions; call again: the call reaches another replica, which takes the session over (its state went with "
        "this replica, and the call's answer says so)",
        "ReplicaStopping",
    )


async def drain(router: SessionRouter) -> None:
    """Steps 1 and 2 of the module docstring; returns when every call that was running has ended, or at the cap."""
    router.stopping = True
    settings = router.settings
    cap = settings.max_timeout + settings.interrupt_grace + MARGIN_S
    held = router.held_sessions()
    log.info("stopping: handing over %d session(s), letting running calls finish (at most %.0f s)", len(held), cap)
    try:
        async with asyncio.timeout(cap):
            while held:  # again for a Lease a call took just before the stop (hand_over drops each from the held)
                await asyncio.gather(*(_hand_over(router, key, session) for key, session in held))
                held = router.held_sessions()
            await router.forwarding.idle()
            await router.bridge.settle()
    except TimeoutError:
        log.warning("stopping: calls still ran after %.0f s; stopping anyway, they are cut", cap)


async def _hand_over(router: SessionRouter, key: ClaimKey, session: SessionKey | None) -> None:
    """Close the session here once its running call ended (``lose`` waits for it), then mark its Lease given up."""
    if session is not None:
        try:
            await router.bridge.lose(session, "was handed over: this replica shut down", keep=True)
        except Exception as exc:  # noqa: BLE001 - finish() closes every sandbox anyway; the claim has its backstop
            log.warning("stopping: could not close session %s: %s", key.name, exc)
    try:
        await router.leases.hand_over(key)  # drops it from the held before it asks the API, whatever happens
    except Exception as exc:  # noqa: BLE001 - the Lease lapses by itself a lease later
        log.warning("stopping: could not hand session %s over: %s", key.name, exc)


async def finish(router: SessionRouter) -> None:
    """Step 3 of the module docstring: hand over what is still held, close every sandbox of this replica (deleting
    its claims), and only then end its liveness Lease. Each step is tried whatever the one before did."""
    with contextlib.suppress(Exception):
        await router.leases.hand_over_all()
    with contextlib.suppress(Exception):
        await router.bridge.close_sessions()
    with contextlib.suppress(Exception):
        await router.leases.end_liveness()
