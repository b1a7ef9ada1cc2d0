"""Shared fixtures: real backends, with CI refusing to skip a missing one. The plain helpers are in tests/support/."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings

from mcp_codemode.runs.sessions import SessionManager
from mcp_codemode.sandbox.select import make_backend
from tests.support import patience
from tests.support.backends import BACKENDS, require_usable, sandbox_settings
from tests.support.processes import our_containers, sandbox_processes, wait_until_gone
from tests.support.purity import forbid_processes_and_network

# The security tally and the slow-test lines, kept where every xdist worker's reports meet (tests/support/tally.py).
pytest_plugins = ["tests.support.tally", "tests.support.grouping"]

T = TypeVar("T")

# The security tests plant a honey file at the real ~/.netrc and fail when anything opens it while they run; pip,
# uv and httpx read that file on their own, and the suite runs pip (the add_server installs) on another worker at
# the same time, which the canary cannot tell from a sandbox reaching out. Every process the suite starts inherits
# this, so none of them reads the real one; sandboxed code reads paths, not NETRC, so the canary is as strict.
os.environ["NETRC"] = os.devnull

# Hypothesis's defaults are wall-clock checks: a 200 ms deadline per example and a health check that fails a test
# whose inputs take "too long" to generate. Both failed pure-logic tests on a starved machine (tests/face/
# test_render.py, tests/runs/test_proxy_units.py) while nothing was wrong; speed is measured in benchmarks/, never
# asserted in a test. What an example checks is unchanged, and so is how many are drawn.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")
# A test that asks for one of these (even through another fixture) runs a real sandbox: it is marked backend
# without having to say so. Whole modules of such tests say it once, with ``pytestmark = pytest.mark.backend``.
BACKEND_FIXTURES = frozenset({"backend_name"})


def pytest_report_header() -> str:
    """Say in the log how slow this machine is, and so how long the hang guards are."""
    return patience.describe()


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by ``-m``, and before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``backend`` every test whose fixtures include a real backend, so ``-m "not backend"`` leaves it out.

    And put every test in a pytest-xdist group (``--dist loadgroup``, scripts/test.sh): its file, so a module's
    shared fixtures are built once, as ``loadfile`` would; split by backend where the file shares nothing else
    between its tests. The security files run 69 attacks on three backends each, one bridge per backend: as one
    group a file was the run's longest single piece of work on a slow machine (tests/security/test_protocol.py:
    a third of an ordinary run's time on one worker); per backend, three workers share it.
    """
    for item in items:
        if BACKEND_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.backend)
        item.add_marker(pytest.mark.xdist_group(name=xdist_group(item)))


# Module-scoped fixtures that are one per backend already (or cost nothing), so they do not keep a file whole.
PER_BACKEND_OR_FREE = frozenset({"target", "anyio_backend"})


def xdist_group(item: pytest.Item) -> str:
    """The file, with the backend when the test has one and no other module- or session-wide fixture of its file."""
    path = item.nodeid.split("::", 1)[0]
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    backend = params.get("target", params.get("backend_name"))
    if backend is None:
        return path
    info = getattr(item, "_fixtureinfo", None)
    for name, definitions in info.name2fixturedefs.items() if info is not None else ():
        if name in PER_BACKEND_OR_FREE:
            continue
        if any(d.scope in ("module", "package") and d.baseid.startswith(path) for d in definitions):
            return path
    return f"{path}::{backend}"


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
