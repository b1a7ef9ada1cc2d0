"""What an idle sandbox keeps in memory: the worker imports only what every cell needs (docs/density.md).

An idle session is a live guest Python waiting for its next cell, and what it imported stays in its memory for as
long as it lives. The worker therefore speaks JSON through ``_json`` (``worker_json``), uses ``_thread``,
``_queue`` and ``_signal``, imports ``traceback``, ``base64`` and ``difflib`` only when an error, a file or a typo
needs them, and starts with ``-S`` (``worker_site`` sets up the import path itself, without the code .pth files
run). These tests hold each of those: the codec behaves as ``json``, the path is the one ``site`` gives, the cells'
sources reach a traceback written after ``linecache`` was imported late, and an idle worker holds none of the
heavy modules.
"""

from __future__ import annotations

import ast
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_codemode.guest import protocol, worker_json
from mcp_codemode.sandbox.base import guest_argv
from mcp_codemode.sandbox.frames import HEADER
from mcp_codemode.sandbox.staging import stage_guest

# Each of these imports re, enum, functools or collections behind it: none belongs in an idle sandbox.
HEAVY = {"re", "enum", "json", "threading", "queue", "collections", "functools", "contextlib", "traceback",
         "linecache", "tokenize", "base64", "difflib", "signal", "importlib.util", "warnings"}  # fmt: skip
DOCUMENTS: list[Any] = [
    1, -0.5, 1e300, 10**30, "x", "é\u2028\x00\"\\", None, True, [], {},
    {"a": [1, 2.5, None, True, False, "ü"], "b": {"c": {"d": []}}}, [[[["deep"]]]],
]  # fmt: skip


@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_guest_codec_writes_and_reads_what_json_does(document: Any) -> None:
    assert worker_json.dumps(document) == json.dumps(document, ensure_ascii=False)
    text = json.dumps(document)
    assert worker_json.loads(text) == json.loads(text) == worker_json.loads(f" \n{text}\t".encode())


def test_the_guest_codec_refuses_what_json_refuses() -> None:
    for bad in ("", "  ", "{", "[1] x", "nul", '{"a" 1}'):
        with pytest.raises(ValueError, match=r"(?i)expecting|extra data"):
            worker_json.loads(bad)
    with pytest.raises(ValueError, match="JSON compliant"):
        worker_json.dumps([math.inf], allow_nan=False)
    with pytest.raises(TypeError, match="not JSON serializable"):
        worker_json.dumps({"x": object()})
    assert worker_json.dumps({"x": object()}, default=lambda value: "shown").endswith('"shown"}')
    looped: list[Any] = [1]
    looped.append(looped)
    with pytest.raises(ValueError, match="Circular"):
        worker_json.dumps(looped)
    assert worker_json.dumps([1]) == "[1]"  # a failed call leaves nothing behind for the next one
    assert [math.isnan(v) or math.isinf(v) for v in worker_json.loads("[NaN, Infinity, -Infinity]")] == [True] * 3


class Guest:
    """The staged worker started as every backend starts it (``guest_argv``), outside a sandbox: what it imports
    does not depend on the sandbox around it."""

    def __init__(self, staged: Path) -> None:
        argv = guest_argv(sys.executable, {"workdir": str(staged)})
        argv[argv.index(next(a for a in argv if a.endswith("boot.py")))] = str(staged / "boot.py")
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.next_id = 0
        assert self.read()["type"] == protocol.READY

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        while True:
            header = self.process.stdout.read(HEADER.size)
            assert len(header) == HEADER.size, self.process.stderr.read().decode() if self.process.stderr else ""
            message: dict[str, Any] = json.loads(self.process.stdout.read(HEADER.unpack(header)[0]))
            if message["type"] != protocol.OUTPUT:
                return message

    def run(self, code: str, **extra: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.next_id += 1
        payload = json.dumps({"type": protocol.EXECUTE, "id": self.next_id, "code": code, **extra}).encode()
        self.process.stdin.write(HEADER.pack(len(payload)) + payload)
        self.process.stdin.flush()
        return self.read()


def started_guest(staged: Path) -> Guest:
    """A worker that ran its first cell, with a server's proxies bound, as a session's first call leaves it."""
    started = Guest(staged)
    context = {"servers": [{"name": "time", "alias": "time", "transport": "stdio"}], "versions": {},
               "policy": {"max_argument_depth": 32, "where": "the policy"}, "saved": []}  # fmt: skip
    assert started.run("1", context=context)["value"] == "1"
    return started


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return stage_guest(tmp_path_factory.mktemp("idle"), os.getuid(), os.getgid())


@pytest.fixture(scope="module")
def guest(staged: Path) -> Iterator[Guest]:
    started = started_guest(staged)
    yield started
    started.process.kill()
    started.process.wait()


@pytest.mark.backend  # starts a Python process
def test_an_idle_worker_holds_none_of_the_heavy_modules(staged: Path) -> None:
    idle = started_guest(staged)
    try:
        loaded = set(ast.literal_eval(idle.run("import sys\nsorted(sys.modules)")["value"]))
    finally:
        idle.process.kill()
        idle.process.wait()
    assert not HEAVY & loaded, sorted(HEAVY & loaded)
    assert {"worker", "worker_json", "mcp.runtime"} <= loaded


@pytest.mark.backend
def test_the_import_path_and_builtins_are_those_site_gives(guest: Guest) -> None:
    done = subprocess.run([sys.executable, "-I", "-c", "import sys, json; print(json.dumps(sys.path))"],
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    with_site = json.loads(done.stdout)
    path = ast.literal_eval(guest.run("import sys\nsys.path")["value"])
    assert path[1:] == with_site  # the guest's own folder first, then what site would have given
    assert guest.run("[type(b).__name__ for b in (exit, quit, help, license)]")["value"] == (
        "['Quitter', 'Quitter', '_Helper', '_Printer']"
    )
    assert guest.run("exit()")["status"] == "error"  # SystemExit from a cell ends the cell, not the session


@pytest.mark.backend
def test_tracebacks_show_the_cells_source_when_linecache_comes_late(staged: Path) -> None:
    """The function is defined while nothing has imported ``linecache``; the user's own traceback, written by a
    later cell that imports it, and the worker's show its line all the same."""
    fresh = started_guest(staged)
    try:
        assert fresh.run("def broken():\n    return 1 / 0  # the line a traceback shows")["status"] == "ok"
        assert fresh.run("import sys\n'linecache' in sys.modules")["value"] == "False"
        mine = fresh.run("import traceback\ntry:\n    broken()\nexcept ZeroDivisionError:\n"
                         "    text = traceback.format_exc()\n'the line a traceback shows' in text")  # fmt: skip
        assert mine["value"] == "True"
        error = fresh.run("broken()")
        assert error["status"] == "error" and "the line a traceback shows" in error["error"]["traceback"]
        typo = fresh.run("x = (")
        assert typo["status"] == "error" and "x = (" in typo["error"]["traceback"]
    finally:
        fresh.process.kill()
        fresh.process.wait()
