"""`mcp-codemode doctor`: what can run here, what will be enforced, and what to install otherwise."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import json
import os
import platform
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..admission import refused_names
from ..errors import SandboxUnavailable
from ..mounts import access_problem, config_paths_in_mounts, shared_with_servers
from ..provision import sandbox_env
from ..runs.readiness import Facts, judge
from ..sandbox.base import StartCheck
from ..sandbox.bubblewrap import BubblewrapBackend
from ..sandbox.cgroups import CGROUP_ROOT, CgroupSupport
from ..sandbox.container import ContainerBackend
from ..sandbox.kube.backend import KubernetesBackend
from ..sandbox.kube.checks import cluster_checks
from ..sandbox.select import AUTO_ORDER, choose_backend, make_backend
from ..session_capacity import COMPUTED as COMPUTED_CAP
from ..session_capacity import backend_kind, capacity_problems, open_files_note, session_cap
from ..settings import Settings
from ..upstream.model import Discovery, ServerConfig
from .weak_setups import SetupFacts, findings, for_user, render


def diagnose(
    settings: Settings, discovery: Discovery | None = None, config_paths: Iterable[Path] = ()
) -> dict[str, Any]:
    """Every fix in the report is a command the reader can run as is: ``sudo`` where root is needed, and the
    package's own commands (``mcp-codemode image build``, ``packages add``) rather than repository scripts."""
    as_root = os.geteuid() == 0
    backends: dict[str, Any] = {}
    for name in (*AUTO_ORDER, "kubernetes") if settings.runtime == "kubernetes" else AUTO_ORDER:
        backend = make_backend(name, settings)
        availability = backend.availability()
        entry: dict[str, Any] = {"usable": availability.usable, "reason": availability.reason}
        if availability.fix:
            entry["fix"] = for_user(availability.fix, as_root)
        if availability.usable:
            entry["limits"] = [
                {"name": limit.name, "value": limit.value, "mechanism": limit.mechanism}
                for limit in backend.enforced_limits()
            ]
        backends[name] = entry
    bubblewrap = BubblewrapBackend(settings)
    cgroup = bubblewrap.cgroup_support
    try:
        choice = choose_backend(settings)
        chosen: dict[str, Any] = {"backend": choice.backend.name, "reason": choice.reason}
    except SandboxUnavailable as exc:
        chosen = {"backend": None, "reason": for_user(str(exc), as_root)}
    weak_spots = [
        dataclasses.replace(finding, fix=for_user(finding.fix, as_root))
        for finding in findings(setup_facts(settings, discovery, chosen, cgroup, config_paths))
    ]
    report: dict[str, Any] = {
        "platform": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "bridge_python": sys.version.split()[0],
        "running_as_root": as_root,
        "runtime_setting": settings.runtime,
        "selected": chosen,
        "backends": backends,
        "image": settings.image,
        "sandbox_python": str(bubblewrap.python) if bubblewrap.python else None,
        "sandbox_packages": sandbox_env.requested(settings.state_dir),
        "cgroups": {
            "mode": cgroup.mode,
            "memory": cgroup.memory,
            "pids": cgroup.pids,
            "cpu": cgroup.cpu,
            "detail": cgroup.reason,
        },
        "state_dir": str(settings.state_dir),
        "mounts": [{"host": str(m.host), "target": m.target, "mode": m.mode} for m in settings.mounts],
        "warnings": [dataclasses.asdict(finding) for finding in weak_spots],
        "probes": probes(settings, chosen),
        "sessions": sessions(settings, chosen.get("backend")),
        "find_servers": finding(settings),
    }
    if settings.runtime == "kubernetes":  # only then: asking a cluster nobody configured would only be noise
        report["kubernetes"] = [dataclasses.asdict(check) for check in asyncio.run(cluster_checks(settings))]
    return report


