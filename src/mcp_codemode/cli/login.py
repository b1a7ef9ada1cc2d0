"""``mcp-codemode login SERVER`` and ``logout SERVER``: the one-time browser sign-in to a remote server (OAuth 2.1).

The SDK's OAuth client does the protocol (discovery, dynamic client registration, PKCE, the token exchange); this
module gives it the two things a person is needed for: a URL to open (printed, and handed to a browser unless
``--no-browser``), and a listener on 127.0.0.1 that the authorization server redirects back to with the code. The
tokens go to the sign-in store ``MCP_BRIDGE_SHARED_STATE`` names (``runs/shared_state.py``): a private file under the
state directory, or the Secret that face replicas share, where the bridge finds them. Nothing secret is printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import urllib.parse
import webbrowser
from collections.abc import AsyncIterator
from typing import TextIO

from mcp.shared.auth import AuthorizationCodeResult

from ..errors import CodemodeError
from ..runs.shared_state import shared_state
from ..settings import Settings
from ..upstream.model import Discovery, ServerConfig
from ..upstream.servers.oauth import configured_client, sign_in_of
from ..upstream.servers.oauth_flow import authorize
from ..upstream.servers.sign_ins import SignInStore

PAGE = b"<!doctype html><title>mcp-codemode</title><p>Signed in. You can close this tab.</p>\n"
MAX_REQUEST = 16 << 10  # the redirect is one short GET line; anything longer is not it


def remote_server(discovery: Discovery, name: str) -> ServerConfig:
    """The configured remote server called ``name`` (or with that alias), or an error naming the choices."""
    for config in discovery.servers:
        if name in (config.name, config.alias):
            if config.transport not in ("http", "sse") or config.url is None:
                raise CodemodeError(f"{config.name} is a {config.transport} server: only remote (http or sse) "
                                    "servers sign in", fix="give the name of a server with a url")  # fmt: skip
            return config
    remote = sorted(c.name for c in discovery.servers if c.transport in ("http", "sse"))
    raise CodemodeError(
        f"no configured server is called {name!r}",
        fix=f"use one of the remote servers found: {', '.join(remote)}"
        if remote
        else "configure it first (mcp-codemode servers lists what is found)",
    )


class Redirect:
    """A listener on 127.0.0.1 for the authorization server's redirect: the first request that carries a code
    (or an error) ends the wait; every request gets a short page."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.result: asyncio.Future[AuthorizationCodeResult] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}/callback"

    @contextlib.asynccontextmanager
    async def listening(self) -> AsyncIterator[Redirect]:
        self.result = asyncio.get_running_loop().create_future()
        server = await asyncio.start_server(self._answer, "127.0.0.1", self.port)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            server.close()
            await server.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = (await reader.readline())[:MAX_REQUEST].decode("latin-1")
            target = line.split(" ")[1] if line.count(" ") >= 2 else ""
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n" + PAGE)
            await writer.drain()
        finally:
            writer.close()
        assert self.result is not None
        if self.result.done():
            return
        if "error" in query:
            reason = query.get("error_description", query["error"])[0]
            refused = CodemodeError(f"the authorization server refused the sign-in: {reason:.300}",
                                    fix="try again, or check the account you signed in with")  # fmt: skip
            self.result.set_exception(refused)
        elif "code" in query:
            state, issuer = query.get("state", [None])[0], query.get("iss", [None])[0]  # RFC 9207: checked by the SDK
            self.result.set_result(AuthorizationCodeResult(code=query["code"][0], state=state, iss=issuer))

    async def code(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return await self.result


async def login(config: ServerConfig, settings: Settings, *, port: int, browser: bool, out: TextIO,
                client_id: str | None = None, client_secret: str | None = None) -> int:  # fmt: skip
    """Sign in to ``config``'s server once and keep its tokens in the store the settings name; 0 when signed in.

    Without ``client_id`` the bridge registers itself (dynamic client registration) on each sign-in, for the
    redirect address of this one. With it, the client the provider's admin registered is used (and kept for
    later sign-ins); its redirect address must be the one registered, so ``port`` is required then."""
    shared = shared_state(settings)
    try:
        return await sign_in(config, shared.sign_ins, port=port, browser=browser, out=out, client_id=client_id,
                             client_secret=client_secret)  # fmt: skip
    finally:
        await shared.aclose()


async def sign_in(config: ServerConfig, store: SignInStore, *, port: int, browser: bool, out: TextIO,
                  client_id: str | None = None, client_secret: str | None = None) -> int:  # fmt: skip
    """``login`` into ``store``."""
    assert config.url is not None
    storage = sign_in_of(config, store)
    configured = await storage.configured_client()
    if client_id is None and configured is not None and port == 0:
        port = urllib.parse.urlsplit(str(configured.redirect_uris[0] if configured.redirect_uris else "")).port or 0
    if client_id is not None and port == 0:
        raise CodemodeError("--client-id needs --port: the provider only redirects to the address registered with "
                            "the client id", fix="give --port PORT, where http://127.0.0.1:PORT/callback is the "
                            "redirect URI registered for that client")  # fmt: skip
    async with Redirect(port).listening() as redirect:
        if client_id is not None:
            await storage.keep_client(configured_client(client_id, client_secret, redirect.uri))
        elif configured is None:
            await storage.keep_client(None)  # a registration from an earlier sign-in names another redirect port

        async def show(url: str) -> None:
            print(f"Open this address to sign in to {config.name}:\n\n  {url}\n", file=out, flush=True)
            if browser:
                with contextlib.suppress(Exception):  # no browser here: the printed address is enough
                    webbrowser.open(url)
            print(f"Waiting for the sign-in to come back to {redirect.uri} ...", file=out, flush=True)

        await authorize(config, storage, redirect.uri, show, redirect.code)
    print(f"Signed in to {config.name}. The bridge now uses (and refreshes) the tokens kept in {storage.where}.",
          file=out)  # fmt: skip
    return 0


async def logout(config: ServerConfig, settings: Settings, out: TextIO = sys.stdout) -> int:
    """Forget ``config``'s tokens, in the store the settings name; 0 whether or not there were any."""
    shared = shared_state(settings)
    try:
        storage = sign_in_of(config, shared.sign_ins)
        if await storage.forget():
            print(f"Signed out of {config.name}: its tokens are deleted ({storage.where}).", file=out)
        else:
            print(f"Not signed in to {config.name}: nothing to delete.", file=out)
    finally:
        await shared.aclose()
    return 0
