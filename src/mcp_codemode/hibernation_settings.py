"""How sessions hibernate: the settings of the snapshot store (``runs/snapshot_store.py``) and their checks.

Apart from ``settings_fields.py`` because they are a group of their own, read together by one part, and because the
store's place has a rule the other paths do not: no sandbox may see it. A snapshot holds a session's variables and
files; one readable from another session's code would hand that code everything the first one built, so the
directory must lie outside every path a backend binds into a sandbox (the host's ``/usr`` and ``/etc``, the sandbox
Python's environment, ``MCP_BRIDGE_MOUNTS``), and the store makes it 0700 and its files 0600 besides.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .setting_parsers import float_in, int_in, size_in, switch

if TYPE_CHECKING:
    from .mounts import Mount

DEFAULT_MAX_BYTES = 64 << 20
DEFAULT_MAX_AGE = 7 * 86400.0
DEFAULT_MAX_COUNT = 20_000
# Host paths a bubblewrap sandbox sees (bubblewrap.py binds them read-only): the store may not lie in one.
SANDBOX_VISIBLE = (Path("/usr"), Path("/etc"), Path("/bin"), Path("/sbin"), Path("/lib"), Path("/lib64"))


def _directory(text: str) -> Path | None:
    if not text.strip():
        return None
    path = Path(text.strip()).expanduser()
    if not path.is_absolute():
        raise ValueError(text)
    return path


_SWITCH = "on or off (on: idle, evicted and stopping sessions are written to disk, their next call restores them)"
_PLACE = "an absolute directory no sandbox can see (empty: hibernated/ under the state directory)"
# The settings table's lines for hibernation: name, variable, parser, what it expects, an example.
HIBERNATION_FIELDS: tuple[tuple[str, str, Callable[[str], Any], str, str], ...] = (
    ("hibernate", "MCP_BRIDGE_HIBERNATE", switch, _SWITCH, "on"),
    ("hibernate_dir", "MCP_BRIDGE_HIBERNATE_DIR", _directory, _PLACE, "/var/lib/mcp-codemode/hibernated"),
    ("hibernate_max_bytes", "MCP_BRIDGE_HIBERNATE_MAX_BYTES", size_in(1 << 20, 1 << 30), "a size from 1m to 1g", "64m"),
    ("hibernate_max_age", "MCP_BRIDGE_HIBERNATE_MAX_AGE", float_in(60, 10**9), "seconds from 60 to 10^9", "604800"),
    ("hibernate_max_count", "MCP_BRIDGE_HIBERNATE_MAX_COUNT", int_in(1, 10_000_000), "a count, 1 to 10^7", "20000"),
)


def store_dir(hibernate_dir: Path | None, state_dir: Path) -> Path:
    return hibernate_dir if hibernate_dir is not None else state_dir / "hibernated"


def store_dir_problem(directory: Path, mounts: Iterable[Mount], sandbox_env: Iterable[Path]) -> str:
    """Why sandboxed code could see the snapshot store at ``directory`` (``sandbox_env``: what the sandbox Python
    binds), or "" when none can: the store may not be, or lie in, a directory a sandbox sees, nor hold a mount."""
    real = Path(os.path.realpath(directory))
    seen = [(path, "the host's system directories every bubblewrap sandbox sees") for path in SANDBOX_VISIBLE]
    seen += [(Path(os.path.realpath(path)), "the sandbox Python's environment") for path in sandbox_env]
    seen += [(mount.host, f"MCP_BRIDGE_MOUNTS ({mount.host})") for mount in mounts]
    for path, what in seen:
        inside = real == path or path in real.parents
        if inside or (what.startswith("MCP_BRIDGE_MOUNTS") and real in path.parents):
            return (
                f"MCP_BRIDGE_HIBERNATE_DIR {real} {'lies in' if inside else 'holds'} {what}, which sandboxed code can "
                "read; snapshots hold sessions' variables and files, so put the store apart from it (the default is "
                "hibernated/ under the state directory)"
            )
    return ""
