"""The capture of the user's output: the pipes behind fds 1 and 2, the thread that drains them, the bounds.

Apart from the worker because it is one mechanism with its own rule, bounded at the source: each stream sends
its head to the host as it comes (a burst of writes as one frame, ``STREAM_DELAY_SECONDS`` late at most) and keeps
only a tail ring afterwards, counting what it dropped, so a flood costs the host at most the configured cap;
``fence`` closes one cell's capture once what it wrote is drained, and sends what still waited.
"""

from __future__ import annotations

import _thread
import codecs
import fcntl
import os
import select
import sys
import termios
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms of start-up and is only needed by type checkers
    from collections import deque
    from typing import Any
else:  # collections' C half: the module costs an idle sandbox about 0.5 MiB (docs/density.md)
    from _collections import deque

if __package__:  # imported on the host (tests) as mcp_codemode.guest.worker_capture
    from .protocol import OUTPUT
    from .worker_channel import READ_CHUNK, Channel
else:  # in the sandbox the guest folder is on sys.path
    from protocol import OUTPUT  # type: ignore[import-not-found,no-redef]
    from worker_channel import READ_CHUNK, Channel  # type: ignore[import-not-found,no-redef]

# How long a result waits, at most, for the capture threads to drain what the cell wrote before it ended. The pipes
# are usually empty at once; 0.05 s lost a cell's last line under gVisor right after a thread bomb, and 0.5 s lost a
# whole cell's output under 64 clients on 2 busy cores (benchmarks/faults.py, issue 35): a starved reader thread is
# slow, not stuck. Only the bytes in the pipe when the cell ended are waited for, so a writer that never stops (a
# background flood) does not hold the result back; this bound is for a reader that cannot run at all.
FENCE_WAIT_SECONDS = 10.0
# How long streamed output waits for more to join it in one frame. Unbuffered (``-u``), each ``print`` is several
# writes, and the drain thread woke for many of them: a cell printing 21 lines sent the host about 27 frames, each
# decoded on the bridge's event loop, which every session shares (issue 35). A burst now leaves as one frame (or one
# per STREAM_FRAME_CHARS), at most this late, and the cell's result always flushes what is left first.
STREAM_DELAY_SECONDS = 0.02
STREAM_FRAME_CHARS = 32768


class StreamSink:
    """Bounded capture of one output stream for the running execution.

    The first ``head_limit`` characters are streamed to the host as they come; later text is kept in a
    tail ring of ``tail_limit`` characters, and whatever falls out of the ring is only counted.
    """

    def __init__(self, name: str, channel: Channel, head_limit: int, tail_limit: int) -> None:
        self.name = name
        self._channel = channel
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.head_left = head_limit
        self.tail_limit = tail_limit
        self.tail: deque[str] = deque()
        self.tail_chars = 0
        self.dropped = 0
        self.pending: list[str] = []  # head text not yet sent: at most head_limit characters in all
        self.pending_chars = 0

    def feed(self, data: bytes) -> None:
        text = self._decoder.decode(data)
        if not text:
            return
        if self.head_left > 0:
            head, text = text[: self.head_left], text[self.head_left :]
            self.head_left -= len(head)
            self.pending.append(head)
            self.pending_chars += len(head)
            if self.pending_chars >= STREAM_FRAME_CHARS:
                self.flush()
        if not text:
            return
        if len(text) >= self.tail_limit:
            self.dropped += self.tail_chars + len(text) - self.tail_limit
            self.tail.clear()
            text = text[len(text) - self.tail_limit :] if self.tail_limit else ""
            self.tail_chars = 0
        self.tail.append(text)
        self.tail_chars += len(text)
        while self.tail_chars > self.tail_limit and self.tail:
            first = self.tail[0]
            excess = self.tail_chars - self.tail_limit
            if len(first) <= excess:
                self.tail.popleft()
                self.tail_chars -= len(first)
                self.dropped += len(first)
            else:
                self.tail[0] = first[excess:]
                self.tail_chars -= excess
                self.dropped += excess

    def flush(self) -> None:
        """Send the head text that waited for company, as one frame."""
        if self.pending:
            data = "".join(self.pending)
            self.pending.clear()
            self.pending_chars = 0
            self._channel.send({"type": OUTPUT, "stream": self.name, "data": data})

    def finish(self) -> tuple[str, int]:
        rest = self._decoder.decode(b"", final=True)
        if rest:
            self.feed(rest.encode("utf-8"))
        self.flush()
        return "".join(self.tail), self.dropped


