"""What a session may be called, and the name of the default one.

Apart from sessions.py, which starts sandboxes, so that the command line checks a ``--session`` name without
loading the sandbox code (``serve`` over stdio answers its client before that is loaded; issue 38).
"""

from __future__ import annotations

import re

from ..guest.protocol import SESSION_KEY_PATTERN

SESSION_NAME = re.compile(SESSION_KEY_PATTERN)  # the internal key (prefix and principal); users name with fewer
DEFAULT_SESSION = "default"


def check_session_name(name: str) -> str:
    if not SESSION_NAME.fullmatch(name):
        raise ValueError(
            f"session name {name!r} is not valid: use 1-128 letters, digits, '_', '.', ':', '@' or '-', "
            "starting with a letter or digit (for example 'analysis-1')"
        )
    return name
