"""The bubblewrap backend: a hardened namespace sandbox that starts in milliseconds.

Started by root, plain bubblewrap is dangerous: with ``--unshare-all --uid 65534`` the sandbox uid maps to
host root and can write ``/proc/sys/kernel/core_pattern``. So, as measured in DESIGN.md §4, we

* drop to an unprivileged host uid with ``setpriv`` before bubblewrap runs (when we are root),
* unshare every namespace, network included, and forbid further user namespaces
  (``--unshare-user --disable-userns --assert-userns-disabled``),
* mount a read-only root holding only ``/usr`` (and its merged-usr links), a synthetic ``/etc``, the guest
  code and the sandbox Python, read-only; ``/proc/sys`` is bound read-only over the fresh procfs,
* give writable, size-capped tmpfs only at ``/tmp``, ``/workspace`` and ``/dev/shm`` (the rest of ``/dev`` is
  read-only, and RLIMIT_MSGQUEUE 0 leaves no POSIX message queue to fill), plus the host directories the user
  mounts on purpose (``MCP_BRIDGE_MOUNTS``, read-only unless marked ``rw``),
* clear the environment, start a new session (no TIOCSTI into our terminal), die with the bridge,
* load the seccomp denylist of ``seccomp.py``, and
* put the whole process tree into per-worker cgroups (memory, pids, cpu) before it execs, falling back
  to rlimits inside the guest where the host gives us no cgroups.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..mounts import mount_order
from ..settings import Settings
from ..sizes import format_size
from ..state_files import passage_problem
from . import cgroups
from .base import GUEST_MOUNT, SANDBOX_ENV, WORKSPACE, Availability, Backend, EnforcedLimit, Launch, guest_argv
from .channel import PipeChannel
from .processes import tree_rss
from .seccomp import SeccompUnavailable, bpf_pipe, denylist_bpf
from .staged_trust import UntrustedStaging
from .staging import stage_guest

# Moves itself into each cgroup given before "--" (writing 0, "the writer", to the files of
# WorkerCgroup.entry_files), then becomes the sandbox. Runs as root, and the shell has one thread, so the whole
# tree is confined before a single line of user code exists.
_ENTER_CGROUPS = 'while [ "$1" != -- ]; do echo 0 > "$1" || exit 111; shift; done; shift; exec "$@"'
_MERGED_USR_LINKS = ("bin", "sbin", "lib", "lib64", "lib32", "libx32")
# Host /etc entries that hold no secrets but that libraries need: the loader's cache, the time zone, Debian's
# alternatives symlinks (numpy finds libblas through them), fontconfig and matplotlib's system-wide defaults.
_HOST_ETC_FILES = ("ld.so.cache", "localtime", "alternatives", "matplotlibrc", "fonts")
_counter = itertools.count(1)


def find_sandbox_python(settings: Settings) -> Path | None:
    """The interpreter the sandbox uid can run: configured, the state dir's env, or Debian's."""
    candidates = [settings.sandbox_python] if settings.sandbox_python else []
    candidates += [settings.state_dir / "sandbox-env" / "bin" / "python3", Path("/usr/bin/python3")]
    for candidate in candidates:
        if candidate is not None and candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


class BubblewrapBackend(Backend):
    name = "bubblewrap"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.as_root = os.geteuid() == 0
        self.uid = settings.sandbox_uid if self.as_root else os.geteuid()
        self.gid = settings.sandbox_uid if self.as_root else os.getegid()
        self.bwrap = shutil.which("bwrap")
        self.setpriv = shutil.which("setpriv")
        self.python = find_sandbox_python(settings)

    @functools.cached_property
    def cgroup_support(self) -> cgroups.CgroupSupport:
        return cgroups.probe()

    @functools.cached_property
    def _guest_dir(self) -> Path:
        return stage_guest(self.settings.state_dir, self.uid, self.gid)

    def availability(self) -> Availability:
        return self._availability

    @functools.cached_property
    def _availability(self) -> Availability:
        if not sys.platform.startswith("linux"):
            return Availability(False, "bubblewrap needs Linux", "use the podman or docker backend")
        if self.bwrap is None:
            return Availability(False, "bwrap is not installed", "apt-get install bubblewrap")
        if self.as_root and self.setpriv is None:
            return Availability(False, "setpriv is missing (needed to drop root)", "apt-get install util-linux")
        configured = self.settings.sandbox_python
        if configured is not None and self.python != configured:
            return Availability(
                False,
                f"MCP_BRIDGE_SANDBOX_PYTHON={configured} is not an executable file",
                "point it at a python3 that the sandbox uid can read, or unset it",
            )
        if self.python is None:
            return Availability(
                False,
                "no Python the sandbox uid can run (root's pyenv is mode 700)",
                "apt-get install python3, or set MCP_BRIDGE_SANDBOX_PYTHON to a world-readable python3",
            )
        try:
            denylist_bpf()
        except SeccompUnavailable as exc:
            return Availability(False, str(exc), "apt-get install libseccomp2")
        state_dir = self.settings.state_dir
        try:
            guest_dir = self._guest_dir
        except UntrustedStaging as exc:
            return Availability(False, exc.problem, exc.fix)
        except OSError as exc:
            return Availability(
                False,
                f"cannot stage the worker in the state directory {state_dir}: {exc}",
                "make it writable by the bridge's user, or set MCP_BRIDGE_STATE_DIR to a directory of its own",
            )
        blocked = passage_problem(guest_dir, self.uid, self.gid)
        if blocked is not None:
            return Availability(False, *blocked)
        return self._probe()

    def _probe(self) -> Availability:
        """Start a real hardened sandbox once: kernels that forbid user namespaces fail here, not mid-call."""
        seccomp_fd = bpf_pipe()
        try:
            argv = self._argv(seccomp_fd, [str(self.python), "-I", "-c", "pass"])
            done = subprocess.run(argv, capture_output=True, timeout=30, pass_fds=(seccomp_fd,), check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Availability(False, f"bubblewrap could not start: {exc}", "run `mcp-codemode doctor`")
        finally:
            if seccomp_fd >= 0:
                os.close(seccomp_fd)
        if done.returncode != 0:
            detail = done.stderr.decode(errors="replace").strip().splitlines()
            reason = detail[-1] if detail else f"exit status {done.returncode}"
            fix = "allow unprivileged user namespaces: sysctl -w kernel.unprivileged_userns_clone=1"
            if ("Permission denied" in reason or "No such file" in reason) and str(self.settings.state_dir) in reason:
                fix = (
                    f"let uid {self.uid} reach the state directory {self.settings.state_dir}: every directory above "
                    "it needs the x (search) bit for others (chmod o+x), or set MCP_BRIDGE_STATE_DIR elsewhere"
                )
            elif "Permission denied" in reason or "No such file" in reason:
                fix = f"make {self.python} readable by uid {self.uid}, or set MCP_BRIDGE_SANDBOX_PYTHON"
            return Availability(False, f"bubblewrap sandbox failed to start: {reason}", fix)
        drop = f", dropped to uid {self.uid}" if self.as_root else ""
        return Availability(True, f"bwrap at {self.bwrap} starts a hardened sandbox{drop}")

    def enforced_limits(self) -> list[EnforcedLimit]:
        s, cg = self.settings, self.cgroup_support
        memory = "cgroup " + cg.mode if cg.memory else "RLIMIT_AS (address space, cruder than a cgroup)"
        pids = "cgroup " + cg.mode if cg.pids else "RLIMIT_NPROC (per user, weaker than a cgroup)"
        limits = [
            EnforcedLimit("memory", format_size(s.memory), memory),
            EnforcedLimit("processes", str(s.pids), pids),
            EnforcedLimit("/tmp", format_size(s.tmp_size), "tmpfs size"),
            EnforcedLimit("/dev/shm", format_size(s.tmp_size), "tmpfs size"),
            EnforcedLimit(WORKSPACE, format_size(s.workspace_size), "tmpfs size"),
            EnforcedLimit("network", "none", "empty network namespace + seccomp (AF_UNIX only)"),
        ]
        if s.cpus:
            limits.append(EnforcedLimit("cpus", str(s.cpus), "cgroup " + cg.mode if cg.cpu else "not enforced"))
        return limits + self.mount_limits(s.mounts, "bwrap --ro-bind (ro) or --bind (rw)")

    def rlimits(self) -> dict[str, int]:
        cg = self.cgroup_support
        # MSGQUEUE 0: no POSIX message queues, which would be a place to write outside the sized tmpfs mounts.
        limits = {"CORE": 0, "MSGQUEUE": 0, "NOFILE": 1024}
        if not cg.memory:
            limits["AS"] = self.settings.memory
        if not cg.pids:
            limits["NPROC"] = self.settings.pids
        return limits

    def _argv(self, seccomp_fd: int, command: list[str]) -> list[str]:
        assert self.bwrap is not None and self.python is not None
        s = self.settings
        argv = [self.bwrap]
        argv += ["--unshare-all", "--unshare-user", "--disable-userns", "--assert-userns-disabled"]
        argv += ["--uid", str(self.uid), "--gid", str(self.gid), "--hostname", "sandbox"]
        argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        argv += ["--clearenv"]
        for name, value in SANDBOX_ENV.items():
            argv += ["--setenv", name, value]
        argv += ["--ro-bind", "/usr", "/usr"]
        for name in _MERGED_USR_LINKS:
            path = Path("/") / name
            if path.is_symlink():
                argv += ["--symlink", os.readlink(path), str(path)]
            elif path.is_dir():
                argv += ["--ro-bind", str(path), str(path)]
        for directory in self._python_dirs():
            argv += ["--ro-bind", str(directory), str(directory)]
        argv += ["--dir", "/etc"]
        staged_etc = self._guest_dir / "etc"
        for name in ("passwd", "group", "hosts"):
            argv += ["--ro-bind", str(staged_etc / name), f"/etc/{name}"]
        for name in _HOST_ETC_FILES:
            if (Path("/etc") / name).exists():
                argv += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        argv += ["--ro-bind", str(self._guest_dir), GUEST_MOUNT]
        argv += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev"]
        argv += ["--size", str(s.tmp_size), "--tmpfs", "/tmp"]
        argv += ["--size", str(s.tmp_size), "--tmpfs", "/dev/shm"]
        argv += ["--size", str(s.workspace_size), "--tmpfs", WORKSPACE]
        # The configured host directories, after the workspace's tmpfs so that a target under it lands on top. The
        # host side is a real path checked by the settings; links inside it resolve in the sandbox's own tree. A
        # read-only mount nested in a writable one comes after it (mount_order), or the outer bind would cover it.
        for mount in mount_order(s.mounts):
            argv += ["--bind" if mount.writable else "--ro-bind", str(mount.host), mount.target]
        # --dev makes /dev a tmpfs of the sandbox uid's own, with no size cap: read-only once /dev/shm is mounted
        # in it (--remount-ro is not recursive, so /dev/shm and /dev/pts keep their own flags).
        argv += ["--remount-ro", "/dev"]
        argv += ["--chdir", WORKSPACE, "--remount-ro", "/", "--seccomp", str(seccomp_fd), "--"]
        argv += command
        if self.as_root:
            assert self.setpriv is not None
            drop = [self.setpriv, f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups"]
            drop += ["--inh-caps=-all", "--bounding-set=-all", "--"]
            argv = drop + argv
        return argv

    def _python_dirs(self) -> list[Path]:
        """Directories to bind so the configured interpreter (maybe a venv outside /usr) works inside."""
        assert self.python is not None
        found: list[Path] = []
        for path in (self.python, self.python.resolve()):
            prefix = path.parent.parent
            if not str(prefix).startswith("/usr") and prefix not in found and prefix != Path("/"):
                found.append(prefix)
        return found

    async def launch(self, worker_id: str, guest_config: dict[str, Any]) -> Launch:
        availability = self.availability()
        if not availability.usable:
            from ..errors import SandboxUnavailable

            raise SandboxUnavailable(f"bubblewrap backend: {availability.reason}; fix: {availability.fix}")
        assert self.python is not None
        config = dict(guest_config, rlimits=self.rlimits(), workdir=WORKSPACE)
        group = await asyncio.to_thread(
            cgroups.create,
            self.cgroup_support,
            f"w-{os.getpid()}-{next(_counter)}-{worker_id}",
            self.settings.memory,
            self.settings.pids,
            self.settings.cpus,
        )
        seccomp_fd = -1
        try:  # the filter's pipe too: out of file descriptors, it failed here and left the groups behind (issue 35)
            seccomp_fd = bpf_pipe()
            argv = self._argv(seccomp_fd, guest_argv(str(self.python), config))
            if group is not None:
                argv = ["/bin/sh", "-c", _ENTER_CGROUPS, "sh", *map(str, group.entry_files), "--", *argv]
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(seccomp_fd,),
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"},
                start_new_session=True,
            )
        except BaseException:
            if group is not None:
                await asyncio.to_thread(group.remove)
            raise
        finally:
            if seccomp_fd >= 0:
                os.close(seccomp_fd)

        async def kill() -> None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            if group is not None:
                await asyncio.to_thread(group.kill_all)

        async def cleanup() -> None:
            await kill()
            with contextlib.suppress(asyncio.TimeoutError, ProcessLookupError):
                await asyncio.wait_for(process.wait(), 5)
            if group is not None:
                await asyncio.to_thread(group.remove)

        def death_cause() -> str | None:
            if group is not None and group.oom_killed():
                return f"out of memory (limit {format_size(self.settings.memory)})"
            return None

        def memory() -> int | None:
            used = group.memory_current() if group is not None else None
            return used if used is not None else tree_rss(process.pid)

        return Launch(PipeChannel(process), kill, cleanup, death_cause, memory)

    async def reap_orphans(self) -> int:
        if self.cgroup_support.parents:
            return await asyncio.to_thread(cgroups.sweep_stale, self.cgroup_support)
        return 0