class Capture:
    """Owns the pipes behind fds 1 and 2 and the thread that drains them."""

    def __init__(self, channel: Channel, limit: int) -> None:
        self._channel = channel
        self._limit = limit
        self._lock = _thread.allocate_lock()
        self._fds: dict[str, int] = {}
        self._drained = {"stdout": 0, "stderr": 0}  # bytes read from each pipe so far: what fence waits for
        self._sinks: dict[str, StreamSink] = {}
        self.reset()
        names: dict[int, str] = {}
        for name, target in (("stdout", 1), ("stderr", 2)):
            read_fd, write_fd = os.pipe()
            os.dup2(write_fd, target)
            os.close(write_fd)
            os.set_blocking(read_fd, False)
            self._fds[name] = read_fd
            names[read_fd] = name
        # One thread drains both pipes (each read takes the lock anyway), and a bare one: a thread is memory every
        # idle sandbox keeps, and ``threading`` imports about 1 MiB more (docs/density.md).
        _thread.start_new_thread(self._drain, (names,))

    def reset(self) -> None:
        half = max(self._limit // 2, 1)
        with self._lock:
            self._sinks = {
                name: StreamSink(name, self._channel, head_limit=half, tail_limit=self._limit - half)
                for name in ("stdout", "stderr")
            }

    def _drain(self, names: dict[int, str]) -> None:
        poller = select.poll()
        for fd in names:
            poller.register(fd, select.POLLIN)
        due: float | None = None  # when the pending head text must leave
        while names:
            wait = None if due is None else max(0, int((due - time.monotonic()) * 1000) + 1)
            for fd, _ in poller.poll(wait):
                with self._lock:
                    try:
                        data = os.read(fd, READ_CHUNK)
                    except BlockingIOError:
                        continue
                    if data:
                        self._drained[names[fd]] += len(data)
                        self._sinks[names[fd]].feed(data)
                        continue
                    poller.unregister(fd)  # its write end is closed (the user's code closed fd 1 or 2)
                    del names[fd]
            with self._lock:
                waiting = any(sink.pending for sink in self._sinks.values())
                if waiting and due is not None and time.monotonic() >= due:
                    for sink in self._sinks.values():
                        sink.flush()
                    waiting = False
            due = (due or time.monotonic() + STREAM_DELAY_SECONDS) if waiting else None

    def fence(self) -> dict[str, Any]:
        """Wait until everything written so far is drained, then close this execution's capture."""
        for stream in (sys.stdout, sys.stderr):
            try:  # noqa: SIM105 - no contextlib in the guest: it costs every idle sandbox ~0.9 MiB
                stream.flush()
            except (OSError, ValueError):
                pass
        buf = bytearray(4)
        wanted: dict[str, int] = {}
        with self._lock:  # what is in each pipe now was written before the fence: it belongs to this cell
            for name, fd in self._fds.items():
                fcntl.ioctl(fd, termios.FIONREAD, buf)
                wanted[name] = self._drained[name] + int.from_bytes(buf, sys.byteorder)
        deadline = time.monotonic() + FENCE_WAIT_SECONDS
        while time.monotonic() <= deadline:
            with self._lock:
                if all(self._drained[name] >= count for name, count in wanted.items()):
                    break
            time.sleep(0.0002)
        with self._lock:
            summary: dict[str, Any] = {}
            for name, sink in self._sinks.items():
                tail, dropped = sink.finish()
                summary[name + "_tail"] = tail
                summary[name + "_dropped"] = dropped
        self.reset()
        return summary
