"""The web console's settings: whether the bridge serves it, and on which loopback port a stdio bridge does.

Apart from ``settings_fields.py`` because the console is a part of its own that most bridges never turn on, and
that table is near its size bound; the fields are written here as plain rows (name, variable, parser, what is
expected, an example), which the table turns into its ``Field`` entries, so this module imports nothing of it.
Off unless turned on: a console is a new door into the bridge, and nobody should find one open they did not ask for.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .setting_parsers import int_in, switch

CONSOLE_PATH = "/console"  # where the console lives on the HTTP face, and on a stdio bridge's own port


def _port(text: str) -> int:
    return int_in(0, 65535)(text.strip() or "0")


def _operators(text: str) -> tuple[str, ...]:
    """Token names (``t-`` and 12 hex digits, as the console shows whoever signed in), never tokens: the setting
    then holds no secret, and may sit in a file or a process listing."""
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    if any(not re.fullmatch(r"t-[0-9a-f]{12}", name) for name in names):
        raise ValueError(text)
    return names


def _approvers(text: str) -> str:
    value = text.strip().lower()
    if value not in ("", "client", "console", "either"):
        raise ValueError(text)
    return value


#: (name, variable, parser, what it expects, an example): the rows settings_fields.py adds to its table.
CONSOLE_FIELDS: tuple[tuple[str, str, Callable[[str], Any], str, str], ...] = (
    (
        "console",
        "MCP_BRIDGE_CONSOLE",
        switch,
        f"on or off (on: the web console at {CONSOLE_PATH}, on the HTTP face or a stdio bridge's loopback port)",
        "on",
    ),
    (
        "console_port",
        "MCP_BRIDGE_CONSOLE_PORT",
        _port,
        "the 127.0.0.1 port a stdio bridge serves its console on (0: any free port, named in the log)",
        "8770",
    ),
    (
        "approvals",
        "MCP_BRIDGE_APPROVALS",
        _approvers,
        "who may answer an ask_tools call: client (its MCP client, by elicitation), console (the web console) or "
        "either (the client when it can elicit, else the console); unset: client, or either with the console on",
        "console",
    ),
    (
        "console_operators",
        "MCP_BRIDGE_CONSOLE_OPERATORS",
        _operators,
        "the names (t- and 12 hex digits, as the console shows who signed in) of the tokens that may restart upstream "
        "servers from the web console, comma-separated; other token holders see the servers read-only",
        "t-3f2a9c0d81be",
    ),
)
