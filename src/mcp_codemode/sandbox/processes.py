"""Small helpers about host processes, shared by the backends' orphan sweeps."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether a process exists; one we may not signal still counts as alive (it is not ours to sweep)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
