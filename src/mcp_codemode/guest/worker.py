"""The worker that runs inside the sandbox.

It is shipped as a file and started through ``python3 -I -B -u boot.py CONFIG_JSON``; it must run on any
Python >= 3.10 with the standard library only, and it imports nothing of the host package.

Why it is shaped this way:

* The host talks to it over the process's original stdin/stdout, which the worker moves to private,
  close-on-exec descriptors before any user code runs. File descriptors 1 and 2 are then pipes that the
  worker itself drains, so ``print``, ``os.write(1, ...)``, C extensions and subprocesses all land in the
  captured output and can never corrupt the control channel.
* Frames are a 4-byte big-endian length followed by UTF-8 JSON. A length prefix (rather than newlines)
  means a 100 MB line of output is just data, and the host can refuse an oversized frame before reading it.
* Output is bounded here, at the source: each stream streams its head to the host and keeps only a tail
  ring afterwards, counting what it dropped. A flood costs the host at most the configured cap.
* Images travel with the cell's result: ``runtime.show(obj)``, an image-like last value (or the images inside
  it, such as an upstream result of text and images) and matplotlib figures left open are rendered here (the
  host only checks and forwards bytes), each capped in size.
* Interrupts arrive as frames; the control thread turns them into SIGINT for the main thread, and the
  SIGINT handler raises only while user code is running, so an interrupt can never land in the worker's
  own bookkeeping.
"""

from __future__ import annotations

import _ast
import codecs
import collections
import contextlib
import faulthandler
import fcntl
import json
import linecache
import os
import queue
import resource
import select
import signal
import struct
import sys
import termios
import threading
import time
import traceback
import types
import warnings

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms of start-up and is only needed by type checkers
    from typing import Any

# MAX_DEPTH and MAX_VALUES are re-exported: tests read them as this module's own.
if __package__:  # imported on the host (tests) as mcp_codemode.guest.worker
    from .protocol import ERROR_KIND_MCP, EXECUTE, INTERRUPT, MAX_INBOUND_FRAME, OUTPUT, READY, REPLY, RESULT, SHUTDOWN
    from .protocol import MAX_DEPTH as MAX_DEPTH
    from .protocol import MAX_VALUES as MAX_VALUES
else:  # in the sandbox boot.py imports this file as the top-level module ``worker``, its folder on sys.path
    from protocol import (  # type: ignore[import-not-found,no-redef]
        ERROR_KIND_MCP,
        EXECUTE,
        INTERRUPT,
        MAX_DEPTH,
        MAX_INBOUND_FRAME,
        MAX_VALUES,
        OUTPUT,
        READY,
        REPLY,
        RESULT,
        SHUTDOWN,
    )

HEADER = struct.Struct(">I")
# The host kills a worker whose frame is nested deeper or holds more values than MAX_DEPTH/MAX_VALUES
# (sandbox/frames.py); a request built from user values is refused here first, so user code gets an error and
# keeps its session.
READ_CHUNK = 65536
# How long a result waits for the capture threads to drain what the cell wrote. The pipes are usually empty at
# once; 0.05 s lost a cell's last line under gVisor right after a thread bomb (the readers were slow to run),
# and a writer that never stops (a background flood) delays each result by at most this.
FENCE_WAIT_SECONDS = 0.5
TEXT_LIMIT = 200_000
GUEST_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep  # the worker's and runtime's own frames

_RLIMIT_NAMES = {
    "AS": resource.RLIMIT_AS,
    "CORE": resource.RLIMIT_CORE,
    "CPU": resource.RLIMIT_CPU,
    "FSIZE": resource.RLIMIT_FSIZE,
    "MSGQUEUE": resource.RLIMIT_MSGQUEUE,
    "NOFILE": resource.RLIMIT_NOFILE,
    "NPROC": resource.RLIMIT_NPROC,
}


# One encoder for every request: json.dumps with options builds a new one per call.
_STRICT_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


