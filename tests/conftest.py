"""Shared fixtures: real backends, with CI refusing to skip a missing one."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from mcp_codemode.sandbox.base import Backend
from mcp_codemode.sandbox.container import OWNER_LABEL
from mcp_codemode.sandbox.select import make_backend
from mcp_codemode.sessions import SessionManager
from mcp_codemode.settings import Settings

T = TypeVar("T")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
BACKENDS = ("bubblewrap", "podman")
SANDBOX_UID = 65534


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """The one event loop the async tests and fixtures run on (`@pytest.mark.anyio`): asyncio, as the bridge does.

    Module scope, so a module's shared async fixtures (a bridge, an HTTP server) and its tests share one loop.
    """
    return "asyncio"


def sandbox_settings(**changes: Any) -> Settings:
    """Settings independent of the developer's environment, with limits small enough to hit quickly."""
    base = Settings.load(env={}, overrides={"state_dir": Settings.load(env={}).state_dir})
    defaults: dict[str, Any] = {
        "memory": 256 << 20,
        "pids": 64,
        "capture_limit": 64 << 10,
        "interrupt_grace": 1.0,
        "timeout": 20,
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


@pytest.fixture(params=BACKENDS)
def backend_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    require_usable(make_backend(name, sandbox_settings()))
    return name


Runner = Callable[[Callable[[SessionManager], Awaitable[T]]], T]


@pytest.fixture
def with_sessions(backend_name: str) -> Callable[..., Any]:
    """Run an async body against a fresh SessionManager on the parametrised backend."""

    def run(body: Callable[[SessionManager], Coroutine[Any, Any, T]], **changes: Any) -> T:
        settings = sandbox_settings(runtime=backend_name, **changes)
        backend = make_backend(backend_name, settings)

        async def main() -> T:
            async with SessionManager(backend, settings) as sessions:
                return await body(sessions)

        return asyncio.run(main())

    return run


def sandbox_processes() -> list[str]:
    """Live processes of the sandbox uid on the host (workers, their children, rootful containers).

    Zombies are left out: they run nothing and hold no memory, and bwrap's inner processes become zombies
    of the host's init, which on our VMs reaps them only every second or so.
    """
    done = subprocess.run(
        ["ps", "-o", "pid=,stat=,args=", "-u", str(SANDBOX_UID)], capture_output=True, text=True, check=False
    )
    rows = [line.split(None, 2) for line in done.stdout.splitlines() if line.strip()]
    return [" ".join(row) for row in rows if len(row) == 3 and not row[1].startswith("Z")]


def our_containers() -> list[str]:
    done = subprocess.run(
        ["podman", "ps", "--all", "--filter", f"label={OWNER_LABEL}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return [line for line in done.stdout.splitlines() if line.strip()]


def wait_until_gone(probe: Callable[[], list[str]], seconds: float = 15.0) -> list[str]:
    """Poll until ``probe`` finds nothing; a bounded wait for the kernel and podman to finish, not a timing test."""
    deadline = time.monotonic() + seconds
    found = probe()
    while found and time.monotonic() < deadline:
        time.sleep(0.1)
        found = probe()
    return found


@pytest.fixture
def no_orphans(backend_name: str) -> Iterator[None]:
    """After the test, nothing of the sandbox may still be running."""
    yield
    assert wait_until_gone(sandbox_processes) == [], "sandbox processes outlived their session manager"
    if backend_name == "podman":
        assert wait_until_gone(our_containers) == [], "containers outlived their session manager"
