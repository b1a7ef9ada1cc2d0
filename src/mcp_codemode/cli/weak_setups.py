"""What `doctor` warns about: setups that run, but give weaker isolation or less control than the user may think.

This module is pure logic over facts that ``doctor`` gathers (``SetupFacts``), so every rule can be tested without
building the weak machine it describes. A finding is a ``warn`` when a promise of docs/security.md does not hold
here (a limit not enforced, a secret readable by others), and ``info`` when the setup holds its promises but a
stronger option is one setting away.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Literal

from ..face.addresses import is_loopback
from ..mounts import Mount, SharedPlace

Level = Literal["warn", "info"]


@dataclasses.dataclass(frozen=True)
class Finding:
    level: Level
    topic: str  # a short stable id, e.g. "cpu-quota", for scripts that read `doctor --json`
    message: str
    fix: str


@dataclasses.dataclass(frozen=True)
class SetupFacts:
    """Everything the rules look at; ``doctor`` fills it from the settings and the machine."""

    backend: str | None  # the backend that would run code, or None when none can
    running_as_root: bool
    cgroup_mode: str  # "v1", "v2" or "none"
    cgroup_memory: bool
    cgroup_pids: bool
    cgroup_cpu: bool
    swap_accounting: bool  # v1: memory.memsw exists; v2: memory.swap.max exists
    oci_runtime: str  # what podman/docker will be given as --runtime ("" = the engine's default)
    gvisor_installed: bool
    docker_userns: bool | None  # docker only: user namespaces remap container root; None = unknown
    setpriv: bool
    cpus: float | None
    container_args: tuple[str, ...]
    http_host: str
    http_tokens: int
    allowed_origins: tuple[str, ...]
    audit_log_on: bool
    policy_narrows: bool  # the [policy] table narrows servers, tools or read-only beyond the defaults
    servers: int  # configured upstream servers
    readable_secret_configs: tuple[str, ...]  # config files holding env/header values that others can read
    state_dir_problem: str  # "" or why the state directory is unsafe
    allow_self_server: bool
    mounts: tuple[Mount, ...] = ()  # MCP_BRIDGE_MOUNTS
    mount_problems: tuple[tuple[str, str], ...] = ()  # (why the sandbox uid cannot use a mount, the fix)
    shared_mounts: tuple[SharedPlace, ...] = ()  # rw mounts that host-side upstream servers work in too
    kube_runtime_class: str = "gvisor"  # MCP_BRIDGE_KUBE_RUNTIME_CLASS: what the cluster's sandbox pods must run under
    shares_sessions: bool = False  # a face replica among others (MCP_BRIDGE_PEER_TOKEN)
    shared_state: str = "files"  # where sign-ins and saved tools are kept (MCP_BRIDGE_SHARED_STATE)
    pod: str = ""  # why the bridge looks like it runs in a Kubernetes pod ("" when it does not)
    refused_stdio: tuple[str, ...] = ()  # stdio servers the bridge refuses here (admission.py)
    config_in_mounts: tuple[str, ...] = ()  # MCP config paths the bridge reads that lie in a writable mount
    config_refresh: bool = False  # MCP_BRIDGE_CONFIG_REFRESH: the config is read again while the bridge runs


def findings(facts: SetupFacts) -> list[Finding]:
    """Every rule, in the order a reader should fix them: isolation first, then secrets, then control."""
    found: list[Finding] = []
    for rule in _RULES:
        found.extend(rule(facts))
    return found


def _limits(facts: SetupFacts) -> list[Finding]:
    if facts.backend == "bubblewrap":
        return _bubblewrap_limits(facts)
    if facts.backend in ("podman", "docker") and not facts.running_as_root and facts.cgroup_mode == "v1":
        return [
            Finding(
                "warn",
                "rootless-cgroup-v1",
                f"rootless {facts.backend} on cgroup v1 ignores --memory and --pids-limit: a sandbox's memory is not "
                "capped, and processes are capped only per user by --ulimit nproc",
                "run the bridge as root, move the host to cgroup v2 with delegation, or use bubblewrap",
            )
        ]
    return []


def _bubblewrap_limits(facts: SetupFacts) -> list[Finding]:
    found: list[Finding] = []
    missing = [name for name, ok in (("memory", facts.cgroup_memory), ("pids", facts.cgroup_pids)) if not ok]
    if missing:
        found.append(
            Finding(
                "warn",
                "no-cgroups",
                f"bubblewrap cannot create {' and '.join(missing)} cgroups here, so it falls back to rlimits: memory "
                "is capped per process (RLIMIT_AS, tmpfs not counted) and processes per user (RLIMIT_NPROC)",
                "run the bridge as root, or on cgroup v2 delegate a subtree with the memory and pids controllers",
            )
        )
    elif not facts.swap_accounting:
        found.append(
            Finding(
                "warn",
                "no-swap-accounting",
                "the kernel does not account swap per cgroup, so a sandbox can use swap beyond its memory limit",
                "boot with swapaccount=1 (cgroup v1) or turn swap off",
            )
        )
    return found


def _cpu(facts: SetupFacts) -> list[Finding]:
    if facts.backend is None or facts.cpus is not None:
        return []
    if facts.backend == "bubblewrap" and not facts.cgroup_cpu:
        fix = "the cpu cgroup controller is not available here either; rely on the timeout"
    else:
        fix = "set MCP_BRIDGE_CPUS (e.g. 1) to give each sandbox a CPU quota"
    return [
        Finding(
            "info",
            "cpu-quota",
            "no CPU quota: one cell can keep every CPU busy until its timeout (MCP_BRIDGE_TIMEOUT)",
            fix,
        )
    ]


def _containers(facts: SetupFacts) -> list[Finding]:
    found: list[Finding] = []
    if facts.backend == "docker" and facts.docker_userns is False:
        found.append(
            Finding(
                "warn",
                "docker-no-userns",
                "the Docker engine runs without user namespaces: root in a container is root on the host, so a "
                "kernel escape from a container lands as host root (mcp-codemode runs code as 65534 inside, which "
                "narrows but does not remove this)",
                'enable "userns-remap" in /etc/docker/daemon.json, run rootless Docker, or use podman or bubblewrap',
            )
        )
    if facts.backend in ("podman", "docker") and facts.container_args:
        found.append(
            Finding(
                "warn",
                "container-args",
                f"MCP_BRIDGE_CONTAINER_ARGS adds {' '.join(facts.container_args)!r} after the hardening flags, and "
                "can override any of them (network, capabilities, seccomp, mounts)",
                "check that every extra argument is needed and weakens nothing",
            )
        )
    if facts.backend == "podman" and facts.gvisor_installed and not _is_gvisor(facts.oci_runtime):
        found.append(
            Finding(
                "info",
                "gvisor",
                "containers share the host kernel; gVisor (runsc) is installed and would put a user-space kernel "
                "between code and the host",
                "set MCP_BRIDGE_OCI_RUNTIME=runsc",
            )
        )
    return found


def _cluster(facts: SetupFacts) -> list[Finding]:
    """Sandbox pods without gVisor were chosen (overlays/no-gvisor): they run, but not as docs/security.md says."""
    if facts.backend != "kubernetes" or facts.kube_runtime_class != "none":
        return []
    return [
        Finding(
            "warn",
            "kube-no-gvisor",
            "MCP_BRIDGE_KUBE_RUNTIME_CLASS=none: sandbox pods run under the node's runc, so the guest's system calls "
            "reach the node's kernel, with only namespaces, the RuntimeDefault seccomp profile and the pod's "
            "settings between them; a kernel or container escape is the node, its other pods and its credentials",
            "install gVisor on the nodes and apply an overlay without no-gvisor (its template names runtimeClassName "
            "gvisor); docs/kubernetes.md, 'Clusters without gVisor'",
        )
    ]


def _is_gvisor(runtime: str) -> bool:
    return runtime == "runsc" or runtime.endswith("/runsc")


def _mounts(facts: SetupFacts) -> list[Finding]:
    """A writable mount is a promise of docs/security.md given up on purpose (host files within reach): say so
    every time, and say when a mount cannot work as meant because the sandbox's uid lacks the permission. One that
    a host-side server works in too is named whether refused or accepted: accepted, it is still a way to the host."""
    found = [
        Finding(
            "warn",
            "mount-rw",
            f"{mount.host} is mounted writable at {mount.target}: sandboxed code can change and delete every file "
            "in it, and whatever it writes there lands on the host",
            f"mount it read-only ({mount.host}:{mount.target}:ro) unless code must write there, and keep nothing in "
            "it you could not lose",
        )
        for mount in facts.mounts
        if mount.writable
    ]
    found += [Finding("warn", "mount-access", problem, fix) for problem, fix in facts.mount_problems]
    found += [
        Finding(
            "warn",
            "mount-shared",
            place.problem
            + (
                "; accepted in MCP_BRIDGE_MOUNTS_SHARED, so the bridge runs code with it"
                if place.accepted
                else "; the bridge runs no code until this is fixed"
            ),
            place.fix,
        )
        for place in facts.shared_mounts
    ]
    if facts.config_in_mounts:
        found.append(
            Finding(
                "warn",
                "mount-config",
                f"{'; '.join(facts.config_in_mounts)}: sandboxed code could write an MCP server there, a command "
                + (
                    "the bridge would run on the host within seconds (MCP_BRIDGE_CONFIG_REFRESH); the bridge runs "
                    "no code until this is fixed"
                    if facts.config_refresh
                    else "the bridge runs on the host at its next start"
                ),
                "mount it read-only (:ro), or keep MCP config files out of it: start the bridge in another folder, "
                "or give the servers with --config and --no-discover",
            )
        )
    return found


def _processes(facts: SetupFacts) -> list[Finding]:
    if facts.setpriv:
        return []
    return [
        Finding(
            "warn",
            "no-setpriv",
            "setpriv is missing: local MCP servers are not tied to the bridge's life, so they can outlive a bridge "
            "that is killed",
            "apt-get install util-linux",
        )
    ]


def _http(facts: SetupFacts) -> list[Finding]:
    found: list[Finding] = []
    if not is_loopback(facts.http_host) and facts.http_tokens == 0:
        found.append(
            Finding(
                "warn",
                "http-exposed",
                f"http_host is {facts.http_host}, beyond loopback, and no token is set: `serve --transport http` "
                "will refuse to start",
                "set MCP_BRIDGE_HTTP_TOKEN (openssl rand -hex 24), or listen on 127.0.0.1",
            )
        )
    if any(origin.strip() == "*" or origin.startswith("*") for origin in facts.allowed_origins):
        found.append(
            Finding(
                "warn",
                "origins-wildcard",
                "allowed_origins accepts any origin, so any web page open in a browser that can reach the bridge "
                "may call it",
                "list the exact origins of your web clients in MCP_BRIDGE_ALLOWED_ORIGINS",
            )
        )
    return found


def _secrets(facts: SetupFacts) -> list[Finding]:
    found: list[Finding] = []
    for path in facts.readable_secret_configs:
        found.append(
            Finding(
                "warn",
                "config-readable",
                f"{path} holds credentials (env or headers of a server) and every user of this machine can read it",
                f"chmod 600 {path}",
            )
        )
    if facts.state_dir_problem:
        found.append(Finding("warn", "state-dir", facts.state_dir_problem, "use a directory only you can write"))
    if facts.shares_sessions and facts.shared_state == "files":
        found.append(
            Finding(
                "warn",
                "state-per-replica",
                "this replica shares sessions with others but keeps sign-ins and saved tools in its own state "
                "directory: a tool saved on one replica is missing on the others, a sign-in must be made on each, "
                "and in a pod both are lost with it",
                'set MCP_BRIDGE_SHARED_STATE=kubernetes (docs/kubernetes.md, "Shared state: sign-ins and saved tools")',
            )
        )
    return found


def _stdio_in_pod(facts: SetupFacts) -> list[Finding]:
    """Configured stdio servers the kubernetes backend refuses in a pod: a server the user configured that never
    runs is worth a warning, with the way to run it instead."""
    if not facts.refused_stdio:
        return []
    names = ", ".join(repr(name) for name in facts.refused_stdio)
    return [
        Finding(
            "warn",
            "stdio-in-pod",
            f"the stdio server(s) {names} are refused: on the kubernetes backend in a pod ({facts.pod}) a stdio "
            "server would run beside the face's service-account token and mounted secrets, and could act with them",
            "run each as an HTTP MCP server of its own (a Deployment and a Service) and give its url in the config "
            '(docs/kubernetes.md, "Upstream servers for a team")',
        )
    ]


def _control(facts: SetupFacts) -> list[Finding]:
    found: list[Finding] = []
    if not facts.audit_log_on:
        found.append(
            Finding(
                "warn",
                "audit-off",
                "the audit log is off: tool calls made by sandboxed code are not recorded",
                "unset MCP_BRIDGE_AUDIT_LOG (the default writes <state_dir>/audit/audit.jsonl)",
            )
        )
    if facts.servers and not facts.policy_narrows:
        found.append(
            Finding(
                "info",
                "no-policy",
                f"no [policy] narrows what code may call: every tool of the {facts.servers} configured server(s) "
                "is callable, including tools that write or delete",
                "add a [policy] table to the settings file (deny_tools, read_only = true; see docs/configuration.md)",
            )
        )
    if facts.allow_self_server:
        found.append(
            Finding(
                "info",
                "self-server",
                "MCP_BRIDGE_ALLOW_SELF_SERVER is on: a config entry that starts mcp-codemode itself is proxied, and "
                "each session may start another bridge",
                "turn it off unless you nest bridges on purpose",
            )
        )
    return found


_RULES = (_limits, _cpu, _containers, _cluster, _mounts, _processes, _http, _stdio_in_pod, _secrets, _control)


# Commands in fix texts that only root may run. Backends write their fixes as root would type them; `doctor` shows
# an ordinary user each one with `sudo`, so every fix it prints is a command the reader can run as is.
_ROOT_COMMANDS = re.compile(r"(?<![\w/-])(?<!sudo )(apt-get install|sysctl -w|usermod)\b")


def for_user(fix: str, running_as_root: bool) -> str:
    """``fix`` as the reader types it: root-only commands get ``sudo`` when the reader is not root."""
    return fix if running_as_root else _ROOT_COMMANDS.sub(r"sudo \1", fix)


def render(found: Sequence[Mapping[str, str]]) -> list[str]:
    """Text lines for `doctor` from findings as its JSON report holds them: warnings first, each with its fix."""
    if not found:
        return ["no weak spots found in this setup"]
    lines = []
    for finding in sorted(found, key=lambda f: f["level"] != "warn"):
        lines.append(f"{finding['level']:<5} {finding['message']}")
        lines.append(f"      fix: {finding['fix']}")
    return lines
