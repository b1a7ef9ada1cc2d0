"""The command line's own ``main`` called in the test process, with an environment of the test's choosing.

Why not a subprocess each time: starting ``python -m mcp_codemode`` costs seconds of imports before the command
does anything (about 2 s of CPU, 5-15 s on a loaded machine), and the files that run a command twenty times spent
most of their time there. A test that is about what a command does (its output, its exit status, what it changes
on disk and in the sandboxes) proves the same through ``main``: it parses the same arguments, reads its settings
from the environment given here, and runs the same code, whose subprocesses (sandboxes, uv, podman) are as real as
ever. What only a new process shows (the entry points, a SIGKILL of the bridge, an installed wheel) is tested with
real processes in tests/cli/test_cli.py and test_install_as_tool.py.
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

from mcp_codemode.cli.main import main


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` is exactly ``env`` meanwhile (every setting and every child process reads it there)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _logging_restored() -> Iterator[None]:
    """``main`` configures the root logger and warnings for its process; the test process gets its own back."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        with warnings.catch_warnings():
            yield
    finally:
        logging.captureWarnings(False)
        root.handlers[:] = handlers
        root.setLevel(level)


def call_main(*args: str, env: Mapping[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``mcp-codemode ARGS`` run by ``main`` here, reading ``stdin``: its exit status and what it wrote, as
    ``subprocess.run`` says."""
    out, err = io.StringIO(), io.StringIO()
    with _environment(env), _logging_restored(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        saved, sys.stdin = sys.stdin, io.StringIO(stdin)
        try:
            code = main(list(args))
        finally:
            sys.stdin = saved
    return subprocess.CompletedProcess(["mcp-codemode", *args], code, out.getvalue(), err.getvalue())
