"""The program's entry, ``mcp-codemode`` and ``python -m mcp_codemode``: which path a command line takes.

Apart from main.py because main.py loads the settings and the parser of every command when imported, and a plain
stdio ``serve`` answers its client before it needs either (plain_serve.py); every other command line goes to main.py.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .plain_serve import plain_serve, serve_plain


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    options = plain_serve(words)
    if options is not None:
        return serve_plain(options)
    from .main import main as everything_else

    return everything_else(words)
