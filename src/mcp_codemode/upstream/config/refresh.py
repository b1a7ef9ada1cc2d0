"""Noticing that the server configuration changed on disk, and what changed in it: the pure half of the refresh.

Why files are looked at rather than watched with inotify: a Kubernetes ConfigMap or Secret volume is updated by
the kubelet swapping a hidden ``..data`` link to a new directory, so the files a config names (``servers.json ->
..data/servers.json``) change without any event on their own path, and editors replace files by renaming. Looking
at what every path resolves to now (``stat`` follows the links) catches both. A small file's bytes are hashed too,
since two writes within one tick of the file system's clock can leave size and times alike.

The other half, asking again at an interval and applying a change to the running bridge, is
``runs/config_refresh.py``; ``ConfigSources.watched`` in ``discovery.py`` says which paths matter.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

from ..model import ServerConfig

HASHED_BYTES: Final = 1 << 20  # config files and secrets are far smaller; a client's big state file is stat'ed only

Fingerprint = tuple[object, ...]


def fingerprint(watched: Iterable[tuple[Path, bool]]) -> Fingerprint:
    """What each watched path (a directory when ``True``: its visible entries) resolves to and holds now."""
    return tuple((str(path), _directory(path) if is_dir else _file(path)) for path, is_dir in watched)


def _directory(path: Path) -> object:
    try:
        names = sorted(name for name in os.listdir(path) if not name.startswith("."))
    except OSError as exc:
        return ("unreadable", exc.errno)
    return tuple((name, _file(path / name)) for name in names)


def _file(path: Path) -> object:
    try:
        info = path.stat()
    except OSError as exc:
        return ("unreadable", exc.errno)
    shape = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    if not stat.S_ISREG(info.st_mode) or info.st_size > HASHED_BYTES:
        return (stat.S_IFMT(info.st_mode), *shape)
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        return ("unreadable", exc.errno, *shape)
    return (*shape, digest)


@dataclasses.dataclass(frozen=True)
class Changes:
    """What a new configuration changes in the running one, by server name; the rest stays as it is.

    ``changed``: the entry differs in anything (what is started or reached, its credentials, its alias or
    description): such a server is stopped and started again from its new entry."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def describe(self) -> str:
        """One line for the log: the names only, never a value of an entry."""
        parts = []
        for verb, names in (("added", self.added), ("removed", self.removed), ("restarted", self.changed)):
            if names:
                parts.append(f"{verb} {', '.join(map(repr, names))}")
        return "; ".join(parts) or "nothing changed"


def changes(running: Mapping[str, ServerConfig], wanted: Sequence[ServerConfig]) -> Changes:
    """How ``wanted`` (a new discovery's servers) differs from ``running`` (by name)."""
    names = {server.name for server in wanted}
    return Changes(
        added=tuple(server.name for server in wanted if server.name not in running),
        removed=tuple(name for name in running if name not in names),
        changed=tuple(server.name for server in wanted if server.name in running and running[server.name] != server),
    )
