"""Staging compiles the guest to bytecode, and the sandbox's entry point really runs from it.

Without bytecode every sandbox start compiled the whole guest again (each start runs with ``-B`` on a read-only
mount, so nothing could be cached): about 9 ms of each cold start on our machines.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_codemode.sandbox.base import GUEST_MOUNT
from mcp_codemode.sandbox.staging import guest_sources, stage_guest

# The flags word of a pyc header (PEP 552): bit 0 hash-based, bit 1 check the source.
UNCHECKED_HASH_FLAGS = 0b01


def test_every_guest_module_is_staged_with_its_bytecode(tmp_path: Path) -> None:
    target = stage_guest(tmp_path, os.getuid(), os.getgid())
    sources = [name for name in guest_sources() if name.endswith(".py")]
    assert "worker.py" in sources and "mcp/runtime.py" in sources
    for name in sources:
        compiled = Path(importlib.util.cache_from_source(str(target / name)))
        assert compiled.is_file(), f"no bytecode for {name}"
        assert compiled.stat().st_mode & 0o777 == 0o644
        assert compiled.parent.stat().st_mode & 0o777 == 0o755
        data = compiled.read_bytes()
        assert data[:4] == importlib.util.MAGIC_NUMBER
        assert int.from_bytes(data[4:8], "little") == UNCHECKED_HASH_FLAGS
        code = marshal.loads(data[16:])
        assert code.co_filename == f"{GUEST_MOUNT}/{name}", "tracebacks must name the path the sandbox sees"
        source = (target / name).read_bytes()
        assert code == compile(source, f"{GUEST_MOUNT}/{name}", "exec", dont_inherit=True)


def test_the_entry_point_imports_the_worker_from_bytecode(tmp_path: Path) -> None:
    """Replace the worker's bytecode (not its source): what runs is the bytecode, so boot.py really uses it."""
    target = stage_guest(tmp_path, os.getuid(), os.getgid())
    compiled = Path(importlib.util.cache_from_source(str(target / "worker.py")))
    impostor = tmp_path / "impostor.py"
    impostor.write_text("def main(argv):\n    print('ran the bytecode', argv[1:])\n    return 7\n")
    os.chmod(compiled, 0o644)
    py_compile.compile(
        str(impostor), cfile=str(compiled), invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
    )
    done = subprocess.run(
        [sys.executable, "-I", "-B", str(target / "boot.py"), "{}"], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout.strip()) == (7, "ran the bytecode ['{}']"), done.stderr
    assert "class Executor" in (target / "worker.py").read_text()  # the source is still the real worker


def test_another_interpreter_version_gets_its_own_staged_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = stage_guest(tmp_path, os.getuid(), os.getgid())
    assert stage_guest(tmp_path, os.getuid(), os.getgid()) == first
    monkeypatch.setattr(sys.implementation, "cache_tag", "cpython-399")
    assert stage_guest(tmp_path, os.getuid(), os.getgid()) != first
