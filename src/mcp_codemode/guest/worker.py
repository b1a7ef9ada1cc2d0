"""The worker that runs inside the sandbox.

It is shipped as a file and started through ``python3 -I -S -B -u boot.py CONFIG_JSON``; it must run on any
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

This file is the start-up and the main loop; each mechanism above has its own module beside it, imported by
top-level name in the sandbox (the guest folder is on ``sys.path``): ``worker_channel`` (frames both ways),
``worker_capture`` (fds 1 and 2), ``worker_cells`` (running and interrupting cells) and ``worker_tracebacks``
(describing an exception). Their names all start with ``worker_`` so that they cannot shadow a module the user's
code imports: the guest folder comes first on ``sys.path``.
"""

from __future__ import annotations

import _queue
import _thread
import _warnings
import faulthandler
import os
import resource
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms of start-up and is only needed by type checkers
    from typing import Any


if __package__:  # imported on the host (tests) as mcp_codemode.guest.worker
    from .protocol import FILES, PROTOCOL_VERSION, READY, RESULT, SHUTDOWN, SNAPSHOT_OPS
    from .worker_capture import Capture
    from .worker_cells import Executor, Interrupter
    from .worker_channel import READ_CHUNK, Channel, control_loop
    from .worker_files import answer as answer_files
    from .worker_json import loads
    from .worker_priority import lower as lower_priority
    from .worker_site import set_up as set_up_site
    from .worker_tracebacks import GUEST_DIR, clip, describe_exception
else:  # in the sandbox boot.py imports this file as the top-level module ``worker``, its folder on sys.path
    from protocol import (  # type: ignore[import-not-found,no-redef]
        FILES,
        PROTOCOL_VERSION,
        READY,
        RESULT,
        SHUTDOWN,
        SNAPSHOT_OPS,
    )
    from worker_capture import Capture  # type: ignore[import-not-found,no-redef]
    from worker_cells import Executor, Interrupter  # type: ignore[import-not-found,no-redef]
    from worker_channel import READ_CHUNK, Channel, control_loop  # type: ignore[import-not-found,no-redef]
    from worker_files import answer as answer_files  # type: ignore[import-not-found,no-redef]
    from worker_json import loads  # type: ignore[import-not-found,no-redef]
    from worker_priority import lower as lower_priority  # type: ignore[import-not-found,no-redef]
    from worker_site import set_up as set_up_site  # type: ignore[import-not-found,no-redef]
    from worker_tracebacks import GUEST_DIR, clip, describe_exception  # type: ignore[import-not-found,no-redef]

NOT_SHOWN = "non-interactive, and thus cannot be shown"
WORKSPACE = "/workspace"  # the sandbox's working directory on every backend, when the host names none
_RLIMIT_NAMES = {
    "AS": resource.RLIMIT_AS,
    "CORE": resource.RLIMIT_CORE,
    "CPU": resource.RLIMIT_CPU,
    "FSIZE": resource.RLIMIT_FSIZE,
    "MSGQUEUE": resource.RLIMIT_MSGQUEUE,
    "NOFILE": resource.RLIMIT_NOFILE,
    "NPROC": resource.RLIMIT_NPROC,
}


def apply_rlimits(limits: dict[str, Any]) -> None:
    for name, value in limits.items():
        which = _RLIMIT_NAMES.get(name)
        if which is None or not isinstance(value, int):
            continue
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))


class _Contains:
    """A warning filter's message pattern that is a plain substring: ``warnings`` only calls ``match`` on it."""

    def __init__(self, text: str) -> None:
        self.text = text

    def match(self, message: str) -> bool:
        return self.text in message


def ignore_warning(text: str) -> None:
    """``warnings.filterwarnings("ignore", message=".*" + re.escape(text))`` without importing ``warnings`` and
    ``re`` for it (about 1 MiB that every idle sandbox would keep): the filter list is ``_warnings``'s own."""
    mutated = getattr(_warnings, "_filters_mutated", None)
    filters = getattr(_warnings, "filters", None)
    if mutated is None or not isinstance(filters, list):  # a Python that keeps its filters otherwise
        import warnings

        warnings.filterwarnings("ignore", message=".*" + text)  # the text has no pattern characters
        return
    filters.insert(0, ("ignore", _Contains(text), Warning, None, 0))
    mutated()


def load_runtime() -> Any:
    """Make the guest's ``mcp`` package importable by user code and return its runtime module."""
    if GUEST_DIR.rstrip(os.sep) not in sys.path:  # boot.py put it there already
        sys.path.insert(0, GUEST_DIR.rstrip(os.sep))
    # Plots render to bytes here; there is no display, and the home directory may not be writable.
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.environ.setdefault("MPLCONFIGDIR", "/tmp/.matplotlib")  # the sandbox's private tmpfs
    # plt.show() under Agg keeps the figure open for us to send; its "cannot be shown" warning is noise here.
    ignore_warning(NOT_SHOWN)
    return __import__("mcp.runtime", fromlist=["runtime"])  # the guest's mcp, not the host's SDK


def main(argv: list[str]) -> int:
    set_up_site()  # started with -S: the site-packages folders and exit()/help(), before any user code
    config: dict[str, Any] = loads(argv[1]) if len(argv) > 1 else {}
    apply_rlimits(config.get("rlimits", {}))
    lower_priority(config)  # before any thread: the control and capture threads, and the user's, inherit it
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
    workspace = workdir if isinstance(workdir, str) and os.path.isdir(workdir) else WORKSPACE
    requests: _queue.SimpleQueue[dict[str, Any]] = _queue.SimpleQueue()
    runtime.rpc.bind(channel.send_strict)
    hibernators: list[Any] = []

    def files(message: dict[str, Any]) -> None:
        """The client's file requests, answered here on the control thread (a client may take a file out while a cell
        runs). The host's snapshot requests go to the main thread, idle then (they come only while no cell runs): a
        restore runs the session's imports and definitions, and a module like ``threading``, which the worker no
        longer imports at start, takes the thread that first imports it for the process's main thread."""
        if message.get("op") not in SNAPSHOT_OPS:
            channel.send(answer_files(workspace, message))
            return
        requests.put(message)

    def snapshot(message: dict[str, Any]) -> None:
        """The snapshot module is imported on the first request: pickle and tarfile cost every sandbox's start tens
        of ms, and every idle sandbox memory."""
        if not hibernators:
            if __package__:
                from .worker_snapshot import Hibernator
            else:
                from worker_snapshot import Hibernator  # type: ignore[import-not-found,no-redef]
            hibernators.append(Hibernator(executor, workspace, runtime))
        channel.send(hibernators[0].answer(message))

    _thread.start_new_thread(  # not threading: it imports functools and collections, ~1 MiB an idle sandbox keeps
        control_loop,
        (
            os.fdopen(control_in, "rb", buffering=READ_CHUNK),
            requests,
            interrupter,
            runtime.rpc.deliver,
            files,
        ),
    )
    channel.send({"type": READY, "protocol": PROTOCOL_VERSION, "python": sys.version.split()[0], "pid": os.getpid()})
    while True:
        message = requests.get()
        if message.get("type") == SHUTDOWN:
            return 0
        if message.get("type") == FILES:  # a snapshot request, passed on by the control thread
            snapshot(message)
            continue
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
        links = runtime._take_links()
        if links:
            outcome["links"] = links
        if setup_notes:
            outcome["notes"] = setup_notes + list(outcome.get("notes") or [])
        outcome.update(capture.fence())
        outcome.update(type=RESULT, id=request_id, duration=time.perf_counter() - started)
        channel.send(outcome)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
