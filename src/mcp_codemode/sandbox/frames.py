"""Host side of the frame channel: 4-byte big-endian length, then UTF-8 JSON.

The guest has its own copy of these few lines (it may not import host code). Everything read here comes
from code we do not trust, so a frame is refused before it is read when its announced length is over the
bound, and after it is read unless it is strict UTF-8 JSON: an object with a string ``type``, no ``NaN`` or
infinite number, at most ``MAX_DEPTH`` levels deep and at most ``MAX_VALUES`` values. Those bounds keep one
frame from costing the host far more memory than its bytes (``[{},{},...]`` is 64 bytes of Python per 3 bytes
of JSON) or recursion depth in whatever later walks the value (schema checks, the SDK's serialiser).

Lone surrogates are the one thing repaired rather than refused: JSON may spell them (``"\\ud800"``), a
well-behaved guest sends them when user code passes such a string, and Python cannot encode them as UTF-8,
so every string in a frame leaves here with each lone surrogate replaced by U+FFFD. Whatever the host does
with the message afterwards (re-encode it for an upstream server, log it, reply with it) cannot fail on one.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import CodemodeError
from ..guest.protocol import MAX_DEPTH, MAX_FRAME_BYTES, MAX_VALUES, REPLY
from ..reply_encoding import EncodedReply, encode_value

HEADER = struct.Struct(">I")
_REASON_CHARS = 200

_SURROGATE = re.compile("[\ud800-\udfff]")
# The json module's own (C) scanner of one string literal: where a string ends, exactly as json.loads sees it.
_scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


class FrameError(CodemodeError):
    """The guest broke the protocol; the worker cannot be trusted any further and is killed."""


def encode_frame(message: Mapping[str, Any]) -> bytes:
    """One frame: ``message`` (a frame of ``guest/protocol.py``'s typed ``HostFrame``, or any object) framed."""
    return _framed(encode_value(message))


def _framed(payload: bytes) -> bytes:
    return HEADER.pack(len(payload)) + payload


def encode_reply(request_id: int, body: Mapping[str, Any]) -> bytes:
    """The reply frame to request ``request_id``: ``body`` spliced in, its value pre-encoded when it is one."""
    if not isinstance(body, EncodedReply):
        return encode_frame({"type": REPLY, "id": request_id, **body})
    head = encode_value({"type": REPLY, "id": request_id, **{k: v for k, v in body.items() if k != "value"}})
    return _framed(head[:-1] + b',"value":' + body.value_json + b"}")


async def read_frame(reader: asyncio.StreamReader, max_bytes: int = MAX_FRAME_BYTES) -> dict[str, Any] | None:
    """Read one frame; ``None`` at a clean end of stream between frames. Every other outcome is a ``FrameError``."""
    payload = await read_payload(reader, max_bytes)
    return None if payload is None else decode_frame(payload)


async def read_payload(reader: asyncio.StreamReader, max_bytes: int = MAX_FRAME_BYTES) -> bytes | None:
    """The bytes of one frame, never reading past a header that announces more than ``max_bytes``."""
    try:
        header = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise FrameError("the worker's output ended in the middle of a frame header") from None
        return None
    (size,) = HEADER.unpack(header)
    if size > max_bytes:
        raise FrameError(f"the worker announced a frame of {size} bytes (limit {max_bytes})")
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise FrameError("the worker's output ended in the middle of a frame") from None


def decode_frame(payload: bytes) -> dict[str, Any]:
    """The message one frame carries, checked as described above; anything else is a ``FrameError``."""
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FrameError(f"the worker sent a frame that is not JSON (bad UTF-8: {str(exc)[:_REASON_CHARS]})") from None
    brackets = text.count("[") + text.count("{")  # opening brackets anywhere, strings included
    _check_value_count(text, brackets + text.count(","))
    try:
        # ValueError covers JSONDecodeError and an integer over Python's 4,300-digit limit.
        message = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except (ValueError, RecursionError) as exc:
        raise FrameError(f"the worker sent a frame that is not JSON: {str(exc)[:_REASON_CHARS]}") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise FrameError("the worker sent a frame that is not an object with a string 'type'")
    # Walked only when the walk could find something: a lone surrogate can only come from a \u escape (strict
    # UTF-8 decoding refused any other spelling), and a value nested d deep needs d opening brackets. Brackets
    # and escapes inside strings only make the walk run more often, never wrongly not.
    if brackets > MAX_DEPTH or "\\u" in text:
        _check_and_repair(message)
    return message


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def _check_value_count(text: str, structural: int) -> None:
    """Refuse a frame of more than MAX_VALUES values before parsing it, so it never costs their memory.

    Every value but the first follows a comma or an opening bracket, so counting those bounds the values.
    Counted over the whole text the bound settles nearly every frame at once; only when it does not are
    string literals skipped (with the json module's own scanner, so both agree on where strings end), one
    string per step, and a frame with more than MAX_VALUES strings is refused on the way: the work is
    bounded by the limit, not by the frame. (A regular expression for string literals is quadratic on
    unterminated ones, which a hostile worker would send.) ``structural`` is that count over the whole text.
    """
    if structural <= MAX_VALUES:
        return
    values = strings = position = 0
    while True:
        quote = text.find('"', position)
        values += _structural(text, position, len(text) if quote < 0 else quote)
        if values > MAX_VALUES or strings > MAX_VALUES:
            raise FrameError(f"the worker sent a frame of more than {MAX_VALUES:,} JSON values")
        if quote < 0:
            return
        strings += 1
        try:
            position = _scanstring(text, quote + 1, True)[1]
        except ValueError as exc:
            raise FrameError(f"the worker sent a frame that is not JSON: {str(exc)[:_REASON_CHARS]}") from None


def _structural(text: str, start: int, end: int) -> int:
    return text.count(",", start, end) + text.count("[", start, end) + text.count("{", start, end)


def _check_and_repair(message: dict[str, Any]) -> None:
    """Enforce MAX_DEPTH and replace lone surrogates in every string (keys too), without recursion."""
    stack: list[tuple[dict[str, Any] | list[Any], int]] = [(message, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise FrameError(f"the worker sent a frame nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, dict) and not all(_encodable(key) for key in node):
            items = [(_repaired(key), value) for key, value in node.items()]
            node.clear()
            node.update(items)
        entries: Iterable[tuple[Any, Any]] = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in entries:  # only values are replaced, so iterating while assigning is safe
            if isinstance(value, str):
                if not _encodable(value):
                    node[key] = _repaired(value)
            elif isinstance(value, (dict, list)):
                stack.append((value, depth + 1))


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _repaired(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text)
