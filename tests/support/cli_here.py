"""``mcp-codemode COMMAND`` run in the test's own process, through the command line's entry point.

Why: an ``mcp-codemode`` process spends about three seconds of CPU importing the MCP SDK before it does anything,
and a test that checks what one command leaves for the next (a cache, a sign-in) runs several. The entry point,
its settings and everything it starts are the real ones; only the process boundary is left out, so a test still
runs at least one command as a process of its own where the entry point itself is the point. Nothing is kept in
memory from one command to the next that a process would not keep: the commands build everything from the
environment and the state directory each time.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path

from mcp_codemode.cli.main import main


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` is exactly ``env`` inside, as it is in a process started with it; restored after."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def cli_here(
    env: Mapping[str, str], *args: str, cwd: Path | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """``mcp-codemode ARGS`` with environment ``env`` (and working directory ``cwd``, reading ``stdin``): its exit
    status and what it printed, as from a process."""
    out, err = io.StringIO(), io.StringIO()
    handlers, level = logging.root.handlers[:], logging.root.level  # the command configures logging for itself
    saved_stdin, sys.stdin = sys.stdin, io.StringIO(stdin)
    try:
        with (
            environment(env),
            warnings.catch_warnings(),  # and the warnings filters
            contextlib.chdir(cwd or Path.cwd()),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            status = main(list(args))
    finally:
        sys.stdin = saved_stdin
        logging.captureWarnings(False)
        logging.root.handlers[:] = handlers
        logging.root.setLevel(level)
    return subprocess.CompletedProcess(["mcp-codemode", *args], status, out.getvalue(), err.getvalue())