def sessions(settings: Settings, backend: str | None) -> dict[str, Any]:
    """The session cap the bridge would run with, why, and what would stop that many sessions before memory does."""
    source = settings.sources.get("max_sessions", "settings")
    kind = backend_kind(backend or settings.runtime, settings.oci_runtime)
    found = session_cap(settings.max_sessions, "" if source == COMPUTED_CAP else source, kind)
    return {"cap": found.cap, "why": found.explain(), "memory_bytes": found.memory or None,
            "per_session_bytes": found.per_session or None, "open_files": open_files_note(),
            "problems": capacity_problems(found.cap, kind)}  # fmt: skip


def probes(settings: Settings, chosen: dict[str, Any]) -> dict[str, Any]:
    """The endpoints a deployment of ``serve --transport http`` probes, and what ``/readyz`` would answer now.

    A face that just started has no session and no failed start yet, so only the backend can make it not ready: none
    can run here, or (kubernetes) the cluster does not answer as a claim needs; the same rules as the face's.
    """
    host = settings.http_host.strip("[]")
    with contextlib.suppress(ValueError):
        host = "127.0.0.1" if ipaddress.ip_address(host).is_unspecified else host  # every address: ask this one
    base = f"http://{f'[{host}]' if ':' in host else host}:{settings.http_port}"
    check = StartCheck(ok=True)
    if chosen.get("backend") == "kubernetes":
        check = asyncio.run(_cluster_start_check(settings))
    verdict = judge(
        Facts(
            started=True,
            stopping=False,
            backend_error="" if chosen.get("backend") else str(chosen.get("reason")),
            cap=settings.max_sessions,
            has_room=True,
            pooled=0,
            failed_start_age=None,
            backend=check,
        )
    )
    return {"liveness": f"{base}/healthz", "readiness": f"{base}/readyz", "ready_now": verdict.ready,
            "reason": verdict.reason, "detail": verdict.detail}  # fmt: skip


async def _cluster_start_check(settings: Settings) -> StartCheck:
    backend = KubernetesBackend(settings)
    try:
        return await backend.start_check()
    finally:
        await backend.close()


def finding(settings: Settings) -> dict[str, Any]:
    """Where find_servers() looks, and what each catalog file gives now (read here: an air-gapped site's operator
    learns of a bad entry before a model does). The registries are only named: doctor asks no network."""
    from ..upstream.registry.catalog import read_catalog

    catalogs = []
    for path in settings.registry_catalog:
        read = read_catalog(path)
        catalogs.append({"path": str(path), "servers": len(read.entries), "problems": list(read.problems)})
    return {"registries": list(settings.registries), "catalogs": catalogs}


def _finding_lines(found: dict[str, Any] | None) -> list[str]:
    if found is None:
        return []
    places = [f"registry {url}" for url in found["registries"]]
    places += [
        f"catalog {c['path']} ({c['servers']} server{'' if c['servers'] == 1 else 's'})" for c in found["catalogs"]
    ]
    problems = [f"                 [!] {problem}" for c in found["catalogs"] for problem in c["problems"]]
    return [f"find servers:    {'; '.join(places) or 'no registry or catalog (MCP_BRIDGE_REGISTRIES=off)'}", *problems]


