"""Small helpers about host processes, shared by the backends' orphan sweeps and memory reports."""

from __future__ import annotations

import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """Whether a process exists; one we may not signal still counts as alive (it is not ours to sweep)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def tree_rss(pid: int, proc: Path = Path("/proc")) -> int | None:
    """The resident memory of process ``pid`` and all its descendants, in bytes; None when ``pid`` is gone.

    For a sandbox without a memory cgroup to ask: its processes' pages, each shared page counted in every process
    that maps it, so a high estimate, never a guess from nothing. Walks ``/proc`` once (a page draws it, no call)."""
    parents: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])  # after the name, which may hold spaces: state, ppid
            parents.setdefault(parent, []).append(int(entry.name))
    page, total, found, todo = os.sysconf("SC_PAGE_SIZE"), 0, False, [pid]
    while todo:
        each = todo.pop()
        try:
            total += int((proc / str(each) / "statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
        found = True
        todo.extend(parents.get(each, ()))
    return total if found else None


def watch_children_with_pidfds() -> bool:
    """On Python 3.11, let asyncio learn of a sandbox's exit through a pidfd in the running event loop instead of a
    thread per child process (its default there): a thousand idle sessions would be a thousand threads in the
    bridge, tasks its cgroup counts (docs/density.md). Python 3.12 does this by itself. Called from the loop that
    starts every sandbox (3.11's pidfd watcher serves one loop); returns whether it changed anything."""
    import asyncio
    import sys

    if sys.version_info >= (3, 12) or not hasattr(asyncio, "PidfdChildWatcher") or not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # a kernel before 5.3, or a seccomp filter that refuses it
        return False
    watcher = asyncio.PidfdChildWatcher()
    watcher.attach_loop(asyncio.get_running_loop())
    asyncio.set_child_watcher(watcher)
    return True
