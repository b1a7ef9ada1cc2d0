"""What every sandbox backend provides, and the small records passed between backends and workers.

A backend knows how to start one worker process in its kind of sandbox and how to clean up after it.
Everything about talking to the worker (frames, interrupts, timeouts) is the same for all backends and
lives in ``worker.py``; that is why a backend only returns the started worker's byte channel (``channel.py``:
a child process's pipes here, a network stream for a remote sandbox) plus hooks.
"""

from __future__ import annotations

import abc
import dataclasses
import errno
import json
import resource
import types
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from ..mounts import Mount
from .channel import WorkerChannel

GUEST_MOUNT = "/opt/mcp-codemode"
WORKSPACE = "/workspace"
# The sandbox's whole environment, on every backend: an allowlist, so no variable of the bridge's own environment
# (API keys, tokens, MCP_BRIDGE_*) and no upstream server's ``env`` or ``headers`` can reach sandboxed code. Only
# the runtime adds to it (podman: ``container``, ``HOSTNAME``; the worker: ``MPLBACKEND``, ``MPLCONFIGDIR``).
SANDBOX_ENV: Mapping[str, str] = types.MappingProxyType(
    {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": WORKSPACE, "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
)


@dataclasses.dataclass(frozen=True)
class Availability:
    """Whether a backend can run here; when not, why, and what would fix it."""

    usable: bool
    reason: str
    fix: str = ""


# Why a backend that was asked cheaply could not start a sandbox now: a word from this closed set, which the readiness
# endpoint shows to anyone who asks (runs/readiness.py), so it never carries a name, a host or a path.
StartProblem = Literal["cluster-unreachable", "cluster-refused", "warm-pool-missing"]


@dataclasses.dataclass(frozen=True)
class StartCheck:
    """Whether the backend could be asked for a new sandbox now, as a readiness probe wants to know it: from what
    the backend learnt cheaply and keeps for a while, never by starting a sandbox (probes come every few seconds).
    ``problem`` is safe to show to anyone; ``detail`` (hosts, namespaces, the API's message) is for the log."""

    ok: bool
    problem: StartProblem | None = None
    detail: str = ""


@dataclasses.dataclass(frozen=True)
class EnforcedLimit:
    """A limit as it will really be enforced here (doctor shows these)."""

    name: str
    value: str
    mechanism: str


@dataclasses.dataclass
class Launch:
    """A started worker's byte channel and what its backend needs to know about it afterwards."""

    channel: WorkerChannel
    kill: Callable[[], Awaitable[None]]
    cleanup: Callable[[], Awaitable[None]]
    death_cause: Callable[[], str | None]  # e.g. "out of memory (limit 512m)" once the process has died
    # The bytes the sandbox uses now, read when asked (the console's Sessions page); None: this backend cannot say.
    memory: Callable[[], int | None] = lambda: None


class Backend(abc.ABC):
    """One kind of sandbox."""

    name: str
    # How often a worker's channel needs traffic to stay open, in seconds; None where it never closes when idle
    # (a pipe). A remote stream (a kubelet's exec, and any proxy on the way) may be cut after minutes of silence.
    keepalive_interval: float | None = None

    @abc.abstractmethod
    def availability(self) -> Availability:
        """Cheap, cached check whether this backend can start workers here."""

    @abc.abstractmethod
    def enforced_limits(self) -> list[EnforcedLimit]:
        """The limits a worker will really get, and by which mechanism."""

    @abc.abstractmethod
    async def launch(self, worker_id: str, guest_config: dict[str, Any]) -> Launch:
        """Start a worker; it speaks frames on its channel's stdin/stdout."""

    @staticmethod
    def mount_limits(mounts: tuple[Mount, ...], how: str) -> list[EnforcedLimit]:
        """The host directories of ``MCP_BRIDGE_MOUNTS`` as doctor lists them: the only host paths a sandbox sees."""
        return [EnforcedLimit(mount.target, mount.mode, f"{how} of {mount.host}") for mount in mounts]

    async def start_check(self) -> StartCheck:
        """Whether a sandbox could be started now, asked cheaply (``StartCheck``). A local backend has nothing to
        ask beyond what ``availability`` said at start: its last start's outcome, which the warm pool keeps, says the
        rest. A cluster backend asks whether the cluster answers."""
        return StartCheck(ok=True)

    async def reap_orphans(self) -> int:
        """Remove leftovers of bridges that died without cleaning up; returns how many."""
        return 0

    async def reap_replica(self, replica: str) -> int:
        """Remove what another bridge replica, found dead, left running (its cluster sandboxes); returns how many.

        Only a backend whose sandboxes outlive their bridge has any: a local sandbox dies with its parent.
        """
        return 0

    async def close(self) -> None:
        """Release what the backend holds between launches (a cluster backend's API connections)."""
        return None


def guest_argv(python: str, guest_config: dict[str, Any]) -> list[str]:
    """The command that starts the worker inside any sandbox: isolated mode, no bytecode written, unbuffered, and
    ``-S``: the guest sets up ``site``'s import path itself, without the code .pth files run (``worker_site.py``),
    which every idle sandbox would keep in memory (docs/density.md)."""
    config = json.dumps(guest_config, separators=(",", ":"))
    return [python, "-I", "-S", "-B", "-u", f"{GUEST_MOUNT}/boot.py", config]


HOST_LIMITS = frozenset({errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM})  # what launch_failure explains


def launch_failure(backend: str, exc: OSError) -> str:
    """Why a sandbox could not be launched, when the host refused a resource (a pipe, a process), with the fix.

    Raised bare, an ``OSError`` reached the client as the SDK's "Internal server error"; the commonest cause under
    load is the bridge's own file-descriptor limit, which every session's pipes count against (issue 35).
    """
    what = f"the {backend} worker could not be started: {exc.strerror or exc}"
    if exc.errno == errno.EMFILE:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        return (
            f"{what} (the bridge holds as many files as its limit allows, {soft}): raise the bridge's limit "
            "(ulimit -n, or LimitNOFILE= in its systemd unit) or lower MCP_BRIDGE_MAX_SESSIONS; sessions already "
            "running are not affected"
        )
    if exc.errno == errno.ENFILE:
        return f"{what} (the whole machine is out of file handles): raise fs.file-max or run fewer processes"
    if exc.errno in (errno.EAGAIN, errno.ENOMEM):
        return f"{what} (the machine is out of processes or memory): lower MCP_BRIDGE_MAX_SESSIONS or add memory"
    return f"{what} (errno {exc.errno})"  # not one of HOST_LIMITS: the caller re-raises those as they are
