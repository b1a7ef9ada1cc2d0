"""Host directories mounted into every sandbox (``MCP_BRIDGE_MOUNTS``): what one is, how it is spelled, and checks.

Why a module of its own: a mount is the one deliberate hole in "host files are out of reach", so its rules live
in one place that every backend, ``doctor`` and the capability summary read, and that a pure test can cover. The
parser refuses what would blur the sandbox's own layout (a mount over ``/usr``, ``/proc`` or ``/tmp`` would replace
what the sandbox relies on, or hide its size caps) and anything a runtime's option syntax could misread (a ``,``
or ``:`` in a path). Which uid may use a directory is checked here too, from the mode bits, for ``doctor``.

A writable mount is also a way into whatever works on the same host directory outside the sandbox: an upstream
server started on the host (``mcp-server-git --repository`` on a repository mounted ``rw``: code appends
``core.fsmonitor`` to ``.git/config``, asks the server for ``git_status``, and git runs the command as the
bridge's user). ``shared_with_servers`` finds those overlaps so the bridge can refuse them at start-up unless the
user listed the directory in ``MCP_BRIDGE_MOUNTS_SHARED``; a read-only mount nested in the writable one (the
repository's ``.git``) is how to keep such a pair safely.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import NoReturn

from .errors import CodemodeError
from .upstream.model import ServerConfig

# The sandbox's own places: a mount on or under one would hide or replace what the sandbox needs to run (the
# interpreter, the guest code at /opt/mcp-codemode, procfs) or a size-capped tmpfs; /lib32 and /libx32 are links
# into /usr on a merged-usr host, so a mount there would land in the host's /usr. /workspace itself is taken too,
# but a directory under it is allowed.
RESERVED = (
    "/proc", "/sys", "/dev", "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/var", "/run",
    "/tmp", "/opt",
)  # fmt: skip
WORKSPACE = "/workspace"
EXAMPLE = "/srv/data:/mnt/data:ro,/home/me/out:/mnt/out:rw"
_MODES = {"ro": False, "rw": True}


class MountError(CodemodeError, ValueError):
    """A ``MCP_BRIDGE_MOUNTS`` entry refused, with the reason (the settings add where it was given)."""


@dataclasses.dataclass(frozen=True)
class Mount:
    """One host directory (its real path) seen at ``target`` inside every sandbox, writable or read-only."""

    host: Path
    target: str
    writable: bool

    @property
    def mode(self) -> str:
        return "rw" if self.writable else "ro"

    def __str__(self) -> str:
        return f"{self.host}:{self.target}:{self.mode}"


def parse_mounts(text: str) -> tuple[Mount, ...]:
    """``HOST_DIR:SANDBOX_PATH[:ro|:rw]`` entries separated by commas (empty: no mounts); raises MountError."""
    mounts = tuple(parse_mount(entry.strip()) for entry in text.split(",") if entry.strip())
    refuse_overlaps(mounts)
    return mounts


def parse_mount(entry: str) -> Mount:
    """One entry; the error names it and shows a good one."""
    parts = entry.split(":")
    if len(parts) > 3 or (len(parts) == 3 and parts[2].strip().startswith("/")):
        _refuse(entry, "a path may hold no ':' (nor ',', which separates entries)")
    if len(parts) == 3 and parts[2].strip() not in _MODES:
        _refuse(entry, f"the mode {parts[2]!r} is neither ro nor rw")
    if len(parts) != 2 and len(parts) != 3:
        _refuse(entry, "expected HOST_DIR:SANDBOX_PATH or HOST_DIR:SANDBOX_PATH:ro|rw (a path may hold no ',')")
    host_text, target = parts[0].strip(), parts[1].strip()
    writable = _MODES[parts[2].strip()] if len(parts) == 3 else False
    return Mount(_host_dir(entry, host_text), _target(entry, target), writable)


def _host_dir(entry: str, text: str) -> Path:
    path = Path(text).expanduser()
    if not path.is_absolute():
        _refuse(entry, f"the host directory {text!r} is not an absolute path")
    if not path.is_dir():
        _refuse(entry, f"the host directory {text} does not exist or is not a directory")
    return Path(os.path.realpath(path))


def _target(entry: str, target: str) -> str:
    if not target.startswith("/"):
        _refuse(entry, f"the sandbox path {target!r} is not absolute")
    if posixpath.normpath(target) != target or "/../" in f"{target}/" or target.startswith("//"):
        _refuse(entry, f"the sandbox path {target!r} is not normalized (write it as {posixpath.normpath(target)})")
    if target == "/" or target == WORKSPACE:
        _refuse(entry, f"the sandbox path {target} is the sandbox's own; pick one such as /mnt/data or /workspace/data")
    for reserved in RESERVED:
        if _within(target, reserved):
            _refuse(entry, f"the sandbox path {target} is on or under {reserved}, which the sandbox itself uses")
    return target


def parse_shared(text: str) -> tuple[Path, ...]:
    """``MCP_BRIDGE_MOUNTS_SHARED``: absolute host directories separated by ``,`` (as in MCP_BRIDGE_MOUNTS), each
    stored as its real path so it compares with a mount's; raises ValueError naming the bad one."""
    found: list[Path] = []
    for item in (part.strip() for part in text.split(",")):
        if item and not Path(item).expanduser().is_absolute():
            raise ValueError(f"{item!r} is not an absolute path")
        if item:
            found.append(Path(os.path.realpath(Path(item).expanduser())))
    return tuple(found)


