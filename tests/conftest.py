"""Shared fixtures: real backends, with CI refusing to skip a missing one. The plain helpers are in tests/support/."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from mcp_codemode.runs.sessions import SessionManager
from mcp_codemode.sandbox.select import make_backend
from tests.support import patience
from tests.support.backends import BACKENDS, require_usable, sandbox_settings
from tests.support.processes import our_containers, sandbox_processes, wait_until_gone
from tests.support.purity import forbid_processes_and_network

# The security tally and the slow-test lines, kept where every xdist worker's reports meet (tests/support/tally.py).
pytest_plugins = ["tests.support.tally"]

T = TypeVar("T")
# A test that asks for one of these (even through another fixture) runs a real sandbox: it is marked backend
# without having to say so. Whole modules of such tests say it once, with ``pytestmark = pytest.mark.backend``.
BACKEND_FIXTURES = frozenset({"backend_name"})


def pytest_report_header() -> str:
    """Say in the log how slow this machine is, and so how long the hang guards are."""
    return patience.describe()


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by ``-m``
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``backend`` every test whose fixtures include a real backend, so ``-m "not backend"`` leaves it out."""
    for item in items:
        if BACKEND_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.backend)


def pytest_collection_finish(session: pytest.Session) -> None:
    """A session with no backend test (``-m "not backend"``, or pure files alone) may start no process at all."""
    if session.items and not any(item.get_closest_marker("backend") for item in session.items):
        session.config.add_cleanup(forbid_processes_and_network())


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
