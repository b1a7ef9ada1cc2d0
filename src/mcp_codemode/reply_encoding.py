"""What the relay hands the worker for one request of sandboxed code: the reply, its type and its spelling.

Two layers meet here. The sandbox's worker passes each ``call`` frame of a running cell to a request handler
(``GuestRequestHandler``) and writes what it returns as a ``reply`` frame; the relay is that handler. Both sides
speak the protocol's typed messages (``guest/protocol.py``): a ``CallFrame`` in, a ``ReplyBody`` out, or an
``EncodedReply``, a successful body whose value the relay encoded already. The type is named here, below both,
so the relay need not import the sandbox, nor the sandbox the relay, to agree on it.

The spelling is here for the same reason: the frame channel writes every frame with ``encode_value``, and the
relay encodes a tool's result once, to count its bytes for the audit log, then hands the bytes on so the frame
does not encode them again, without importing the sandbox's framing to do that.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from .guest.protocol import CallFrame, ReplyBody, ReplyValue


class EncodedReply(dict[str, Any]):
    """A successful reply whose ``value`` was already encoded (``value_json``), to be sent without encoding it again.

    The relay encodes a tool's result once, to count its bytes for the audit log; the frame reuses those bytes.
    A large result (a megabyte of JSON costs milliseconds to encode) used to be encoded twice.
    """

    def __init__(self, reply: ReplyValue, value_json: bytes) -> None:
        super().__init__(reply)
        self.value_json = value_json


if TYPE_CHECKING:
    # The answer to one request, as the relay returns it and the worker frames it.
    Reply = ReplyBody | EncodedReply
    # Answers one request of sandboxed code (a CALL frame: its op and parameters, typed as a well-behaved guest
    # sends them and checked field by field before use, since the guest may send anything) with a reply body.
    GuestRequestHandler = Callable[[CallFrame], Awaitable[Reply]]


def encode_value(value: Any) -> bytes:
    """``value`` as the frame spells it: compact UTF-8 JSON; raises like ``encode_frame`` on what JSON cannot carry."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
