"""Settings for a real sandbox in tests, and the rule that under CI=true a missing backend fails instead of skipping.

Apart from conftest.py because tests, fixtures and the other support modules import these by name, and a conftest
is pytest's to load, not a module to import.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from mcp_codemode.sandbox.base import Backend
from mcp_codemode.settings import Settings

from .patience import patient

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
BACKENDS = ("bubblewrap", "podman")
# For a test of the bridge's or the guest's own logic (a cell's value, a session's queue, the pool's counting, the
# CLI's exit status): the same code runs whatever holds the sandbox, so one real sandbox proves it, the default
# backend's. What a backend does itself (containment, mounts, syscalls, output plumbing, signals, what is left
# after a close or a kill, how a start fails) stays on every backend, and so does every attack (tests/security/).
ONE_BACKEND = pytest.mark.parametrize("backend_name", [BACKENDS[0]], indirect=True)
SANDBOX_UID = 65534
# A cell's default time limit in tests, like the product's default a guard against code that hangs, not a limit
# under test (tests of the limit pass their own small timeout). Lengthened on a slow machine, where a cell that
# takes a second on an ordinary one has taken a minute; capped so a stuck cell still fails within minutes.
CELL_TIMEOUT = int(min(patient(20), 300))


def sandbox_settings(**changes: Any) -> Settings:
    """Settings independent of the developer's environment, with limits small enough to hit quickly."""
    base = Settings.load(env={}, overrides={"state_dir": Settings.load(env={}).state_dir})
    defaults: dict[str, Any] = {
        "memory": 256 << 20,
        "pids": 64,
        "capture_limit": 64 << 10,
        "interrupt_grace": 1.0,
        "timeout": CELL_TIMEOUT,
        "startup_timeout": patient(60),  # the product's default, lengthened on a slow machine
        # Hang guards, not limits under test: a Node server's handshake has taken over 30 s (the product's
        # default) on a starved machine, and cells.RUN_TIMEOUT needs a ceiling above it.
        "connect_timeout": 120.0,
        "max_timeout": 600,
        # No pre-started workers unless a test asks for them (tests/runs/test_warm_pool.py does): with the product's
        # pool of 2, a test that used one session started three sandboxes (two pooled, one refill) and closed two
        # unused, which on a slow machine's podman is minutes of containers nobody runs code in.
        "warm_pool": 0,
        # No test asks the official MCP Registry (there is no internet here): find_servers() tests name a stand-in.
        "registries": (),
    }
    defaults.update(changes)
    return base.replace(**defaults)


def fail_unless(condition: bool, message: str) -> None:
    """Under CI=true a precondition this host cannot meet fails the test; elsewhere it skips, saying why."""
    if condition:
        return
    if IN_CI:
        pytest.fail(message + " — CI=true requires it")
    pytest.skip(message + " (not CI, so skipped)")


def require_usable(backend: Backend) -> None:
    """Under CI=true a backend that cannot run is a failure, never a silent skip."""
    availability = backend.availability()
    message = f"{backend.name} backend unusable: {availability.reason} (fix: {availability.fix})"
    fail_unless(availability.usable, message)
