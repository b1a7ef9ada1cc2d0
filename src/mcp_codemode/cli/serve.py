"""``mcp-codemode serve``: the MCP face over stdio or HTTP, until the client hangs up or a signal stops it.

Why a module apart from ``cli.py``: serving is the one long-running command, and its signal handling, socket
and stdio wiring have nothing in common with parsing arguments; ``cli.py`` builds the settings and discovery
and hands them here, and this builds the bridge and the face from them.

Over stdio the client waits for the answer to its first request, and importing the sandbox, upstream, relay, HTTP and
metrics code and starting the bridge took longer than importing the SDK (issue 38). So this module imports, at its
top, only the SDK, the settings and the part of the face that answers without the bridge (face/handshake.py,
face/stdio.py); the rest is serving.py, imported in ``_serving``: over stdio once the first answer has gone out, over
HTTP (or with a metrics port, which is bound before anything is served) at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from ..face.handshake import Hold, face_server
from ..face.stdio import private_stdio
from ..settings import Settings
from ..upstream.model import Discovery

if TYPE_CHECKING:
    import socket

    from ..upstream.config.discovery import ConfigSources

log = logging.getLogger("mcp_codemode")

FindServers = Callable[[], "tuple[Discovery, ConfigSources | None]"]


async def serve(settings: Settings, transport: str, find_servers: FindServers = lambda: (Discovery(), None)) -> None:
    """Serve until the client hangs up (stdio) or the process is told to stop (SIGTERM, SIGHUP, Ctrl-C).

    SIGTERM must unwind through the bridge like Ctrl-C does, or every sandbox and cgroup would outlive us:
    it sets an event that stops serving (over stdio by cancelling, over HTTP through uvicorn's graceful
    exit; uvicorn also re-raises the signal to the handler it found, which is this one). The stdio channel
    is driven without threads, so the cancellation does not wait for the client's next line. ``find_servers``
    reads the clients' files (over stdio, after the first answer) and gives the configured servers and where they
    were found, which is read again while serving when ``MCP_BRIDGE_CONFIG_REFRESH`` is set.
    """
    stop = anyio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signum, stop.set)
    with contextlib.ExitStack() as sockets:
        sock = metrics_sock = None
        if transport == "http" or settings.metrics_port is not None:
            sock, metrics_sock = _serving().bind(settings, transport == "http", sockets)
        if sock is None:
            await _serve_stdio(settings, find_servers, stop, metrics_sock)
            return
        serving = _serving()
        discovery, sources = find_servers()
        async with serving.started(settings, discovery, sources, metrics_sock) as bridge:
            await serving.serve_over_http(bridge, settings, sock, stop)


def _serving() -> ModuleType:
    """serving.py: everything ``serve`` needs the bridge for, imported only here (see the module's docstring)."""
    from . import serving

    return serving


async def _serve_stdio(
    settings: Settings, find_servers: FindServers, stop: anyio.Event, metrics_sock: socket.socket | None
) -> None:
    """Answer what needs no bridge at once, and start the bridge meanwhile; what needs it waits (face/handshake.py).

    The start begins once a first answer has gone out whole, or as soon as a request needs the bridge, whichever comes
    first, so the client's first answer never queues behind it.
    """
    server = face_server(settings)
    begin = anyio.Event()
    hold = Hold(server, begin)
    server.middleware.append(hold)
    async with anyio.create_task_group() as group:

        async def stop_on_signal() -> None:
            await stop.wait()
            log.info("stopping: closing every sandbox")
            group.cancel_scope.cancel()

        group.start_soon(stop_on_signal)
        with private_stdio(sent=begin) as (lines, output):
            channel = stdio_server(
                stdin=cast("anyio.AsyncFile[str]", lines), stdout=cast("anyio.AsyncFile[str]", output)
            )
            async with channel as (read_stream, write_stream):
                ended = anyio.Event()

                async def answer() -> None:
                    try:
                        await server.run(read_stream, write_stream, server.create_initialization_options())
                    finally:
                        ended.set()
                        begin.set()

                group.start_soon(answer)
                await begin.wait()
                if not ended.is_set():  # a client that left before its first answer needs no bridge
                    await _with_bridge(settings, find_servers, metrics_sock, server, hold, ended)
        group.cancel_scope.cancel()


async def _with_bridge(
    settings: Settings,
    find_servers: FindServers,
    metrics_sock: socket.socket | None,
    server: Server[Any],
    hold: Hold,
    ended: anyio.Event,
) -> None:
    """Start the bridge, give ``server`` the handlers that need it, release what waited, and serve until ``ended``.

    The imports and the discovery run in a worker thread, so the event loop goes on answering the listing and pings
    meanwhile.
    """
    serving = await anyio.to_thread.run_sync(_serving)
    discovery, sources = await anyio.to_thread.run_sync(find_servers)
    if ended.is_set():  # the client left while the bridge loaded: it needs none
        return
    async with serving.started(settings, discovery, sources, metrics_sock, console_port=True) as bridge:
        serving.attach(server, bridge)
        hold.release()
        await ended.wait()
