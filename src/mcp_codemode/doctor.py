"""`mcp-codemode doctor`: what can run here, what will be enforced, and what to install otherwise."""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

from .errors import SandboxUnavailable
from .sandbox.bubblewrap import BubblewrapBackend
from .sandbox.select import AUTO_ORDER, choose_backend, make_backend
from .settings import Settings


def diagnose(settings: Settings) -> dict[str, Any]:
    backends: dict[str, Any] = {}
    for name in AUTO_ORDER:
        backend = make_backend(name, settings)
        availability = backend.availability()
        entry: dict[str, Any] = {"usable": availability.usable, "reason": availability.reason}
        if availability.fix:
            entry["fix"] = availability.fix
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
        chosen = {"backend": None, "reason": str(exc)}
    return {
        "platform": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "bridge_python": sys.version.split()[0],
        "running_as_root": os.geteuid() == 0,
        "runtime_setting": settings.runtime,
        "selected": chosen,
        "backends": backends,
        "image": settings.image,
        "sandbox_python": str(bubblewrap.python) if bubblewrap.python else None,
        "cgroups": {
            "mode": cgroup.mode,
            "memory": cgroup.memory,
            "pids": cgroup.pids,
            "cpu": cgroup.cpu,
            "detail": cgroup.reason,
        },
        "state_dir": str(settings.state_dir),
    }


def render_text(report: dict[str, Any]) -> str:
    lines = [
        f"platform:        {report['platform']}, bridge Python {report['bridge_python']}"
        + (", running as root" if report["running_as_root"] else ""),
        f"selected:        {report['selected']['backend'] or 'none'} — {report['selected']['reason']}",
        f"cgroups:         {report['cgroups']['detail']}",
        f"sandbox python:  {report['sandbox_python'] or 'none found'}",
        f"image:           {report['image']}",
        f"state dir:       {report['state_dir']}",
        "",
    ]
    for name, entry in report["backends"].items():
        mark = "ok " if entry["usable"] else "no "
        lines.append(f"[{mark}] {name}: {entry['reason']}")
        if entry.get("fix"):
            lines.append(f"       fix: {entry['fix']}")
        for limit in entry.get("limits", []):
            lines.append(f"       {limit['name']:<11} {limit['value']:<8} via {limit['mechanism']}")
    return "\n".join(lines)
