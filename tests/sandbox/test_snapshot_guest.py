"""The guest's half of hibernation, as pure logic: which statements are kept, what a snapshot holds and names as lost,
and what a restore brings back (in this process, with a workspace of its own; the real sandbox is in
tests/runs/test_hibernation.py)."""

from __future__ import annotations

import base64
import io
import os
import pickle
import tarfile
import zlib
from pathlib import Path
from typing import Any

import pytest

from mcp_codemode.guest import worker_snapshot
from mcp_codemode.guest.protocol import FILE_CHUNK
from mcp_codemode.guest.worker_cells import Executor, Interrupter
from mcp_codemode.guest.worker_definitions import Definitions


class _Runtime:
    """What the executor needs of ``mcp.runtime`` to run cells outside a sandbox."""

    class _state:
        display = None
        hibernate = True

    class rpc:
        @staticmethod
        def close() -> None:
            pass

    class Display:
        def __init__(self, *_: object) -> None:
            self.images: list[object] = []
            self.notes: list[str] = []

        def collect_figures(self) -> None:
            pass

        def add_found_in(self, value: object) -> None:
            pass


def _packed(state: dict[str, Any]) -> bytes:
    return worker_snapshot.MAGIC + zlib.compress(pickle.dumps(state))


def _executor() -> Executor:
    _Runtime._state.hibernate = True
    return Executor(Interrupter(), _Runtime, 1 << 20, 1)


def _run(executor: Executor, *cells: str) -> None:
    for cell in cells:
        outcome = executor.execute(1, cell)
        assert outcome["status"] == "ok", outcome


SESSION = (
    "import json, collections\nfrom math import pi\nimport os.path as osp",
    "LIMIT = 3\n@staticmethod\ndef decorated(f):\n    return f",
    "class Point:\n    def __init__(self, x):\n        self.x = x\n"
    "    def __repr__(self):\n        return f'Point({self.x})'",
    "def double(v=LIMIT):\n    return v * 2",
    "p = Point(5); data = {'k': list(range(100))}; gen = (i for i in range(3)); square = lambda v: v * v",
    "handle = open(__file__ if '__file__' in dir() else '/dev/null')",
    "if True:\n    def hidden():\n        return 1",
    "def double(v=LIMIT):\n    return v * 3",  # defined again: only the latest statement is kept
    "temporary = 1\ndel temporary",
)


