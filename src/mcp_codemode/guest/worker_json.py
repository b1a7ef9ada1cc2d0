"""JSON for the frames, on the interpreter's C accelerator (``_json``) without the ``json`` package.

Why: ``import json`` imports ``re`` (and ``enum``, ``functools``, ``collections`` behind it) to compile the
pure-Python fallbacks' patterns, which the C scanner and encoder never use: about 1.2 MiB of private memory in
every sandbox, for the whole life of an idle session (docs/density.md). The worker needs only what ``_json``
does, so it calls it directly; a cell that imports ``json`` pays for it then, as it would in any Python.

The behaviour is ``json``'s: ``_json`` is the code ``json.loads`` and ``json.dumps`` run. Only the whitespace
around a document and the "extra data" check are done here, as ``json.decoder`` does them. A malformed document
raises ``json``'s own ``JSONDecodeError`` (``_json`` imports ``json.decoder`` to build it), a ``ValueError``.
"""

from __future__ import annotations

import _json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_WHITESPACE = " \t\n\r"
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Context:
    """What ``_json.make_scanner`` reads off a ``JSONDecoder``: the defaults of ``json.loads``."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


_scan = _json.make_scanner(_Context())  # type: ignore[arg-type]  # it reads only the attributes above


def loads(data: bytes | str) -> Any:
    """``json.loads``: one JSON document, surrounded by whitespace at most."""
    text = data.decode("utf-8", "surrogatepass") if isinstance(data, bytes) else data
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _scan(text, start)
    except StopIteration as stop:
        raise ValueError(f"Expecting value: char {stop.value}") from None
    rest = text[end:].lstrip(_WHITESPACE)
    if rest:
        raise ValueError(f"Extra data: char {len(text) - len(rest)}")
    return value


def _unserialisable(value: Any) -> Any:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def dumps(value: Any, default: Any = None, allow_nan: bool = True) -> str:
    """``json.dumps(value, ensure_ascii=False, default=default, allow_nan=allow_nan)``. A new encoder each time, as
    ``json`` makes one: its table of the containers being written must start empty (a failed call leaves it not)."""
    if isinstance(value, str):
        return str(_json.encode_basestring(value))
    iterencode = _json.make_encoder(
        {}, default or _unserialisable, _json.encode_basestring, None, ": ", ", ", False, False, allow_nan
    )
    return "".join(iterencode(value, 0))
