"""``mcp-codemode serve``: the MCP face over stdio or HTTP, until the client hangs up or a signal stops it.

Why a module apart from ``cli.py``: serving is the one long-running command, and its signal handling, socket
and stdio wiring have nothing in common with parsing arguments; ``cli.py`` builds the settings and discovery
and hands them here, and this builds the bridge and the face from them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from typing import cast

import anyio
from mcp.server.stdio import stdio_server
from starlette.types import ASGIApp

from ..face.addresses import is_loopback
from ..face.metrics_endpoint import MetricsEndpoint, check_metrics_exposure, serve_metrics
from ..face.probes import Probes
from ..face.server import build_server
from ..face.stdio import private_stdio
from ..face.tool_calls import local_runner
from ..face.web import bind_socket, check_exposure, serve_http
from ..runs.bridge import Bridge
from ..settings import Settings
from ..upstream.config.discovery import ConfigSources
from ..upstream.model import Discovery

log = logging.getLogger("mcp_codemode")


async def serve(
    settings: Settings, transport: str, discovery: Discovery | None = None, sources: ConfigSources | None = None
) -> None:
    """Serve until the client hangs up (stdio) or the process is told to stop (SIGTERM, SIGHUP, Ctrl-C).

    SIGTERM must unwind through the bridge like Ctrl-C does, or every sandbox and cgroup would outlive us:
    it sets an event that stops serving (over stdio by cancelling, over HTTP through uvicorn's graceful
    exit; uvicorn also re-raises the signal to the handler it found, which is this one). The stdio channel
    is driven without threads, so the cancellation does not wait for the client's next line. ``sources``: where
    ``discovery`` came from, read again while serving when ``MCP_BRIDGE_CONFIG_REFRESH`` is set.
    """
    with contextlib.ExitStack() as sockets:
        sock = metrics_sock = None
        if transport == "http":
            check_exposure(settings)
            sock = sockets.enter_context(contextlib.closing(bind_socket(settings)))
        if settings.metrics_port is not None:
            check_metrics_exposure(settings)
            metrics_sock = sockets.enter_context(contextlib.closing(bind_socket(
                settings, settings.metrics_port, "--metrics-port (or MCP_BRIDGE_METRICS_PORT)", settings.metrics_host
            )))  # fmt: skip
        await _serve(settings, sock, discovery, sources, metrics_sock)


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


async def _serve(settings: Settings, sock: socket.socket | None, discovery: Discovery | None,
                 sources: ConfigSources | None, metrics_sock: socket.socket | None) -> None:  # fmt: skip
    stop = anyio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signum, stop.set)
    async with Bridge(settings, discovery, sources=sources) as bridge:
        if metrics_sock is None:
            await _serve_face(bridge, settings, sock, stop)
            return
        endpoint = MetricsEndpoint(bridge.telemetry, settings, is_loopback(settings.metrics_host))
        served = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(serve_metrics, endpoint, metrics_sock, served)
            try:
                await _serve_face(bridge, settings, sock, stop)
            finally:
                served.set()


async def _serve_face(bridge: Bridge, settings: Settings, sock: socket.socket | None, stop: anyio.Event) -> None:
    """Serve MCP over HTTP (``sock``) or stdio until the client hangs up or ``stop`` is set."""
    if sock is not None and settings.shares_sessions:
        await _serve_shared(bridge, settings, sock, stop)
        return
    if sock is not None:
        await serve_http(
            build_server(bridge, "http"), settings, sock, stop, lambda app: _probed(app, bridge, stop),
            telemetry=bridge.telemetry,
        )  # fmt: skip
        return
    async with anyio.create_task_group() as group:

        async def stop_on_signal() -> None:
            await stop.wait()
            log.info("stopping: closing every sandbox")
            group.cancel_scope.cancel()

        group.start_soon(stop_on_signal)
        server = build_server(bridge, "stdio")
        with private_stdio() as (lines, output):
            channel = stdio_server(
                stdin=cast("anyio.AsyncFile[str]", lines), stdout=cast("anyio.AsyncFile[str]", output)
            )
            async with channel as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
        group.cancel_scope.cancel()
