"""The guest's end of the control channel: frames to the host, and the thread that reads the host's frames.

Apart from the worker's start-up because it is the one place that knows the wire (a 4-byte length, then JSON)
on this side, and it holds the checks that keep a request the host would refuse from leaving the sandbox: a
value too deep or too large is refused here, so the user's code gets an error and keeps its session. Several
threads write (the capture threads, the runtime's calls, the main loop), so writes are serialised here.
"""

from __future__ import annotations

import _thread
import os
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms of start-up and is only needed by type checkers
    from typing import Any

# MAX_DEPTH and MAX_VALUES are re-exported: tests read them as this module's own.
if __package__:  # imported on the host (tests) as mcp_codemode.guest.worker_channel
    from .protocol import ERROR_KIND_MCP, EXECUTE, FILES, INTERRUPT, KEEPALIVE, MAX_INBOUND_FRAME, REPLY, SHUTDOWN
    from .protocol import MAX_DEPTH as MAX_DEPTH
    from .protocol import MAX_VALUES as MAX_VALUES
    from .worker_json import dumps, loads
else:  # in the sandbox the guest folder is on sys.path
    from protocol import (  # type: ignore[import-not-found,no-redef]
        ERROR_KIND_MCP,
        EXECUTE,
        FILES,
        INTERRUPT,
        KEEPALIVE,
        MAX_DEPTH,
        MAX_INBOUND_FRAME,
        MAX_VALUES,
        REPLY,
        SHUTDOWN,
    )
    from worker_json import dumps, loads  # type: ignore[import-not-found,no-redef]
if TYPE_CHECKING:
    import _queue

    from .worker_cells import Interrupter

HEADER = struct.Struct(">I")
# The host kills a worker whose frame is nested deeper or holds more values than MAX_DEPTH/MAX_VALUES
# (sandbox/frames.py); a request built from user values is refused here first, so user code gets an error and
# keeps its session.
READ_CHUNK = 65536


class Channel:
    """Writes frames to the host; several threads share it, so writes are serialised."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = _thread.allocate_lock()

    def send(self, message: dict[str, Any]) -> None:
        self._write(dumps(message, default=repr))

    def send_strict(self, message: dict[str, Any]) -> None:
        """For requests built from user values: a value JSON cannot carry raises TypeError or ValueError (NaN, a
        value nested too deep or too large for the host's frame checks) instead of becoming repr.

        The shape is walked only when the text leaves room for a problem: a text of n characters holds at most
        n values, and a value nested d deep needs d opening brackets. A typical call's text settles it at once.
        """
        try:
            text = dumps(message, allow_nan=False)
        except RecursionError:
            check_shape(message)  # names the limit the host enforces when it lies below Python's own
            raise
        if len(text) > MAX_VALUES or text.count("[") + text.count("{") > MAX_DEPTH:
            check_shape(message)
        self._write(text)

    def _write(self, text: str) -> None:
        payload = text.encode("utf-8", "backslashreplace")
        data = HEADER.pack(len(payload)) + payload
        with self._lock:
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]


def check_shape(message: Any) -> None:
    """Raise ValueError for a value the host would refuse as a whole frame: deeper than MAX_DEPTH, or more than
    MAX_VALUES values (containers count twice, as the host's count of commas and brackets may)."""
    stack = [(message, 1)]
    weight = 0
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list, tuple)):
            if depth > MAX_DEPTH:
                raise ValueError(f"it is nested more than {MAX_DEPTH} levels deep")
            weight += 2
            stack.extend((item, depth + 1) for item in (node.values() if isinstance(node, dict) else node))
        else:
            weight += 1
        if weight > MAX_VALUES:
            raise ValueError(f"it holds more than {MAX_VALUES // 2:,} values")


def read_exactly(stream: Any, size: int) -> bytes | None:
    data = stream.read(size)
    if data is None or len(data) < size:
        return None
    return bytes(data)


def control_loop(
    stream: Any, requests: _queue.SimpleQueue[dict[str, Any]], interrupter: Interrupter, deliver: Any, files: Any = None
) -> None:
    """Reads the host's frames; end of input means the host is gone, so the worker ends at once. ``files``
    answers a FILES frame here, on this thread, so the client reaches /workspace while a cell runs."""
    try:
        while True:
            header = read_exactly(stream, HEADER.size)
            if header is None:
                break
            (size,) = HEADER.unpack(header)
            if size > MAX_INBOUND_FRAME:
                break
            payload = read_exactly(stream, size)
            if payload is None:
                break
            try:
                message = loads(payload)
            except (ValueError, RecursionError) as exc:
                # The host checks what it sends, but an answer relayed from a server may still be too deep for
                # this interpreter: fail that one call, not the worker.
                message = undecodable_reply(payload, exc)
            if not isinstance(message, dict):
                continue
            kind = message.get("type")
            if kind == REPLY:
                deliver(message)
            elif kind == INTERRUPT:
                interrupter.interrupt(message.get("id"))
            elif kind == FILES and files is not None:
                files(message)
            elif kind in (EXECUTE, SHUTDOWN):
                requests.put(message)
            elif kind == KEEPALIVE:
                continue  # it only kept an idle exec stream open; unknown types are dropped the same way
    finally:
        os._exit(0)


def undecodable_reply(payload: bytes, exc: BaseException) -> dict[str, Any] | None:
    """An error reply for a reply frame that could not be decoded, read off its prefix (the host writes the
    type and id first); None when the frame is not a reply at all."""
    head = payload[:64]
    prefix = b'{"type":"' + REPLY.encode() + b'","id":'  # as the host's encode_reply writes it
    if not head.startswith(prefix):
        return None
    digits = head[len(prefix) :].split(b",", 1)[0]
    if not digits.isdigit():
        return None
    message = f"the bridge's answer could not be decoded in the sandbox ({type(exc).__name__})"
    return {"type": REPLY, "id": int(digits), "ok": False, "error": {"kind": ERROR_KIND_MCP, "message": message}}
