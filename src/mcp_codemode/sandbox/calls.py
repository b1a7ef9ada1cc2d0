"""The running cell's calls to the bridge: admitted, relayed to the cell's request handler, answered, bounded.

Sandboxed code reaches MCP servers by sending ``call`` frames while a cell runs. The worker (``worker.py``) reads
and checks each frame and hands a call to ``CallRelay.accept``; from there on the call is this module's, a job
with its own limits and its own hostile case, a guest that floods the bridge with calls or stops reading answers:

- *Admission.* A call outside a running cell, past ``MAX_CALLS_IN_FLIGHT`` of its cell, or whose request frame
  would take the cell's calls past ``MAX_CALL_BYTES_IN_FLIGHT`` is refused at once with an error reply.
- *Relaying.* At most ``CONCURRENT_CALLS`` of a cell wait on its handler at once; the rest queue. A bug of ours in
  the handler reaches the code as an error reply, never as a hang.
- *The reply backlog.* A relayed reply waits its turn while the guest has more than ``REPLY_BACKLOG_BYTES``
  unread, so a guest that stops reading holds its relay slots, not the bridge's memory. A reply JSON cannot carry,
  or larger than ``MAX_REPLY_BYTES``, becomes an error reply that says so.

What this needs of the worker is handed in when the worker starts: its channel (for the backlog), its writer of
frames (which also kills a guest that stops reading while it keeps sending calls: every frame written to it counts,
so that check stays with the worker's writer) and whether it is alive. A cell's calls end with the cell
(``CellCalls.close``): no reply is written for it after that. Apart from the worker because none of it is the
process, the frame loop or the cell's result, and its limits are easier to read and to test as one piece.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..guest.protocol import ERROR_KIND_MCP, REPLY
from .channel import WorkerChannel
from .frames import encode_frame, encode_reply

if TYPE_CHECKING:
    from ..guest.protocol import CallFrame
    from ..reply_encoding import GuestRequestHandler, Reply

log = logging.getLogger("mcp_codemode.sandbox.worker")  # the name log lines have always shown

MAX_CALLS_IN_FLIGHT = 1024  # per cell; more get an immediate error (asyncio.gather over thousands still works)
CONCURRENT_CALLS = 64  # per cell, relayed at once; the rest wait their turn
MAX_REPLY_BYTES = 48 * 1024 * 1024  # the guest refuses frames over 64 MiB
# Request frames held by one cell at once (queued or being relayed), so 1,024 calls of a full-size frame each
# cannot hold gigabytes of the bridge's memory; more get an immediate error until some finish.
MAX_CALL_BYTES_IN_FLIGHT = 64 * 1024 * 1024
# Replies written to the guest and not yet read by it. Past this, a relayed call's reply waits until the guest has
# read the backlog (and the relay slot it holds keeps the next calls from going upstream), so a guest that stops
# reading cannot make the bridge buffer its answers without end. A guest that also keeps sending calls that are
# refused at once (whose short answers cannot wait) is killed by the worker's writer past a larger bound.
REPLY_BACKLOG_BYTES = 8 * 1024 * 1024


@dataclasses.dataclass
class CellCalls:
    """The calls of one running cell: who answers them, the tasks in flight and the request bytes they hold."""

    handler: GuestRequestHandler | None
    tasks: set[asyncio.Task[None]] = dataclasses.field(default_factory=set)
    held_bytes: int = 0  # request frame bytes held by the calls in flight
    gate: asyncio.Semaphore = dataclasses.field(default_factory=lambda: asyncio.Semaphore(CONCURRENT_CALLS))
    open: bool = True  # until the cell ends: no reply is written for a cell that ended

    def close(self) -> None:
        """The cell ended: its replies are dropped from now on and the calls still in flight are cancelled."""
        self.open = False
        for task in list(self.tasks):
            task.cancel()


class CallRelay:
    """One worker's side of its guest's calls: admits each, relays it, writes its reply when the guest can take it."""

    def __init__(
        self, worker_id: str, channel: WorkerChannel, write: Callable[[bytes], None], alive: Callable[[], bool]
    ) -> None:
        self.worker_id = worker_id
        self._channel = channel
        self._write = write
        self._alive = alive
        self._turn = asyncio.Lock()  # relayed replies wait their turn while the guest has a backlog to read

    def accept(self, calls: CellCalls | None, request_id: int, message: CallFrame, size: int = 0) -> None:
        """Start relaying request ``request_id`` (its frame ``size`` bytes) of the running cell, whose calls are
        ``calls``; anything else gets an error reply, never a crash."""
        problem = ""
        if calls is None or calls.handler is None:
            problem = "calls to MCP servers work only while a run_python call is running"
        elif len(calls.tasks) >= MAX_CALLS_IN_FLIGHT:
            problem = f"more than {MAX_CALLS_IN_FLIGHT} calls are in flight; await some before starting more"
        elif calls.held_bytes + size > MAX_CALL_BYTES_IN_FLIGHT and calls.tasks:
            problem = (
                f"the calls in flight carry more than {MAX_CALL_BYTES_IN_FLIGHT >> 20} MiB of requests; "
                "await some before starting more"
            )
        if problem or calls is None:
            self.reply(request_id, {"ok": False, "error": {"kind": ERROR_KIND_MCP, "message": problem}})
            return
        calls.held_bytes += size
        task = asyncio.create_task(self._serve(calls, request_id, message))
        calls.tasks.add(task)

        def finished(task: asyncio.Task[None]) -> None:
            calls.tasks.discard(task)
            calls.held_bytes -= size

        task.add_done_callback(finished)

    async def _serve(self, calls: CellCalls, request_id: int, message: CallFrame) -> None:
        assert calls.handler is not None
        async with calls.gate:
            body: Reply
            try:
                body = await calls.handler(message)
            except Exception as exc:  # a bug of ours must reach the code as an error, not hang it
                log.exception("relaying a call of worker %s failed", self.worker_id)
                body = {"ok": False, "error": {"kind": ERROR_KIND_MCP, "message": f"the bridge failed: {exc}"}}
            async with self._turn:  # uncontended unless replies are waiting for the guest to read
                await self._wait_for_reader()
                if calls.open and self._alive():
                    self.reply(request_id, body)

    async def _wait_for_reader(self) -> None:
        """Return once the guest has read all but ``REPLY_BACKLOG_BYTES`` of what was written to it."""
        channel = self._channel
        while self._alive() and channel.unsent() > REPLY_BACKLOG_BYTES:
            try:
                await channel.drain()  # wakes once the backlog falls under the channel's low-water mark
            except (ConnectionError, RuntimeError):
                return

    def reply(self, request_id: int, body: Reply) -> None:
        """Write ``body`` as the reply frame to request ``request_id``, or the error reply that says why it cannot."""
        try:
            frame = encode_reply(request_id, body)
        except (TypeError, ValueError, RecursionError) as exc:
            # An answer JSON cannot carry (a value nested past the recursion limit, say): the code must hear so.
            log.warning("a reply to worker %s could not be encoded: %s", self.worker_id, exc)
            message = f"the answer could not be sent into the sandbox ({type(exc).__name__})"
            frame = encode_frame({"type": REPLY, "id": request_id, "ok": False,
                                  "error": {"kind": ERROR_KIND_MCP, "message": message}})  # fmt: skip
        if len(frame) > MAX_REPLY_BYTES:
            size = len(frame) / (1 << 20)
            message = (
                f"the answer is {size:.1f} MB, more than the {MAX_REPLY_BYTES >> 20} MB one reply may carry; "
                "ask the server for less (a page, a range, a filter)"
            )
            frame = encode_frame({"type": REPLY, "id": request_id, "ok": False,
                                  "error": {"kind": ERROR_KIND_MCP, "message": message}})  # fmt: skip
        self._write(frame)
