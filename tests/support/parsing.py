"""``ast.parse`` that a busy test process cannot break.

CPython before 3.11.8 keeps the AST builder's recursion count in one global (gh-106905). A garbage collection
during a parse can run finalizers, which lets another thread in; if that thread parses too, the first parse
fails with "SystemError: AST constructor recursion depth mismatch" (seen once in CI, in test_architecture, with
a finalizer of an asyncio subprocess transport in the traceback). With the collector paused no finalizer runs,
so nothing else gets in between.
"""

from __future__ import annotations

import ast
import gc


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, filename)
    finally:
        if enabled:
            gc.enable()
