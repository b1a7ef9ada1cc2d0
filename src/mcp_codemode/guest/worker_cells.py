"""Running cells in one persistent namespace, notebook style, and interrupting them only while they run.

Apart from the worker's start-up and control loop because this is where the user's code is compiled and run:
the last expression's value, top-level ``await``, the sources kept for tracebacks (without growing for ever),
the images a cell showed, and the SIGINT that an interrupt frame becomes, raised only inside user code.
"""

from __future__ import annotations

import _ast
import _thread
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms of start-up and is only needed by type checkers
    import signal as _signal
    import types
    from collections import deque
    from typing import Any
else:  # the C modules behind them: the Python ones cost an idle sandbox about 1 MiB (docs/density.md)
    import _signal
    from _collections import deque

if __package__:  # imported on the host (tests) as mcp_codemode.guest.worker_cells
    from .worker_definitions import Definitions
    from .worker_tracebacks import clip, describe_exception
else:  # in the sandbox the guest folder is on sys.path
    from worker_definitions import Definitions  # type: ignore[import-not-found,no-redef]
    from worker_tracebacks import clip, describe_exception  # type: ignore[import-not-found,no-redef]


_CODE = type(compile("", "<cell>", "exec"))  # types.CodeType, without importing types for it (idle memory)


class Interrupter:
    """Delivers SIGINT to the main thread only while user code runs. Made on the main thread.

    ``_signal`` and ``_thread`` rather than ``signal`` and ``threading``: those import ``enum``, ``functools`` and
    ``collections``, about 1 MiB that every idle sandbox would keep (docs/density.md).
    """

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self.running_id: int | None = None
        self._main_thread = _thread.get_ident()
        _signal.signal(_signal.SIGINT, self._on_sigint)

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
                _signal.pthread_kill(self._main_thread, _signal.SIGINT)


def _linecache() -> dict[str, Any] | None:
    """``linecache.cache`` once something imported ``linecache`` (a traceback being written), else None."""
    module = sys.modules.get("linecache")
    cache = getattr(module, "cache", None)
    return cache if isinstance(cache, dict) else None


class _Filling:
    """The loader of ``linecache`` wrapped: after the module runs, its cache gets the cells' sources."""

    def __init__(self, loader: Any, lines: dict[str, Any]) -> None:
        self._loader = loader
        self._lines = lines

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        module.__loader__ = module.__spec__.loader = self._loader
        module.cache.update(self._lines)


