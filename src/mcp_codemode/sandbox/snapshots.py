"""Taking a session's snapshot out of its worker and putting one into a new worker: the host's half of the exchange.

The guest builds and applies snapshots (``guest/worker_snapshot.py``); here the bytes are only moved, in chunks
small enough for a frame, over the worker's file requests (FILES frames with ``SNAPSHOT_OPS``). What the guest
answers is hostile like every frame: sizes are checked against the bound before and while the bytes arrive, the
counts must be small whole numbers of known names, and what it says was lost is a bounded list of cut strings. The
bytes themselves are never looked into here (``runs/snapshot_store.py`` says why).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from typing import Any

from ..errors import CodemodeError
from ..guest.protocol import FILE_CHUNK
from .worker import Worker

MAX_LOST = 51  # the guest's 50 names and a count of the rest
_COUNTS = ("definitions", "imports", "variables", "files")


class SnapshotError(CodemodeError):
    """The worker's snapshot could not be taken or put; the message says why (for a notice)."""


@dataclasses.dataclass(frozen=True)
class GuestReport:
    """What the guest said of a snapshot it built or applied: its counts and what it could not keep."""

    counts: tuple[tuple[str, int], ...]
    lost: tuple[str, ...]
    guest_ms: float = 0.0  # how long the guest took to build or apply it, as it says (for logs and benchmarks)
    guest_cpu_ms: float = 0.0


async def take(worker: Worker, limit: int, timeout: float) -> tuple[bytes, GuestReport] | None:
    """The worker's session as bytes (at most ``limit``) with the guest's report; None when the session's code
    turned hibernation off (``runtime.hibernation(False)``). ``SnapshotError`` when it fails."""
    value = await _ask(worker, {"op": "snapshot", "limit": limit}, timeout)
    if value.get("declined") is True:
        return None
    size = value.get("size")
    if type(size) is not int or not 0 < size <= limit:
        raise SnapshotError(f"the sandbox's snapshot is {size!r} bytes, over the bound of {limit:,}")
    report = checked_report(value)
    data = bytearray()
    while len(data) < size:
        chunk = _decoded((await _ask(worker, {"op": "snapshot_read", "offset": len(data)}, timeout)).get("data"))
        if not chunk or len(data) + len(chunk) > size:
            raise SnapshotError("the sandbox sent a snapshot of another size than it announced")
        data += chunk
    return bytes(data), report


async def put(worker: Worker, blob: bytes, timeout: float) -> GuestReport:
    """Restore ``blob`` into a new worker's session; the guest's report of what came back."""
    for offset in range(0, len(blob), FILE_CHUNK):
        data = base64.b64encode(blob[offset : offset + FILE_CHUNK]).decode("ascii")
        await _ask(worker, {"op": "restore_put", "offset": offset, "data": data}, timeout)
    return checked_report(await _ask(worker, {"op": "restore"}, timeout))


def checked_report(value: dict[str, Any]) -> GuestReport:
    """The counts and the lost names of a guest's answer, or ``SnapshotError`` when they are not what it sends."""
    counts, lost = value.get("counts"), value.get("lost")
    if not isinstance(counts, dict) or not all(
        name in _COUNTS and type(number) is int and 0 <= number < 10**8 for name, number in counts.items()
    ):
        raise SnapshotError("the sandbox's answer about the snapshot was malformed")
    if not isinstance(lost, list) or len(lost) > MAX_LOST or not all(isinstance(item, str) for item in lost):
        raise SnapshotError("the sandbox's list of what it could not keep was malformed")
    cleaned = tuple("".join(c if c.isprintable() else " " for c in item[:240]) for item in lost)
    return GuestReport(tuple(sorted(counts.items())), cleaned, _milliseconds(value.get("ms")),
                       _milliseconds(value.get("cpu_ms")))  # fmt: skip


def _milliseconds(value: object) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1e9:
        return float(value)
    return 0.0


async def _ask(worker: Worker, request: dict[str, Any], timeout: float) -> dict[str, Any]:
    try:
        return await worker.files({**request, "path": ""}, timeout)
    except CodemodeError as exc:  # FileRequestError: refused, died, or no answer in time
        raise SnapshotError(str(exc)) from None


def _decoded(data: object) -> bytes:
    if not isinstance(data, str) or len(data) > FILE_CHUNK * 4 // 3 + 8:
        raise SnapshotError("the sandbox sent a snapshot chunk that is not base64 of at most one chunk")
    try:
        return binascii.a2b_base64(data, strict_mode=True)  # as strict as b64decode(validate=True), in C
    except (binascii.Error, ValueError):
        raise SnapshotError("the sandbox sent a snapshot chunk that is not base64") from None
