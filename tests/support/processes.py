"""What is still running on the host after a test: the sandbox uid's processes, our containers, a process's tree.

Apart because the tests that prove nothing outlives a session (CLI, HTTP, warm pool, cgroups, resources) all ask
the same questions of ps, podman and /proc, with the same bounded wait for the kernel to finish reaping.

The suite runs in several pytest processes at once (pytest-xdist), and all their sandboxes share one uid and one
podman. So "what is left" means what is left *of this test process*: a sandbox process or container is someone
else's only when it provably belongs to a live bridge outside this process's tree. Its bridge is named by its
cgroup (``w-<bridge pid>-...``, which no sandboxed process can leave) or its container's bridge-pid label. Anything
that cannot be traced to another live bridge (an escapee whose container is gone, the leftovers of a bridge that
died) counts as ours, so a leak is never explained away.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from mcp_codemode.sandbox.container import OWNER_LABEL

from .backends import SANDBOX_UID
from .patience import patient

_GROUP = re.compile(r"/w-(\d+)-\d+-")  # a bubblewrap sandbox's cgroup: w-<bridge pid>-<n>-<worker>
_CONTAINER_ID = re.compile(r"[0-9a-f]{64}")  # in a container process's cgroup (libpod-<id>) or runsc's arguments


def sandbox_processes() -> list[str]:
    """Live processes of the sandbox uid on the host that are not another test process's (see the module doc).

    Zombies are left out: they run nothing and hold no memory, and bwrap's inner processes become zombies
    of the host's init, which on our VMs reaps them only every second or so.
    """
    done = subprocess.run(
        ["ps", "-ww", "-o", "pid=,stat=,args=", "-u", str(SANDBOX_UID)], capture_output=True, text=True, check=False
    )
    rows = [line.split(None, 2) for line in done.stdout.splitlines() if line.strip()]
    labels: dict[str, str] = {}
    return [
        " ".join(row)
        for row in rows
        if len(row) == 3 and not row[1].startswith("Z") and not _belongs_elsewhere(int(row[0]), labels)
    ]


def our_containers() -> list[str]:
    """Names of our containers (by their owner label) whose bridge is not another test process's."""
    done = subprocess.run(
        ["podman", "ps", "--all", "--filter", f"label={OWNER_LABEL}",
         "--format", '{{.Names}} {{index .Labels "' + OWNER_LABEL + '"}}'],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    found = []
    for line in done.stdout.splitlines():
        name, _, owner = line.strip().partition(" ")
        if name and not _elsewhere(owner):
            found.append(name)
    return found


def _elsewhere(bridge: str) -> bool:
    """True when ``bridge`` (a pid, as text) is alive and not this process or one of its descendants."""
    if not bridge.isdigit():
        return False
    stat = _stat(int(bridge))
    if stat is None or stat[0] in ("Z", "X"):
        return False
    return not _in_my_tree(int(bridge))


def _in_my_tree(pid: int) -> bool:
    me, current = os.getpid(), pid
    for _ in range(64):
        if current == me:
            return True
        if current <= 1:
            return False
        stat = _stat(current)
        if stat is None:
            return False
        current = stat[2]
    return False


def _read(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _label_of(container: str, labels: dict[str, str]) -> str:
    if container not in labels:
        done = subprocess.run(
            ["podman", "inspect", "--format", '{{index .Config.Labels "' + OWNER_LABEL + '"}}', container],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        labels[container] = done.stdout.strip() if done.returncode == 0 else ""
    return labels[container]


def _belongs_elsewhere(pid: int, labels: dict[str, str]) -> bool:
    """True when a sandbox-uid process is provably another live bridge's, found through it or an ancestor."""
    current = pid
    for _ in range(64):
        if current <= 1 or current == os.getpid():
            return False
        text = _read(f"/proc/{current}/cgroup") + _read(f"/proc/{current}/cmdline")
        group = _GROUP.search(text)
        if group is not None:
            return _elsewhere(group.group(1))
        container = _CONTAINER_ID.search(text)
        if container is not None:
            return _elsewhere(_label_of(container.group(0), labels))
        stat = _stat(current)
        if stat is None:
            return False
        current = stat[2]
    return False


def wait_until_gone(probe: Callable[[], list[str]], seconds: float = 15.0) -> list[str]:
    """Poll until ``probe`` finds nothing; a bounded wait for the kernel and podman to finish, not a timing test."""
    deadline = time.monotonic() + patient(seconds)
    found = probe()
    while found and time.monotonic() < deadline:
        time.sleep(0.1)
        found = probe()
    return found


@dataclasses.dataclass(frozen=True)
class Proc:
    """A process as of one moment: pid plus start time, so a reused pid is not mistaken for it."""

    pid: int
    started: int
    command: str

    def alive(self) -> bool:
        stat = _stat(self.pid)
        return stat is not None and stat[1] == self.started and stat[0] not in ("Z", "X")


def _stat(pid: int) -> tuple[str, int, int] | None:
    """State, start time and parent pid of ``pid`` (None when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[19]), int(fields[1])


def descendants(root: int) -> list[Proc]:
    """Every live process below ``root`` in the process tree."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                children.setdefault(stat[2], []).append(int(entry.name))
    found: list[Proc] = []
    pending = list(children.get(root, []))
    while pending:
        pid = pending.pop()
        stat = _stat(pid)
        with contextlib.suppress(OSError):
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if stat is not None and stat[0] not in ("Z", "X"):
                found.append(Proc(pid, stat[1], command))
        pending += children.get(pid, [])
    return found
