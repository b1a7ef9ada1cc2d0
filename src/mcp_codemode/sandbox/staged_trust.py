"""Whether a staged guest directory may be used: only one that nobody but the bridge's user could have written.

A staged worker is found by its name (``<state_dir>/guest/<digest>``) and, when it exists, mounted as the code
every sandbox boots, beside the relay to the user's servers. A directory that another local user placed there
(possible wherever the state directory was ever writable by others: ``login`` once made it under the umask, so
umask 000 made it 0777) would have its code run in every sandbox. So before use, ``guest/``, the digest directory
and everything in it must belong to the bridge's user (or root, who could change anything anyway), be writable by
nobody else, and hold only folders and regular files; and the state directory itself must not let others rename
what is in it (writable by others only with the sticky bit, as ``/tmp``).

A directory that fails is not used and not trusted to be removed safely: it is renamed aside in its own parent
(which is ours) and the worker is staged afresh, with a warning naming what was set aside. Only when even that
cannot be done does staging stop, with the reason and the fix.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from pathlib import Path

from ..errors import CodemodeError

log = logging.getLogger(__name__)
_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


class UntrustedStaging(CodemodeError, OSError):
    """A staged worker, or the directory it lives in, that others could have written; ``fix`` says what to do."""

    fix: str

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(problem, fix=fix)  # "problem; fix" where only the text is shown (a container backend's start)
        self.problem = problem


def _problem(path: Path, info: os.stat_result) -> str | None:
    """Why ``path`` (described by its lstat) could hold another user's code, or None."""
    mode = stat.S_IMODE(info.st_mode)
    if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
        return f"{path} is neither a folder nor a regular file (mode {info.st_mode:o})"
    if info.st_uid not in (os.geteuid(), 0):
        return f"{path} belongs to uid {info.st_uid}, not to the bridge's user (uid {os.geteuid()})"
    if mode & _WRITABLE_BY_OTHERS:
        return f"{path} is writable by users other than its owner (mode {mode:04o})"
    return None


def shared_state_dir(state_dir: Path) -> tuple[str, str] | None:
    """Whether others may rename or replace what is in the state directory (and so the staged worker)."""
    info = state_dir.stat()
    mode = stat.S_IMODE(info.st_mode)
    if mode & _WRITABLE_BY_OTHERS and not mode & stat.S_ISVTX:
        return (
            f"the state directory {state_dir} is writable by users other than its owner (mode {mode:04o}), so any of "
            "them could replace the worker staged in it",
            f"run `chmod 0711 {state_dir}` (as its owner), or set MCP_BRIDGE_STATE_DIR to a directory of the "
            "bridge's user",
        )
    return None


def tree_problem(root: Path) -> str | None:
    """The first entry of ``root`` (itself included, symlinks not followed) that others could have written."""
    pending = [root]
    while pending:
        path = pending.pop()
        info = path.lstat()
        problem = _problem(path, info)
        if problem is not None:
            return problem
        if stat.S_ISDIR(info.st_mode):
            pending.extend(path.iterdir())
    return None


def set_aside_if_untrusted(path: Path, whole_tree: bool) -> None:
    """Rename ``path`` aside when others could have written it (itself, or with ``whole_tree`` anything in it)."""
    try:
        problem = tree_problem(path) if whole_tree else _problem(path, path.lstat())
    except FileNotFoundError:
        return
    if problem is None:
        return
    aside = path.with_name(f".untrusted-{path.name}-{secrets.token_hex(4)}")
    try:
        os.rename(path, aside)
    except OSError as exc:
        raise UntrustedStaging(
            f"refusing the staged worker: {problem}, and it cannot be set aside ({exc.strerror})",
            f"remove {path} (`rm -rf {path}`, as root if need be) and start the bridge again",
        ) from None
    log.warning(
        "%s; it was not used: it is set aside as %s and made afresh by the bridge (remove it once you have "
        "looked at it: someone may have planted code there)",
        problem,
        aside,
    )


def check_staged(target: Path, whole_tree: bool = True) -> None:
    """Refuse ``target`` unless it (and with ``whole_tree`` everything in it) is the bridge's user's and writable by
    nobody else."""
    problem = tree_problem(target) if whole_tree else _problem(target, target.lstat())
    if problem is not None:
        raise UntrustedStaging(
            f"refusing the staged worker: {problem}",
            f"remove {target} (`rm -rf {target}`, as root if need be) and start the bridge again",
        )
