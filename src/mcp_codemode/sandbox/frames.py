"""Host side of the frame channel: 4-byte big-endian length, then UTF-8 JSON.

The guest has its own copy of these few lines (it may not import host code). Everything read here comes
from code we do not trust, so a frame is refused before it is read when its announced length is over the
bound, and after it is read unless it is a JSON object with a string ``type``.
"""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 8 * 1024 * 1024


class FrameError(Exception):
    """The guest broke the protocol; the worker cannot be trusted any further and is killed."""


def encode_frame(message: dict[str, Any]) -> bytes:
    payload = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return HEADER.pack(len(payload)) + payload


async def read_frame(reader: asyncio.StreamReader, max_bytes: int = MAX_FRAME_BYTES) -> dict[str, Any] | None:
    """Read one frame; ``None`` at a clean end of stream between frames."""
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
        payload = await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise FrameError("the worker's output ended in the middle of a frame") from None
    try:
        message = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise FrameError(f"the worker sent a frame that is not JSON: {exc}") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise FrameError("the worker sent a frame that is not an object with a string 'type'")
    return message
