"""Sizes as people write them (``512m``, ``1.5GiB``) and as the bridge prints them back (``512m``).

Apart from the settings catalogue because the sandboxes, the run service and the benchmarks print sizes too, and a
unit rule is a thing of its own: binary units, the way container runtimes read ``--memory``.
"""

from __future__ import annotations

import re

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """Parse ``512m``, ``1g``, ``1.5GiB`` or plain bytes, the way container runtimes do (binary units)."""
    match = _SIZE_RE.match(text)
    if not match:
        raise ValueError(text)
    number, unit, _ = match.groups()
    value = int(float(number) * _SIZE_UNITS[unit.lower()])
    if value <= 0:
        raise ValueError(text)
    return value


def format_size(value: int) -> str:
    for unit, factor in (("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if value % factor == 0:
            return f"{value // factor}{unit}"
    return str(value)