class LinecacheWatch:
    """A finder that does nothing until ``linecache`` is imported, then sees that its cache starts with every kept
    cell's source, and leaves ``sys.meta_path``.

    Why: importing ``linecache`` imports ``tokenize`` and ``re`` (about 1.4 MiB that every idle sandbox would keep),
    and only a traceback needs it; but a cell's source must be there when one is written, by the worker or by the
    user's own ``traceback.print_exc()`` in a later cell, as if the worker had put it there from the start.
    """

    def __init__(self, lines: dict[str, Any]) -> None:
        self._lines = lines

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "linecache":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Filling(spec.loader, self._lines)
                return spec
        return None


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
        self._recent: deque[list[Any]] = deque()  # [filename, characters, defines code]
        self._kept: deque[tuple[str, int]] = deque()
        self._kept_chars = 0
        # What linecache.cache holds of the cells, kept here too while nothing has imported linecache.
        self.lines: dict[str, Any] = {}
        if _linecache() is None:
            sys.meta_path.insert(0, LinecacheWatch(self.lines))

    def add(self, filename: str, source: str) -> None:
        """Before the cell is compiled, so a SyntaxError can show its line too."""
        entry = (len(source), None, source.splitlines(True), filename)
        self.lines[filename] = entry
        cache = _linecache()
        if cache is not None:
            cache[filename] = entry
        self._recent.append([filename, len(source), False])
        while len(self._recent) > self.keep_recent:
            old, chars, kept = self._recent.popleft()
            if kept:
                self._kept.append((old, chars))
                self._kept_chars += chars
            else:
                self._drop(old, cache)
        while self._kept_chars > self.budget and self._kept:
            old, chars = self._kept.popleft()
            self._kept_chars -= chars
            self._drop(old, cache)

    def _drop(self, filename: str, cache: dict[str, Any] | None) -> None:
        self.lines.pop(filename, None)
        if cache is not None:
            cache.pop(filename, None)

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
        self.definitions = Definitions()  # what a hibernated session defines again (worker_snapshot.py)
        self._interrupter = interrupter

    def _compile(self, source: str) -> tuple[types.CodeType, types.CodeType | None, str]:
        self.cell += 1
        filename = f"<cell {self.cell}>"
        self.sources.add(filename, source)
        # _ast rather than ast: the same classes and flags without ast.py's import cost at start-up.
        flags = _ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        tree = compile(source, filename, "exec", flags | _ast.PyCF_ONLY_AST, dont_inherit=True)
        assert isinstance(tree, _ast.Module)
        self.definitions.note(tree, source)
        last: types.CodeType | None = None
        tail = tree.body[-1] if tree.body else None
        if isinstance(tail, _ast.Expr):
            tree.body.pop()
            expr = _ast.Expression(tail.value)
            last = compile(expr, filename, "eval", flags, dont_inherit=True)
        body = compile(tree, filename, "exec", flags, dont_inherit=True)
        if any(isinstance(const, _CODE) for code in (body, last) if code for const in code.co_consts):
            self.sources.defines_code()
        return body, last, filename

    def define(self, source: str) -> None:
        """Run a kept statement again in a restored session: compiled as a cell, so its source shows in tracebacks
        and it is kept again for the next hibernation."""
        body, last, _ = self._compile(source)
        self._run(body)
        if last is not None:
            self._run(last)

    def _run(self, code: types.CodeType) -> Any:
        result = eval(code, self.namespace)  # noqa: S307 - running the user's code is the point
        if code.co_flags & 0x80:  # CO_COROUTINE: the cell used top-level await
            result = self._await(result)
        return result

    def _await(self, coroutine: Any) -> Any:
        """Run a cell that awaits to its end; an interrupt that lands in the event loop ends it where it waits.

        While the cell waits (``await asyncio.sleep``, a tool call, an approval), the main thread sits in the
        loop's selector, so the SIGINT of an interrupt is raised there: its traceback held the loop's and the
        worker's frames and none of the user's. Then the cell's task is cancelled, which ends the cell at its
        ``await`` (its ``finally`` blocks run), and the interrupt is raised again with that traceback, which
        shows the user's line. The same dance as ``asyncio.run`` on Ctrl-C.
        """
        import asyncio

        if self.loop is None:
            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
        task = self.loop.create_task(coroutine)
        try:
            return self.loop.run_until_complete(task)
        except KeyboardInterrupt:
            if task.done():  # raised in the user's own frames (blocking code inside the cell): already right
                raise
        task.cancel()
        try:
            self.loop.run_until_complete(task)
        except asyncio.CancelledError as cancelled:  # ended at its await: where the code was waiting
            raise KeyboardInterrupt().with_traceback(cancelled.__traceback__) from None
        raise KeyboardInterrupt  # the code swallowed its cancellation and finished: it was interrupted all the same

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
            import traceback  # here: an idle sandbox keeps what it imports (docs/density.md)

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
        try:  # noqa: SIM105 - no contextlib in the guest: it costs every idle sandbox ~0.9 MiB
            display.add_found_in(value)
        except BaseException:  # noqa: BLE001, S110 - a value that only looked like an image is shown as text
            pass
        try:
            shown = repr(value)
        except BaseException as exc:  # noqa: BLE001 - a broken __repr__ is the user's error, not ours
            return {"status": "error", "error": describe_exception(exc)}
        return {"status": "ok", "value": clip(shown)}
