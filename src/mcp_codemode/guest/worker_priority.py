"""The worker's CPU priority, lowered before any thread or user code exists (``MCP_BRIDGE_SANDBOX_NICE``,
``MCP_BRIDGE_SANDBOX_BATCH``).

Why the guest does it, not the host: every backend starts this same file, so one place covers bubblewrap, the
containers and kubernetes alike, and done first thing in ``main`` it reaches every thread and process the worker
and the user's code start later (Linux threads and children inherit nice and policy). Two levers, two reasons:

* **nice** is the defence. A raised nice value cannot be lowered again without ``CAP_SYS_NICE`` (no sandbox has
  it) or an ``RLIMIT_NICE`` above 0, which is set to 0 here; so spinning code cannot outweigh the bridge where the
  kernel ranks tasks by their nice. Where it groups processes by session first (``kernel.sched_autogroup_enabled``,
  and every bubblewrap sandbox is a session of its own), a task's nice only ranks it inside its group, so the
  group's nice (``/proc/self/autogroup``) is set too; but the kernel lets the group's owner set that back to 0 (it
  refuses only values below 0), ``setsid`` makes a new group, and the kernel accepts one such write in 100 ms
  from processes without ``CAP_SYS_ADMIN`` (sandboxes starting together may keep 0), so there it is a default,
  not a bound. Neither
  counts where the sandbox has a cpu cgroup of its own (bubblewrap as root): the group's weight decides, and all
  sandboxes' groups share one parent, which weighs as much as one session of the bridge's.
* **SCHED_BATCH** is for throughput: a batch task does not preempt the running one when it wakes. A frame written
  to a sandbox otherwise wakes the worker on the bridge's core and pushes the bridge's event loop off it, many
  times per call under load (docs/load-and-faults.md). Code may switch itself back to the normal policy: that
  costs only its own share of the bridge's time, which nice still bounds.

Each step is best effort: a kernel or a runtime that refuses one (gVisor implements no autogroup) leaves the
worker as it was, and the host does not depend on it.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms of start-up and is only needed by type checkers
    from typing import Any

AUTOGROUP = "/proc/self/autogroup"


def lower(config: dict[str, Any]) -> None:
    """Apply the host's ``nice`` (0 to 19) and ``batch`` (a bool) from the worker's config."""
    nice = config.get("nice")
    if isinstance(nice, int) and 0 < nice < 20:
        _nice(nice)
    if config.get("batch") is True:
        try:  # noqa: SIM105 - no contextlib in the guest: it costs every idle sandbox ~0.9 MiB
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        except (AttributeError, OSError):
            pass


def _nice(nice: int) -> None:
    try:  # noqa: SIM105 - no contextlib in the guest (see above)
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError:
        pass
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_NICE, (0, 0))  # no way back below the value just set
    except (AttributeError, ImportError, OSError, ValueError):
        pass
    try:
        with open(AUTOGROUP, "w", encoding="ascii") as group:
            group.write(str(nice))
    except OSError:
        pass
