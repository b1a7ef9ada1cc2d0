"""What ``serve`` needs the bridge for: its sockets, the started bridge with its metrics port, and the HTTP face.

Apart from serve.py because this is the part of the start a stdio client no longer waits for: serve.py answers the
client's first request with the SDK and the settings alone, and imports this module afterwards (or at once over
HTTP, whose clients reach the port only once everything here has started). Everything here is imported at the top,
but the replicas' router, which only replicas that share sessions need.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
from mcp.server.lowlevel import Server
from starlette.types import ASGIApp

from ..face.addresses import is_loopback
from ..face.metrics_endpoint import MetricsEndpoint, check_metrics_exposure, serve_metrics
from ..face.probes import Probes
from ..face.server import build_server
from ..face.tool_calls import local_runner
from ..face.web import bind_socket, check_exposure, serve_http
from ..runs.bridge import Bridge
from ..sandbox.processes import watch_children_with_pidfds
from ..session_capacity import raise_open_files
from ..settings import Settings
from ..upstream.config.discovery import ConfigSources
from ..upstream.model import Discovery

log = logging.getLogger("mcp_codemode")


def bind(
    settings: Settings, http: bool, sockets: contextlib.ExitStack
) -> tuple[socket.socket | None, socket.socket | None]:
    """The MCP port (over HTTP) and the metrics port (when asked for), bound before anything else starts, so that a
    busy port or an exposure without a token is a plain error; ``sockets`` closes them."""
    sock = metrics_sock = None
    if http:
        check_exposure(settings)
        sock = sockets.enter_context(contextlib.closing(bind_socket(settings)))
    if settings.metrics_port is not None:
        check_metrics_exposure(settings)
        metrics_sock = sockets.enter_context(contextlib.closing(bind_socket(
            settings, settings.metrics_port, "--metrics-port (or MCP_BRIDGE_METRICS_PORT)", settings.metrics_host
        )))  # fmt: skip
    return sock, metrics_sock


@contextlib.asynccontextmanager
async def started(
    settings: Settings,
    discovery: Discovery,
    sources: ConfigSources | None,
    metrics_sock: socket.socket | None,
    *,
    console_port: bool = False,
) -> AsyncIterator[Bridge]:
    """The bridge, started (and closed on the way out), with its metrics served on ``metrics_sock`` meanwhile, and
    with ``console_port`` (a stdio bridge) its web console on a loopback port of its own when it is turned on.

    Entered shielded: over stdio a stop can come while the bridge starts, and it must still close what it started.
    """
    soft, hard = raise_open_files()  # each session holds its sandbox's pipes: 1,024 would stop near 330 sessions
    log.debug("open files: soft limit %s, hard limit %s", soft, hard)
    watch_children_with_pidfds()  # Python 3.11: no thread per sandbox in the bridge
    async with contextlib.AsyncExitStack() as stack:
        with anyio.CancelScope(shield=True):
            bridge = await stack.enter_async_context(Bridge(settings, discovery, sources=sources))
        if console_port and settings.console:
            from ..console.launch import served_on_loopback  # only a bridge with its console on loads it

            await stack.enter_async_context(served_on_loopback(bridge, settings, discovery))
        settle_heap()
        if metrics_sock is None:
            yield bridge
            return
        endpoint = MetricsEndpoint(bridge.telemetry, settings, is_loopback(settings.metrics_host))
        served = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(serve_metrics, endpoint, metrics_sock, served)
            try:
                yield bridge
            finally:
                served.set()


def settle_heap() -> None:
    """Move every object the start made (the SDK's, pydantic's and the bridge's: over 100,000) out of the cyclic
    collector's sight once the bridge has started. They live as long as the process, and without this each full
    collection scans them all again: under load, two a minute, about 100 ms of the event loop each, which every
    client in every session waits out."""
    gc.freeze()


def attach(server: Server[Any], bridge: Bridge) -> None:
    """Give the stdio face's server, which answered the handshake already, the handlers that need ``bridge``."""
    build_server(bridge, "stdio", server=server)


async def serve_over_http(bridge: Bridge, settings: Settings, sock: socket.socket, stop: anyio.Event) -> None:
    """Serve MCP over HTTP until ``stop`` is set; replicas that share sessions go through ``_serve_shared``."""
    if settings.shares_sessions:
        if settings.console:
            log.warning("the web console is not served by replicas that share sessions (each would show only its own)")
        await _serve_shared(bridge, settings, sock, stop)
        return
    with _console(bridge, settings, sock) as wrap:
        await serve_http(
            build_server(bridge, "http"), settings, sock, stop, lambda app: _probed(wrap(app), bridge, stop),
            telemetry=bridge.telemetry,
        )  # fmt: skip


@contextlib.contextmanager
def _console(bridge: Bridge, settings: Settings, sock: socket.socket) -> Iterator[Callable[[ASGIApp], ASGIApp]]:
    """What puts the web console in front of the HTTP face under /console (when it is on; else nothing), announced
    in the log and in its state file while the face serves."""
    if not settings.console:
        yield lambda app: app
        return
    from ..console.launch import announced, front, on_http_face

    console = on_http_face(bridge, settings, bridge.discovery)
    with announced(console, settings, settings.http_host, sock.getsockname()[1]):
        yield lambda app: front(app, console)


async def _serve_shared(bridge: Bridge, settings: Settings, sock: socket.socket, stop: anyio.Event) -> None:
    """HTTP, as one of several replicas that share sessions (face/replicas.py); a stop drains (face/stopping.py)."""
    from ..face.replicas import PeerEndpoint, SessionRouter
    from ..face.stopping import drain

    async with SessionRouter.open(bridge, settings) as router:
        server = build_server(bridge, "http", router=router)
        run_here = local_runner(bridge)
        log.info("sharing sessions with the other replicas as %s (%s, forwarded calls on port %d)", settings.replica,
                 settings.peer_url, settings.peer_port)  # fmt: skip
        with contextlib.closing(bind_socket(settings, settings.peer_port, "MCP_BRIDGE_PEER_PORT")) as peers:
            await serve_http(
                server, settings, sock, stop, lambda app: PeerEndpoint(_probed(app, bridge, stop), router, run_here),
                peers, drain=lambda: drain(router), telemetry=bridge.telemetry,
            )  # fmt: skip


def _probed(app: ASGIApp, bridge: Bridge, stop: anyio.Event) -> ASGIApp:
    """``/healthz`` and ``/readyz`` in front of the guarded app (face/probes.py); a face told to stop is not ready."""
    return Probes(app, lambda: bridge.readiness(stopping=stop.is_set()))
