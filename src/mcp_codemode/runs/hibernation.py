"""Sessions that hibernate: written to disk instead of dropped, and brought back by their next call.

The session manager calls this where it used to throw a session away: when it idles out, when the session cap
closes it for another, when the bridge (or a replica handing its sessions over) stops. The worker's guest builds the
snapshot (``sandbox/snapshots.py`` moves it), the store seals it (``snapshot_store.py``), and the sandbox is closed.
A later call to that session finds the snapshot before its code runs, hands it to the session's new sandbox, and
says in its notice what came back and what could not (an open file, a generator, a function whose source is not
kept). A snapshot the store refuses (planted, edited, truncated, too large, too old, another session's) is deleted
and the call starts fresh, saying why. Nothing here reads the snapshot's bytes: only the new sandbox does.

Replicas that share the store's directory (``MCP_BRIDGE_HIBERNATE_DIR`` on a shared volume) share the sessions it
holds: a replica that stops hibernates its sessions before it hands their Leases over, and the replica that takes a
session over restores it, so a rollout no longer loses state.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Literal

from ..sandbox.snapshots import GuestReport, SnapshotError, put, take
from ..sandbox.worker import Worker
from ..settings import Settings
from .snapshot_store import Manifest, Refused, SnapshotStore

log = logging.getLogger("mcp_codemode.hibernation")
EXCHANGE_TIMEOUT = 30.0  # seconds for one step of the exchange with a guest (pickling a large namespace, say)
SWEEP_EVERY = 300.0
Outcome = Literal["restored", "none", "refused", "failed"]


class Hibernation:
    """The session manager's way to hibernate and restore sessions; per-session state lives on disk only."""

    def __init__(self, settings: Settings) -> None:
        self.store = SnapshotStore(settings.snapshot_dir, settings.hibernate_max_bytes, settings.hibernate_max_age,
                                   settings.hibernate_max_count)  # fmt: skip
        self._swept = 0.0

    @classmethod
    def of(cls, settings: Settings) -> Hibernation | None:
        return cls(settings) if settings.hibernate else None

    def has(self, session: str) -> bool:
        return self.store.has(session)

    def size(self, session: str) -> int | None:
        """The bytes ``session``'s snapshot takes on disk; None without one."""
        try:
            return os.path.getsize(self.store.file(session))
        except OSError:
            return None

    def drop(self, session: str) -> None:
        """Forget a session's snapshot (``reset``, a session that opted out, a connection that ended)."""
        self.store.drop(session)

    async def hibernate(self, session: str, worker: Worker, why: str) -> bool:
        """Write ``session`` (whose sandbox is ``worker``, idle) to disk; True when it was kept. Its code may have
        opted out, or the guest may fail: then the session is dropped as before, and any old snapshot with it."""
        if not worker.alive:
            return False
        began = time.perf_counter()
        try:
            taken = await take(worker, self.store.max_bytes, EXCHANGE_TIMEOUT)
            if taken is None:
                self.store.drop(session)
                return False
            blob, report = taken
            manifest = Manifest(session, len(blob), _sha256(blob), time.time(), why, report.lost, report.counts)
            await asyncio.to_thread(self.store.save, manifest, blob)
        except (SnapshotError, OSError, ValueError) as exc:
            log.warning("could not hibernate a session (%s); it is dropped", exc)
            self.store.drop(session)
            return False
        log.info("hibernated a session: %d bytes in %.0f ms (the sandbox's part %.0f ms, %.0f ms of CPU)", len(blob),
                 (time.perf_counter() - began) * 1000, report.guest_ms, report.guest_cpu_ms)  # fmt: skip
        return True

    async def restore(self, session: str, worker: Worker) -> tuple[Outcome, str]:
        """Bring ``session``'s snapshot into its new sandbox ``worker``: how it went, and the notice that says so.
        A worker whose restore ``failed`` half way must not be used: the caller starts another."""
        try:
            found = await asyncio.to_thread(self.store.take, session)
        except Refused as exc:
            log.warning("refused a hibernated session's snapshot: %s", exc)
            return "refused", (f"A snapshot of this session was found but refused ({exc}); this call starts it fresh "
                           "with an empty namespace.")  # fmt: skip
        if found is None:
            return "none", ""
        manifest, blob = found
        try:
            report = await put(worker, blob, EXCHANGE_TIMEOUT)
        except SnapshotError as exc:
            return "failed", (f"This session was hibernated ({manifest.why}), but its snapshot could not be restored "
                           f"({exc}); this call starts it fresh with an empty namespace.")  # fmt: skip
        log.info("restored a session: %d bytes; the sandbox's part %.0f ms (%.0f ms of CPU)", len(blob),
                 report.guest_ms, report.guest_cpu_ms)  # fmt: skip
        return "restored", restored_notice(manifest, report)

    def sweep_due(self) -> bool:
        now = time.monotonic()
        if now - self._swept < SWEEP_EVERY:
            return False
        self._swept = now
        return True

    async def sweep(self) -> int:
        return await asyncio.to_thread(self.store.sweep)


def restored_notice(manifest: Manifest, report: GuestReport) -> str:
    """What the model reads first: that the session came back from disk, what it holds, and what did not come back."""
    counts = dict(report.counts)
    held = ", ".join(
        f"{counts.get(name, 0)} {name}" for name in ("definitions", "imports", "variables", "files") if name in counts
    )
    text = f"This session was hibernated ({manifest.why}) and restored in a new sandbox: {held} came back."
    lost = [*manifest.lost, *report.lost]
    if lost:
        text += " Not kept: " + "; ".join(lost[:60]) + "."
    return text


def _sha256(blob: bytes) -> str:
    import hashlib

    return hashlib.sha256(blob).hexdigest()
