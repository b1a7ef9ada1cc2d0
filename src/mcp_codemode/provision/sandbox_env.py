"""The bubblewrap sandbox's virtual environment: where ``packages add`` puts packages for bubblewrap sandboxes.

Layout under the state directory::

    sandbox-env -> sandbox-envs/env-<time>     (a symlink, swapped in one rename)
    sandbox-envs/env-<time>/                   (a venv of /usr/bin/python3, world-readable)
    sandbox-envs/env-<time>/mcp-codemode-packages.json   (what was asked for)

``sandbox-env/bin/python3`` is the second place the bubblewrap backend looks for its interpreter (after
``MCP_BRIDGE_SANDBOX_PYTHON``), so once the link exists every new sandbox uses the environment, with nothing to
configure. Every change builds a whole new environment beside the current one, from the full list of requested
packages, checks that a real sandbox starts with it, and only then moves the link: a failed install, a typo or no
network leaves the working environment exactly as it was. The environment before the current one is kept, since
sandboxes started before the swap still have it mounted; older ones are deleted.

The venv is made from Debian's ``/usr/bin/python3`` because the sandbox already mounts ``/usr``: the venv adds only
its own directory, bound read-only, so sandboxed code can import the packages but not change them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import TextIO

from ..state_files import make_state_dir
from .installer import Installer
from .requirements import requirements_text
from .steps import ProvisionError, hint, say, stream

ENV_LINK = "sandbox-env"
ENVS_DIR = "sandbox-envs"
RECORD = "mcp-codemode-packages.json"
BASE_PYTHON = Path("/usr/bin/python3")
KEEP = 2  # the current environment and the one before it


def env_python(state_dir: Path) -> Path:
    """The interpreter path the bubblewrap backend looks for (``find_sandbox_python``)."""
    return state_dir / ENV_LINK / "bin" / "python3"


def current_env(state_dir: Path) -> Path | None:
    """The environment the link points at, or None when there is none (or it is not one of ours)."""
    link = state_dir / ENV_LINK
    if not link.is_symlink():
        return None
    target = link.resolve()
    return target if target.is_dir() else None


def requested(state_dir: Path) -> list[str]:
    """The requirements the current environment was built from (empty when there is none)."""
    env = current_env(state_dir)
    if env is None:
        return []
    try:
        record = json.loads((env / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [str(spec) for spec in record.get("requested", [])]


def installed(env: Path) -> list[tuple[str, str]]:
    """(name, version) of every distribution in the environment's site-packages, sorted by name."""
    paths = [str(path) for path in env.glob("lib/python3*/site-packages")]
    found = {(dist.metadata["Name"], dist.version) for dist in metadata.distributions(path=paths)}
    return sorted(found, key=lambda item: item[0].lower())


def check_not_hand_made(state_dir: Path) -> None:
    """A ``sandbox-env`` directory made by hand (as docs once told users to) is theirs: never replace it."""
    link = state_dir / ENV_LINK
    if link.exists() and not link.is_symlink():
        raise ProvisionError(
            f"{link} is a directory that mcp-codemode did not make (a virtual environment built by hand?), so "
            f"`packages` will not replace it; move it away (mv {link} {link}.by-hand) and run `packages add` "
            "with the packages it held, or keep managing it yourself"
        )


def rebuild(
    state_dir: Path,
    specs: list[str],
    installer: Installer | None,
    out: TextIO,
    check: Callable[[Path], None],
) -> Path | None:
    """Build a fresh environment holding ``specs``, check it with ``check(python)``, and make it the current one.

    With no specs the link is removed, so bubblewrap falls back to ``/usr/bin/python3``. Returns the new
    environment (None when there is none). On any failure the new directory is deleted and nothing else changes.
    """
    check_not_hand_made(state_dir)
    make_state_dir(state_dir)
    envs = state_dir / ENVS_DIR
    envs.mkdir(mode=0o755, exist_ok=True)
    with _locked(envs):
        if not specs:
            with contextlib.suppress(FileNotFoundError):
                (state_dir / ENV_LINK).unlink()
            say(out, f"no packages left: removed {state_dir / ENV_LINK}; bubblewrap uses {BASE_PYTHON} again")
            _prune(envs, keep=None)
            return None
        assert installer is not None, "specs to install need an installer"
        if not BASE_PYTHON.is_file():
            raise ProvisionError(f"{BASE_PYTHON} is missing; install it (sudo apt-get install python3) and try again")
        env = new_env_dir(envs)
        try:
            _build(env, specs, installer, out)
            say(out, "checking that a bubblewrap sandbox starts with the new environment")
            check(env / "bin" / "python3")
        except BaseException:
            shutil.rmtree(env, ignore_errors=True)
            raise
        _swap(state_dir / ENV_LINK, env)
        _prune(envs, keep=env)
        return env


def new_env_dir(envs: Path) -> Path:
    """A directory no other environment has, made now (the name sorts by time, for ``_prune``).

    Made, not only named: a name from the time and the pid alone was the current environment's when two adds ran in
    one process within a second (the CLI's tests run it in-process), and a failed add then deleted, as its own, the
    environment every sandbox was using.
    """
    return Path(tempfile.mkdtemp(prefix=f"env-{time.strftime('%Y%m%d-%H%M%S')}-", dir=envs))


def _build(env: Path, specs: list[str], installer: Installer, out: TextIO) -> None:
    say(out, f"creating a virtual environment of {BASE_PYTHON} in {env}")
    made = stream([str(BASE_PYTHON), "-m", "venv", "--without-pip", str(env)], out)
    if not made.ok:
        raise ProvisionError(f"`{BASE_PYTHON} -m venv` failed (exit status {made.returncode}); see its output above")
    requirements = env / "requirements.txt"
    requirements.write_text(requirements_text(specs), encoding="utf-8")
    say(out, f"installing {', '.join(specs)} with {installer.name} {installer.version}")
    done = stream(installer.into_env(env / "bin" / "python3", requirements), out)
    if not done.ok:
        cause = hint(done.tail)
        raise ProvisionError(
            f"installing {', '.join(specs)} failed ({installer.name} exit status {done.returncode})"
            + (f": {cause}" if cause else "; its output above says why")
            + ". The sandbox environment was not changed"
        )
    record = {"requested": specs, "python": str(BASE_PYTHON), "installer": f"{installer.name} {installer.version}"}
    (env / RECORD).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    make_readable(env)


def make_readable(root: Path) -> None:
    """Let every uid read the tree (the sandbox runs as another uid when the bridge is root); never writable."""
    for directory, _, filenames in os.walk(root):
        os.chmod(directory, 0o755)  # noqa: S103 - the sandbox uid must read it; nobody but us may write
        for name in filenames:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                mode = os.stat(path).st_mode
                os.chmod(path, 0o755 if mode & 0o111 else 0o644)


def _swap(link: Path, env: Path) -> None:
    """Point ``link`` at ``env`` in one rename, so a sandbox starting meanwhile sees the old or the new, never none."""
    scratch = link.with_name(f".{link.name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        scratch.unlink()
    scratch.symlink_to(Path(ENVS_DIR) / env.name)
    os.replace(scratch, link)


def _prune(envs: Path, keep: Path | None) -> None:
    """Delete all but the ``KEEP`` newest environments (sandboxes started before a swap still use the previous)."""
    found = sorted((p for p in envs.iterdir() if p.is_dir() and p.name.startswith("env-")), key=lambda p: p.name)
    for old in found[:-KEEP]:
        if old != keep:
            shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def _locked(envs: Path) -> Iterator[None]:
    """One change at a time: two `packages add` at once would each drop the other's package."""
    with open(envs / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
