"""The container backend, for podman and for docker (same flags, another binary).

Slower to start than bubblewrap (a ``podman run`` costs about 150 ms here) but it isolates with a whole
image, works where user namespaces are off, and can run under gVisor (``MCP_BRIDGE_OCI_RUNTIME=runsc``).

Facts that shaped it (DESIGN.md §4): podman as root on a cgroup-v1 hybrid host works only with the runc
OCI runtime, and needs ``--ulimit nofile`` and ``--ulimit nproc`` set explicitly; no registry is
reachable, so we never pull (``--pull never``) and tell the user how to build the image locally.

Writable places: the same three sized tmpfs mounts as bubblewrap (``/tmp``, ``/dev/shm``, ``/workspace``) and
nothing else but the host directories mounted ``rw`` on purpose (``MCP_BRIDGE_MOUNTS``); podman's ``--read-only``
would add uncapped ``/run`` and ``/var/tmp`` mounts, so they are turned off.

Orphans: a killed ``podman run`` client does not stop its container, so every container is labelled with
the bridge's pid, killed by name, and swept at start-up if its bridge is gone. The worker also exits when
its stdin closes, which is what happens when the bridge dies, so a container never outlives it by more
than its own exit.

gVisor (``oci_runtime`` ``runsc`` or a path ending in ``/runsc``, podman only): podman gets the global runtime
flags ``network=none`` (no network stack; runsc refuses its default netstack in the host's namespace) and
``oci-seccomp`` (our profile, applied inside gVisor), a pids limit of at least ``GVISOR_MIN_PIDS`` for the
sentry's host threads, and ``--ulimit nproc`` set to the configured pids, which gVisor's own kernel enforces
per sandbox (measured: a fork bomb and a thread bomb both stop at pids - 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import os
import resource
import shutil
import subprocess
from pathlib import Path
from typing import Any, Literal

from ..errors import SandboxUnavailable
from ..mounts import Mount, mount_order
from ..settings import Settings
from ..sizes import format_size
from .base import GUEST_MOUNT, SANDBOX_ENV, WORKSPACE, Availability, Backend, EnforcedLimit, Launch, guest_argv
from .channel import PipeChannel
from .processes import pid_alive
from .staged_trust import set_aside_if_untrusted
from .staging import stage_guest

OWNER_LABEL = "io.mcp-codemode.bridge-pid"
# gVisor's sentry runs the guest's processes as goroutines on its own host threads, which are what a pids cgroup
# counts: it needs a few hundred of them at idle (377 with 63 guest processes, measured) and panics when the
# cgroup refuses one, so the container's pids limit is raised to this floor. Inside, gVisor's own kernel
# enforces RLIMIT_NPROC per sandbox (it counts guest tasks, threads included), so --ulimit nproc is the limit.
GVISOR_MIN_PIDS = 1024
ContainerEngine = Literal["podman", "docker"]
_counter = itertools.count(1)
_BUILD_HINT = "build it with: mcp-codemode image build --tag {image} --engine {engine}"


class ContainerBackend(Backend):
    def __init__(self, settings: Settings, engine: ContainerEngine, binary: str | None = None) -> None:
        """``binary`` overrides the executable, e.g. podman's docker-compatible CLI for the docker path."""
        self.settings = settings
        self.engine = engine
        self.name = engine
        self.binary = binary or shutil.which(engine)

    @property
    def oci_runtime(self) -> str:
        """runc by default for podman when it is installed (crun fails on cgroup-v1 hybrid hosts)."""
        if self.settings.oci_runtime:
            return self.settings.oci_runtime
        if self.engine == "podman" and shutil.which("runc"):
            return "runc"
        return ""

    @property
    def gvisor(self) -> bool:
        """True when the OCI runtime is gVisor's ``runsc`` (by name or by a path ending in ``/runsc``)."""
        runtime = self.oci_runtime
        return runtime == "runsc" or runtime.endswith("/runsc")

    def global_flags(self) -> list[str]:
        """podman's global options (before ``run``) that the OCI runtime needs.

        Under gVisor, ``network=none`` gives the sandbox no network stack at all (runsc refuses to start with
        its default netstack in the host's network namespace), and ``oci-seccomp`` makes runsc apply our
        seccomp profile inside the sandbox (without it runsc ignores the profile). docker has no per-call
        runtime flags: there they belong in the daemon's runtime definition (``runtimeArgs``).
        """
        if self.engine == "podman" and self.gvisor:
            return ["--runtime-flag", "network=none", "--runtime-flag", "oci-seccomp"]
        return []

    def pids_limit(self) -> int:
        """The container's ``--pids-limit``: the setting, or gVisor's floor (see ``GVISOR_MIN_PIDS``)."""
        if self.gvisor:
            return max(self.settings.pids, GVISOR_MIN_PIDS)
        return self.settings.pids

    @functools.cached_property
    def _guest_dir(self) -> str:
        uid, _, gid = self.settings.container_user.partition(":")
        return str(stage_guest(self.settings.state_dir, int(uid), int(gid or uid)))

    @functools.cached_property
    def _seccomp_file(self) -> str:
        """The OCI seccomp profile: the staged one, or under gVisor the same one without its ``clone3`` rule.

        runsc 20221219 ignores a rule's ``errnoRet`` and fails every denied call with EPERM; a clone3 that fails
        with EPERM instead of ENOSYS stops glibc from falling back to clone, so no thread could start. That
        runsc has no clone3 at all (ENOSYS, measured), so the rule adds nothing there; the namespace flags of
        clone are still refused, and tests/security asserts clone3 fails on every backend.
        """
        staged = Path(self._guest_dir) / "seccomp.json"
        if not self.gvisor:
            return str(staged)
        profile = json.loads(staged.read_text())
        profile["syscalls"] = [rule for rule in profile["syscalls"] if rule["names"] != ["clone3"]]
        target = staged.parent.with_name(staged.parent.name + "-seccomp-gvisor.json")
        set_aside_if_untrusted(target, whole_tree=False)  # found by name, like the staged worker
        if not target.is_file():
            scratch = target.with_name(f".{target.name}.{os.getpid()}")
            scratch.write_text(json.dumps(profile, indent=1))
            scratch.chmod(0o644)
            scratch.replace(target)
        return str(target)

    def availability(self) -> Availability:
        return self._availability

    @functools.cached_property
    def _availability(self) -> Availability:
        if self.binary is None:
            return Availability(False, f"{self.engine} is not installed", f"apt-get install {self.engine}")
        if self.engine == "docker":
            probe = self._run_quiet([self.binary, "version", "--format", "{{.Server.Version}}"])
            if probe.returncode != 0:
                return Availability(
                    False,
                    "the docker client is installed but no Docker engine answers",
                    "start the Docker daemon, or use podman (MCP_BRIDGE_RUNTIME=podman)",
                )
        image = self.settings.image
        probe = self._run_quiet([self.binary, "image", "inspect", "--format", "{{.Id}}", image])
        if probe.returncode != 0:
            return Availability(
                False, f"image {image} is not present in {self.engine}",
                _BUILD_HINT.format(image=image, engine=self.engine),
            )  # fmt: skip
        runtime = self.oci_runtime
        missing = runtime and (
            not os.access(runtime, os.X_OK) if os.path.isabs(runtime) else shutil.which(runtime) is None
        )
        if missing:
            what = f"OCI runtime {runtime}" + (" (gVisor)" if self.gvisor else "")
            package = "runsc" if self.gvisor else os.path.basename(runtime)
            where = "is not an executable file" if os.path.isabs(runtime) else "is not installed (not on PATH)"
            fix = f"apt-get install {package}"
            if self.gvisor:
                fix += ", or unset MCP_BRIDGE_OCI_RUNTIME to use runc"
            return Availability(False, f"{what} {where}", fix)
        extra = f" with the {runtime} runtime" + (" (gVisor)" if self.gvisor else "") if runtime else ""
        return Availability(True, f"{self.engine} at {self.binary}{extra}, image {image}")

    @staticmethod
    def _run_quiet(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run(argv, capture_output=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return subprocess.CompletedProcess(argv, 1, b"", str(exc).encode())

    def enforced_limits(self) -> list[EnforcedLimit]:
        how = f"{self.engine} --mount type=bind" + (" (through gVisor's gofer)" if self.gvisor else "")
        return self._limits() + self.mount_limits(self.settings.mounts, how)

    def _limits(self) -> list[EnforcedLimit]:
        s = self.settings
        if self.gvisor:
            return self._gvisor_limits()
        mechanism = f"{self.engine} --memory/--pids-limit"
        limits = [
            EnforcedLimit("memory", format_size(s.memory), mechanism),
            EnforcedLimit("processes", str(s.pids), f"{mechanism} + --ulimit nproc"),
            EnforcedLimit("/tmp", format_size(s.tmp_size), "tmpfs size"),
            EnforcedLimit("/dev/shm", format_size(s.tmp_size), "tmpfs size"),
            EnforcedLimit(WORKSPACE, format_size(s.workspace_size), "tmpfs size"),
            EnforcedLimit("network", "none", "--network none + seccomp (AF_UNIX only)"),
        ]
        if s.cpus:
            limits.append(EnforcedLimit("cpus", str(s.cpus), "--cpus"))
        if os.geteuid() != 0:
            limits.append(EnforcedLimit("note", "rootless", "on cgroup v1, rootless podman ignores --memory/--pids"))
        return limits

    def _gvisor_limits(self) -> list[EnforcedLimit]:
        s = self.settings
        limits = [
            EnforcedLimit(
                "kernel", "gVisor", f"{self.oci_runtime}: the guest's syscalls are served by gVisor's sentry"
            ),
            EnforcedLimit("memory", format_size(s.memory), f"{self.engine} --memory (cgroup of the sentry and guest)"),
            EnforcedLimit("processes", str(s.pids), "--ulimit nproc, enforced per sandbox by gVisor's kernel"),
            EnforcedLimit(
                "host threads",
                str(self.pids_limit()),
                f"{self.engine} --pids-limit on the sentry (gVisor needs ≥ {GVISOR_MIN_PIDS})",
            ),
            EnforcedLimit("/tmp", format_size(s.tmp_size), "tmpfs size"),
            EnforcedLimit("/dev/shm", format_size(s.tmp_size), "tmpfs size"),
            EnforcedLimit(WORKSPACE, format_size(s.workspace_size), "tmpfs size"),
        ]
        if self.engine == "podman":
            limits.append(
                EnforcedLimit("network", "none", "runsc network=none + --network none + seccomp (AF_UNIX only)")
            )
        else:
            limits.append(
                EnforcedLimit("network", "none", "--network none; seccomp only if the daemon passes --oci-seccomp")
            )
        if s.cpus:
            limits.append(EnforcedLimit("cpus", str(s.cpus), "--cpus"))
        if os.geteuid() != 0:
            limits.append(EnforcedLimit("note", "rootless", "on cgroup v1, rootless podman ignores --memory/--pids"))
        return limits

    def nproc_ulimit(self) -> int:
        """RLIMIT_NPROC counts every process of the host uid, so all rootful containers share it: there
        ``--pids-limit`` (a per-container cgroup) does the real work and nproc only caps the sum. Rootless on
        cgroup v1 ignores ``--pids-limit``, so there nproc is the limit. Under gVisor the guest's processes
        are counted by gVisor's own kernel, per sandbox, so nproc is the per-sandbox limit there. The sum is held
        to this process's hard limit and to ``kernel.pid_max`` (no uid has more tasks): runc cannot set more than
        the ``conmon`` it runs under has, which was pid_max here, and with a cap of a thousand sessions every
        container start failed."""
        s = self.settings
        if self.gvisor or os.geteuid() != 0:
            return s.pids
        total = s.pids * s.max_sessions
        _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        if hard != resource.RLIM_INFINITY:
            total = min(total, hard)
        with contextlib.suppress(OSError, ValueError):
            total = min(total, int(Path("/proc/sys/kernel/pid_max").read_text(encoding="utf-8")))
        return max(s.pids, total)

    def run_argv(self, container_name: str, guest_config: dict[str, Any]) -> list[str]:
        assert self.binary is not None
        s = self.settings
        tmpfs_opts = "rw,nosuid,nodev,mode=1777"
        argv = [self.binary, *self.global_flags(), "run", "-i", "--rm", "--init", "--pull", "never"]
        argv += ["--name", container_name]
        argv += ["--label", f"{OWNER_LABEL}={os.getpid()}", "--log-driver", "none"]
        if self.oci_runtime:
            argv += ["--runtime", self.oci_runtime]
        argv += ["--network", "none", "--read-only", "--cap-drop", "ALL"]
        if self.engine == "podman":
            # podman's --read-only also mounts /run and /var/tmp as tmpfs with no size cap (docker does not):
            # without them the only writable places are the sized tmpfs mounts below, as on every backend.
            argv += ["--read-only-tmpfs=false"]
        argv += ["--security-opt", "no-new-privileges", "--user", s.container_user, "--hostname", "sandbox"]
        argv += ["--security-opt", f"seccomp={self._seccomp_file}"]
        argv += ["--pids-limit", str(self.pids_limit()), "--memory", str(s.memory), "--memory-swap", str(s.memory)]
        nproc = self.nproc_ulimit()
        argv += ["--ulimit", "nofile=1024:1024", "--ulimit", f"nproc={nproc}:{nproc}", "--ulimit", "core=0:0"]
        # No POSIX message queues (podman mounts /dev/mqueue, where a queue is a file anyone may create); gVisor
        # does not enforce this limit, but it mounts no /dev/mqueue and keeps queues in the sentry's memory.
        argv += ["--ulimit", "msgqueue=0:0"]
        if s.cpus:
            argv += ["--cpus", str(s.cpus)]
        argv += ["--tmpfs", f"/tmp:{tmpfs_opts},size={s.tmp_size}"]
        argv += ["--tmpfs", f"/dev/shm:{tmpfs_opts},size={s.tmp_size}"]
        argv += ["--tmpfs", f"{WORKSPACE}:{tmpfs_opts},size={s.workspace_size}"]
        argv += ["--volume", f"{self._guest_dir}:{GUEST_MOUNT}:ro", "--workdir", WORKSPACE]
        argv += [part for mount in mount_order(s.mounts) for part in ("--mount", self.mount_option(mount))]
        argv += [part for name, value in SANDBOX_ENV.items() for part in ("--env", f"{name}={value}")]
        argv += list(s.container_args)
        argv += [s.image, *guest_argv("python3", dict(guest_config, workdir=WORKSPACE))]
        return argv

    @staticmethod
    def mount_option(mount: Mount) -> str:
        """``--mount`` for one of ``MCP_BRIDGE_MOUNTS``: the engine mounts it before the runtime starts (so runc and
        gVisor alike get it), as the engine's user; the container user (65534) then needs the mode bits to use it.
        A path holds no ',' (the settings refuse it), which would split this option."""
        option = f"type=bind,src={mount.host},dst={mount.target}"
        return option if mount.writable else option + ",readonly=true"

    async def launch(self, worker_id: str, guest_config: dict[str, Any]) -> Launch:
        availability = self.availability()
        if not availability.usable:
            raise SandboxUnavailable(f"{self.engine} backend: {availability.reason}; fix: {availability.fix}")
        name = f"mcp-codemode-{os.getpid()}-{next(_counter)}-{worker_id}"
        process = await asyncio.create_subprocess_exec(
            *self.run_argv(name, guest_config),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        killed = False

        async def kill() -> None:
            nonlocal killed
            if killed:
                return
            killed = True
            await self._remove(name)
            with contextlib.suppress(ProcessLookupError):
                process.kill()

        async def cleanup() -> None:
            if process.returncode is None:
                await kill()
            with contextlib.suppress(asyncio.TimeoutError, ProcessLookupError):
                await asyncio.wait_for(process.wait(), 10)
            if killed:
                # An `rm` that raced a `run` still creating the container can leave it stuck in "Removing" (seen
                # when a pool closed mid-start); once the run client has exited, a second `rm` settles it.
                await self._remove(name)

        def death_cause() -> str | None:
            if process.returncode == 137 and not killed:
                return f"killed by SIGKILL, most likely the memory limit ({format_size(self.settings.memory)})"
            return None

        return Launch(PipeChannel(process), kill, cleanup, death_cause)

    async def _remove(self, name: str) -> None:
        assert self.binary is not None
        remover = await asyncio.create_subprocess_exec(
            self.binary, "rm", "--force", "--time", "0", name,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(remover.wait(), 30)

    async def reap_orphans(self) -> int:
        """Remove containers whose bridge process is gone (it was SIGKILLed before it could clean up)."""
        if self.binary is None:
            return 0
        lister = await asyncio.create_subprocess_exec(
            self.binary, "ps", "--all", "--filter", f"label={OWNER_LABEL}",
            "--format", '{{.Names}} {{index .Labels "' + OWNER_LABEL + '"}}',
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        out, _ = await lister.communicate()
        removed = 0
        for line in out.decode(errors="replace").splitlines():
            name, _, owner = line.partition(" ")
            if owner.strip().isdigit() and not pid_alive(int(owner)):
                await self._remove(name)
                removed += 1
        return removed
