"""How a value is spelled in a frame (compact UTF-8 JSON), and a reply whose value is spelled already.

It exists apart from ``sandbox/frames.py`` because two layers need it: the frame channel writes every frame
with it, and the relay encodes a tool's result once, to count its bytes for the audit log, then hands the
bytes on so the frame does not encode them again. Here, below both, the relay need not import the sandbox's
framing to do that.
"""

from __future__ import annotations

import json
from typing import Any


class EncodedReply(dict[str, Any]):
    """A successful reply whose ``value`` was already encoded (``value_json``), to be sent without encoding it again.

    The relay encodes a tool's result once, to count its bytes for the audit log; the frame reuses those bytes.
    A large result (a megabyte of JSON costs milliseconds to encode) used to be encoded twice.
    """

    def __init__(self, reply: dict[str, Any], value_json: bytes) -> None:
        super().__init__(reply)
        self.value_json = value_json


def encode_value(value: Any) -> bytes:
    """``value`` as the frame spells it: compact UTF-8 JSON; raises like ``encode_frame`` on what JSON cannot carry."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
