"""The upstream servers as a person running the bridge sees them: each one's state, tools, last error and restarts;
restarting one; and searching their tools as sandboxed code does. What the web console's Servers and Search pages
ask the Bridge for (``Bridge.upstreams``).

Apart from the bridge, which is near its size bound, and from the hub, which knows connections but not the
configuration's skipped and refused entries nor the sign-ins. Everything here is what the hub, the directory and the
discovery already track, read when a page asks: nothing is kept or counted on a call's path.

No secret leaves: a command line is shown as ``mcp-codemode servers`` shows it (``ServerConfig.target``: env values
and ``--token``-style arguments hidden), and every text (target, error) then goes through the process-wide filter
of the log (``telemetry/logs.py``), which knows every server's env, header, URL and argument secrets.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from collections.abc import Callable
from typing import Any

from ..errors import CodemodeError
from ..telemetry.logs import HIDDEN, MIN_SECRET, without_secrets
from ..upstream.errors import UnknownServer
from ..upstream.model import Discovery, ServerConfig
from ..upstream.servers.hub import Hub
from ..upstream.servers.oauth import sign_in_of
from ..upstream.servers.oauth_flow import Code, Show, authorize
from ..upstream.servers.redaction import secret_values
from ..upstream.servers.sign_ins import SignInStore
from ..upstream.servers.state import ServerState
from ..upstream.tools.directory import ToolDirectory

SEARCH_LIMIT = 20  # results a search page shows: a person reads the first screen, as code reads its first page


@dataclasses.dataclass(frozen=True)
class ServerView:
    """One configured server as the Servers page shows it; every text already free of secrets.

    ``state``: ready, starting, failed, not started (nothing has called it yet), skipped (found but not used: a
    code-mode bridge, disabled, shadowed) or refused (by the policy). ``tools``: the names of the tools the directory
    serves for it (from the live listing, or the catalog cache: ``listing`` says which; empty while unknown).
    ``signed_in``: for a remote server, whether the bridge holds OAuth tokens for it (None: stdio). ``restartable``:
    the hub runs it (a skipped or refused entry has no process to restart). ``sign_in``: a remote server the hub runs
    that has no tokens, or whose tokens no longer open it: one a person may sign in to from the console."""

    name: str
    transport: str
    target: str
    state: str
    tools: tuple[str, ...] = ()
    listing: str = "unknown"
    restarts: int = 0
    error: str = ""
    retry_in: float | None = None
    signed_in: bool | None = None
    restartable: bool = False
    sign_in: bool = False


def state_name(state: ServerState) -> str:
    """The hub's status as a person reads it."""
    if state.status == "failed" and state.retry_in is None:
        return "skipped"  # it said it is a code-mode bridge, and is never started again
    return {"idle": "not started", "connecting": "starting"}.get(state.status, state.status)


def shown(text: str, config: ServerConfig) -> str:
    """``text`` about ``config`` without a secret: its own (hidden here, so that a skipped or refused entry, whose
    secrets the bridge never learned, is covered too), then every one the log knows."""
    for value in sorted({v for v in secret_values(config) if len(v) >= MIN_SECRET}, key=len, reverse=True):
        text = text.replace(value, HIDDEN)
    return without_secrets(text)