def test_a_session_comes_back_with_its_imports_definitions_variables_and_files(tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir()
    after.mkdir()
    (before / "notes.txt").write_text("kept")
    (before / "folder").mkdir()
    (before / "folder" / "data.bin").write_bytes(b"\0" * 100)
    (before / "link").symlink_to("/etc/passwd")
    executor = _executor()
    _run(executor, *SESSION)
    blob, counts, lost = worker_snapshot.build(executor, str(before), 1 << 20)
    assert counts == {"definitions": 4, "imports": 3, "variables": 4, "files": 2}, counts  # LIMIT p data pi
    assert any(item.startswith("gen (generator") for item in lost), lost
    assert any(item.startswith("handle (") for item in lost), lost
    assert any(item.startswith("hidden (its source is not kept") for item in lost), lost
    assert "/workspace/link (a symlink)" in lost

    restored = _executor()
    counts, lost = worker_snapshot.restore(restored, str(after), blob)
    assert lost == []
    assert counts == {"definitions": 4, "imports": 3, "variables": 4, "files": 2}, counts
    outcome = restored.execute(2, "(double(), p, square(4), pi, json.dumps(data)[:6], osp.join('a', 'b'))")
    assert outcome == {"status": "ok", "value": "(9, Point(5), 16, 3.141592653589793, '{\"k\": ', 'a/b')"}
    assert "temporary" not in restored.namespace and "hidden" not in restored.namespace
    assert (after / "notes.txt").read_text() == "kept" and (after / "folder" / "data.bin").stat().st_size == 100
    assert not (after / "link").exists()
    # The statements run again are kept again: a restored session hibernates as fully as the first time.
    assert worker_snapshot.build(restored, str(after), 1 << 20)[1]["definitions"] == 4


def test_what_is_over_the_size_bound_is_named_and_the_rest_kept(tmp_path: Path) -> None:
    executor = _executor()
    _run(executor, "small = 1\nbig = b'x' * 300_000")
    (tmp_path / "large.bin").write_bytes(b"y" * 300_000)
    blob, counts, lost = worker_snapshot.build(executor, str(tmp_path), 200_000)
    assert len(blob) <= 200_000
    assert counts["variables"] == 1
    assert any(item.startswith("big (bytes of") for item in lost)
    assert any(item.startswith("/workspace/large.bin (300,000 bytes") for item in lost)


def test_a_statement_that_needs_a_variable_is_run_again_after_the_variables(tmp_path: Path) -> None:
    executor = _executor()
    _run(executor, "class Base:\n    pass", "Alias = Base", "class Child(Alias):\n    pass", "c = Child()")
    blob, _, lost = worker_snapshot.build(executor, str(tmp_path), 1 << 20)
    assert lost == []
    restored = _executor()
    counts, lost = worker_snapshot.restore(restored, str(tmp_path), blob)
    assert lost == [] and counts["definitions"] == 2
    assert restored.execute(2, "type(c).__name__, isinstance(c, Base)") == {"status": "ok", "value": "('Child', True)"}


def test_a_statement_that_fails_again_is_named_and_the_rest_come_back(tmp_path: Path) -> None:
    executor = _executor()
    _run(executor, "import json", "def f():\n    return 1", "x = 2")
    blob, _, _ = worker_snapshot.build(executor, str(tmp_path), 1 << 20)
    state = pickle.loads(zlib.decompress(blob[len(worker_snapshot.MAGIC) :]))
    state["statements"].insert(0, ("import", "import no_such_module_here\n"))
    restored = _executor()
    _, lost = worker_snapshot.restore(restored, str(tmp_path), _packed(state))
    assert lost == ["import no_such_module_here (ModuleNotFoundError: No module named 'no_such_module_here')"]
    assert restored.namespace["f"]() == 1 and restored.namespace["x"] == 2


def test_an_archive_entry_that_leaves_the_workspace_or_is_a_link_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, kind in (("../escape.txt", tarfile.REGTYPE), ("ok.txt", tarfile.REGTYPE), ("l", tarfile.SYMTYPE)):
            info = tarfile.TarInfo(name)
            info.type = kind
            info.linkname = "/etc/passwd" if kind == tarfile.SYMTYPE else ""
            info.size = 2 if kind == tarfile.REGTYPE else 0
            tar.addfile(info, io.BytesIO(b"hi") if kind == tarfile.REGTYPE else None)
    state = {"statements": [], "modules": {}, "variables": {}, "names": [], "workspace": buffer.getvalue()}
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    counts, lost = worker_snapshot.restore(_executor(), str(workspace), _packed(state))
    assert sorted(os.listdir(workspace)) == ["ok.txt"] and not (tmp_path / "escape.txt").exists()
    assert counts["files"] == 1 and len(lost) == 2


def test_kept_sources_are_latest_per_name_and_bounded() -> None:
    definitions = Definitions(budget=200)
    executor = _executor()
    executor.definitions = definitions
    _run(executor, "def a():\n    return 1", "def a():\n    return 2", "import json\nimport json")
    kept = [statement.source for statement in definitions.statements()]
    assert kept == ["def a():\n    return 2\n", "import json\n"]
    _run(executor, "def b():\n    return '" + "x" * 300 + "'")
    assert definitions.defined("a") is None and "a" in definitions.forgotten
    _, _, lost = worker_snapshot.build(executor, "/nonexistent", 1 << 20)
    assert any(item.startswith("a (its source is not kept: over the budget") for item in lost), lost


def test_a_decorated_definition_and_a_statement_after_a_semicolon_keep_their_exact_source() -> None:
    executor = _executor()
    _run(executor, "x = 1; import json\n@staticmethod\n@staticmethod\ndef é():\n    return 'é'\n")
    assert [statement.source for statement in executor.definitions.statements()] == [
        "import json\n",
        "@staticmethod\n@staticmethod\ndef é():\n    return 'é'\n",
    ]


def _ask(hibernator: worker_snapshot.Hibernator, **message: Any) -> dict[str, Any]:
    reply = hibernator.answer({"type": "files", "id": 7, "path": "", **message})
    assert reply["id"] == 7
    return reply


def test_the_exchange_reads_and_writes_in_chunks_and_a_session_that_opted_out_declines(tmp_path: Path) -> None:
    executor = _executor()
    _run(executor, "import os\nbig = os.urandom(5 * 1024 * 1024)")
    hibernator = worker_snapshot.Hibernator(executor, str(tmp_path), _Runtime)
    built = _ask(hibernator, op="snapshot", limit=16 << 20)["value"]
    chunks: list[bytes] = []
    while sum(map(len, chunks)) < built["size"]:
        data = _ask(hibernator, op="snapshot_read", offset=sum(map(len, chunks)))["value"]["data"]
        chunks.append(base64.b64decode(data))
    assert len(chunks) == 2 and len(chunks[0]) == FILE_CHUNK
    other = worker_snapshot.Hibernator(_executor(), str(tmp_path), _Runtime)
    offset = 0
    for chunk in chunks:
        assert _ask(other, op="restore_put", offset=offset, data=base64.b64encode(chunk).decode())["ok"]
        offset += len(chunk)
    out_of_order = _ask(other, op="restore_put", offset=1, data="")
    assert out_of_order["ok"] is False and "in order" in out_of_order["error"]["message"]
    assert _ask(other, op="restore")["value"]["counts"]["variables"] == 1
    assert len(other.executor.namespace["big"]) == 5 * 1024 * 1024
    _Runtime._state.hibernate = False
    try:
        assert _ask(hibernator, op="snapshot", limit=1 << 20)["value"]["declined"] is True
    finally:
        _Runtime._state.hibernate = True
    assert _ask(hibernator, op="nonsense")["ok"] is False


@pytest.mark.parametrize("blob", [b"", b"not a snapshot", worker_snapshot.MAGIC + b"\x80\x05garbage"])
def test_a_broken_snapshot_is_an_error_answer_not_a_dead_worker(tmp_path: Path, blob: bytes) -> None:
    hibernator = worker_snapshot.Hibernator(_executor(), str(tmp_path), _Runtime)
    _ask(hibernator, op="restore_put", offset=0, data=base64.b64encode(blob).decode())
    assert _ask(hibernator, op="restore")["ok"] is False
