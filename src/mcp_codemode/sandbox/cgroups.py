"""Per-worker cgroups for the bubblewrap backend.

Why cgroups and not only rlimits: ``RLIMIT_NPROC`` counts processes per host uid, and when the sandbox
runs as host root it does not stop a fork bomb at all; ``pids.max`` does. Likewise ``RLIMIT_AS`` is a
crude stand-in for a memory limit, while the memory controller also charges tmpfs pages and reports OOM
kills. We use cgroup v2 when the host has it unified, else the v1 ``memory``, ``pids`` and ``cpu``
hierarchies, else nothing (and the caller falls back to rlimits and says so).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
from pathlib import Path
from typing import Literal

from .processes import pid_alive

CgroupMode = Literal["v2", "v1", "none"]
CGROUP_ROOT = Path("/sys/fs/cgroup")
GROUP_NAME = "mcp-codemode"
CPU_PERIOD_US = 100_000


@dataclasses.dataclass(frozen=True)
class CgroupSupport:
    """What the host lets us do; probed once per process."""

    mode: CgroupMode
    memory: bool
    pids: bool
    cpu: bool
    reason: str
    parents: dict[str, Path]  # controller ("unified" for v2) -> directory our groups go under


def _own_path(controller: str, proc_cgroup: str) -> str:
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        if (controller == "" and controllers == "") or controller in controllers.split(","):
            return path.lstrip("/")
    return ""


def _try_make_parent(directory: Path) -> bool:
    try:
        directory.mkdir(exist_ok=True)
    except OSError:
        return False
    return os.access(directory, os.W_OK)


def probe(root: Path = CGROUP_ROOT) -> CgroupSupport:
    try:
        proc_cgroup = Path("/proc/self/cgroup").read_text()
    except OSError:
        return CgroupSupport("none", False, False, False, "cannot read /proc/self/cgroup", {})
    if (root / "cgroup.controllers").exists():
        return _probe_v2(root, proc_cgroup)
    if (root / "memory").is_dir() or (root / "pids").is_dir():
        return _probe_v1(root, proc_cgroup)
    return CgroupSupport("none", False, False, False, f"no cgroup hierarchy mounted at {root}", {})


def _probe_v1(root: Path, proc_cgroup: str) -> CgroupSupport:
    parents: dict[str, Path] = {}
    for controller in ("memory", "pids", "cpu"):
        base = root / controller
        if not base.is_dir():
            continue
        parent = base / _own_path(controller, proc_cgroup) / GROUP_NAME
        if _try_make_parent(parent):
            parents[controller] = parent
    missing = [c for c in ("memory", "pids") if c not in parents]
    reason = "cgroup v1: memory, pids" + (", cpu" if "cpu" in parents else "") + " controllers writable"
    if missing:
        reason = f"cgroup v1: cannot create groups under the {', '.join(missing)} controller(s) (not root?)"
    return CgroupSupport("v1", "memory" in parents, "pids" in parents, "cpu" in parents, reason, parents)


def _probe_v2(root: Path, proc_cgroup: str) -> CgroupSupport:
    own = root / _own_path("", proc_cgroup)
    parent = own / GROUP_NAME
    if not _try_make_parent(parent):
        return CgroupSupport("v2", False, False, False, f"cgroup v2: cannot create {parent} (not delegated?)", {})
    try:
        available = (parent / "cgroup.controllers").read_text().split()
    except OSError:
        available = []
    wanted = [c for c in ("memory", "pids", "cpu") if c in available]
    enabled: list[str] = []
    for controller in wanted:
        try:
            (parent / "cgroup.subtree_control").write_text(f"+{controller}")
            enabled.append(controller)
        except OSError:
            pass
    if not enabled:
        reason = f"cgroup v2: no controller can be enabled below {parent} (enable memory and pids in {own})"
    else:
        reason = "cgroup v2: " + ", ".join(enabled) + " controllers enabled"
    return CgroupSupport(
        "v2", "memory" in enabled, "pids" in enabled, "cpu" in enabled, reason, {"unified": parent} if enabled else {}
    )


@dataclasses.dataclass
class WorkerCgroup:
    """The groups of one worker: created before it starts, emptied and removed after it ends."""

    mode: CgroupMode
    directories: dict[str, Path]  # controller -> group directory

    @property
    def procs_files(self) -> list[Path]:
        return [d / "cgroup.procs" for d in self.directories.values()]

    @property
    def entry_files(self) -> list[Path]:
        """Where a single-threaded process writes ``0`` to move itself in, before it starts anything else.

        On v1 that is ``tasks``, not ``cgroup.procs``: moving a whole process takes the kernel's global
        threadgroup lock, which waits for an RCU grace period, while moving the writing thread itself skips it
        (Linux 5.17+). Measured here: 6-24 ms per start for ``echo $$ > cgroup.procs``, 0.03-0.07 ms for
        ``echo 0 > tasks``. For a process with one thread, the two mean the same. v2 has no such file for a
        domain group, so it keeps ``cgroup.procs``, where ``0`` also means the writer.
        """
        name = "tasks" if self.mode == "v1" else "cgroup.procs"
        return [d / name for d in self.directories.values()]

    def oom_killed(self) -> bool:
        if self.mode == "v2":
            events = self._read(self.directories.get("unified"), "memory.events")
            key = "oom_kill"
        else:
            events = self._read(self.directories.get("memory"), "memory.oom_control")
            key = "oom_kill"
        for line in events.splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit() and int(value) > 0:
                return True
        return False

    def memory_current(self) -> int | None:
        """What the group's processes use now, page cache and tmpfs pages included (the kernel's count, which its
        limit is enforced on); None without a memory group."""
        name = "memory.current" if self.mode == "v2" else "memory.usage_in_bytes"
        text = self._read(self.directories.get("unified" if self.mode == "v2" else "memory"), name).strip()
        return int(text) if text.isdigit() else None

    def memory_peak(self) -> int | None:
        name = "memory.peak" if self.mode == "v2" else "memory.max_usage_in_bytes"
        text = self._read(self.directories.get("unified" if self.mode == "v2" else "memory"), name).strip()
        return int(text) if text.isdigit() else None

    @staticmethod
    def _read(directory: Path | None, name: str) -> str:
        if directory is None:
            return ""
        try:
            return (directory / name).read_text()
        except OSError:
            return ""

    def pids(self) -> set[int]:
        found: set[int] = set()
        for path in self.procs_files:
            with contextlib.suppress(OSError):
                found.update(int(x) for x in path.read_text().split())
        return found

    def kill_all(self) -> None:
        """SIGKILL everything in the group; loops because a fork bomb keeps forking while we kill."""
        unified = self.directories.get("unified")
        if unified is not None and (unified / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                (unified / "cgroup.kill").write_text("1")
        for _ in range(200):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def remove(self) -> None:
        self.kill_all()
        for directory in self.directories.values():
            for _ in range(100):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)


def create(support: CgroupSupport, name: str, memory: int, pids: int, cpus: float | None) -> WorkerCgroup | None:
    """Make the worker's groups and write its limits; ``None`` when the host gives us no cgroups."""
    if not support.parents:
        return None
    directories: dict[str, Path] = {}
    try:
        for controller, parent in support.parents.items():
            directory = parent / name
            directory.mkdir()
            directories[controller] = directory
        group = WorkerCgroup(support.mode, directories)
        if support.mode == "v2":
            unified = directories["unified"]
            if support.memory:
                (unified / "memory.max").write_text(str(memory))
                with contextlib.suppress(OSError):
                    (unified / "memory.swap.max").write_text("0")
            if support.pids:
                (unified / "pids.max").write_text(str(pids))
            if support.cpu and cpus:
                (unified / "cpu.max").write_text(f"{int(cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}")
        else:
            if "memory" in directories:
                (directories["memory"] / "memory.limit_in_bytes").write_text(str(memory))
                with contextlib.suppress(OSError):
                    (directories["memory"] / "memory.memsw.limit_in_bytes").write_text(str(memory))
                with contextlib.suppress(OSError):
                    (directories["memory"] / "memory.swappiness").write_text("0")
            if "pids" in directories:
                (directories["pids"] / "pids.max").write_text(str(pids))
            if "cpu" in directories and cpus:
                (directories["cpu"] / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
                (directories["cpu"] / "cpu.cfs_quota_us").write_text(str(int(cpus * CPU_PERIOD_US)))
        return group
    except OSError:
        WorkerCgroup(support.mode, directories).remove()
        raise


def sweep_stale(support: CgroupSupport) -> int:
    """Remove empty groups left behind by a bridge that was killed; returns how many went."""
    removed = 0
    for parent in support.parents.values():
        with contextlib.suppress(OSError):
            for child in parent.iterdir():
                if child.is_dir() and child.name.startswith("w-"):
                    owner = child.name.split("-")[1]
                    if owner.isdigit() and not pid_alive(int(owner)):
                        with contextlib.suppress(OSError):
                            child.rmdir()
                            removed += 1
    return removed
