"""The suite's bridges come from a pre-imported fork server (tests/support/zygote.py): what the tests rely on of it.

A test that kills a bridge, signals it or reads its exit status talks to the launcher in its place; these check
that the launcher stands in for the bridge faithfully, so those tests prove what they would of an exec'd one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import STARTED_SERVERS, assert_no_orphans, clean_environ, require_bubblewrap
from tests.support.patience import patient
from tests.support.processes import wait_until_gone
from tests.support.zygote import bridge_pid, launch_command, serve_command

pytestmark = pytest.mark.backend
ROOT = Path(__file__).resolve().parents[1]
HELLO: list[dict[str, Any]] = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "run_python", "arguments": {"code": "6*7"}}},
]  # fmt: skip


def started(log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A launched bridge that has answered a call (so it runs a sandbox), in a session of its own as the SDK starts
    one; the launcher and the bridge's pid."""
    with log.open("wb") as errlog:
        launcher = subprocess.Popen(
            serve_command(launcher_always=True), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog,
            env=clean_environ(MCP_BRIDGE_WARM_POOL="0"), start_new_session=True,
        )  # fmt: skip
    STARTED_SERVERS.add(launcher.pid)
    assert launcher.stdin is not None and launcher.stdout is not None
    launcher.stdin.write("".join(json.dumps(message) + "\n" for message in HELLO).encode())
    launcher.stdin.flush()
    answers = [json.loads(launcher.stdout.readline()) for _ in range(2)]
    assert answers[1]["result"]["content"][0]["text"] == "42", (answers, log.read_text())
    bridge = bridge_pid(launcher.pid)
    assert bridge != launcher.pid
    return launcher, bridge


def gone(pid: int) -> list[str]:
    """``[]`` once ``pid`` has ended (a zombie has), else ``[pid]``: a probe for ``wait_until_gone``."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return []
    return [] if state in ("Z", "X") else [str(pid)]


def test_a_sigkilled_launcher_takes_its_bridge_and_the_bridges_sandboxes_with_it(tmp_path: Path) -> None:
    """A SIGKILL cannot be passed on: the bridge watches its launcher and goes as its killed process group would."""
    require_bubblewrap()
    launcher, bridge = started(tmp_path / "bridge.log")
    launcher.kill()
    assert launcher.wait(timeout=patient(30)) == -signal.SIGKILL
    assert wait_until_gone(lambda: gone(bridge)) == [], "the bridge outlived its SIGKILLed launcher"
    assert_no_orphans()


def test_signals_reach_the_bridge_and_the_launcher_ends_as_it_did(tmp_path: Path) -> None:
    """SIGTERM: the bridge closes its sandboxes and exits 0, as an exec'd one does. A signal the bridge does not
    handle kills it, and the launcher dies of the same signal, so a shell or a client sees the same status."""
    require_bubblewrap()
    launcher, bridge = started(tmp_path / "term.log")
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=patient(60)) == 0, (tmp_path / "term.log").read_text()
    assert "closing every sandbox" in (tmp_path / "term.log").read_text()
    assert gone(bridge) == []
    assert_no_orphans()
    launcher, bridge = started(tmp_path / "usr1.log")
    launcher.send_signal(signal.SIGUSR1)
    assert launcher.wait(timeout=patient(60)) == -signal.SIGUSR1
    assert wait_until_gone(lambda: gone(bridge)) == []
    assert_no_orphans()
    # A bridge SIGKILLed itself (as tests kill one, by its pid): SIGKILL has no handler to reset, and the launcher
    # still dies of it rather than of a traceback.
    launcher, bridge = started(tmp_path / "kill.log")
    os.kill(bridge, signal.SIGKILL)
    assert launcher.wait(timeout=patient(60)) == -signal.SIGKILL, (tmp_path / "kill.log").read_text()
    assert "Traceback" not in (tmp_path / "kill.log").read_text()
    assert_no_orphans()


def test_a_test_support_module_is_launched_as_python_m_would_run_it_and_no_other_module_is(tmp_path: Path) -> None:
    """The conformance suite's sign-in client runs through the fork server too: its arguments, working directory,
    environment and exit status are what ``python -m`` would give it, and the fork server runs nothing else."""
    probe = launch_command("-m", "tests.support.launched_probe", "a b", "--c", launcher_always=True)
    done = subprocess.run(probe, capture_output=True, text=True, timeout=patient(60), check=False,
                          cwd=ROOT, env=clean_environ(PROBE="seen"))  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout) == {"argv": ["a b", "--c"], "cwd": str(ROOT), "probe": "seen", "forked": True}

    other = launch_command("-m", "json.tool", "--help", launcher_always=True)
    refused = subprocess.run(other, capture_output=True, text=True, timeout=patient(60), check=False, cwd=tmp_path)
    assert refused.returncode == 1 and "neither the bridge nor a test support module" in refused.stderr, refused
