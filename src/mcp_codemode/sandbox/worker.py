"""Host side of one warm worker: start it, run cells, interrupt, time out, notice death.

Everything the guest sends is treated as hostile: frames are bounded and validated, output is capped
again here (the guest's own cap is a courtesy, not a guarantee), and a protocol violation ends the
worker. The guest cannot make the host wait longer than the call's timeout plus the interrupt grace.

What stays here is the process handle, its frame loop and the running cell: the launch, the frames written to
the guest (and the kill of a guest that stops reading them, since every frame written counts), the violation
that ends the worker and why it died. The frame loop hands each frame on to the part whose job it is, and those
parts are modules of their own because each has its own limits and its own hostile case and needs of the worker
only what it is handed: the guest's calls to the bridge go to ``calls.py`` (admission, the relay to the cell's
request handler, the reply backlog; given the channel, the writer and whether the worker lives, when it starts),
the client's file requests and their answers to ``file_requests.py`` (given the writer, the death, the ids), and
the cell's result frame to ``results.py``, which checks it into an ``ExecutionResult``; ``output.py`` bounds one
output stream.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import dataclasses
import itertools
import logging
import signal
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, cast

import anyio

from ..errors import SandboxStartError
from ..guest.protocol import (
    CALL,
    EXECUTE,
    FILE_REPLY,
    INTERRUPT,
    KEEPALIVE,
    MAX_FRAME_BYTES,
    OUTPUT,
    PROTOCOL_VERSION,
    READY,
    RESULT,
    SHUTDOWN,
)
from ..settings import Settings
from .base import HOST_LIMITS, Backend, Launch, launch_failure
from .calls import MAX_REPLY_BYTES, REPLY_BACKLOG_BYTES, CallRelay, CellCalls
from .file_requests import FileRequestError, FileRequests, answer_value
from .frames import FrameError, decode_frame, encode_frame, read_payload
from .output import BoundedStream
from .results import ExecutionResult, cell_result, lost_result

if TYPE_CHECKING:
    from ..guest.protocol import CellContext, ExecuteFrame, GuestFrame, ResultFrame
    from ..reply_encoding import GuestRequestHandler

log = logging.getLogger(__name__)

OutputCallback = Callable[[str, str], None]
# Bytes written to the guest and not yet read by it past which it is killed: relayed replies wait below
# REPLY_BACKLOG_BYTES (calls.py), but a guest that stops reading and keeps sending calls that are refused at once
# (whose short answers cannot wait) would make the bridge buffer one refusal per frame without end.
_UNREAD_KILL_BYTES = REPLY_BACKLOG_BYTES + MAX_REPLY_BYTES + 16 * 1024 * 1024
_MAX_REQUEST_ID = 1 << 53  # the largest integer every JSON implementation reads exactly
_STDERR_KEEP = 8192
_GRACEFUL_EXIT_SECONDS = 1.0
# What the guest keeps from one cell to the next (guest/mcp/runtime.py _configure), so it is sent only on change.
_STICKY_CONTEXT: Final[tuple[Literal["servers", "versions", "policy"], ...]] = ("servers", "versions", "policy")
_UNSENT = object()
_GUEST_TEXT_LIMITS = 3 * 200_000  # value, message and traceback, each clipped by the guest (TEXT_LIMIT)


@dataclasses.dataclass
class _Cell:
    id: int
    done: asyncio.Future[ResultFrame]
    streams: dict[str, BoundedStream]
    on_output: OutputCallback | None
    calls: CellCalls


class Worker:
    """One sandboxed interpreter. Not safe for concurrent ``execute`` calls: sessions serialise them."""

    _ids = itertools.count(1)

    def __init__(self, backend: Backend, settings: Settings, worker_id: str) -> None:
        self.backend = backend
        self.settings = settings
        self.worker_id = worker_id
        self._launch: Launch | None = None
        self._ready = asyncio.Event()
        self._dead = asyncio.Event()
        self._cell: _Cell | None = None
        self._violation: str | None = None
        self._stderr_tail: collections.deque[bytes] = collections.deque()
        self._tasks: list[asyncio.Task[None]] = []
        self._calls: CallRelay | None = None  # made with the launch, before the first frame is read
        self.python_version = ""
        self.started_at = 0.0
        self.keepalives_sent = 0
        self._files = FileRequests(self._send, self._dead, self._ids)
        self._guest_summary: str | None = None  # what the guest was last sent, not sent again while unchanged
        self._guest_context: CellContext = {}
        # JSON may escape a character into 6 bytes; the guest bounds output, values and tracebacks in characters.
        text_bytes = 6 * (settings.capture_limit + _GUEST_TEXT_LIMITS) + 65536
        image_bytes = settings.max_images * (settings.image_limit * 4 // 3 + 256)
        self._max_frame = max(MAX_FRAME_BYTES, text_bytes + image_bytes)

    def _context_changes(self, context: CellContext) -> CellContext:
        """What of ``context`` this worker's guest does not hold yet; it keeps the rest from earlier cells.

        The servers, their catalog versions and the policy went with every cell, encoded here and decoded
        there each time, although they change only when the user's configuration does. Saved tools are sent
        whenever given (only a fresh sandbox is given them). New servers go with their versions, because the
        guest reads a server list without versions as "no version known".
        """
        sent = self._guest_context
        changes = cast("CellContext", {key: value for key, value in context.items() if sent.get(key, _UNSENT) != value})
        if "servers" in changes and "versions" in context:
            changes["versions"] = context["versions"]
        for key in _STICKY_CONTEXT:
            if key in changes:  # a copy: the caller may change its own objects in place later
                self._guest_context[key] = copy.deepcopy(changes[key])
        return changes

    @property
    def alive(self) -> bool:
        return self._launch is not None and not self._dead.is_set()

    async def start(self) -> None:
        self.started_at = time.monotonic()
        config = {
            "capture_limit": self.settings.capture_limit,
            "image_limit": self.settings.image_limit,
            "max_images": self.settings.max_images,
            "nice": self.settings.sandbox_nice,
            "batch": self.settings.sandbox_batch,
        }
        launch = await self._launch_uncancelled(config)
        self._launch = launch
        self._calls = CallRelay(self.worker_id, launch.channel, self._write, lambda: self.alive)
        self._tasks = [asyncio.create_task(self._pump()), asyncio.create_task(self._drain_stderr())]
        ready = asyncio.create_task(self._ready.wait())
        dead = asyncio.create_task(self._dead.wait())
        try:
            await asyncio.wait({ready, dead}, timeout=self.settings.startup_timeout, return_when="FIRST_COMPLETED")
        finally:
            ready.cancel()
            dead.cancel()
        if not self._ready.is_set():
            await self.close()
            if not self._dead.is_set():
                raise SandboxStartError(
                    f"the {self.backend.name} worker did not start within {self.settings.startup_timeout:g} s "
                    f"(raise MCP_BRIDGE_STARTUP_TIMEOUT if the machine is slow){self._stderr_hint()}"
                )
            if self._violation:
                raise SandboxStartError(f"the {self.backend.name} worker was refused: {self._violation}")
            raise SandboxStartError(f"the {self.backend.name} worker exited while starting{self._stderr_hint()}")

    async def _launch_uncancelled(self, config: dict[str, Any]) -> Launch:
        """The backend's launch, run to its end even when this start is cancelled, then torn down before re-raising.

        A launch cancelled half way left sandboxes behind and could hang. Cancelling asyncio's process spawn
        while it connects the pipes makes it kill the launcher and wait for every pipe to close (Python 3.11),
        but bubblewrap's inner process had already forked, may survive its parent (the die-with-parent signal
        is set after the fork), and holds the pipes: only our cgroup cleanup would kill it, and that ran after
        the spawn returned, which it never did. A cancelled ``cgroups.create`` likewise left groups behind.
        Both were found by closing a pool mid-start in a loop (the sandbox start had got fast enough to hit it).
        """
        launching = asyncio.ensure_future(self.backend.launch(self.worker_id, config))
        try:
            return await asyncio.shield(launching)
        except OSError as exc:  # the host refused a pipe or a process: say which and what to change
            if exc.errno not in HOST_LIMITS:
                raise
            raise SandboxStartError(launch_failure(self.backend.name, exc)) from exc
        except asyncio.CancelledError:
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                launched = await launching
                await launched.cleanup()
            raise

    def _stderr_hint(self) -> str:
        text = b"".join(self._stderr_tail).decode(errors="replace").strip()
        return f": {text}" if text else ""

    async def _pump(self) -> None:
        assert self._launch is not None
        reader = self._launch.channel.stdout
        try:
            while True:
                payload = await read_payload(reader, self._max_frame)
                if payload is None:
                    break
                # Typed by its ``type`` as a well-behaved guest sends it; every other field is checked before use.
                self._dispatch(cast("GuestFrame", decode_frame(payload)), len(payload))
        except FrameError as exc:
            # The first violation is the cause: a worker killed for another one ends its output mid-frame.
            self._violation = self._violation or str(exc)
            log.warning("worker %s broke the protocol: %s", self.worker_id, exc)
            await self._launch.kill()
        except Exception as exc:
            # A frame our checks let through and our own code then choked on: a bug of ours, but the worker
            # that sent it is still the one that cannot be trusted, and the bridge must keep serving the rest.
            self._violation = self._violation or f"the bridge could not handle a frame it sent ({type(exc).__name__})"
            log.exception("worker %s sent a frame the bridge could not handle", self.worker_id)
            await self._launch.kill()
        finally:
            self._dead.set()

    def _dispatch(self, message: GuestFrame, size: int = 0) -> None:
        """Act on one checked frame (``size``: its payload bytes). Unknown types and stray frames are ignored."""
        cell = self._cell
        if message["type"] == READY and not self._ready.is_set():
            protocol = message.get("protocol")
            if type(protocol) is not int or protocol != PROTOCOL_VERSION:
                self._end_for_violation(_protocol_mismatch(protocol))
                return
            version = message.get("python")
            self.python_version = version[:32] if isinstance(version, str) else ""
            self._ready.set()
        elif message["type"] == OUTPUT and cell is not None:
            stream, data = message.get("stream"), message.get("data")
            if isinstance(stream, str) and stream in cell.streams and isinstance(data, str):
                kept = cell.streams[stream].add(data)
                if kept and cell.on_output is not None:
                    cell.on_output(stream, kept)
        elif (
            message["type"] == RESULT and cell is not None and _request_id(message) == cell.id and not cell.done.done()
        ):
            cell.done.set_result(message)
        elif message["type"] == CALL:
            request_id = _request_id(message)
            if request_id is not None and self._calls is not None:  # no id: nothing to answer (never sent)
                self._calls.accept(cell.calls if cell is not None else None, request_id, message, size)
        elif message["type"] == FILE_REPLY:
            self._files.answered(_request_id(message), message)

    async def _drain_stderr(self) -> None:
        """The worker's own stderr carries only bwrap/runtime errors and fatal crashes; keep its tail."""
        assert self._launch is not None
        size = 0
        while chunk := await self._launch.channel.stderr.read(4096):
            self._stderr_tail.append(chunk)
            size += len(chunk)
            while size > _STDERR_KEEP and len(self._stderr_tail) > 1:
                size -= len(self._stderr_tail.popleft())

    def _send(self, message: Mapping[str, Any]) -> None:
        self._write(encode_frame(message))

    def _write(self, frame: bytes) -> None:
        assert self._launch is not None
        channel = self._launch.channel
        with contextlib.suppress(ConnectionError, RuntimeError):
            channel.write(frame)
        if channel.unsent() > _UNREAD_KILL_BYTES and self._violation is None:
            self._end_for_violation(
                f"it stopped reading the bridge's answers ({_UNREAD_KILL_BYTES >> 20} MiB unread) while sending more "
                "calls"
            )

    def _end_for_violation(self, reason: str) -> None:
        """Kill the worker for breaking the protocol, from code that cannot await; the first reason is kept."""
        assert self._launch is not None
        if self._violation is not None:
            return
        self._violation = reason
        log.warning("worker %s broke the protocol: %s", self.worker_id, reason)
        self._tasks.append(asyncio.ensure_future(self._launch.kill()))

    def interrupt(self) -> None:
        """Ask the running cell to stop (KeyboardInterrupt in the guest); the namespace survives."""
        if self._cell is not None and self.alive:
            self._send({"type": INTERRUPT, "id": self._cell.id})

    def keepalive(self) -> None:
        """Send the guest a frame it drops, so a stream that closes when idle (a kubelet's exec stream, after its
        streamingConnectionIdleTimeout) sees traffic. The owner of remote workers calls it for those idle long;
        it is a method here, not a timer in the channel, because only frames may go down the guest's stdin and
        the frames are this module's to write."""
        if self.alive:
            self._send({"type": KEEPALIVE})
            self.keepalives_sent += 1

    async def files(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Ask the guest one file request (``op``, ``path``, ...: a FILES frame's fields) and return its answer's
        ``value``, unchecked (the caller checks each field). Works while a cell runs; the guest answers on its
        control thread. Raises ``FileRequestError`` when the guest refuses, dies or does not answer in ``timeout``."""
        if not self.alive:
            raise FileRequestError(f"the session's sandbox is not running ({self.death_reason()})")
        answer = await self._files.ask(request, timeout)
        if answer is None:
            if not self.alive:
                raise FileRequestError(f"the session's sandbox stopped ({self.death_reason()})")
            raise FileRequestError(f"the sandbox did not answer within {timeout:g} s")
        return answer_value(answer)

    async def execute(
        self,
        code: str,
        timeout: float,
        on_output: OutputCallback | None = None,
        summary: str | None = None,
        *,
        context: CellContext | None = None,
        relay: GuestRequestHandler | None = None,
    ) -> ExecutionResult:
        """Run one cell. ``context`` goes to the guest with it (servers, saved tools); ``relay`` answers its calls."""
        if not self.alive:
            return ExecutionResult("crashed", state_lost=True, notice="The sandbox worker is not running.")
        loop = asyncio.get_running_loop()
        limit = self.settings.capture_limit
        streams = {"stdout": BoundedStream(limit), "stderr": BoundedStream(limit)}
        cell = _Cell(next(self._ids), loop.create_future(), streams, on_output, CellCalls(relay))
        self._cell = cell
        started = time.monotonic()
        try:
            request: ExecuteFrame = {"type": EXECUTE, "id": cell.id, "code": code}
            if summary is not None and summary != self._guest_summary:
                request["summary"] = self._guest_summary = summary
            changes = self._context_changes(context or {})
            if changes:
                request["context"] = changes
            self._send(request)
            if await self._wait(cell, timeout):
                return self._finish(cell, started)
            if not self.alive:
                return await self._died(cell, started)
            self.interrupt()
            if await self._wait(cell, self.settings.interrupt_grace):
                return self._finish(cell, started, timed_out=timeout)
            if not self.alive:
                return await self._died(cell, started)
            await self.kill()
            return lost_result(
                cell.streams, started, "timeout", f"Timed out after {timeout:g} s and did not stop within "
                f"{self.settings.interrupt_grace:g} s of an interrupt, so the sandbox was killed: the session's "
                "state (variables, imports, functions) was lost and the next call starts fresh.",
            )  # fmt: skip
        except asyncio.CancelledError:
            # Shielded against both asyncio and anyio cancellation (an MCP client's cancel arrives as the
            # latter, which re-cancels at every await): the cell must be stopped before the session is reused.
            with anyio.CancelScope(shield=True):
                await asyncio.shield(self._abort(cell))
            raise
        finally:
            self._cell = None
            cell.calls.close()

    async def _abort(self, cell: _Cell) -> None:
        """The caller gave up (client cancelled): interrupt, and kill if the code ignores it."""
        self.interrupt()
        if not await self._wait(cell, self.settings.interrupt_grace):
            await self.kill()

    async def _wait(self, cell: _Cell, timeout: float) -> bool:
        """True when the cell's result arrived; False on timeout or worker death."""
        dead: asyncio.Future[Any] = asyncio.ensure_future(self._dead.wait())
        waiting: set[asyncio.Future[Any]] = {cell.done, dead}
        try:
            await asyncio.wait(waiting, timeout=timeout, return_when="FIRST_COMPLETED")
        finally:
            dead.cancel()
        return cell.done.done()

    def _finish(self, cell: _Cell, started: float, timed_out: float | None = None) -> ExecutionResult:
        return cell_result(cell.done.result(), cell.streams, self.settings, started, timed_out)

    async def _died(self, cell: _Cell, started: float) -> ExecutionResult:
        # The output channel closes a moment before the exit status (and the OOM verdict) is known.
        if self._launch is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._launch.channel.wait(), _GRACEFUL_EXIT_SECONDS)
        return lost_result(
            cell.streams, started, "crashed", f"The sandbox worker died ({self.death_reason()}). The session's state "
            "was lost; the next call starts a fresh one.",
        )  # fmt: skip

    def death_reason(self) -> str:
        if self._launch is None:
            return "never started"
        if self._violation:
            return f"killed for breaking the frame protocol: {self._violation}"
        cause = self._launch.death_cause()
        if cause:
            return cause
        code = self._launch.channel.returncode
        if code is None:
            return "its output channel closed"
        if code < 0:
            return f"killed by {signal.Signals(-code).name}" if -code in signal.valid_signals() else f"signal {-code}"
        if code > 128 and code - 128 in signal.valid_signals():
            return f"killed by {signal.Signals(code - 128).name} (exit status {code})"
        return f"exit status {code}"

    def memory(self) -> int | None:
        """The bytes the sandbox uses now, as its backend reads them (blocking: a file or two of /sys or /proc)."""
        return self._launch.memory() if self._launch is not None and self.alive else None

    async def kill(self) -> None:
        if self._launch is None:
            return
        await self._launch.kill()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._dead.wait(), 5)

    async def close(self) -> None:
        """Stop the worker and everything it started; safe to call twice."""
        if self._launch is None:
            return
        if self.alive:
            # Let the worker leave on its own first: the sandbox then unwinds in order and leaves no zombies.
            self._send({"type": SHUTDOWN})
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._launch.channel.wait(), _GRACEFUL_EXIT_SECONDS)
        await self._launch.cleanup()
        self._dead.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _protocol_mismatch(version: object) -> str:
    """Why a guest's ready frame is refused, and what brings the two sides to one release."""
    said = f"version {version}" if type(version) is int else "no protocol version"
    return (
        f"its guest speaks {said} of the host-guest protocol and this bridge speaks version {PROTOCOL_VERSION}: "
        "the sandbox runs a guest of another mcp-codemode release. Rebuild the sandbox image with this release "
        "(`mcp-codemode image build`; on kubernetes, the image the SandboxTemplate names) or run the matching bridge"
    )


def _request_id(message: GuestFrame) -> int | None:
    """A frame's id when it is one the host could have issued or would answer: a positive JSON integer, not a
    bool or a float (``True == 1`` and ``1.0 == 1`` in Python), below 2**53."""
    value = message.get("id")
    return value if type(value) is int and 0 < value < _MAX_REQUEST_ID else None