def refuse_overlaps(mounts: Iterable[Mount]) -> None:
    """Two mounts at one target, or one inside another, would hide each other, depending on the order.

    One nesting is allowed: a read-only mount inside a writable one that is the same host directory seen through
    it (``/repo:/mnt/repo:rw`` with ``/repo/.git:/mnt/repo/.git:ro``), so part of a writable tree stays read-only.
    Its mount point then already exists on the host, and nothing has to be created in the writable directory. No
    link may lead there: code could replace a link in the writable directory with a directory of its own, which
    host-side tools would then read instead (a ``.git`` link to a repository kept elsewhere)."""
    seen: list[Mount] = []
    for mount in mounts:
        for other in seen:
            if _within(mount.target, other.target) or _within(other.target, mount.target):
                outer, inner = (other, mount) if _within(mount.target, other.target) else (mount, other)
                if outer.target != inner.target and outer.writable and not inner.writable:
                    seen_through = outer.host / posixpath.relpath(inner.target, outer.target)
                    if seen_through == inner.host:  # a real path: no link on the way that code could swap
                        continue
                    raise MountError(
                        f"the read-only {inner} is nested in the writable {outer} but is not the same directory seen "
                        f"through it ({seen_through}, with no link on the way: code could replace a link in a "
                        f"writable directory); mount {seen_through}:{inner.target}:ro if it is a directory, or give "
                        "it a place of its own"
                    )
                raise MountError(
                    f"the sandbox paths of {other} and {mount} are the same or nested; give each mount a place of "
                    "its own (only a read-only mount may sit inside a writable one, as the same directory)"
                )
        seen.append(mount)


def mount_order(mounts: Iterable[Mount]) -> tuple[Mount, ...]:
    """The order a backend must mount in: a nested mount after the one it sits in (else the outer would hide it)."""
    listed = tuple(mounts)
    return tuple(sorted(listed, key=lambda m: any(o is not m and _within(m.target, o.target) for o in listed)))


def state_dir_problem(mounts: Iterable[Mount], state_dir: Path) -> str:
    """Why a mount would expose the bridge's state directory (tokens, saved tools, the staged worker), or "".

    Code that can read it could take tokens; code that can write it could change the worker other sessions run."""
    state = Path(os.path.realpath(state_dir))
    for mount in mounts:
        if state == mount.host or mount.host in state.parents or state in mount.host.parents:
            return (
                f"MCP_BRIDGE_MOUNTS mounts {mount.host}, which is, holds or lies in the bridge's state directory "
                f"{state} (its tokens, saved tools, audit log and the worker code); mount a directory apart from "
                "it, or move MCP_BRIDGE_STATE_DIR elsewhere"
            )
    return ""


