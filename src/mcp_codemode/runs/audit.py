"""The audit log: one JSON line per tool call, resource read and prompt get that sandboxed code made, refused ones
included.

It answers "what did the agent's code do with my tools, and when" after the fact, so it records who
(session, owner), what (server, tool), how it ended and how large the traffic was, and never the
arguments or results themselves: those may hold secrets, and a log that needs protecting like a
database is a log nobody keeps. ``args_sha256`` (of the canonical compact JSON) still lets two calls be
told apart or matched against arguments someone already has.

Lines are appended with ``O_APPEND`` (whole lines per ``write``, so concurrent writers never interleave
inside a line), to a file that is 0600 in a directory made 0700. When the file would grow past
``max_bytes`` it is renamed ``.1`` (older backups shift up to ``.N``; the oldest is dropped). Opening,
appending and closing costs tens of microseconds (about 18 per write here, measured alone; more on a busy
machine), and building a line (hash, timestamp, JSON) about 9 more, so a call only queues its fields; on an
event loop the lines of one turn are built and written together on the next turn (``call_soon``): the
reply that triggered a line is sent first, and the sandbox is not kept waiting on the disk. Lines of
concurrent calls share one ``write``; ``flush`` writes what is still pending (the bridge calls it when it
closes). The file is reopened for every write, so an external rotation (logrotate) is simply followed. A
failing disk never fails a call: the first failure is logged as a warning, later ones only at debug level
until a write succeeds. What a failed write could not write is kept, in order, and written ``RETRY_SECONDS``
later (or at the next ``flush``), with the lines queued meanwhile: a bridge whose file table is full for a moment (every
descriptor its limit allows in use) or whose disk filled loses no record once it can write again, unless the
failure outlasts ``HELD_BYTES`` of lines (the oldest are kept; how many were dropped is logged).

A line written ``soon=False`` (the console's ``run`` line of each ``run_python`` call) waits up to
``LINGER`` seconds instead, for the next write of any line: calls that follow each other closely then share
one open, write and close, which would otherwise cost a call as much again as the console's own work on it.
A bridge that is killed loses at most those seconds of such lines; a clean stop loses none (``flush``), and
a page that reads the log flushes it first, so it never shows less than what ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from ..state_files import make_private_dir

log = logging.getLogger("mcp_codemode.audit")  # the name log lines have always shown
OUTCOMES = ("ok", "tool_error", "refused", "error", "timeout", "cancelled")
LINGER = 0.25  # seconds a line written with soon=False may wait for others to share its write (docs say so)
MAX_PENDING = 1024  # queued lines past which the queue is written on the next turn, whatever waited
RETRY_SECONDS = 1.0  # a write that failed is tried again this much later (a flush before then tries too)
HELD_BYTES = 8 << 20  # what a write that keeps failing may hold for later; newer lines past it are dropped
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # made once: json.dumps builds one per line


class _Call(NamedTuple):
    """A queued call: what ``record`` was given, and when; ``_encoded`` turns it into the line."""

    stamp: float  # time.time()
    session: str
    owner: str
    server: str | None
    tool: str | None
    arguments: bytes | None  # their canonical JSON
    outcome: str
    duration: float
    result_bytes: int | None
    rule: str | None
    error: str | None
    kind: str = "tool"  # "resource": ``tool`` holds the URI; "prompt": the prompt's name
    approval: str | None = None  # for a call the policy's ask_tools names: how it was (not) approved
    call: str = ""  # the run_python call's id, as its log lines and spans carry it
    trace: tuple[str, str] = ("", "")  # the trace and span ids of the use's client span, when traced


class AuditLog:
    """Appends records to one file, rotating it by size; ``path=None`` turns it into a no-op."""

    def __init__(self, path: Path | None, max_bytes: int = 10 << 20, backups: int = 5) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        self._ready = False
        self._failing = False
        self._dropped = 0  # lines lost while writes failed and HELD_BYTES was full
        self._pending: list[_Entry] = []
        self._flush_soon: asyncio.Handle | None = None
        self._flushing_soon = False  # whether ``_flush_soon`` runs on the next turn (else after LINGER)
        self._flush_loop: asyncio.AbstractEventLoop | None = None
        self.queued = 0  # lines queued so far: whoever queued the last one knows whether one came after it

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def record(
        self,
        *,
        session: str,
        owner: str,
        server: str | None,
        tool: str | None,
        arguments: bytes | None,
        outcome: str,
        duration: float,
        result_bytes: int | None = None,
        rule: str | None = None,
        error: str | None = None,
        kind: str = "tool",
        approval: str | None = None,
        call: str = "",
        trace: tuple[str, str] = ("", ""),
    ) -> None:
        """Queue one call's line; ``arguments`` is their canonical JSON (None when it could not be made).

        Only the fields are kept here: hashing, formatting the time and encoding the line happen when the
        queue is written, after the reply, because this runs between a tool's answer and the sandbox.
        """
        if self.path is None:
            return
        self._queue(_Call(time.time(), session, owner, server, tool, arguments, outcome, duration, result_bytes, rule,
                          error, kind, approval, call, trace))  # fmt: skip

    def write(self, record: dict[str, Any] | Callable[[], dict[str, Any] | bytes], *, soon: bool = True) -> None:
        """Queue one line given as a whole, or the function that makes it when the queue is written (as a call's
        fields are: what a line costs to build is then paid after the reply), as a dict or already encoded; it
        reaches the file on the event loop's next turn (``soon=False``: within ``LINGER`` seconds, with the next
        line written), or at once."""
        if self.path is None:
            return
        self._queue(record, soon)

    def _queue(self, entry: _Entry, soon: bool = True) -> None:
        self._pending.append(entry)
        self.queued += 1
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        waiting = self._flush_soon
        if self._failing and waiting is not None and self._flush_loop is loop:
            return  # writes fail: the retry writes this line too, and no turn pays for a write that fails
        soon = soon or len(self._pending) >= MAX_PENDING
        if waiting is not None and self._flush_loop is loop and (self._flushing_soon or not soon):
            return  # a write already comes, as soon as this line needs it
        if waiting is not None:
            waiting.cancel()  # a later one, or one left behind by a closed loop
        self._flush_soon = loop.call_soon(self.flush) if soon else loop.call_later(LINGER, self.flush)
        self._flushing_soon, self._flush_loop = soon, loop

    def flush(self) -> None:
        """Write every queued line, in as few writes as the size bound allows; a no-op when nothing waits."""
        if self._flush_soon is not None:
            self._flush_soon.cancel()
            self._flush_soon = None
        if self.path is None or not self._pending:
            return
        lines, self._pending = [_encoded(entry) for entry in self._pending], []
        while lines:  # in chunks no larger than max_bytes (one line at least), so rotation keeps its bound
            size, count = len(lines[0]), 1
            while count < len(lines) and size + len(lines[count]) <= self.max_bytes:
                size += len(lines[count])
                count += 1
            if not self._write_chunk(self.path, b"".join(lines[:count])):
                self._hold(lines)
                return
            lines = lines[count:]

    def _hold(self, lines: list[bytes]) -> None:
        """Keep the lines a write failed to write ahead of those queued since, within ``HELD_BYTES``, and try
        again after ``RETRY_SECONDS`` (lines queued meanwhile wait for that try: ``_queue``)."""
        held: list[_Entry] = []
        size = 0
        for line in [*lines, *(_encoded(entry) for entry in self._pending)]:
            size += len(line)
            if size > HELD_BYTES:
                self._dropped += 1
            else:
                held.append(line)
        self._pending = held
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a closing bridge's last flush): what is held is lost with the process
        self._flush_soon = loop.call_later(RETRY_SECONDS, self.flush)
        self._flushing_soon, self._flush_loop = False, loop

    def _write_chunk(self, path: Path, data: bytes) -> bool:
        try:
            self._append(path, data)
        except OSError as exc:
            if not self._failing:
                log.warning("audit log: cannot write to %s (%s); its lines are kept and written once it works",
                            self.path, exc)  # fmt: skip
            else:
                log.debug("audit log: cannot write to %s: %s", self.path, exc)
            self._failing = True
            return False
        if self._failing:
            lost = f" ({self._dropped} lines that did not fit in the meantime were dropped)" if self._dropped else ""
            log.warning("audit log: writing to %s works again%s", self.path, lost)
            self._dropped = 0
        self._failing = False
        return True

    def _append(self, path: Path, data: bytes) -> None:
        if not self._ready:
            make_private_dir(path.parent)  # one that exists is left as it is (it may be a shared /var/log)
            self._ready = True
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        descriptor = os.open(path, flags, 0o600)
        try:
            status = os.fstat(descriptor)
            if status.st_size > 0 and status.st_size + len(data) > self.max_bytes:
                os.close(descriptor)
                descriptor = -1
                self._rotate(path)
                descriptor = os.open(path, flags, 0o600)
                status = os.fstat(descriptor)
            if status.st_mode & 0o077:
                os.fchmod(descriptor, 0o600)
            os.write(descriptor, data)
        finally:
            if descriptor >= 0:
                os.close(descriptor)

    def _rotate(self, path: Path) -> None:
        """``audit.jsonl`` becomes ``.1``, ``.1`` becomes ``.2``, …; beyond ``backups`` files are dropped."""
        if self.backups == 0:
            path.unlink(missing_ok=True)
            return
        path.with_name(f"{path.name}.{self.backups}").unlink(missing_ok=True)
        for number in range(self.backups - 1, 0, -1):
            with contextlib.suppress(FileNotFoundError):
                os.replace(path.with_name(f"{path.name}.{number}"), path.with_name(f"{path.name}.{number + 1}"))
        os.replace(path, path.with_name(f"{path.name}.1"))


_Entry = dict[str, Any] | _Call | Callable[[], dict[str, Any] | bytes] | bytes


def stamp(when: float) -> str:
    """``when`` (``time.time()``) as a line's ``time``: what ``datetime``'s ``isoformat`` with milliseconds makes
    of it, in UTC, at a fraction of the cost (the lines of a busy bridge are stamped by the thousand)."""
    second, millisecond = divmod(int(when * 1000), 1000)
    return f"{_second(second)}.{millisecond:03d}+00:00"


@functools.lru_cache(maxsize=4)
def _second(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))


def _encoded(entry: _Entry) -> bytes:
    """One queued entry as its line: a record's fields in their documented order, or a whole line as given."""
    if isinstance(entry, bytes):  # a line a failed write kept
        return entry
    if isinstance(entry, dict):
        line = entry
    elif callable(entry):
        made = entry()
        if isinstance(made, bytes):
            return made
        line = made
    else:
        arguments = entry.arguments
        line = {"time": stamp(entry.stamp)}
        if entry.call:  # the run_python call's id: its log lines and spans carry it too
            line["call"] = entry.call
        line |= {"session": entry.session, "owner": entry.owner, "server": entry.server}
        if entry.kind == "tool":
            line["tool"] = entry.tool
        elif entry.kind in ("elicitation", "sampling"):  # a server's request of the client, during this tool call
            line["kind"] = entry.kind
            line["tool"] = entry.tool
        else:  # a resource read or a prompt get: its kind, then what it named where a tool line names the tool
            line["kind"] = entry.kind
            line["uri" if entry.kind == "resource" else "prompt"] = entry.tool
        line |= {
            "args_sha256": hashlib.sha256(arguments).hexdigest() if arguments is not None else None,
            "args_bytes": len(arguments) if arguments is not None else None,
            "outcome": entry.outcome,
        }
        if entry.rule is not None:
            line["rule"] = entry.rule
        if entry.error is not None:
            line["error"] = entry.error
        if entry.approval is not None:
            line["approval"] = entry.approval
        line["duration_ms"] = round(entry.duration * 1000, 1)
        line["result_bytes"] = entry.result_bytes
        if entry.trace[0]:
            line["trace_id"], line["span_id"] = entry.trace
    return (_JSON.encode(line) + "\n").encode("utf-8", "replace")
