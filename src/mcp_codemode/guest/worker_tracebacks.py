"""How an exception of the user's code is described to the host: its traceback trimmed to the user's frames, clipped.

Apart from the executor because it is pure text work that both the executor and the worker's main loop use (an
exception can land outside a cell, e.g. a second interrupt), and because its rule is subtle enough to read on
its own: the worker's, the runtime's and asyncio's frames above the first frame of a cell are dropped, in every
chained exception, and a hostile exception (a ``__str__`` that raises) cannot kill the worker.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms of start-up and is only needed by type checkers
    import traceback
    from typing import Any

TEXT_LIMIT = 200_000
GUEST_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep  # the worker's and runtime's own frames
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
            current.stack = type(current.stack).from_list(kept)
        pending.extend([current.__cause__, current.__context__])


def clip(text: str, limit: int = TEXT_LIMIT) -> str:
    """Keep head and tail of an oversized text, so one repr or message cannot blow up a frame."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... [{len(text) - 2 * half} characters cut] ...\n{text[-half:]}"


def describe_exception(exc: BaseException) -> dict[str, Any]:
    """The exception as the host shows it. ``traceback`` is imported here, by the first error: with ``linecache``,
    ``tokenize`` and ``re`` behind it, it is about 1.6 MiB that an idle sandbox would otherwise keep."""
    try:
        import traceback

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
