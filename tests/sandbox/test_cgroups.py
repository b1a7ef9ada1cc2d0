"""The bubblewrap backend's cgroups hold every process of a sandbox from its first instruction."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest

from mcp_codemode.sandbox import bubblewrap
from mcp_codemode.sandbox.bubblewrap import BubblewrapBackend
from mcp_codemode.sandbox.channel import PipeChannel
from mcp_codemode.sandbox.worker import Worker
from tests.support.backends import fail_unless, require_usable, sandbox_settings
from tests.support.processes import descendants

pytestmark = pytest.mark.backend


def test_every_bubblewrap_process_starts_inside_the_workers_own_cgroups() -> None:
    """The launcher moves itself in by writing 0 to v1's ``tasks`` (see cgroups.entry_files): check the result.

    Every process of the sandbox, from bwrap to a child that user code started, must sit in the worker's own
    group of each controller, or limits would silently apply to nothing.
    """
    settings = sandbox_settings(runtime="bubblewrap")
    backend = BubblewrapBackend(settings)
    require_usable(backend)
    support = backend.cgroup_support
    fail_unless(bool(support.parents), f"this host gives the bubblewrap backend no cgroups: {support.reason}")

    async def tree() -> dict[int, str]:
        worker = Worker(backend, settings, "entry-check")
        await worker.start()
        try:
            result = await worker.execute("import subprocess\nchild = subprocess.Popen(['sleep', '60'])\n1", 30)
            assert result.status == "ok", result
            assert worker._launch is not None
            channel = worker._launch.channel
            assert isinstance(channel, PipeChannel)
            root = channel.process.pid
            pids = [root, *(proc.pid for proc in descendants(root))]
            return {pid: Path(f"/proc/{pid}/cgroup").read_text() for pid in pids}
        finally:
            await worker.close()

    memberships = asyncio.run(tree())
    # sh (exec'd into setpriv, then bwrap), bwrap's child, the worker, its capture threads are not processes, sleep
    assert len(memberships) >= 4, memberships
    for pid, text in memberships.items():
        for controller in support.parents:
            lines = [line for line in text.splitlines() if _names_controller(line, controller)]
            assert len(lines) == 1 and lines[0].endswith("-entry-check"), (pid, controller, text)


def _names_controller(line: str, controller: str) -> bool:
    """Whether a /proc/PID/cgroup line is the one of ``controller`` ("unified" is v2's single line)."""
    number, controllers, _ = line.split(":", 2)
    if controller == "unified":
        return number == "0" and controllers == ""
    return controller in controllers.split(",")


def test_a_launch_refused_a_file_descriptor_leaves_no_cgroup_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """Out of file descriptors, the seccomp filter's pipe failed after the worker's groups were made, and they were
    never removed (found by benchmarks/faults.py's fd_limit fault, issue 35)."""
    settings = sandbox_settings(runtime="bubblewrap")
    backend = BubblewrapBackend(settings)
    require_usable(backend)
    support = backend.cgroup_support
    fail_unless(bool(support.parents), f"this host gives the bubblewrap backend no cgroups: {support.reason}")

    def no_pipe() -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(bubblewrap, "bpf_pipe", no_pipe)
    with pytest.raises(OSError, match="Too many open files"):
        asyncio.run(backend.launch("fd-refused", {}))
    left = [path for parent in support.parents.values() for path in parent.glob(f"w-{os.getpid()}-*-fd-refused")]
    assert left == []