class Upstreams:
    """The servers' view and their two actions, over the directory (which owns the hub) and the discovery."""

    def __init__(self, directory: ToolDirectory, sign_ins: SignInStore, discovery: Callable[[], Discovery],
                 search_wait: float) -> None:  # fmt: skip
        self.directory = directory
        self.search_wait = search_wait
        self.sign_ins = sign_ins
        self.discovery = discovery  # what was found and skipped now (a configuration refresh swaps it)
        # Whether a principal may see a server of the hub: every configured one, only its own added ones (the
        # bridge hands in its added servers' rule; the pages of one principal never name another's servers).
        self.visible: Callable[[str, str], bool] = lambda principal, name: True

    @property
    def hub(self) -> Hub:
        return self.directory.hub

    async def servers(self, viewer: str) -> list[ServerView]:
        """Every configured server ``viewer`` may see, in configuration order: those the hub runs (with the
        servers ``viewer`` added, never another principal's), then the policy's refused ones, then those skipped
        when the configuration was read."""
        views = []
        for name in self.hub.names():
            if not self.visible(viewer, name):
                continue
            config, state = self.hub.config(name), self.hub.state(name)
            known = self.directory.known(name)
            signed_in = await self._signed_in(config)
            lapsed = signed_in is True and state.status == "failed" and "mcp-codemode login" in state.detail
            views.append(ServerView(
                name, config.transport, shown(config.target, config), state_name(state),
                tuple(tool.name for tool in known.tools) if known is not None else (),
                known.origin if known is not None else "unknown", state.restarts, shown(state.detail, config),
                state.retry_in, signed_in, restartable=True,
                sign_in=(signed_in is False and state.status != "ready") or lapsed,  # ready without: needs none
            ))  # fmt: skip
        for name, (config, verdict) in self.directory.refused.items():
            if name == config.name:  # refused is keyed by name and by alias
                views.append(ServerView(name, config.transport, shown(config.target, config), "refused",
                                        error=shown(verdict.reason, config)))  # fmt: skip
        for skip in self.discovery().skipped:
            config = skip.config
            views.append(ServerView(config.name, config.transport, shown(config.target, config), "skipped",
                                    error=shown(skip.reason, config)))  # fmt: skip
        return views

    def fingerprint(self) -> str:
        """A digest of what the Servers page shows that changes without any call of the page's viewer (a server
        starting, failing, restarted, listing its tools, a configuration refresh), for its event stream to compare
        while someone watches the page: read from the hub's state, nothing is counted for it."""
        seen: list[object] = [self.hub.generation]
        for name in self.hub.names():
            state, known = self.hub.state(name), self.directory.known(name)
            listing = (known.origin, len(known.tools)) if known is not None else None
            seen.append((name, state.status, state.restarts, state.detail, state.retry_in is None, listing))
        return hashlib.sha256(repr(seen).encode()).hexdigest()[:16]

    async def _signed_in(self, config: ServerConfig) -> bool | None:
        if config.transport not in ("http", "sse"):
            return None
        return await sign_in_of(config, self.sign_ins).signed_in()

    async def restart(self, name: str) -> bool:
        """Stop the server called ``name`` (by its name, not its alias) and start it again; False: no such server."""
        if name not in self.hub.names():
            return False
        try:
            await self.hub.restart(name)
        except UnknownServer:  # removed by a configuration refresh meanwhile
            return False
        return True

    def remote(self, name: str) -> ServerConfig | None:
        """The remote server the hub runs under ``name`` (its name, not its alias), which may sign in; else None."""
        if name not in self.hub.names():
            return None
        config = self.hub.config(name)
        return config if config.transport in ("http", "sse") and config.url is not None else None

    async def sign_in(self, config: ServerConfig, redirect_uri: str, show: Show, code: Code) -> None:
        """Sign in to ``config``'s server as ``mcp-codemode login`` does (the same flow and store), redirecting
        to ``redirect_uri``, then restart it, so that its calls use the new tokens and its tools are listed again.

        The client is registered afresh for ``redirect_uri``, unless an admin's client id is stored (``login
        --client-id``): the provider redirects that one only to the address it was registered with, the CLI's.
        Its tools are listed before this returns, so the page the person goes back to shows them. Errors come
        without the server's secrets."""
        storage = sign_in_of(config, self.sign_ins)
        configured = await storage.configured_client()
        if configured is not None:
            raise CodemodeError(f"{config.name} signs in with a client id its provider's admin registered for "
                                "another redirect address", fix=f"run `mcp-codemode login {config.name}` on the "
                                "bridge's machine")  # fmt: skip
        await storage.keep_client(None)  # a registration from an earlier sign-in names another redirect address
        try:
            await authorize(config, storage, redirect_uri, show, code)
        except CodemodeError as exc:
            raise CodemodeError(shown(str(exc), config)) from None
        await self.restart(config.name)
        with contextlib.suppress(CodemodeError):  # signed in all the same: the page shows why it is not listed
            await self.directory.listing(config.name, live=True)

    async def search(self, query: str, viewer: str, limit: int = SEARCH_LIMIT) -> dict[str, Any]:
        """The tools of every server ranked for ``query``, exactly as ``runtime.search_tool_docs(query)`` answers code
        (its reply at ``summary`` detail: plain data, so the console needs none of the directory's types), waiting as
        long as it would (``search_wait``) for listings not known yet; another principal's added servers are
        neither started nor ranked for ``viewer``."""
        page = await self.directory.search(
            query, limit=limit, wait=self.search_wait, among=lambda name: self.visible(viewer, name)
        )
        return page.reply("summary")
