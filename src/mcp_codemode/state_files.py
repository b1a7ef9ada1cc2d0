"""Files the bridge keeps under its state directory: the directory itself, and JSON documents written whole.

The state directory must let the sandbox's uid pass through (to reach the staged guest files) without
listing it, so whichever part creates it first makes it 0711. A directory that already existed without the
search bit for others (a ``mkdir`` under umask 077, a ``mktemp -d``: 0700) kept bubblewrap's sandbox uid out,
and ``auto`` then fell back to podman; so a directory the bridge's user owns gets the search bits added
(0700 becomes 0711), and nothing else about its mode is changed: the bridge never takes a permission away
from a directory it did not make (``MCP_BRIDGE_STATE_DIR=/tmp`` must stay 1777). One the bridge's user does
not own cannot be fixed from here: ``passage_problem`` names it and says what its owner must do.

Documents a crash must not corrupt (saved tools, the catalog cache) are written to a temporary file in the
same folder, made private, and renamed over the old one; on any failure the temporary file is removed and
the old document stays as it was.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

log = logging.getLogger(__name__)
STATE_DIR_MODE = 0o711  # the sandbox uid may pass through, not list
_PASS_THROUGH = stat.S_IXGRP | stat.S_IXOTH


def make_state_dir(state_dir: Path) -> None:
    """Create the state directory if it is missing: 0711, so the sandbox uid can pass through but not list it.

    Every command that may create it first (``serve``, ``run``, ``login``, ``packages``) comes through here, so its
    mode never depends on the umask: under umask 000 a plain ``mkdir -p`` made it, and the parents it made,
    world-writable, and another local user could then plant a staged worker in it. Each directory is made private
    first and opened with an explicit chmod after, so none is ever writable by others, not even for a moment.
    """
    if state_dir.exists():
        return
    missing = [state_dir, *(parent for parent in state_dir.parents if not parent.exists())]
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:  # made meanwhile by someone else: its mode is theirs (staging checks it)
            continue
        os.chmod(directory, STATE_DIR_MODE if directory == state_dir else 0o755)


def make_private_dir(directory: Path) -> None:
    """Create ``directory`` (tokens, logs, saved tools) 0700 inside a parent made by ``make_state_dir``.

    One that exists is left as it is."""
    if directory.is_dir():
        return
    make_state_dir(directory.parent)
    with contextlib.suppress(FileExistsError):
        os.mkdir(directory, 0o700)
        os.chmod(directory, 0o700)


def open_to_the_sandbox(state_dir: Path) -> None:
    """Create the state directory, or add the search bits to an existing one the bridge's user owns.

    Only staging calls this, for the directory the worker is staged in; a directory named for something else
    (the audit log's) is created 0711 when missing but never changed.
    """
    make_state_dir(state_dir)
    info = state_dir.stat()
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid == os.geteuid() and stat.S_ISDIR(info.st_mode) and mode & _PASS_THROUGH != _PASS_THROUGH:
        os.chmod(state_dir, mode | _PASS_THROUGH)
        log.warning(
            "the state directory %s was mode %04o, which keeps the sandbox's uid from reaching the worker staged in "
            "it; set it to %04o (search only: it still cannot be listed)",
            state_dir,
            mode,
            mode | _PASS_THROUGH,
        )


def passage_problem(directory: Path, uid: int, gid: int) -> tuple[str, str] | None:
    """Why ``uid``/``gid`` cannot pass through ``directory`` and every directory above it, and the fix; or None.

    The kernel's rule for the search (x) bit: the owner's bits if ``uid`` owns it, else the group's if ``gid``
    is its group, else the others'. The sandbox never runs as root, so uid 0 gets no exception.
    """
    for step in (directory, *directory.parents):
        try:
            info = step.stat()
        except OSError as exc:
            return f"cannot read the mode of {step}: {exc.strerror}", f"check that {step} exists and can be read"
        if info.st_uid == uid:
            allowed = info.st_mode & stat.S_IXUSR
        elif info.st_gid == gid:
            allowed = info.st_mode & stat.S_IXGRP
        else:
            allowed = info.st_mode & stat.S_IXOTH
        if allowed:
            continue
        problem = (
            f"uid {uid} cannot pass through {step} (mode {stat.S_IMODE(info.st_mode):04o}, owner uid {info.st_uid}) "
            f"to reach the worker staged in {directory}"
        )
        elsewhere = "or set MCP_BRIDGE_STATE_DIR to a directory of the bridge's user whose parents all let others pass"
        if info.st_uid != os.geteuid():
            fix = f"{step} belongs to uid {info.st_uid}: have its owner run `chmod o+x {step}`, {elsewhere}"
        else:
            fix = f"run `chmod o+x {step}` (search only: it stays unlistable), {elsewhere}"
        return problem, fix
    return None


def write_json(path: Path, document: Any, *, compact: bool = False) -> Path:
    """Replace ``path`` with ``document`` as JSON, readable by this user only (0600)."""

    def dump(stream: TextIO) -> None:
        if compact:
            json.dump(document, stream, ensure_ascii=False, separators=(",", ":"))
        else:
            json.dump(document, stream)

    return replace_private(path, dump)


def replace_private(path: Path, write: Callable[[TextIO], None]) -> Path:
    """Replace ``path`` with what ``write`` writes (0600, whole or not at all); ``write_json`` is the usual writer."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem[:40]}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            write(stream)
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return path