def setup_facts(
    settings: Settings,
    discovery: Discovery | None,
    chosen: dict[str, Any],
    cgroup: CgroupSupport,
    config_paths: Iterable[Path] = (),
) -> SetupFacts:
    """Read off this machine and these settings what the weak-setup rules look at (``cgroup``: as probed;
    ``config_paths``: where the bridge reads MCP server configuration)."""
    podman = ContainerBackend(settings, "podman")
    backend = chosen.get("backend")
    servers = discovery.servers if discovery is not None else ()
    allowed = [server for server in servers if settings.policy.server_refusal(server.name, server.alias) is None]
    return SetupFacts(
        backend=backend,
        running_as_root=os.geteuid() == 0,
        cgroup_mode=cgroup.mode,
        cgroup_memory=cgroup.memory,
        cgroup_pids=cgroup.pids,
        cgroup_cpu=cgroup.cpu,
        swap_accounting=_swap_accounting(cgroup),
        oci_runtime=podman.oci_runtime if backend != "docker" else settings.oci_runtime,
        gvisor_installed=shutil.which("runsc") is not None,
        docker_userns=_docker_userns() if backend == "docker" else None,
        setpriv=shutil.which("setpriv") is not None,
        cpus=settings.cpus,
        container_args=settings.container_args,
        http_host=settings.http_host,
        http_tokens=len(settings.http_tokens),
        allowed_origins=settings.allowed_origins,
        audit_log_on=settings.audit_log != "off",
        policy_narrows=settings.policy.narrows,
        servers=len(servers),
        readable_secret_configs=readable_secret_configs(servers),
        state_dir_problem=state_dir_problem(settings.state_dir),
        allow_self_server=settings.allow_self_server,
        mounts=settings.mounts,
        mount_problems=mount_problems(settings, backend),
        shared_mounts=tuple(
            shared_with_servers(settings.mounts, allowed, settings.roots, settings.mounts_shared, Path.cwd())
        ),
        kube_runtime_class=settings.kube_runtime_class,
        shares_sessions=settings.shares_sessions,
        shared_state=settings.shared_state,
        pod=settings.pod,
        refused_stdio=refused_names(settings, discovery) if discovery is not None else (),
        config_in_mounts=tuple(config_paths_in_mounts(settings.mounts, config_paths)),
        config_refresh=settings.config_refresh > 0,
    )


def mount_problems(settings: Settings, backend: str | None) -> tuple[tuple[str, str], ...]:
    """Each mount the chosen backend's sandbox uid could not use as meant (by the mode bits), with the fix.

    bubblewrap mounts as the sandbox uid itself, which must pass through every directory above; a container engine
    mounts as root, and only the container user's access to the directory itself counts."""
    if backend == "bubblewrap":
        bubblewrap = BubblewrapBackend(settings)
        uid, gid, through_parents = bubblewrap.uid, bubblewrap.gid, True
    elif backend in ("podman", "docker"):
        user, _, group = settings.container_user.partition(":")
        uid, gid, through_parents = int(user), int(group or user), False
    else:
        return ()
    found = (access_problem(mount, uid, gid, through_parents) for mount in settings.mounts)
    return tuple(problem for problem in found if problem is not None)


def _swap_accounting(cgroup: CgroupSupport, root: Path = CGROUP_ROOT) -> bool:
    if cgroup.mode == "v1":
        return (root / "memory" / "memory.memsw.limit_in_bytes").exists()
    if cgroup.mode == "v2":
        parent = cgroup.parents.get("unified")
        return (parent is not None and any(parent.glob("*/memory.swap.max"))) or (root / "memory.swap.max").exists()
    return True  # no cgroups: the no-cgroups finding says more than this one would


def _docker_userns() -> bool | None:
    """Whether the Docker engine remaps container root (userns-remap or rootless); None when it cannot be asked."""
    docker = shutil.which("docker")
    if docker is None:
        return None
    try:
        done = subprocess.run(
            [docker, "info", "--format", "{{json .SecurityOptions}}"], capture_output=True, text=True, timeout=20
        )
        options = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    if not isinstance(options, list):
        return None
    return any(isinstance(o, str) and ("name=userns" in o or "name=rootless" in o) for o in options)


def readable_secret_configs(servers: tuple[ServerConfig, ...]) -> tuple[str, ...]:
    """Config files that hold a server's env or header value literally and that every local user may read.

    Values written as ``${VAR}`` are not in the file, so only literal values count: the file is read and each
    value looked for in it.
    """
    found: list[str] = []
    for server in servers:
        values = [v for v in (*server.env.values(), *server.headers.values()) if len(v) >= 4]
        path = Path(server.source.split(" (project ")[0])
        if not values or str(path) in found:
            continue
        try:
            if not path.stat().st_mode & stat.S_IROTH:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if any(value in text for value in values):
            found.append(str(path))
    return tuple(found)


