"""The finished calls the console lists, read back from the audit log: each call's ``run`` line with the tool
lines that carry its call id, for one owner, newest first, filtered as the person asked.

Why read the file rather than keep the calls in memory: the log outlives the bridge (a call of yesterday is still
there), and it is the record the operator already keeps. Only the tail is read (``TAIL_BYTES``): a page shows the
recent calls, and a log of many megabytes must not make every page slow. Lines that are not JSON (a torn last line
being written) are skipped. A live page asks again after every call, so what was read is kept while the file is
unchanged (its identity, size and time), and lines of other owners are passed over without being parsed.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from pathlib import Path
from typing import Any

TAIL_BYTES = 4 << 20
SHOWN = 200  # calls one page lists at most


@dataclasses.dataclass
class AuditedCall:
    """One run_python call as the audit log tells it: its run line (absent for a call of a bridge that did not
    write them) and its upstream requests' lines, in order."""

    call: str
    run: dict[str, Any] | None = None
    uses: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def time(self) -> str:
        first = self.run or (self.uses[0] if self.uses else {})
        return str(first.get("time", ""))

    @property
    def session(self) -> str:
        line = self.run or (self.uses[0] if self.uses else {})
        return str(line.get("session", ""))

    @property
    def outcome(self) -> str:
        return str(self.run.get("outcome", "")) if self.run else ""


@dataclasses.dataclass(frozen=True)
class Search:
    """What the person filters finished calls by; empty fields match everything."""

    session: str = ""
    server: str = ""
    tool: str = ""
    outcome: str = ""
    since: str = ""  # an ISO time or its prefix (2026-11-28, 2026-11-28T07): calls at or after it
    until: str = ""

    def matches(self, found: AuditedCall) -> bool:
        if self.session and self.session not in found.session:
            return False
        if self.server and not any(use.get("server") == self.server for use in found.uses):
            return False
        if self.tool and not any(use.get("tool") == self.tool for use in found.uses):
            return False
        if self.outcome and found.outcome != self.outcome:
            return False
        if self.since and found.time < self.since:
            return False
        return not (self.until and found.time[: len(self.until)] > self.until)


def _tail_lines(path: Path, limit: int) -> list[bytes]:
    try:
        with path.open("rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            start = max(size - limit, 0)
            stream.seek(start)
            data = stream.read(limit)
    except OSError:
        return []
    lines = data.split(b"\n")
    return lines[1:] if start > 0 else lines  # the first may be a line cut in half


def audited_calls(path: Path | None, owner: str, limit: int = TAIL_BYTES) -> dict[str, AuditedCall]:
    """``owner``'s calls in the tail of the audit log at ``path``, by call id, in the order they appear (shared
    with the next caller while the file is unchanged: read, never changed)."""
    if path is None:
        return {}
    try:
        status = path.stat()
    except OSError:
        return {}
    return _read(path, owner, limit, (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns))


@functools.lru_cache(maxsize=16)
def _read(path: Path, owner: str, limit: int, version: tuple[int, int, int, int]) -> dict[str, AuditedCall]:
    found: dict[str, AuditedCall] = {}
    mark = json.dumps(owner).encode()  # a line without the owner's name as a JSON string is not theirs
    for raw in _tail_lines(path, limit):
        if mark not in raw:
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(line, dict) or line.get("owner") != owner or not isinstance(line.get("call"), str):
            continue
        entry = found.setdefault(line["call"], AuditedCall(line["call"]))
        if line.get("kind") == "run":
            entry.run = line
        else:
            entry.uses.append(line)
    return found


def search(path: Path | None, owner: str, wanted: Search, shown: int = SHOWN) -> list[AuditedCall]:
    """The newest ``shown`` of ``owner``'s calls that match ``wanted``."""
    calls = [found for found in audited_calls(path, owner).values() if wanted.matches(found)]
    calls.sort(key=lambda found: found.time, reverse=True)
    return calls[:shown]