@dataclasses.dataclass(frozen=True)
class SharedPlace:
    """A writable mount whose host directory overlaps a path host-side upstream servers work in."""

    mount: Mount
    servers: tuple[str, ...]  # the servers working there (a root is given to every host-side server)
    path: Path  # that path, real
    how: str  # where the servers' configuration names it
    accepted: bool  # the mount's host directory is listed in MCP_BRIDGE_MOUNTS_SHARED

    @property
    def problem(self) -> str:
        mount, path = self.mount, self.path
        relation = "is" if path == mount.host else "holds" if mount.host in path.parents else "lies in"
        who = "the upstream server " + ", ".join(repr(name) for name in self.servers)
        return (
            f"MCP_BRIDGE_MOUNTS mounts {mount.host} writable at {mount.target}, and it {relation} {path}, where "
            f"{who} works on the host ({self.how}): code in the sandbox can change files that the server then acts on "
            "as the bridge's user, outside the sandbox (in a git repository, a line appended to .git/config such as "
            "core.fsmonitor makes the server's next git_status run any command on the host)"
        )

    @property
    def fix(self) -> str:
        host, target = self.mount.host, self.mount.target
        return (
            f"mount it read-only ({host}:{target}:ro); or keep it writable with what the server trusts read-only "
            f"inside it (for a git repository add {host}/.git:{target}/.git:ro) and list {host} in "
            "MCP_BRIDGE_MOUNTS_SHARED to accept sharing it knowingly; or point the server at another directory"
        )


def shared_with_servers(
    mounts: Iterable[Mount], servers: Iterable[ServerConfig], roots: Iterable[Path], accepted: Iterable[Path], cwd: Path
) -> list[SharedPlace]:
    """Every writable mount whose host directory is, holds or lies in a path a host-side server works in.

    Where a server works: the paths in its stdio command line (absolute ones, ``--opt=/path``, and relative ones
    that exist, resolved against its cwd), its cwd, and the roots the bridge gives upstream servers. A server
    whose entry sets no cwd runs in ``cwd``, the bridge's: that counts when a mount is or holds it (a launcher
    such as npx or uvx reads its config from there: an ``.npmrc`` written by code would run on the host), but
    not when it merely lies under it (a bridge started in ``/`` or in the home directory). A remote (HTTP) server
    has no host paths. ``accepted``: the host directories listed in MCP_BRIDGE_MOUNTS_SHARED (real paths); their
    overlaps are kept, marked."""
    writable = [mount for mount in mounts if mount.writable]
    host_side = [server for server in servers if server.transport == "stdio"]
    places: list[tuple[tuple[str, ...], Path, str, bool]]
    places = [((server.name,), *place) for server in host_side for place in _server_paths(server, cwd)]
    if host_side:
        names = tuple(server.name for server in host_side)
        how = "a root the bridge gives upstream servers (MCP_BRIDGE_ROOTS)"
        places += [(names, _real(root), how, False) for root in roots]
    found: dict[tuple[Mount, tuple[str, ...], Path], SharedPlace] = {}
    kept = set(accepted)
    for mount in writable:
        for names, path, how, inside_only in places:
            holds = path == mount.host or mount.host in path.parents
            if holds or (path in mount.host.parents and not inside_only):
                found.setdefault((mount, names, path), SharedPlace(mount, names, path, how, mount.host in kept))
    return list(found.values())


def refusal(places: Iterable[SharedPlace]) -> str:
    """Why the bridge will not run code with these overlaps (each not accepted, with its fix), or ""."""
    refused = [place for place in places if not place.accepted]
    if not refused:
        return ""
    return "; and ".join(f"{place.problem}. To fix it: {place.fix}" for place in refused) + "."


