"""Choosing a backend: the configured one, or for ``auto`` the best one that works here, with the reason.

The choice is made once, when a bridge starts, and never revisited: a backend that fails later fails with its
own error, and a bridge never moves to another backend on its own. So that ``auto`` is never a silent switch
either, the choice records every earlier candidate it passed over (and why), and ``announce`` logs it as a
warning whenever there was one: a bridge that meant to use bubblewrap and runs podman says so at every start,
with bubblewrap's reason and fix, whatever the log level short of ERROR.
"""

from __future__ import annotations

import dataclasses
import logging

from ..errors import SandboxUnavailable
from ..settings import Settings
from .base import Availability, Backend
from .bubblewrap import BubblewrapBackend
from .container import ContainerBackend
from .kube.backend import KubernetesBackend

log = logging.getLogger(__name__)
AUTO_ORDER = ("bubblewrap", "podman", "docker")


def make_backend(name: str, settings: Settings) -> Backend:
    if name == "bubblewrap":
        return BubblewrapBackend(settings)
    if name in ("podman", "docker"):
        return ContainerBackend(settings, name)  # type: ignore[arg-type]
    if name == "kubernetes":  # never chosen by auto: a cluster is a deliberate choice (docs/kubernetes.md)
        return KubernetesBackend(settings)
    raise SandboxUnavailable(f"unknown backend {name!r}; choose one of auto, {', '.join(AUTO_ORDER)}, kubernetes")


@dataclasses.dataclass(frozen=True)
class PassedOver:
    """A backend ``auto`` tried before the one it chose, and why it could not use it."""

    name: str
    availability: Availability

    def __str__(self) -> str:
        fix = self.availability.fix
        return f"{self.name}: {self.availability.reason}" + (f" — fix: {fix}" if fix else "")


@dataclasses.dataclass(frozen=True)
class Choice:
    backend: Backend
    reason: str
    passed_over: tuple[PassedOver, ...] = ()


def choose_backend(settings: Settings) -> Choice:
    """Resolve ``settings.runtime``; raise ``SandboxUnavailable`` naming every failed option and its fix."""
    if settings.runtime != "auto":
        backend = make_backend(settings.runtime, settings)
        availability = backend.availability()
        if not availability.usable:
            raise SandboxUnavailable(
                f"the {backend.name} backend was requested but cannot run: {availability.reason}. "
                f"Fix: {availability.fix}" + (". Or set MCP_BRIDGE_RUNTIME=auto" if availability.fix else "")
            )
        return Choice(backend, f"{backend.name} was requested ({settings.sources.get('runtime', 'settings')})")
    refused: list[PassedOver] = []
    for name in AUTO_ORDER:
        backend = make_backend(name, settings)
        availability = backend.availability()
        if availability.usable:
            reason = f"auto chose {name}: {availability.reason}"
            if refused:
                reason += "; passed over " + "; ".join(map(str, refused))
            return Choice(backend, reason, tuple(refused))
        refused.append(PassedOver(name, availability))
    raise SandboxUnavailable("no sandbox backend can run here:\n  " + "\n  ".join(map(str, refused)))


def announce(choice: Choice) -> None:
    """Log the choice once per start: a warning when ``auto`` passed over a better backend, else info."""
    if choice.passed_over:
        skipped = ", ".join(entry.name for entry in choice.passed_over)
        log.warning(
            "%s. Every sandbox of this bridge runs on %s; it does not switch back to %s by itself: apply the fix "
            "and restart, or set MCP_BRIDGE_RUNTIME=%s to make this choice explicit (see `mcp-codemode doctor`)",
            choice.reason,
            choice.backend.name,
            skipped,
            choice.backend.name,
        )
    else:
        log.info("%s", choice.reason)


def passed_over_note(choice: Choice) -> str:
    """One sentence for the capability summary: which better backends could not run (no host paths or reasons)."""
    if not choice.passed_over:
        return ""
    names = " and ".join(entry.name for entry in choice.passed_over)
    return f"({names} cannot run on this host, so auto chose {choice.backend.name}; `mcp-codemode doctor` says why.)"
