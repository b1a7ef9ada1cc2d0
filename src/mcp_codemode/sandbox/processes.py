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
