"""The command the tests start a bridge with: through the pre-imported fork server unless it is switched off.

Apart because each new interpreter that imports the bridge spends about two CPU-seconds on it, and the suite starts
hundreds on two cores: ``bridge_zygote.py`` imports it once per pytest process and forks a bridge for each
``bridge_launcher.py`` a test runs (see those two for what the fork keeps equal to an exec). ``serve_command``
starts the fork server the first time it is asked; ``CODEMODE_TEST_ZYGOTE=0`` in the tests' environment makes
it the real ``python -m mcp_codemode`` for the whole run. The tests about starting up, the CLI, signals and
packaging use ``REAL_SERVE`` themselves.

A launched bridge's pid is not the launcher's: ``bridge_pid`` tells one from the other, for the checks that find a
bridge's sandboxes by its pid.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REAL_SERVE = [sys.executable, "-m", "mcp_codemode", "serve"]
ON = os.environ.get("CODEMODE_TEST_ZYGOTE", "1") != "0"
_state: dict[str, Path] = {}
_process: list[subprocess.Popen[bytes]] = []


def _directory() -> Path:
    if "directory" not in _state:
        _state["directory"] = Path(tempfile.mkdtemp(prefix="codemode-zygote-"))  # mode 0700: ours alone
    return _state["directory"]


def launch_command(*args: str, launcher_always: bool = False) -> list[str]:
    """``python -m mcp_codemode ARGS`` as the tests run it: the launcher when the fork server is on (started here
    the first time), else the real command. ``launcher_always``: the launcher even when it is switched off, for
    the tests of the launcher itself, which hold whichever way the rest of the run starts its bridges."""
    if not ON and not launcher_always:
        return [sys.executable, "-m", "mcp_codemode", *args]
    _ensure_started()
    launcher = [sys.executable, "-I", "-S", str(HERE / "bridge_launcher.py")]
    return [*launcher, str(_directory() / "socket"), *args]


def launch_module_command(module: str, *args: str) -> list[str]:
    """``python -m MODULE ARGS`` for a test support module that runs the bridge's commands in its own process (the
    conformance suite's sign-in client): forked from the fork server as a bridge is, unless it is switched off."""
    if not ON:
        return [sys.executable, "-m", module, *args]
    return launch_command("-m", module, *args)


def serve_command(*, launcher_always: bool = False) -> list[str]:
    return launch_command("serve", launcher_always=launcher_always)


def _ensure_started() -> None:
    if _process and _process[0].poll() is None:
        return
    directory = _directory()
    socket_path = directory / "socket"
    socket_path.unlink(missing_ok=True)
    log = (directory / "zygote.log").open("ab")
    environ = {key: value for key, value in os.environ.items() if not key.startswith("MCP_BRIDGE_")}
    process = subprocess.Popen(
        [sys.executable, str(HERE / "bridge_zygote.py"), str(directory)],
        stdin=subprocess.PIPE, stdout=log, stderr=log, env=environ, cwd=directory,
    )  # fmt: skip
    log.close()
    _process[:] = [process]
    atexit.register(_stop, process, directory)
    deadline = time.monotonic() + 60
    while not socket_path.exists():  # it listens before it imports: a launcher may connect at once
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"the bridge fork server did not start: {(directory / 'zygote.log').read_text()}")
        time.sleep(0.005)


def _stop(process: subprocess.Popen[bytes], directory: Path) -> None:
    if process.stdin is not None:
        process.stdin.close()  # its end of the pipe closes: it exits
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
    shutil.rmtree(directory, ignore_errors=True)


def bridge_pid(pid: int) -> int:
    """The bridge a launcher of pid ``pid`` stands for (``pid`` itself when it is no launcher, or not yet forked)."""
    directory = _state.get("directory")
    if directory is None:
        return pid
    try:
        return int((directory / "children" / str(pid)).read_text())
    except (OSError, ValueError):
        return pid


def bridge_pids(pids: set[int]) -> set[int]:
    """``pids`` and the bridges those of them that are launchers stand for."""
    return pids | {bridge_pid(pid) for pid in pids}
