"""Staging compiles the guest to bytecode, and the sandbox's entry point really runs from it; the state directory
it lands in lets the sandbox uid through, and a backend that cannot reach it is never a silent switch.

Without bytecode every sandbox start compiled the whole guest again (each start runs with ``-B`` on a read-only
mount, so nothing could be cached): about 9 ms of each cold start on our machines. A state directory that already
existed as 0700 kept bubblewrap's sandbox uid from the staged worker, and ``auto`` quietly ran podman instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import marshal
import os
import py_compile
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_codemode.errors import CodemodeError, SandboxUnavailable
from mcp_codemode.runs.bridge import Bridge, RunRequest
from mcp_codemode.sandbox.base import GUEST_MOUNT
from mcp_codemode.sandbox.bubblewrap import BubblewrapBackend
from mcp_codemode.sandbox.container import ContainerBackend
from mcp_codemode.sandbox.select import announce, choose_backend
from mcp_codemode.sandbox.staging import guest_sources, stage_guest
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.state_files import open_to_the_sandbox
from tests.support.backends import fail_unless, require_usable, sandbox_settings

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


@pytest.mark.backend
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
        [sys.executable, "-I", "-B", str(target / "boot.py"), "{}"], capture_output=True, text=True, timeout=300
    )
    assert (done.returncode, done.stdout.strip()) == (7, "ran the bytecode ['{}']"), done.stderr
    assert "def load_runtime" in (target / "worker.py").read_text()  # the source is still the real worker


def test_another_interpreter_version_gets_its_own_staged_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = stage_guest(tmp_path, os.getuid(), os.getgid())
    assert stage_guest(tmp_path, os.getuid(), os.getgid()) == first
    monkeypatch.setattr(sys.implementation, "cache_tag", "cpython-399")
    assert stage_guest(tmp_path, os.getuid(), os.getgid()) != first


CLI = [sys.executable, "-m", "mcp_codemode"]
OTHER_UID = 65533  # neither the bridge (root) nor the sandbox (65534)


@contextlib.contextmanager
def state_dir(mode: int, owner: int | None = None) -> Iterator[Path]:
    """A state directory that already exists, with ``mode`` (and ``owner``), in a parent others may pass."""
    base = Path(tempfile.mkdtemp(prefix="mcp-codemode-state-"))
    try:
        base.chmod(0o711)
        state = base / "state"
        state.mkdir()
        state.chmod(mode)
        if owner is not None:
            os.chown(state, owner, owner)
        yield state
    finally:
        shutil.rmtree(base, ignore_errors=True)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_state_dir_gets_the_search_bits_and_keeps_every_other_permission() -> None:
    for before, after in ((0o700, 0o711), (0o750, 0o751), (0o711, 0o711), (0o755, 0o755), (0o1777, 0o1777)):
        with state_dir(before) as state:
            open_to_the_sandbox(state)
            assert mode_of(state) == after, f"{before:04o} became {mode_of(state):04o}"
    with state_dir(0o700) as state:
        made = state / "new" / "state"
        open_to_the_sandbox(made)
        assert mode_of(made) == 0o711


@pytest.mark.backend
def test_an_existing_0700_state_dir_keeps_auto_on_bubblewrap() -> None:
    require_usable(BubblewrapBackend(sandbox_settings()))
    with state_dir(0o700) as state:
        choice = choose_backend(sandbox_settings(runtime="auto", state_dir=state))
        assert choice.backend.name == "bubblewrap", choice.reason
        assert choice.passed_over == ()
        assert mode_of(state) == 0o711


def needs_root() -> None:
    fail_unless(os.geteuid() == 0, "only root can give a state directory to another user")


@pytest.mark.backend
def test_a_state_dir_of_another_user_is_left_alone_and_named_with_its_fix() -> None:
    needs_root()
    with state_dir(0o700, owner=OTHER_UID) as state:
        with pytest.raises(SandboxUnavailable) as refused:
            choose_backend(sandbox_settings(runtime="bubblewrap", state_dir=state))
        message = str(refused.value)
        assert f"cannot pass through {state} (mode 0700, owner uid {OTHER_UID})" in message, message
        assert f"have its owner run `chmod o+x {state}`" in message, message
        assert mode_of(state) == 0o700 and state.stat().st_uid == OTHER_UID


@pytest.mark.backend
def test_auto_says_at_every_start_which_backend_it_passed_over_and_why(caplog: pytest.LogCaptureFixture) -> None:
    """Not a silent switch: a warning in the log, the choice in the capability summary, a line from `run`."""
    needs_root()
    require_usable(ContainerBackend(sandbox_settings(), "podman"))
    with state_dir(0o700, owner=OTHER_UID) as state:
        settings = sandbox_settings(runtime="auto", state_dir=state, warm_pool=0)
        choice = choose_backend(settings)
        assert choice.backend.name == "podman"
        assert [entry.name for entry in choice.passed_over] == ["bubblewrap"]
        with caplog.at_level(logging.INFO, logger="mcp_codemode"):
            announce(choice)
        [record] = [r for r in caplog.records if r.name == "mcp_codemode.sandbox.select"]
        assert record.levelno == logging.WARNING
        assert f"passed over bubblewrap: uid 65534 cannot pass through {state}" in record.getMessage()
        assert "it does not switch back to bubblewrap by itself" in record.getMessage()

        async def summary() -> str:
            async with Bridge(settings, choice=choice) as bridge:
                return bridge.summary

        first = asyncio.run(summary()).splitlines()[0]
        assert first.endswith("sandbox. (bubblewrap cannot run on this host, so auto chose podman; `mcp-codemode "
                              "doctor` says why.)"), first  # fmt: skip
        assert str(state) not in first, "host paths stay out of what the sandbox can read"
        # `run` is quiet about a first choice, but not about this one, without -v.
        env = {"PATH": os.environ["PATH"], "HOME": str(state.parent), "MCP_BRIDGE_STATE_DIR": str(state)}
        done = subprocess.run(
            [*CLI, "run", "--no-discover", "-c", "print(6 * 7)"], capture_output=True, text=True, timeout=180, env=env
        )
        assert (done.returncode, done.stdout) == (0, "42\n"), done.stderr
        assert "auto chose podman" in done.stderr and "passed over bubblewrap" in done.stderr, done.stderr


@pytest.mark.backend
def test_a_backend_that_fails_after_the_start_says_so_and_is_not_replaced() -> None:
    """The state directory loses its search bits while the bridge runs: the next sandbox cannot start.

    Only as root: as an ordinary user the sandbox runs as the bridge's own uid, which 0700 does not keep out.
    """
    needs_root()
    require_usable(BubblewrapBackend(sandbox_settings()))
    with state_dir(0o711) as state:
        settings = sandbox_settings(runtime="auto", state_dir=state, warm_pool=0)

        async def main() -> tuple[str, str, str]:
            async with Bridge(settings) as bridge:
                first = await bridge.run(RunRequest("print('ran')"), SessionKey.cli("first"))
                state.chmod(0o700)
                try:
                    await bridge.run(RunRequest("print('ran again')"), SessionKey.cli("second"))
                except CodemodeError as exc:
                    return first.stdout, str(exc), bridge.backend_name
                raise AssertionError("a sandbox started without reaching its worker")

        ran, error, backend = asyncio.run(main())
        assert ran == "ran\n"
        assert error.startswith("the bubblewrap worker exited while starting"), error
        assert "does not switch to another backend by itself" in error, error
        assert backend == "bubblewrap"
