"""Shared fixtures: real backends, with CI refusing to skip a missing one. The plain helpers are in tests/support/."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from mcp_codemode.sandbox.select import make_backend
from mcp_codemode.sessions import SessionManager
from tests.support.backends import BACKENDS, require_usable, sandbox_settings
from tests.support.processes import our_containers, sandbox_processes, wait_until_gone

T = TypeVar("T")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """The one event loop the async tests and fixtures run on (`@pytest.mark.anyio`): asyncio, as the bridge does.

    Module scope, so a module's shared async fixtures (a bridge, an HTTP server) and its tests share one loop.
    """
    return "asyncio"


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


@pytest.fixture
def no_orphans(backend_name: str) -> Iterator[None]:
    """After the test, nothing of the sandbox may still be running."""
    yield
    assert wait_until_gone(sandbox_processes) == [], "sandbox processes outlived their session manager"
    if backend_name == "podman":
        assert wait_until_gone(our_containers) == [], "containers outlived their session manager"