class Channel:
    """Writes frames to the host; several threads share it, so writes are serialised."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        self._write(json.dumps(message, ensure_ascii=False, default=repr))

    def send_strict(self, message: dict[str, Any]) -> None:
        """For requests built from user values: a value JSON cannot carry raises TypeError or ValueError (NaN, a
        value nested too deep or too large for the host's frame checks) instead of becoming repr.

        The shape is walked only when the text leaves room for a problem: a text of n characters holds at most
        n values, and a value nested d deep needs d opening brackets. A typical call's text settles it at once.
        """
        try:
            text = _STRICT_JSON.encode(message)
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
        self.tail: collections.deque[str] = collections.deque()
        self.tail_chars = 0
        self.dropped = 0

    def feed(self, data: bytes) -> None:
        text = self._decoder.decode(data)
        if not text:
            return
        if self.head_left > 0:
            head, text = text[: self.head_left], text[self.head_left :]
            self.head_left -= len(head)
            self._channel.send({"type": OUTPUT, "stream": self.name, "data": head})
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

    def finish(self) -> tuple[str, int]:
        rest = self._decoder.decode(b"", final=True)
        if rest:
            self.feed(rest.encode("utf-8"))
        return "".join(self.tail), self.dropped


class Capture:
    """Owns the pipes behind fds 1 and 2 and the threads that drain them."""

    def __init__(self, channel: Channel, limit: int) -> None:
        self._channel = channel
        self._limit = limit
        self._lock = threading.Lock()
        self._fds: dict[str, int] = {}
        self._sinks: dict[str, StreamSink] = {}
        self.reset()
        for name, target in (("stdout", 1), ("stderr", 2)):
            read_fd, write_fd = os.pipe()
            os.dup2(write_fd, target)
            os.close(write_fd)
            os.set_blocking(read_fd, False)
            self._fds[name] = read_fd
            threading.Thread(target=self._drain, args=(name, read_fd), daemon=True, name=f"capture-{name}").start()

    def reset(self) -> None:
        half = max(self._limit // 2, 1)
        with self._lock:
            self._sinks = {
                name: StreamSink(name, self._channel, head_limit=half, tail_limit=self._limit - half)
                for name in ("stdout", "stderr")
            }

    def _drain(self, name: str, fd: int) -> None:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while True:
            poller.poll()
            with self._lock:
                try:
                    data = os.read(fd, READ_CHUNK)
                except BlockingIOError:
                    continue
                if not data:
                    return
                self._sinks[name].feed(data)

    def fence(self) -> dict[str, Any]:
        """Wait until everything written so far is drained, then close this execution's capture."""
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        deadline = time.monotonic() + FENCE_WAIT_SECONDS
        buf = bytearray(4)
        for fd in self._fds.values():
            while True:
                with self._lock:
                    fcntl.ioctl(fd, termios.FIONREAD, buf)
                    pending = int.from_bytes(buf, sys.byteorder)
                if pending == 0 or time.monotonic() > deadline:
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


class Interrupter:
    """Delivers SIGINT to the main thread only while user code runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.running_id: int | None = None
        signal.signal(signal.SIGINT, self._on_sigint)

    def _on_sigint(self, signum: int, frame: types.FrameType | None) -> None:
        if self.running_id is not None:
            raise KeyboardInterrupt

    def enter(self, request_id: int) -> None:
        with self._lock:
            self.running_id = request_id

    def leave(self) -> None:
        with self._lock:
            self.running_id = None

    def interrupt(self, request_id: Any) -> None:
        with self._lock:
            if self.running_id is not None and request_id == self.running_id:
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


class CellSources:
    """Cells' source lines in ``linecache``, so tracebacks show them, without growing for ever.

    A session that runs 10,000 cells would otherwise keep 10,000 sources (about 250 bytes each for ``1``).
    A cell that defines no function, class, lambda or comprehension leaves no code behind that could raise
    later, so its source is dropped once ``keep_recent`` newer cells have run (the recent ones stay, for an
    exception object kept in a variable). Cells that did define code keep their source, up to ``budget``
    characters in all; past that the oldest go first, and their tracebacks show no source line.
    """

    def __init__(self, keep_recent: int = 100, budget: int = 4_000_000) -> None:
        self.keep_recent = keep_recent
        self.budget = budget
        self._recent: collections.deque[list[Any]] = collections.deque()  # [filename, characters, defines code]
        self._kept: collections.deque[tuple[str, int]] = collections.deque()
        self._kept_chars = 0

    def add(self, filename: str, source: str) -> None:
        """Before the cell is compiled, so a SyntaxError can show its line too."""
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        self._recent.append([filename, len(source), False])
        while len(self._recent) > self.keep_recent:
            old, chars, kept = self._recent.popleft()
            if kept:
                self._kept.append((old, chars))
                self._kept_chars += chars
            else:
                linecache.cache.pop(old, None)
        while self._kept_chars > self.budget and self._kept:
            old, chars = self._kept.popleft()
            self._kept_chars -= chars
            linecache.cache.pop(old, None)

    def defines_code(self) -> None:
        """The cell added last compiled to code with functions, classes, lambdas or comprehensions in it."""
        if self._recent:
            self._recent[-1][2] = True


class Executor:
    """Runs cells in one persistent namespace, notebook style."""

    def __init__(self, interrupter: Interrupter, runtime: Any, image_limit: int, max_images: int) -> None:
        self.runtime = runtime
        self.image_limit = image_limit
        self.max_images = max_images
        self.namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
        self.loop: Any = None  # created on the first top-level await: importing asyncio costs ~40 ms of start-up
        self.cell = 0
        self.sources = CellSources()
        self._interrupter = interrupter

    def _compile(self, source: str) -> tuple[types.CodeType, types.CodeType | None, str]:
        self.cell += 1
        filename = f"<cell {self.cell}>"
        self.sources.add(filename, source)
        # _ast rather than ast: the same classes and flags without ast.py's import cost at start-up.
        flags = _ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        tree = compile(source, filename, "exec", flags | _ast.PyCF_ONLY_AST, dont_inherit=True)
        assert isinstance(tree, _ast.Module)
        last: types.CodeType | None = None
        tail = tree.body[-1] if tree.body else None
        if isinstance(tail, _ast.Expr):
            tree.body.pop()
            expr = _ast.Expression(tail.value)
            last = compile(expr, filename, "eval", flags, dont_inherit=True)
        body = compile(tree, filename, "exec", flags, dont_inherit=True)
        if any(isinstance(const, types.CodeType) for code in (body, last) if code for const in code.co_consts):
            self.sources.defines_code()
        return body, last, filename

    def _run(self, code: types.CodeType) -> Any:
        result = eval(code, self.namespace)  # noqa: S307 - running the user's code is the point
        if code.co_flags & 0x80:  # CO_COROUTINE: the cell used top-level await
            if self.loop is None:
                import asyncio

                self.loop = asyncio.new_event_loop()
                asyncio.set_event_loop(self.loop)
            result = self.loop.run_until_complete(result)
        return result

    def execute(self, request_id: int, source: str) -> dict[str, Any]:
        """Run one cell and describe its outcome, with the images it showed."""
        display = self.runtime.Display(self.image_limit, self.max_images)
        self.runtime._state.display = display
        try:
            outcome = self._execute(request_id, source, display)
        finally:
            self.runtime._state.display = None
        display.collect_figures()
        if display.images or display.notes:
            outcome.update(display.payload())
        return outcome

    def _execute(self, request_id: int, source: str, display: Any) -> dict[str, Any]:
        try:
            body, last, _ = self._compile(source)
        except (SyntaxError, ValueError) as exc:
            # Raised by compile() inside the worker: the worker's frames are all there is, and none is the user's.
            text = "".join(traceback.format_exception_only(type(exc), exc))
            return {
                "status": "error",
                "error": {"type": type(exc).__name__, "message": clip(str(exc)), "traceback": clip(text)},
            }
        self._interrupter.enter(request_id)
        try:
            try:
                self._run(body)
                value = self._run(last) if last is not None else None
            finally:
                self.runtime.rpc.close()  # the cell's code is done: what it left running may call no more
        except KeyboardInterrupt as exc:
            self._interrupter.leave()
            return {"status": "interrupted", "error": describe_exception(exc)}
        except BaseException as exc:  # noqa: BLE001 - SystemExit from user code must not end the session
            self._interrupter.leave()
            return {"status": "error", "error": describe_exception(exc)}
        self._interrupter.leave()
        if value is None:
            return {"status": "ok", "value": None}
        self.namespace["_"] = value
        # The value's images, or those it holds (an upstream result of text and images); its text shows the rest.
        with contextlib.suppress(BaseException):  # a value that only looked like an image is shown as text
            display.add_found_in(value)
        try:
            shown = repr(value)
        except BaseException as exc:  # noqa: BLE001 - a broken __repr__ is the user's error, not ours
            return {"status": "error", "error": describe_exception(exc)}
        return {"status": "ok", "value": clip(shown)}


STDLIB_DIR = os.path.dirname(os.__file__) + os.sep


def _trim_to_user_frames(te: traceback.TracebackException, interrupted: bool = False) -> None:
    """Drop the worker's and asyncio's frames above the first frame of a cell, in every chained exception.

    An interrupt lands wherever the code happened to be waiting (asyncio's selector, a lock): for it, the
    standard library's frames below the last frame of the user's code are dropped too.
    """
    seen: set[int] = set()
    pending: list[traceback.TracebackException | None] = [te]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        frames = list(current.stack)
        first_cell = next((i for i, f in enumerate(frames) if f.filename.startswith("<cell ")), None)
        if first_cell is not None:
            kept = [f for f in frames[first_cell:] if not f.filename.startswith(GUEST_DIR)]
            while interrupted and len(kept) > 1 and kept[-1].filename.startswith(STDLIB_DIR):
                kept.pop()
            current.stack = traceback.StackSummary.from_list(kept)
        pending.extend([current.__cause__, current.__context__])


def clip(text: str, limit: int = TEXT_LIMIT) -> str:
    """Keep head and tail of an oversized text, so one repr or message cannot blow up a frame."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... [{len(text) - 2 * half} characters cut] ...\n{text[-half:]}"


def describe_exception(exc: BaseException) -> dict[str, Any]:
    try:
        te = traceback.TracebackException.from_exception(exc, limit=None, compact=True)
        _trim_to_user_frames(te, isinstance(exc, KeyboardInterrupt))
        formatted = "".join(te.format())
    except BaseException:  # noqa: BLE001 - a hostile exception must not kill the worker
        formatted = f"{type(exc).__name__}: <traceback could not be formatted>\n"
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001
        message = "<unprintable exception>"
    return {"type": type(exc).__name__, "message": clip(message), "traceback": clip(formatted)}


def apply_rlimits(limits: dict[str, Any]) -> None:
    for name, value in limits.items():
        which = _RLIMIT_NAMES.get(name)
        if which is None or not isinstance(value, int):
            continue
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))


