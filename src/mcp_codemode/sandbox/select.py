"""Choosing a backend: the configured one, or for ``auto`` the best one that works here, with the reason."""

from __future__ import annotations

import dataclasses

from ..errors import SandboxUnavailable
from ..settings import Settings
from .base import Backend
from .bubblewrap import BubblewrapBackend
from .container import ContainerBackend

AUTO_ORDER = ("bubblewrap", "podman", "docker")


def make_backend(name: str, settings: Settings) -> Backend:
    if name == "bubblewrap":
        return BubblewrapBackend(settings)
    if name in ("podman", "docker"):
        return ContainerBackend(settings, name)  # type: ignore[arg-type]
    raise SandboxUnavailable(f"unknown backend {name!r}; choose one of auto, {', '.join(AUTO_ORDER)}")


@dataclasses.dataclass(frozen=True)
class Choice:
    backend: Backend
    reason: str


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
    refused: list[str] = []
    for name in AUTO_ORDER:
        backend = make_backend(name, settings)
        availability = backend.availability()
        if availability.usable:
            skipped = f" (skipped: {'; '.join(refused)})" if refused else ""
            return Choice(backend, f"auto chose {name}: {availability.reason}{skipped}")
        refused.append(f"{name}: {availability.reason}" + (f" — fix: {availability.fix}" if availability.fix else ""))
    raise SandboxUnavailable("no sandbox backend can run here:\n  " + "\n  ".join(refused))
