"""How many sessions a bridge holds by default: its share of the machine's memory over what one idle session costs.

Why not a constant: an idle session is a live sandbox, and what bounds how many of them one machine holds is memory
(benchmarks/density.py counts them: docs/density.md). A fixed cap of 16 refused the 17th agent on a machine with
room for a thousand, and would be too many on a small pod. So unless ``MCP_BRIDGE_MAX_SESSIONS`` says otherwise,
the cap is ``memory / MEMORY_SHARE / per-session cost``: a quarter of the memory the bridge may use (the machine's,
or its own cgroup's limit when lower, as in a pod) for sessions that wait, the rest for what running cells take
(each up to ``MCP_BRIDGE_MEMORY``) and for everything else on the machine. The cost is the figure the density
benchmark measured for the backend, rounded up.

The kubernetes backend keeps 16: its sandboxes are pods elsewhere, bounded by the cluster's quota, not by this
machine's memory. Beside the cap, what 1,000 sessions need of the kernel's other limits (file descriptors and
processes) is counted here too, for ``doctor`` and for the bridge, which raises its own open-files limit.
"""

from __future__ import annotations

import dataclasses
import resource
from pathlib import Path

MIB = 1 << 20
# The PSS of one idle session (its sandbox's processes and its share of the bridge), measured by
# benchmarks/density.py and rounded up (docs/density.md has the figures and the method): 4.0 MiB on bubblewrap,
# 13.1 on podman (its `podman run` client is most of it), 25.6 under gVisor. Docker is costed as podman (the same
# path here; no Docker engine was there to measure).
IDLE_SESSION_COST = {"bubblewrap": 41 * MIB // 10, "podman": 14 * MIB, "docker": 14 * MIB, "gvisor": 26 * MIB}
# What one session adds to the bridge's open files (its sandbox's stdin, stdout and stderr, and the pidfd asyncio
# watches it by) and to the tasks of the bridge's cgroup (bwrap, its namespace's init, the guest Python and its two
# threads), on bubblewrap; a container backend holds the same pipes, and its tasks live under the engine.
FILES_PER_SESSION = 4
TASKS_PER_SESSION = 5
MEMORY_SHARE = 4
FLOOR = 16
CEILING = 10_000
KUBERNETES_CAP = 16
FILES_RESERVE = 256  # what the bridge itself keeps open: its listening sockets, clients, upstream servers, logs
# Settings.sources' word for a cap nobody set: computed here, again for the backend the bridge ends up on.
COMPUTED = "computed from memory"


@dataclasses.dataclass(frozen=True)
class SessionCap:
    """The cap, and where it came from, as ``doctor`` says it."""

    cap: int
    explicit: str  # where an explicit cap was set ("" when computed)
    memory: int = 0
    memory_source: str = ""
    per_session: int = 0
    kind: str = ""

    def explain(self) -> str:
        if self.explicit:
            return f"{self.cap} (set by {self.explicit})"
        if self.kind == "kubernetes":
            return f"{self.cap} (the kubernetes backend's default: the cluster's quota bounds its sandboxes)"
        bound = " (the most allowed)" if self.cap == CEILING else " (the least given)" if self.cap == FLOOR else ""
        return (
            f"{self.cap}{bound}: a 1/{MEMORY_SHARE} share of {_mib(self.memory)} ({self.memory_source}) at "
            f"{_mib(self.per_session)} per idle session on {self.kind} (docs/density.md); "
            "MCP_BRIDGE_MAX_SESSIONS sets another"
        )


def _mib(size: int) -> str:
    return f"{size / (1 << 30):.1f} GiB" if size >= 1 << 30 else f"{size / MIB:.1f} MiB"


def backend_kind(runtime: str, oci_runtime: str) -> str:
    """The name the costs are kept under: gVisor is podman with the runsc runtime; auto is costed as bubblewrap,
    which it chooses first (a bridge whose auto falls back to a container is costed again once it knows)."""
    if runtime in ("podman", "docker") and (oci_runtime == "runsc" or oci_runtime.endswith("/runsc")):
        return "gvisor"
    return "bubblewrap" if runtime == "auto" else runtime


def memory_limit(meminfo: Path = Path("/proc/meminfo"), cgroup_root: Path = Path("/sys/fs/cgroup"),
                 proc_cgroup: Path = Path("/proc/self/cgroup")) -> tuple[int, str]:  # fmt: skip
    """The memory this process may use and where the figure comes from: the machine's, or its cgroup's limit when
    lower (a pod's, a systemd unit's MemoryMax)."""
    total = 0
    try:
        for line in meminfo.read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        total = 0
    limit = _cgroup_memory_limit(cgroup_root, proc_cgroup)
    if limit and (not total or limit < total):
        return limit, "the bridge's cgroup memory limit"
    return total, "the machine's memory"


def _cgroup_memory_limit(root: Path, proc_cgroup: Path) -> int:
    try:
        lines = proc_cgroup.read_text(encoding="utf-8").splitlines()
    except OSError:
        return 0
    for line in lines:
        _, controllers, path = [*line.split(":", 2), "", ""][:3]
        names = controllers.split(",")
        candidates = [root / path.lstrip("/") / "memory.max"] if controllers == "" else []
        if "memory" in names:
            candidates.append(root / "memory" / path.lstrip("/") / "memory.limit_in_bytes")
        for candidate in candidates:
            try:
                text = candidate.read_text(encoding="utf-8").strip()
            except OSError:
                continue
            if text.isdigit() and int(text) < 1 << 60:  # v1 writes a huge number for "no limit", v2 writes "max"
                return int(text)
    return 0


def session_cap(max_sessions: int, explicit: str, kind: str, memory: tuple[int, str] | None = None) -> SessionCap:
    """The cap a bridge runs with: ``max_sessions`` when ``explicit`` names where it was set, else the computed one.
    ``memory``: (bytes, where from), read from this machine when None."""
    if explicit:
        return SessionCap(max_sessions, explicit)
    if kind not in IDLE_SESSION_COST:
        return SessionCap(KUBERNETES_CAP, "", kind=kind)
    size, source = memory if memory is not None else memory_limit()
    per_session = IDLE_SESSION_COST[kind]
    cap = min(CEILING, max(FLOOR, size // MEMORY_SHARE // per_session)) if size else FLOOR
    return SessionCap(cap, "", size, source or "not known", per_session, kind)


def raise_open_files() -> tuple[int, int]:
    """Raise this process's soft open-files limit to its hard one (every session holds pipes; a soft limit of
    1,024, the usual default, stops a bridge near 330 sessions); returns (soft, hard) afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft >= target:
        return soft, hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError):
        return soft, hard
    return target, hard


def _read_number(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def task_limits(cgroup_root: Path = Path("/sys/fs/cgroup"), proc_cgroup: Path = Path("/proc/self/cgroup"),
                proc_sys: Path = Path("/proc/sys/kernel")) -> dict[str, int]:  # fmt: skip
    """The limits on the tasks this bridge and its sandboxes may have at once, by name (absent when unlimited)."""
    limits: dict[str, int] = {}
    for name in ("pid_max", "threads-max"):
        value = _read_number(proc_sys / name)
        if value:
            limits[f"kernel.{name}"] = value
    try:
        lines = proc_cgroup.read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    for line in lines:
        _, controllers, path = [*line.split(":", 2), "", ""][:3]
        if controllers == "":
            value = _read_number(cgroup_root / path.lstrip("/") / "pids.max")
        elif "pids" in controllers.split(","):
            value = _read_number(cgroup_root / "pids" / path.lstrip("/") / "pids.max")
        else:
            continue
        if value:
            limits["the bridge's cgroup pids.max (systemd: TasksMax)"] = value
    return limits


def capacity_problems(cap: int, kind: str, files: tuple[int, int] | None = None,
                      tasks: dict[str, int] | None = None) -> list[str]:  # fmt: skip
    """What would stop ``cap`` sessions before memory does, each with its fix; empty when nothing would."""
    if kind == "kubernetes":
        return []
    _, hard = files if files is not None else resource.getrlimit(resource.RLIMIT_NOFILE)
    problems = []
    need_files = cap * FILES_PER_SESSION + FILES_RESERVE
    usable = hard if hard != resource.RLIM_INFINITY else need_files
    if usable < need_files:
        problems.append(
            f"{cap} sessions need about {need_files} open files in the bridge ({FILES_PER_SESSION} per session); its "
            f"hard limit is {hard} (the bridge raises its soft limit up to it): raise it (ulimit -Hn, systemd "
            "LimitNOFILE=) or lower MCP_BRIDGE_MAX_SESSIONS"
        )
    if kind != "bubblewrap":
        return problems
    need_tasks = cap * TASKS_PER_SESSION
    for name, value in (tasks if tasks is not None else task_limits()).items():
        if value < need_tasks:
            problems.append(
                f"{cap} sessions need about {need_tasks} tasks ({TASKS_PER_SESSION} per session: bwrap, its init, "
                f"the guest Python and its two threads); {name} is {value}: raise it or lower MCP_BRIDGE_MAX_SESSIONS"
            )
    return problems


def open_files_note() -> str:
    """The bridge's open-files limit now, for doctor."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    shown = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    return f"open files: soft {soft}, hard {shown} (a served bridge raises its soft limit to the hard one)"
