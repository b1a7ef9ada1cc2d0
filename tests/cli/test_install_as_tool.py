"""The package installed the way users install a tool: a wheel, `uv tool install`, an ordinary (non-root) user.

Nothing of the repository is used after the wheel is built: the user (uid 65534, through setpriv, with its own
HOME, uv cache and tool folders) gets `mcp-codemode` on its PATH, `doctor` must name only commands that user has,
code must run in a bubblewrap sandbox, and `packages add` must give that sandbox a package from PyPI.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.backends import fail_unless

pytestmark = pytest.mark.backend

REPO = Path(__file__).resolve().parents[2]
UV = REPO / ".cache" / "uv" / "bin" / "uv"
USER = 65534
# What a user of this machine has in its environment to reach the package index (its TLS roots, a proxy).
NETWORK_ENV = ("SSL_CERT_FILE", "SSL_CERT_DIR", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy",
               "no_proxy")  # fmt: skip
AS_USER = ["setpriv", f"--reuid={USER}", f"--regid={USER}", "--clear-groups"]


class ToolUser:
    """An ordinary user with mcp-codemode installed as a uv tool, and nothing else of ours."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.bin = home / "bin"
        self.runtime_dir = home.parent / "run"
        self.timings: dict[str, float] = {}

    def env(self) -> dict[str, str]:
        return {
            "HOME": str(self.home),
            "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "UV_CACHE_DIR": str(self.home / "uv-cache"),
            "UV_TOOL_DIR": str(self.home / "uv-tools"),
            "UV_TOOL_BIN_DIR": str(self.bin),
            "UV_PYTHON_DOWNLOADS": "never",
            # Rootless podman (doctor's probe) keeps a pause process and its state here; teardown ends them.
            "XDG_RUNTIME_DIR": str(self.runtime_dir),
            **{name: os.environ[name] for name in NETWORK_ENV if name in os.environ},
        }

    def run(self, *argv: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*AS_USER, "env", "-i", *(f"{k}={v}" for k, v in self.env().items()), *argv],
            capture_output=True, text=True, timeout=timeout, cwd=self.home, check=False,
        )  # fmt: skip

    def timed(self, name: str, *argv: str) -> subprocess.CompletedProcess[str]:
        started = time.monotonic()
        done = self.run(*argv)
        self.timings[name] = round(time.monotonic() - started, 1)
        return done


@pytest.fixture(scope="module")
def tool_user() -> Iterator[ToolUser]:
    fail_unless(UV.is_file(), f"{UV} is missing: run scripts/setup.sh")
    fail_unless(shutil.which("setpriv") is not None and shutil.which("bwrap") is not None, "setpriv/bwrap missing")
    fail_unless(os.geteuid() == 0, "switching to an ordinary user needs root")
    # Outside /tmp: the user's state directory (under HOME) holds what its sandboxes mount, and they hide /tmp.
    base = Path(tempfile.mkdtemp(prefix="mcp-codemode-tool-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    user = ToolUser(base / "home")
    try:
        user.bin.mkdir(parents=True)
        # A copy, not a link: the checkout may sit where the user cannot pass (a clone in a mode-700 mktemp -d).
        shutil.copy2(UV, user.bin / "uv")
        started = time.monotonic()
        built = subprocess.run(
            [str(UV), "build", "--wheel", "--out-dir", str(base / "dist"), str(REPO)],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert built.returncode == 0, built.stderr
        user.timings["wheel build"] = round(time.monotonic() - started, 1)
        (wheel,) = (base / "dist").glob("mcp_codemode-*.whl")
        user.runtime_dir.mkdir(mode=0o700)
        for folder in (user.home, user.bin, user.runtime_dir):
            shutil.chown(folder, USER, USER)
        installed = user.timed("uv tool install", "uv", "tool", "install", "--python", "/usr/bin/python3", str(wheel))
        assert installed.returncode == 0, installed.stderr
        yield user
    finally:
        print("timings (s):", json.dumps(user.timings))
        left = end_processes_of(user.home)
        shutil.rmtree(base, ignore_errors=True)
    # Rootless podman leaves its pause process (`catatonit -P`) running as the sandbox uid: the later tests that
    # count the sandbox uid's processes would take it for an escaped sandbox.
    assert left == [] or all("catatonit" in command for command in left), left


def end_processes_of(home: Path) -> list[str]:
    """Kill every process the tool user left behind (found by its HOME); returns their command lines."""
    left = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ours = f"HOME={home}".encode() in (entry / "environ").read_bytes().split(b"\0")
            if entry.stat().st_uid != USER or not ours:
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue
        left.append(command)
    return left


def test_the_installed_tool_runs_code_in_bubblewrap_as_an_ordinary_user(tool_user: ToolUser):
    assert (tool_user.bin / "mcp-codemode").exists()
    done = tool_user.run("mcp-codemode", "run", "-v", "-c", "print(6*7)")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "42\n"
    assert "bubblewrap" in done.stderr


def test_doctor_names_only_commands_the_installed_user_has(tool_user: ToolUser):
    done = tool_user.run("mcp-codemode", "doctor", "--json", "--no-discover")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["running_as_root"] is False
    assert report["selected"]["backend"] == "bubblewrap"
    fixes = [entry["fix"] for entry in report["backends"].values() if entry.get("fix")]
    fixes += [warning["fix"] for warning in report["warnings"]]
    assert fixes, "this user has at least one unusable backend or weak spot to fix"
    for fix in fixes:
        assert "scripts/" not in fix, f"a wheel has no repository scripts: {fix}"
        assert "apt-get install" not in fix or "sudo apt-get install" in fix, f"root needs sudo here: {fix}"
    podman = report["backends"]["podman"]
    if not podman["usable"] and "image" in podman["reason"]:
        assert "mcp-codemode image build" in podman["fix"]


def test_packages_add_as_an_ordinary_user_reaches_its_bubblewrap_sandboxes(tool_user: ToolUser):
    probe = "import toolz, sys; print(toolz.__name__, sys.prefix)"
    before = tool_user.run("mcp-codemode", "run", "-c", probe)
    assert before.returncode == 1 and "No module named 'toolz'" in before.stderr
    added = tool_user.timed("packages add toolz", "mcp-codemode", "packages", "add", "toolz")
    assert added.returncode == 0, added.stderr
    assert "installing toolz with uv" in added.stderr
    inside = tool_user.run("mcp-codemode", "run", "-c", probe)
    assert inside.returncode == 0, inside.stderr
    state = tool_user.home / ".local" / "state" / "mcp-codemode"
    assert inside.stdout == f"toolz {state / 'sandbox-env'}\n"
    doctor = tool_user.run("mcp-codemode", "doctor")
    assert f"sandbox python:  {state / 'sandbox-env' / 'bin' / 'python3'}" in doctor.stdout
    assert "packages add`: toolz" in doctor.stdout
