"""Which program installs Python packages for the sandbox: uv when it is on PATH, else pip next to the bridge.

Packages are always installed on the host, never inside a sandbox: a sandbox has no network, and an installer
that runs code from the index (build scripts) must not run where sandboxed code could watch or tamper with it.
uv comes first because whoever ran ``uv tool install mcp-codemode`` has it and it is fast; a ``pipx install`` has
pip beside the bridge's interpreter. Both honour the user's own index and proxy configuration.

Two shapes of install are needed:

* into a virtual environment (bubblewrap runs the host's ``/usr/bin/python3`` through a venv), and
* into a plain directory for *another* Python, the container image's (``--target`` with that Python's version
  and platform), so wheels match the image and not the host.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

from .steps import ProvisionError

# uv knows manylinux targets from 2.17 to 2.40 by name; an image's glibc outside that range is clamped into it.
_UV_GLIBC_RANGE = (17, 40)


@dataclasses.dataclass(frozen=True)
class TargetPython:
    """The Python a package directory is built for: ``version`` "3.11", ``machine`` "x86_64", ``glibc`` "2.36"."""

    version: str
    machine: str
    glibc: str


@dataclasses.dataclass(frozen=True)
class Installer:
    name: str  # "uv" or "pip"
    command: tuple[str, ...]  # the program up to its subcommand: (uv,) or (python, -m, pip)
    version: str

    def into_env(self, python: Path, requirements: Path) -> list[str]:
        """Install the requirements file into the environment of ``python`` (a venv's interpreter)."""
        if self.name == "uv":
            return [*self.command, "pip", "install", "--python", str(python), "-r", str(requirements)]
        return [*self.command, "--python", str(python), "install", "--no-input", "-r", str(requirements)]

    def into_target(self, target: Path, requirements: Path, python: TargetPython) -> list[str]:
        """Install into the directory ``target`` wheels that fit ``python``, whatever the host's Python is."""
        if self.name == "uv":
            return [
                *self.command, "pip", "install", "--target", str(target), "--python-version", python.version,
                "--python-platform", uv_platform(python), "-r", str(requirements),
            ]  # fmt: skip
        return [
            *self.command, "install", "--no-input", "--target", str(target), "--python-version", python.version,
            "--implementation", "cp", "--platform", pip_platform(python), "--only-binary=:all:",
            "-r", str(requirements),
        ]  # fmt: skip


def uv_platform(python: TargetPython) -> str:
    low, high = _UV_GLIBC_RANGE
    return f"{python.machine}-manylinux_2_{min(max(_glibc_minor(python.glibc), low), high)}"


def pip_platform(python: TargetPython) -> str:
    return f"manylinux_2_{_glibc_minor(python.glibc)}_{python.machine}"


def _glibc_minor(glibc: str) -> int:
    match = re.fullmatch(r"2\.(\d+)", glibc.strip())
    if not match:
        raise ProvisionError(
            f"the image's C library is {glibc or 'not glibc'}; packages can be prepared only for a glibc image "
            "(such as the Debian one `mcp-codemode image build` makes)"
        )
    return int(match.group(1))


def find_installer(bridge_python: str) -> Installer:
    """uv on PATH, else pip importable by the bridge's interpreter; a clear error naming both otherwise."""
    uv = shutil.which("uv")
    if uv is not None:
        return Installer("uv", (uv,), _version([uv, "--version"]))
    if importlib.util.find_spec("pip") is not None:
        command = (bridge_python, "-m", "pip")
        return Installer("pip", command, _version([*command, "--version"]))
    raise ProvisionError(
        "no package installer found: mcp-codemode installs sandbox packages with uv (on PATH) or pip (beside "
        f"{bridge_python}); install uv (for example `pipx install uv`, or see docs.astral.sh/uv) and try again"
    )


def _version(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProvisionError(f"cannot run {argv[0]}: {exc}") from None
    if done.returncode != 0:
        raise ProvisionError(f"{' '.join(argv)} failed: {done.stderr.strip() or done.returncode}")
    words = done.stdout.split()
    return words[1] if len(words) > 1 else done.stdout.strip()
