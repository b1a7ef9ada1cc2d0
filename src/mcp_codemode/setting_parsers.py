"""The parsers every group of settings shares: on/off, and a number (or a size) within bounds.

Apart from ``settings_fields.py`` because the groups that keep their own rows beside it (``console_settings.py``,
``hibernation_settings.py``) need the same spellings, and the table imports those groups: here, none of them
imports another, and a switch or a bounded number is spelled one way in every setting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from .sizes import parse_size

T = TypeVar("T", int, float)


def switch(text: str) -> bool:
    """On or off, as every switch of the settings is spelled."""
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(text)


def bounded(parse: Callable[[str], T], low: T, high: T) -> Callable[[str], T]:
    """``parse``, refusing values outside ``low..high`` (inclusive)."""

    def parse_in_range(text: str) -> T:
        value = parse(text.strip())
        if not low <= value <= high:
            raise ValueError(text)
        return value

    return parse_in_range


def int_in(low: int, high: int) -> Callable[[str], int]:
    return bounded(int, low, high)


def float_in(low: float, high: float) -> Callable[[str], float]:
    return bounded(float, low, high)


def size_in(low: int, high: int) -> Callable[[str], int]:
    return bounded(parse_size, low, high)