def config_in_mounts(mounts: Iterable[Mount], watched: Iterable[Path]) -> str:
    """Why sandboxed code could write the configuration a refreshing bridge reads (a config file, a folder of them,
    the secrets directory, or where a client's file would be created lies in a writable mount), or "".

    With ``MCP_BRIDGE_CONFIG_REFRESH`` such code could add a stdio server (a command the bridge would run on the
    host, within seconds) or point a server holding a secret at an address of its choosing."""
    found = config_paths_in_mounts(mounts, watched)
    if not found:
        return ""
    return (
        f"sandboxed code could rewrite the MCP server configuration that the bridge reads again while it runs: "
        f"{'; '.join(found)}. To fix it: make that mount read-only (:ro), keep the config files and "
        "secrets outside it, or set MCP_BRIDGE_CONFIG_REFRESH=0"
    )


def config_paths_in_mounts(mounts: Iterable[Mount], watched: Iterable[Path]) -> list[str]:
    """Each configuration path the bridge reads that lies in a writable mount, said as "PATH lies in the writable
    mount HOST (TARGET)". Without a refresh the bridge reads them only at its next start, so ``doctor`` warns
    rather than the bridge refusing: what the code writes there runs on the host when the user restarts it."""
    found = []
    writable = [mount for mount in mounts if mount.writable]
    for path in watched:
        real = _real(path)
        for mount in writable:
            if real == mount.host or mount.host in real.parents:
                found.append(f"{path} lies in the writable mount {mount.host} ({mount.target})")
    return list(dict.fromkeys(found))


def _server_paths(server: ServerConfig, cwd: Path) -> Iterable[tuple[Path, str, bool]]:
    """Each path ``server`` works in, how its entry names it, and whether it counts only inside a mount."""
    base = Path(server.cwd) if server.cwd else cwd
    if server.cwd:
        yield _real(base), f"its cwd {server.cwd}", False
    for index, word in enumerate((server.command, *server.args)):
        value = word.partition("=")[2] if word.startswith("-") and "=" in word else word
        what = "its command" if index == 0 else f"its argument {word!r}"
        if value.startswith("/"):
            yield _real(Path(value)), what, False
        elif value and not value.startswith("-") and _exists(base / value):
            yield _real(base / value), what, False
    if not server.cwd:
        yield _real(base), "its working directory: its entry sets no cwd, so it runs in the bridge's", True


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):  # a name too long, or holding a NUL: not a path the server could use
        return False


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def access_problem(mount: Mount, uid: int, gid: int, through_parents: bool) -> tuple[str, str] | None:
    """Why ``uid``/``gid`` could not use ``mount`` from inside the sandbox (by the mode bits), and the fix; or None.

    A read-only mount needs read and search on the directory, a writable one write too. ``through_parents``: the
    sandbox is built by that uid itself (bubblewrap), which must also pass through every directory above.
    """
    needed = 0o5 | (0o2 if mount.writable else 0)
    want = "read, write and search" if mount.writable else "read and search"
    fix = (
        f"give uid {uid} {want} permission on {mount.host} (chown or chmod; rootless podman maps it to a "
        "subordinate uid), or mount another directory"
    )
    for directory in (mount.host, *(mount.host.parents if through_parents else ())):
        try:
            info = directory.stat()
        except OSError as exc:
            return f"cannot read the mode of {directory}: {exc.strerror}", fix
        if directory != mount.host and not _allowed(info, uid, gid) & 0o1:
            return f"uid {uid} (the sandbox's) cannot pass through {directory} to reach {mount.host}", fix
        if directory == mount.host and _allowed(info, uid, gid) & needed != needed:
            mode = f"mode {stat.S_IMODE(info.st_mode):04o}, owner uid {info.st_uid}"
            return f"uid {uid} (the sandbox's) lacks {want} permission on {mount.host} ({mode})", fix
    return None


def _allowed(info: os.stat_result, uid: int, gid: int) -> int:
    """The permission bits (rwx, 0o7) that apply to ``uid``/``gid``: the owner's, else the group's, else the others'
    (the kernel's rule, ACLs aside; the sandbox never runs as root, so uid 0 gets no exception)."""
    if info.st_uid == uid:
        return (info.st_mode >> 6) & 0o7
    if info.st_gid == gid:
        return (info.st_mode >> 3) & 0o7
    return info.st_mode & 0o7


def _within(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")


def _refuse(entry: str, why: str) -> NoReturn:
    raise MountError(f"the entry {entry!r}: {why}")