def read_exactly(stream: Any, size: int) -> bytes | None:
    data = stream.read(size)
    if data is None or len(data) < size:
        return None
    return bytes(data)


def control_loop(stream: Any, requests: queue.Queue[dict[str, Any]], interrupter: Interrupter, deliver: Any) -> None:
    """Reads the host's frames; end of input means the host is gone, so the worker ends at once."""
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
                message = json.loads(payload)
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
            elif kind in (EXECUTE, SHUTDOWN):
                requests.put(message)
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


def load_runtime() -> Any:
    """Make the guest's ``mcp`` package importable by user code and return its runtime module."""
    if GUEST_DIR.rstrip(os.sep) not in sys.path:  # boot.py put it there already
        sys.path.insert(0, GUEST_DIR.rstrip(os.sep))
    # Plots render to bytes here; there is no display, and the home directory may not be writable.
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.environ.setdefault("MPLCONFIGDIR", "/tmp/.matplotlib")  # the sandbox's private tmpfs
    # plt.show() under Agg keeps the figure open for us to send; its "cannot be shown" warning is noise here.
    warnings.filterwarnings("ignore", message=".*non-interactive, and thus cannot be shown")
    return __import__("mcp.runtime", fromlist=["runtime"])  # the guest's mcp, not the host's SDK


