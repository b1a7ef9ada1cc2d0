"""The command line as a user runs it: real subprocesses, real sandboxes, real exit statuses.

Most commands here run through the CLI's ``main`` in this process (tests/support/cli_here.py): the same parser,
settings, sandboxes and messages, without a new interpreter's seconds of imports. Real processes remain where only
they show it: the entry points, an exit status and traceback as a shell sees them, and a SIGKILL of the bridge.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mcp_codemode import __version__
from mcp_codemode.cli.main import main
from tests.support.backends import ONE_BACKEND
from tests.support.cli_here import cli_here
from tests.support.patience import patient
from tests.support.processes import our_containers, sandbox_processes, wait_until_gone

pytestmark = pytest.mark.backend

CLI = [sys.executable, "-m", "mcp_codemode"]


def run_cli(*args: str, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], input=stdin, capture_output=True, text=True, timeout=patient(120), env=env, check=False
    )


@pytest.mark.usefixtures("no_orphans")
@ONE_BACKEND
def test_several_cells_share_one_session_and_print_like_a_shell(backend_name):
    done = cli_here(
        os.environ, "run", "--backend", backend_name, "-c", "x = 20", "-c", "print('twice', x * 2)", "-c", "x + 1"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "twice 40\n21\n"


@pytest.mark.usefixtures("no_orphans")
@ONE_BACKEND
def test_exit_status_is_1_when_the_code_raises_and_the_traceback_goes_to_stderr(backend_name):
    done = run_cli("run", "--backend", backend_name, "-c", "print('before')", "-c", "1/0", "-c", "print('never')")
    assert done.returncode == 1
    assert done.stdout == "before\n"
    assert "ZeroDivisionError: division by zero" in done.stderr
    assert "never" not in done.stdout


@pytest.mark.usefixtures("no_orphans")
@ONE_BACKEND
def test_exit_status_is_124_on_timeout(backend_name):
    done = cli_here(os.environ, "run", "--backend", backend_name, "--timeout", "1", "-c", "import time; time.sleep(30)")
    assert done.returncode == 124
    assert "Timed out after 1 s" in done.stderr


@pytest.mark.usefixtures("no_orphans")
@ONE_BACKEND
def test_code_from_stdin_and_from_a_file(backend_name, tmp_path: Path):
    from_stdin = cli_here(
        os.environ, "run", "--backend", backend_name, "-", stdin="import sys\nprint(sys.version_info[0])\n"
    )
    script = tmp_path / "job.py"
    script.write_text("total = sum(range(5))\ntotal\n")
    from_file = cli_here(os.environ, "run", "--backend", backend_name, str(script))
    assert (from_stdin.returncode, from_stdin.stdout) == (0, "3\n")
    assert (from_file.returncode, from_file.stdout) == (0, "10\n")


def test_a_bad_setting_names_the_variable_and_an_example():
    done = cli_here({**os.environ, "MCP_BRIDGE_TIMEOUT": "30s"}, "run", "-c", "1")
    assert done.returncode == 125
    assert "MCP_BRIDGE_TIMEOUT='30s' is not valid" in done.stderr
    assert "MCP_BRIDGE_TIMEOUT=30" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_runtime_says_what_to_install():
    env = {**os.environ, "PATH": "/nonexistent"}
    done = cli_here(env, "run", "--backend", "podman", "-c", "1")
    assert done.returncode == 125
    assert "podman is not installed" in done.stderr
    assert "apt-get install podman" in done.stderr


def test_a_missing_image_says_how_to_build_it():
    env = {**os.environ, "MCP_BRIDGE_IMAGE": "mcp-codemode-no-such-image:latest"}
    done = cli_here(env, "run", "--backend", "podman", "-c", "1")
    assert done.returncode == 125
    assert "image mcp-codemode-no-such-image:latest is not present" in done.stderr
    # A command an installed wheel has (the repository's scripts are not in it); test_packages runs it.
    assert "mcp-codemode image build --tag mcp-codemode-no-such-image:latest --engine podman" in done.stderr


def test_a_missing_sandbox_python_is_named():
    env = {**os.environ, "MCP_BRIDGE_SANDBOX_PYTHON": "/opt/nowhere/python3"}
    done = cli_here(env, "run", "--backend", "bubblewrap", "-c", "1")
    assert done.returncode == 125
    assert "MCP_BRIDGE_SANDBOX_PYTHON=/opt/nowhere/python3" in done.stderr


def test_nothing_to_run_is_a_clear_usage_error():
    done = cli_here(os.environ, "run")
    assert done.returncode == 125
    assert "nothing to run" in done.stderr


def test_doctor_reports_backends_limits_and_the_choice():
    done = cli_here(os.environ, "doctor", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report["backends"]) == {"bubblewrap", "podman", "docker"}
    assert report["selected"]["backend"] == "bubblewrap"
    assert "auto chose bubblewrap" in report["selected"]["reason"]
    bubblewrap = report["backends"]["bubblewrap"]
    assert bubblewrap["usable"] is True
    assert {limit["name"] for limit in bubblewrap["limits"]} >= {"memory", "processes", "network"}
    assert report["cgroups"]["mode"] in ("v1", "v2", "none")
    docker = report["backends"]["docker"]
    assert docker["usable"] or docker["fix"], "an unusable backend must say how to fix it"
    probes = report["probes"]  # what a deployment of serve --transport http probes, and what it would answer now
    assert (probes["liveness"], probes["readiness"]) == (
        "http://127.0.0.1:8765/healthz",
        "http://127.0.0.1:8765/readyz",
    )
    assert (probes["ready_now"], probes["reason"]) == (True, None)


def _wait_for(probe: Callable[[], list[str]], seconds: float = 180.0) -> list[str]:
    deadline = time.monotonic() + patient(seconds)
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.1)
    return []


def test_nothing_survives_a_sigkill_of_the_bridge(backend_name):
    bridge = subprocess.Popen(
        [*CLI, "run", "--backend", backend_name, "-c", "import subprocess, time\n"
         "subprocess.Popen(['/bin/sleep', '300'])\ntime.sleep(300)"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        running = _wait_for(lambda: [p for p in sandbox_processes() if "sleep 300" in p])
        assert running, "the sandboxed child never started"
        bridge.send_signal(signal.SIGKILL)
        bridge.wait(timeout=patient(10))
        assert wait_until_gone(sandbox_processes, 30) == []
        if backend_name == "podman":
            assert wait_until_gone(our_containers, 30) == []
    finally:
        if bridge.poll() is None:
            bridge.kill()


@pytest.mark.parametrize(
    "program",
    [
        [str(Path(sys.executable).with_name("mcp-codemode"))],
        [sys.executable, "-m", "mcp_codemode"],
        [sys.executable, "-m", "mcp_codemode.cli"],  # configs written before cli.py became the cli/ package
    ],
    ids=["script", "python-m-package", "python-m-cli"],
)
def test_every_way_of_starting_the_program_is_the_same_program(program):
    """Each entry point reaches this package's own parser: it answers with this version, in the parser's words."""
    done = subprocess.run([*program, "--version"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"mcp-codemode {__version__}\n"


def test_the_help_names_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    """What the parser every entry point reaches (above) lists; no process needed to read it."""
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    listed = capsys.readouterr().out
    assert all(command in listed for command in ("serve", "run", "servers", "search", "doctor", "packages")), listed
