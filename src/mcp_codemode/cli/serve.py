"""``mcp-codemode serve``: the MCP face over stdio or HTTP, until the client hangs up or a signal stops it.

Why a module apart from ``cli.py``: serving is the one long-running command, and its signal handling, socket
and stdio wiring have nothing in common with parsing arguments; ``cli.py`` builds the settings and discovery
and hands them here, and this builds the bridge and the face from them.

Over stdio the client waits for the answer to its first request, and importing the sandbox, upstream, relay, HTTP and
metrics code and starting the bridge took longer than importing the SDK (issue 38). So this module imports, at its
top, only the SDK and the part of the face that answers without the bridge (face/handshake.py, face/stdio.py); the
rest is serving.py, imported in ``_serving``: over stdio once the first answer has gone out, over HTTP (or with a
metrics port, which is bound before anything is served) at once. A plain stdio ``serve`` (plain_serve.py) comes here
before its settings are read, through ``serve_before_settings``: they are read once the first answer has gone out.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from ..errors import CodemodeError
from ..face.handshake import Hold, Listing, face_server
from ..face.stdio import private_stdio

if TYPE_CHECKING:
    import socket

    from ..settings import Settings
    from ..upstream.config.discovery import ConfigSources
    from ..upstream.model import Discovery

log = logging.getLogger("mcp_codemode")

FindServers = Callable[[], "tuple[Discovery, ConfigSources | None]"]
# What the stdio face needs once its first answer is out: the settings, how to find the servers, the metrics socket.
Prepare = Callable[[], "tuple[Settings, FindServers, socket.socket | None]"]


def _no_servers() -> tuple[Discovery, ConfigSources | None]:
    from ..upstream.model import Discovery

    return Discovery(), None


async def serve(settings: Settings, transport: str, find_servers: FindServers = _no_servers) -> None:
    """Serve until the client hangs up (stdio) or the process is told to stop (SIGTERM, SIGHUP, Ctrl-C).

    SIGTERM must unwind through the bridge like Ctrl-C does, or every sandbox and cgroup would outlive us:
    it sets an event that stops serving (over stdio by cancelling, over HTTP through uvicorn's graceful
    exit; uvicorn also re-raises the signal to the handler it found, which is this one). The stdio channel
    is driven without threads, so the cancellation does not wait for the client's next line. ``find_servers``
    reads the clients' files (over stdio, after the first answer) and gives the configured servers and where they
    were found, which is read again while serving when ``MCP_BRIDGE_CONFIG_REFRESH`` is set.
    """
    with _sockets() as (stop, sockets):
        sock = metrics_sock = None
        if transport == "http" or settings.metrics_port is not None:
            sock, metrics_sock = _serving().bind(settings, transport == "http", sockets)
        if sock is None:
            await _serve_stdio(stop, lambda: (settings, find_servers, metrics_sock), settings)
            return
        serving = _serving()
        discovery, sources = find_servers()
        async with serving.started(settings, discovery, sources, metrics_sock) as bridge:
            await serving.serve_over_http(bridge, settings, sock, stop)


async def serve_before_settings(load: Callable[[], tuple[Settings, FindServers]]) -> None:
    """``serve`` over stdio whose settings ``load`` reads once the first answer has gone out (plain_serve.py).

    Then, before anything else is served, the metrics port is bound if the settings ask for one; a bad setting, a
    busy port, raises from here (its ``CodemodeError``) after the client's first answer rather than before it.
    """
    with _sockets() as (stop, sockets):

        def prepare() -> tuple[Settings, FindServers, socket.socket | None]:
            settings, find_servers = load()
            metrics_sock = None
            if settings.metrics_port is not None:
                metrics_sock = _serving().bind(settings, False, sockets)[1]
            return settings, find_servers, metrics_sock

        await _serve_stdio(stop, prepare)


@contextlib.contextmanager
def _sockets() -> Iterator[tuple[anyio.Event, contextlib.ExitStack]]:
    """The event SIGTERM and SIGHUP set, and the stack that closes the sockets bound while serving."""
    stop = anyio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signum, stop.set)
    with contextlib.ExitStack() as sockets:
        yield stop, sockets


def _serving() -> ModuleType:
    """serving.py: everything ``serve`` needs the bridge for, imported only here (see the module's docstring)."""
    from . import serving

    return serving


async def _serve_stdio(stop: anyio.Event, prepare: Prepare, settings: Settings | None = None) -> None:
    """Answer what needs no bridge at once, and start the bridge meanwhile; what needs it waits (face/handshake.py).

    The start begins once a first answer has gone out whole, or as soon as a request needs the bridge, whichever comes
    first, so the client's first answer never queues behind it. ``prepare`` runs then; without ``settings`` given
    here, the listing waits for it too. What it raises stops serving and is raised from here.
    """
    begin = anyio.Event()
    listing = Listing(begin)
    if settings is not None:
        listing.settle(settings)
    server = face_server(listing)
    hold = Hold(server, begin)
    server.middleware.append(hold)
    failed: list[BaseException] = []
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
                _collect_again()
                if not ended.is_set():  # a client that left before its first answer needs no bridge
                    try:
                        prepared = await anyio.to_thread.run_sync(prepare)
                    except CodemodeError as exc:  # raised once the channel is closed
                        failed.append(exc)
                        group.cancel_scope.cancel()
                    else:
                        await _with_bridge(prepared, listing, server, hold, ended)
        group.cancel_scope.cancel()
    if failed:
        raise failed[0]


def _collect_again() -> None:
    """Turn the cyclic garbage collector back on if plain_serve.py started serving without it, once the first answer
    is out, freezing what the start made: the SDK's import alone makes hundreds of thousands of objects that live as
    long as the process, which every full collection would otherwise scan again."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


async def _with_bridge(
    prepared: tuple[Settings, FindServers, socket.socket | None],
    listing: Listing,
    server: Server[Any],
    hold: Hold,
    ended: anyio.Event,
) -> None:
    """Start the bridge, give ``server`` the handlers that need it, release what waited, and serve until ``ended``.

    The imports and the discovery run in a worker thread (as ``prepare`` did), so the event loop goes on answering
    the handshake and pings meanwhile.
    """
    settings, find_servers, metrics_sock = prepared
    listing.settle(settings)
    serving = await anyio.to_thread.run_sync(_serving)
    discovery, sources = await anyio.to_thread.run_sync(find_servers)
    if ended.is_set():  # the client left while the bridge loaded: it needs none
        return
    async with serving.started(settings, discovery, sources, metrics_sock, console_port=True) as bridge:
        serving.attach(server, bridge)
        hold.release()
        await ended.wait()