def main(argv: list[str]) -> int:
    config: dict[str, Any] = json.loads(argv[1]) if len(argv) > 1 else {}
    apply_rlimits(config.get("rlimits", {}))
    runtime = load_runtime()
    control_in = os.dup(0)
    control_out = os.dup(1)
    diagnostics = os.dup(2)
    faulthandler.enable(file=diagnostics)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    channel = Channel(control_out)
    capture = Capture(channel, int(config.get("capture_limit", 1 << 20)))
    interrupter = Interrupter()
    executor = Executor(interrupter, runtime, int(config.get("image_limit", 2 << 20)), int(config.get("max_images", 8)))
    workdir = config.get("workdir")
    if isinstance(workdir, str) and os.path.isdir(workdir):
        os.chdir(workdir)
    requests: queue.Queue[dict[str, Any]] = queue.Queue()
    runtime.rpc.bind(channel.send_strict)
    threading.Thread(
        target=control_loop,
        args=(os.fdopen(control_in, "rb", buffering=READ_CHUNK), requests, interrupter, runtime.rpc.deliver),
        daemon=True,
        name="control",
    ).start()
    channel.send({"type": READY, "python": sys.version.split()[0], "pid": os.getpid()})
    while True:
        message = requests.get()
        if message.get("type") == SHUTDOWN:
            return 0
        request_id = message.get("id")
        code = message.get("code")
        if not isinstance(request_id, int) or not isinstance(code, str):
            continue
        summary = message.get("summary")
        if isinstance(summary, str):
            runtime._state.summary = clip(summary)
        started = time.perf_counter()
        setup_notes: list[str] = []
        runtime.rpc.open()
        context = message.get("context")
        try:
            if isinstance(context, dict):
                setup_notes = runtime._configure(context, executor.namespace)
            else:  # nothing changed since the last cell: the bridge sends only changes
                runtime._bind_names(executor.namespace)
        except Exception as exc:  # noqa: BLE001 - the cell still runs; the model hears what went wrong
            setup_notes = [f"the MCP server proxies could not be set up: {type(exc).__name__}: {exc}"]
        try:
            outcome = executor.execute(request_id, code)
        except BaseException as exc:  # noqa: BLE001 - e.g. a second interrupt landing in our except block
            interrupter.leave()
            outcome = {
                "status": "interrupted" if isinstance(exc, KeyboardInterrupt) else "error",
                "error": describe_exception(exc),
            }
        runtime.rpc.close()
        if setup_notes:
            outcome["notes"] = setup_notes + list(outcome.get("notes") or [])
        outcome.update(capture.fence())
        outcome.update(type=RESULT, id=request_id, duration=time.perf_counter() - started)
        channel.send(outcome)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