def state_dir_problem(state_dir: Path) -> str:
    """Why the state directory (staged worker, saved tools, caches) could be tampered with or cannot be used, or "".

    The bridge adds the search bits to a state directory of its own user (0700 becomes 0711); one of another user
    it cannot fix, and without them bubblewrap's sandbox uid cannot reach the worker staged in it.
    """
    for directory in (state_dir, *state_dir.parents):
        try:
            info = directory.stat()
        except OSError:
            continue  # not created yet: the bridge creates it 0711 itself
        if directory == state_dir and info.st_uid != os.geteuid():
            problem = f"the state directory {state_dir} belongs to uid {info.st_uid}, not to the bridge's user"
            if not info.st_mode & stat.S_IXOTH:
                problem += (
                    f", and its mode {stat.S_IMODE(info.st_mode):04o} keeps the sandbox's uid out, which the bridge "
                    f"cannot change: its owner must run `chmod o+x {state_dir}`"
                )
            return problem
        sticky = info.st_mode & stat.S_ISVTX and directory != state_dir
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky:
            return (
                f"{directory} is writable by other users, who could replace the worker code or saved tools under "
                f"{state_dir}"
            )
    return ""


def _packages_note(report: dict[str, Any]) -> str:
    added = report.get("sandbox_packages") or []
    if not added:
        return ""
    return f" (added with `mcp-codemode packages add`: {', '.join(added)})"


def _probes_line(found: dict[str, Any]) -> str:
    now = "yes" if found["ready_now"] else f"no, {found['reason']}: {found['detail'].split('; ')[0]}"
    return f"probes (http):   alive {found['liveness']}, ready {found['readiness']} (ready now: {now})"


def _sessions_lines(found: dict[str, Any] | None) -> list[str]:
    if not found:
        return []
    lines = [f"sessions:        at most {found['why']}", f"                 {found['open_files']}"]
    return lines + [f"  [!] {problem}" for problem in found["problems"]]


def render_text(report: dict[str, Any]) -> str:
    lines = [
        f"platform:        {report['platform']}, bridge Python {report['bridge_python']}"
        + (", running as root" if report["running_as_root"] else ""),
        f"selected:        {report['selected']['backend'] or 'none'} — {report['selected']['reason']}",
        f"cgroups:         {report['cgroups']['detail']}",
        f"sandbox python:  {report['sandbox_python'] or 'none found'}" + _packages_note(report),
        f"image:           {report['image']}",
        f"state dir:       {report['state_dir']}",
        "mounts:          "
        + (", ".join(f"{m['host']} at {m['target']} ({m['mode']})" for m in report["mounts"]) or "none"),
        _probes_line(report["probes"]),
        *_sessions_lines(report.get("sessions")),
        *_finding_lines(report.get("find_servers")),
        "",
    ]
    lines += ["weak spots:", *(f"  {line}" for line in render(report["warnings"])), ""]
    if "kubernetes" in report:
        lines.append("kubernetes:")
        for check in report["kubernetes"]:
            mark = {True: "ok ", False: "no ", None: "?  "}[check["ok"]]
            lines.append(f"[{mark}] {check['name']}: {check['detail']}")
            if check["fix"]:
                lines.append(f"       fix: {check['fix']}")
        lines.append("")
    for name, entry in report["backends"].items():
        mark = "ok " if entry["usable"] else "no "
        lines.append(f"[{mark}] {name}: {entry['reason']}")
        if entry.get("fix"):
            lines.append(f"       fix: {entry['fix']}")
        for limit in entry.get("limits", []):
            lines.append(f"       {limit['name']:<11} {limit['value']:<8} via {limit['mechanism']}")
    return "\n".join(lines)
