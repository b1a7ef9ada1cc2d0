"""The hub: one persistent MCP client connection per configured upstream server, opened on first use.

Code in the sandbox calls upstream tools in loops, so each call must reuse a warm connection (a call costs about
5 ms) instead of paying for a process start and a handshake (0.2-0.3 s for a Node server, 0.6-0.8 s for a Python
one). The hub therefore keeps one ``mcp.Client`` per server, connects it lazily, shares it between concurrent
callers, notices when the server dies, restarts it on a later call with bounded backoff, and guarantees that no
server process outlives the hub, not even when the process that holds the hub is killed.

Each connection lives in its own long-lived task that owns the ``async with Client(...)``: the SDK's transports
use cancel scopes, which must be entered and left by the same task. Callers from any task send requests through
the connected session; the owning task only waits until it is told to stop or its transport ends.

Stdio servers are launched through a small ``/bin/sh`` wrapper, started by ``setpriv --pdeathsig KILL`` (and the
server itself again under ``setpriv --pdeathsig KILL``), so that:

* the kernel kills the wrapper when the hub's process dies (even by SIGKILL, when no cleanup code runs), and the
  server when the wrapper dies, so no server is orphaned;
* the server's pid and, when it ends, its exit status are written to its log file, where the hub reads them to
  fill ``ServerState.pid`` and to say *why* a server died (the SDK keeps its process object private).

When a server dies, the request in flight (or else the next one) fails with ``ServerUnavailable`` saying why,
and the call after that starts the server again. Repeated failures back off (0.5 s doubling to 30 s by default;
calls meanwhile fail at once, saying when the next try is); a connection that stayed up resets the backoff.

A server whose ``serverInfo`` says it is a code-mode bridge (this one, reached through a wrapper script or by its
HTTP URL, which config discovery cannot see through) is closed as soon as it has said so, and is never started
again: every call fails with ``SelfServerSkipped``, a ``ServerUnavailable``. ``allow_self`` keeps it.

Only asyncio is supported: the connection tasks are asyncio tasks. PDEATHSIG fires when the *thread* that
started the server ends, so the hub must run on a loop in a thread that lives at least as long as the hub (the
main thread, or a loop thread that closes the hub before it ends).

This module is the set of connections; each concern of one connection has its own module: ``connection``
(the state machine), ``launch`` (the wrapper, the command, the log file), ``restart`` (backoff), ``redaction``,
``paging`` (listings), ``watch`` (noticing a dead transport) and ``state`` (the snapshot ``state()`` returns).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import mcp_types as types
from mcp.client.stdio import get_default_environment
from mcp.shared.dispatcher import ProgressFnT

from ..config.refresh import Changes, changes
from ..errors import SHUTTING_DOWN, UnknownServer
from ..model import ServerConfig
from .call_links import CallLink
from .connection import Connection
from .roots import Roots
from .sign_ins import SignInStore
from .state import ServerState

logger = logging.getLogger("mcp_codemode.upstream.hub")  # the name log lines have always shown

# A call's progress as the server reports it: (progress, total, message), as the SDK's client passes it on.
Progress = ProgressFnT
# What a call on a connection that ``reconfigure`` closed is told.
REMOVED = "it was removed from the bridge's configuration"
CHANGED = (
    "its entry in the bridge's configuration changed, so the connection this call used was closed; the server is "
    "started again from its new entry on the next call"
)
RESTARTED = "it was restarted (from the web console); the call after this one reaches the new process"


class Hub:
    """Persistent, lazily opened MCP client connections to every configured upstream server.

    Use it as an async context manager: nothing starts on entry, each server starts on its first use, and on
    exit every connection is closed and every server process stopped.

    ``reconfigure`` swaps in another set of servers while the hub runs (the configuration refresh): only the
    connections of servers removed or changed are closed.

    Two callbacks let the layer above follow the listings: ``on_tools_changed(name)`` when a server says its
    tools changed (its cached listing is dropped), and ``on_listing(name, tools)`` whenever a fresh listing is
    cached (first connection, restart, after a change). Both run on the event loop and must not block.
    """

    def __init__(
        self,
        servers: Sequence[ServerConfig],
        *,
        log_dir: Path,
        call_timeout: float = 60.0,
        connect_timeout: float = 30.0,
        on_tools_changed: Callable[[str], None] | None = None,
        on_listing: Callable[[str, tuple[types.Tool, ...]], None] | None = None,
        backoff: tuple[float, float] = (0.5, 30.0),
        secrets: Iterable[str] = (),
        allow_self: bool = False,
        roots: Roots | None = None,
        sign_ins: SignInStore | None = None,
    ) -> None:
        """``secrets``: values no server's error text may show, besides each server's own ``env`` and ``headers``
        values (the bridge's HTTP tokens, credential-looking variables of its environment: ``secret_values``).
        ``allow_self`` (``MCP_BRIDGE_ALLOW_SELF_SERVER``) keeps a server that says it is a code-mode bridge."""
        self._connections: dict[str, Connection] = {}
        self.roots = roots or Roots()
        self.roots.on_change(self._tell_roots_changed)
        self._aliases: dict[str, str] = {}
        self._logs: dict[str, str] = {}  # server name -> the name of its log file (under log_dir, + ".log")
        self.generation = 0  # moves whenever the set of servers or an entry changes (reconfigure)
        setpriv = shutil.which("setpriv", path=get_default_environment().get("PATH", os.defpath))
        if setpriv is None and any(server.transport == "stdio" for server in servers):
            logger.warning(
                "setpriv (util-linux) is not on PATH: stdio servers will not be killed if this process is killed"
            )
        self._log_dir, self._setpriv, self._sign_ins = log_dir, setpriv, sign_ins
        self._timeouts, self._backoff = (call_timeout, connect_timeout), backoff
        self._secrets, self._allow_self = tuple(secrets), allow_self
        self._on_tools_changed, self._on_listing = on_tools_changed, on_listing
        for server in servers:
            if server.name in self._connections:
                raise ValueError(f"two upstream servers are named {server.name!r}")
            self._connections[server.name] = self._connection_for(server)
            self._aliases.setdefault(server.alias, server.name)
        self._warming: set[asyncio.Task[None]] = set()
        self._retiring: set[asyncio.Task[None]] = set()  # closings reconfigure started: aclose waits for them
        self._restarted: dict[str, int] = {}  # starts of connections ``restart`` replaced, counted as restarts
        self._closed = False

    def _connection_for(self, server: ServerConfig, log_name: str = "") -> Connection:
        """A new, idle connection to ``server``; its log is ``log_name``, else its alias made unique among the logs.

        Its news (tools changed, a fresh listing) is passed on only while it is still ``server``'s connection: one
        that ``reconfigure`` replaced must not speak for its successor."""
        if not log_name:
            # Aliases are unique once config discovery is done; should two collide, their logs must not.
            taken = set(self._logs.values())
            log_name = next(
                candidate
                for candidate in (server.alias, *(f"{server.alias}-{n}" for n in range(2, len(taken) + 3)))
                if candidate not in taken
            )
        self._logs[server.name] = log_name
        connection: Connection | None = None
        on_tools_changed, on_listing = self._on_tools_changed, self._on_listing

        def tools_changed(name: str) -> None:
            if on_tools_changed is not None and self._connections.get(name) is connection:
                on_tools_changed(name)

        def listed(name: str, tools: tuple[types.Tool, ...]) -> None:
            if on_listing is not None and self._connections.get(name) is connection:
                on_listing(name, tools)

        connection = Connection(
            server,
            log_file=self._log_dir / f"{log_name}.log" if server.transport == "stdio" else None,
            call_timeout=self._timeouts[0],
            connect_timeout=self._timeouts[1],
            on_tools_changed=tools_changed,
            on_listing=listed,
            backoff=self._backoff,
            setpriv=self._setpriv,
            secrets=self._secrets,
            allow_self=self._allow_self,
            roots=self.roots,
            sign_ins=self._sign_ins,
        )
        return connection

    def reconfigure(self, servers: Sequence[ServerConfig]) -> Changes:
        """Serve ``servers`` from now on: a new one is connected on first use like any other, a removed one is closed,
        one whose entry changed is closed and replaced by a connection made from its new entry, the rest are left
        running as they are. The swap is done when this returns (calls from then on reach the new entries); the
        closing goes on in the background (a stdio server may take seconds to exit), and a call on a closed
        connection, running or waiting, fails at once with ``ServerUnavailable`` saying why."""
        if self._closed:
            return Changes()
        if len({server.name for server in servers}) != len(servers):
            raise ValueError("two upstream servers have the same name")
        found = changes({name: connection.config for name, connection in self._connections.items()}, servers)
        if not found:
            return found
        retired = [(self._connections[name], REMOVED) for name in found.removed]
        retired += [(self._connections[name], CHANGED) for name in found.changed]
        for connection, reason in retired:
            connection.closing = reason  # from now on every call it gets fails, saying why
        current, self._connections = self._connections, {}
        for server in servers:  # in the new configuration's order; a changed server keeps its log file
            kept = current.get(server.name)
            if kept is not None and server.name not in found.changed:
                self._connections[server.name] = kept
            else:
                self._connections[server.name] = self._connection_for(server, self._logs.get(server.name, ""))
        self._aliases = {}
        for server in servers:
            self._aliases.setdefault(server.alias, server.name)
        self.generation += 1
        for connection, reason in retired:
            self._retire_later(connection, reason)
        return found

    async def restart(self, name: str) -> None:
        """Start the server called ``name`` again now, whatever its state: a person asked (the web console).

        Its connection is replaced by a fresh one, as ``reconfigure`` replaces a changed entry's, rather than reset
        in place: the connection's state machine then needs no new transition, and a call still on the old process
        fails at once saying why. The old process is stopped first (two of one server at once could fight over its
        files), then the fresh connection starts in the background, its backoff forgotten (a person who restarts a
        failing server wants a try now); its restarts count on from the old one's starts."""
        old = self._connection(name)
        name = old.config.name
        if self._closed:
            return
        before = old.state()
        self._restarted[name] = self._restarted.get(name, 0) + before.restarts + (before.status != "idle")
        old.closing = RESTARTED
        self._connections[name] = self._connection_for(old.config, self._logs.get(name, ""))
        await asyncio.shield(self._retire_later(old, RESTARTED))  # aclose waits for it too, were this cancelled
        if not self._closed:
            self.warm([name])

    def _retire_later(self, connection: Connection, reason: str) -> asyncio.Task[None]:
        name = connection.config.name
        task = asyncio.get_running_loop().create_task(
            self._retire(connection, reason), name=f"mcp-codemode retire {name}"
        )
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)
        return task

    async def _retire(self, connection: Connection, reason: str) -> None:
        await connection.close(reason)
        name = connection.config.name
        if name not in self._connections:  # removed: its log name stays taken until its process is gone
            self._logs.pop(name, None)

    async def _tell_roots_changed(self) -> None:
        """Every connected server hears that the roots it is given changed (it asks ``roots/list`` again)."""
        for connection in self._connections.values():
            await connection.roots_changed()

    async def __aenter__(self) -> Hub:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every connection and stop every server process; idempotent."""
        self._closed = True
        for connection in self._connections.values():
            connection.closing = connection.closing or SHUTTING_DOWN
        await asyncio.gather(*(connection.close() for connection in self._connections.values()))
        if self._retiring:
            await asyncio.wait(self._retiring)
        if self._warming:
            await asyncio.wait(self._warming)

    def names(self) -> tuple[str, ...]:
        """The configured servers' names, in configuration order."""
        return tuple(self._connections)

    def config(self, name: str) -> ServerConfig:
        """The configuration of the server called ``name`` (its name, or its alias)."""
        return self._connection(name).config

    def state(self, name: str) -> ServerState:
        connection = self._connection(name)
        state = connection.state()
        earlier = self._restarted.get(connection.config.name, 0)
        if not earlier:
            return state
        return dataclasses.replace(state, restarts=state.restarts + earlier)

    async def tools(self, name: str) -> tuple[types.Tool, ...]:
        """The server's tools: listed once, then served from the cache until the server says they changed.

        The cached tuple itself is returned (nothing can change it), so a caller can tell by identity that a
        listing is the one it saw before: the directory does, on every tool call.
        """
        return await self._connection(name).tools()

    def may_start(self, name: str) -> bool:
        """Whether a background start of this server is in order now (see ``warm``): not while it runs, backs
        off after failures, or owes its next caller the news that it crashed."""
        return self._connection(name).may_warm()

    async def call_tool(
        self,
        name: str,
        tool: str,
        arguments: dict[str, Any],
        timeout: float | None = None,
        progress: Progress | None = None,
        link: CallLink | None = None,
    ) -> types.CallToolResult:
        """Call one tool; an ``isError`` answer is returned as it is, for the layer above to show the agent.

        ``progress``: called with each progress notification the server sends about this call (the request
        then carries a progress token, which is what makes a server report progress at all). ``link``: where
        the server's log messages and its requests of the client (elicitation, sampling) during the call go."""
        connection = self._connection(name)
        with connection.links.holding(link):
            return await connection.request(
                f"tool {tool!r}",
                tool,
                lambda client: client.call_tool(tool, arguments, progress_callback=progress),
                timeout,
            )

    async def list_resources(self, name: str, *, background: bool = False) -> list[types.Resource]:
        return await self._connection(name).resources(background=background)

    async def read_resource(self, name: str, uri: str) -> types.ReadResourceResult:
        connection = self._connection(name)
        return await connection.request(f"resource {uri!r}", uri, lambda client: client.read_resource(uri), None)

    async def list_resource_templates(self, name: str, *, background: bool = False) -> list[types.ResourceTemplate]:
        return await self._connection(name).resource_templates(background=background)

    async def list_prompts(self, name: str, *, background: bool = False) -> list[types.Prompt]:
        return await self._connection(name).prompts(background=background)

    async def get_prompt(self, name: str, prompt: str, arguments: dict[str, str]) -> types.GetPromptResult:
        connection = self._connection(name)
        return await connection.request(
            f"prompt {prompt!r}", prompt, lambda client: client.get_prompt(prompt, arguments or None), None
        )

    def warm(self, names: Iterable[str]) -> None:
        """Start connecting to these servers in the background and return at once (the ``servers`` hint).

        Failures are not raised here: they are recorded in ``state()`` and raised by the first real call.
        """
        connections = [self._connection(name) for name in names]
        if self._closed:
            return
        for connection in connections:
            if connection.may_warm():
                task = asyncio.get_running_loop().create_task(connection.warm())
                self._warming.add(task)
                task.add_done_callback(self._warming.discard)

    def _connection(self, name: str) -> Connection:
        connection = self._connections.get(name) or self._connections.get(self._aliases.get(name, ""))
        if connection is None:
            raise UnknownServer(name, tuple(self._connections))
        return connection
