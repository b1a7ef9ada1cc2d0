"""Installing the package of a consented launch plan, pinned, into a folder of its own under the state directory.

Each package version gets one folder (``npm/<name>@<version>``, ``pypi/<name>==<version>``), installed once and
used by every principal that adds it; a folder is used only once its ``.installed`` mark is written, last, so an
install that was cut short is done again rather than half used. The installers are the user's own (``npm``,
``pip``), so their registry settings (``.npmrc``, ``pip.conf``, ``PIP_INDEX_URL``) apply. Their output can name
the user's registry and paths, so it goes to the bridge's log; the code that asked is told only that it failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from ...state_files import make_private_dir
from .plans import CannotAdd, LaunchPlan

log = logging.getLogger(__name__)
INSTALL_TIMEOUT = 600.0  # seconds: a first install fetches the package and its dependencies
MARK = ".installed"
MAX_OUTPUT = 1 << 20  # bytes of an installer's output kept: its end, where the error and the scripts' list are
# Console scripts of the installed distribution, by name (run by the venv's own Python, not ours).
_SCRIPTS = (
    "import json, sys\nfrom importlib.metadata import distribution\n"
    "d = distribution(sys.argv[1])\n"
    "print(json.dumps([e.name for e in d.entry_points if e.group == 'console_scripts']))\n"
)


def folder_of(plan: LaunchPlan, root: Path) -> Path:
    """Where ``plan``'s package is (or will be) installed: the package's name made safe as one path part, and the
    start of a hash of the exact name, since making it safe folds names together (``@a_b/c`` and ``@a/b_c``, ``a~b``
    and ``a_b`` are all npm packages); a folder already installed is used as it is, so two packages sharing one
    would start the first one's program for a person who consented to the second."""
    separator = "@" if plan.kind == "npm" else "=="
    exact = f"{plan.package}{separator}{plan.version}"
    safe = re.sub(r"[^A-Za-z0-9._=@-]", "_", exact.replace("/", "+"))
    return root / plan.kind / f"{safe}-{hashlib.sha256(exact.encode()).hexdigest()[:10]}"


async def install(plan: LaunchPlan, root: Path) -> str:
    """The program to start for ``plan`` (an npm package's bin or a PyPI package's console script), installing the
    package first when its folder is not complete; ``CannotAdd`` when installing fails."""
    folder = folder_of(plan, root)
    if not (folder / MARK).is_file():
        make_private_dir(root)
        make_private_dir(folder.parent)
        if folder.exists():
            shutil.rmtree(folder)  # a cut-short install: start again
        folder.mkdir(mode=0o700)
        if plan.kind == "npm":
            npm = shutil.which("npm") or "npm"
            await _run(plan, [npm, "install", "--prefix", str(folder), "--no-save", "--no-audit", "--no-fund",
                              "--loglevel=error", f"{plan.package}@{plan.version}"])  # fmt: skip
        else:
            await _run(plan, [sys.executable, "-m", "venv", str(folder)])
            await _run(plan, [str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet",
                              "--disable-pip-version-check", f"{plan.package}=={plan.version}"])  # fmt: skip
        program = await _program(plan, folder)
        (folder / MARK).write_text(program, encoding="utf-8")
    return (folder / MARK).read_text(encoding="utf-8").strip()


async def _program(plan: LaunchPlan, folder: Path) -> str:
    what = f"the {plan.kind} package {plan.package} {plan.version}"
    if plan.kind == "npm":
        manifest = folder / "node_modules" / plan.package / "package.json"
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise CannotAdd(f"{what} was installed but its package.json cannot be read") from None
        if data.get("version") != plan.version:
            raise CannotAdd(f"{what} installed as version {str(data.get('version'))[:40]!r}, not the one shown")
        bins = data.get("bin")
        base = plan.package.rsplit("/", 1)[-1]
        names = {base: bins} if isinstance(bins, str) else dict(bins) if isinstance(bins, dict) else {}
        chosen = base if base in names else next(iter(names)) if len(names) == 1 else None
        if chosen is None or not isinstance(names[chosen], str):
            raise CannotAdd(f"{what} has {len(names)} programs and none is named after it: which to start is unclear")
        program = (folder / "node_modules" / plan.package / names[chosen]).resolve()
        if folder.resolve() not in program.parents or not program.is_file():
            raise CannotAdd(f"{what} names a program outside its own folder")
        return str(program)
    output = await _run(plan, [str(folder / "bin" / "python"), "-c", _SCRIPTS, plan.package])
    try:
        scripts = [name for name in json.loads(output.splitlines()[-1]) if isinstance(name, str)]
    except (ValueError, IndexError):
        scripts = []
    wanted = re.sub(r"[-_.]+", "-", plan.package).lower()
    chosen = next((s for s in scripts if re.sub(r"[-_.]+", "-", s).lower() == wanted), None)
    if chosen is None and len(scripts) == 1:
        chosen = scripts[0]
    if chosen is None or "/" in chosen:
        raise CannotAdd(f"{what} has {len(scripts)} console scripts and none is named after it: which to start is "
                        "unclear")  # fmt: skip
    return str(folder / "bin" / chosen)


async def _run(plan: LaunchPlan, command: list[str]) -> str:
    """Run one installer step; its output is the host's (logged on failure), the caller is told only what failed.

    The step ends when its process does, not when its output closes: an install script that leaves a child behind
    holding the output (``sleep 600 &``) would otherwise hold the install, the timeout included (asyncio waits for
    the pipes before it reports an exit), and with it every other add, which take turns. So the output goes to a
    file, and the step runs in a process group of its own, killed whole when it ends, times out or is cancelled."""
    with tempfile.TemporaryFile() as output:
        process = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.DEVNULL, stdout=output, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            await asyncio.wait_for(process.wait(), INSTALL_TIMEOUT)
        finally:
            _kill_group(process.pid)
            if process.returncode is None:
                await process.wait()
        output.seek(max(0, output.seek(0, os.SEEK_END) - MAX_OUTPUT))
        text = output.read().decode("utf-8", "replace")
    if process.returncode != 0:
        log.warning("installing %s %s failed (%s): %s", plan.package, plan.version, command[0], text[-4000:])
        raise CannotAdd(
            f"installing the {plan.kind} package {plan.package} {plan.version} failed (exit {process.returncode})",
            fix="the bridge's log has the installer's output; check the package registry settings of its host",
        )
    return text


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
