"""What is still running on the host after a test: the sandbox uid's processes, our containers, a process's tree.

Apart because the tests that prove nothing outlives a session (CLI, HTTP, warm pool, cgroups, resources) all ask
the same questions of ps, podman and /proc, with the same bounded wait for the kernel to finish reaping.
"""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from mcp_codemode.sandbox.container import OWNER_LABEL

from .backends import SANDBOX_UID
from .patience import patient


def sandbox_processes() -> list[str]:
    """Live processes of the sandbox uid on the host (workers, their children, rootful containers).

    Zombies are left out: they run nothing and hold no memory, and bwrap's inner processes become zombies
    of the host's init, which on our VMs reaps them only every second or so.
    """
    done = subprocess.run(
        ["ps", "-o", "pid=,stat=,args=", "-u", str(SANDBOX_UID)], capture_output=True, text=True, check=False
    )
    rows = [line.split(None, 2) for line in done.stdout.splitlines() if line.strip()]
    return [" ".join(row) for row in rows if len(row) == 3 and not row[1].startswith("Z")]


def our_containers() -> list[str]:
    done = subprocess.run(
        ["podman", "ps", "--all", "--filter", f"label={OWNER_LABEL}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return [line for line in done.stdout.splitlines() if line.strip()]


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
