"""A remote MCP server that requires OAuth sign-in, for tests: the MCP SDK's own authorization server and resource
server (``MCPServer`` with ``auth``), run as ``python tests/support/oauth_server.py PORT [CLIENT_ID REDIRECT_URI]``
on 127.0.0.1 (the optional pair is a client registered beforehand, as a provider's admin registers one).

The SDK serves the real protocol: protected-resource and authorization-server metadata, dynamic client
registration, ``/authorize`` with PKCE, ``/token`` for codes and refresh tokens, and 401 with
``WWW-Authenticate`` on the MCP endpoint without a valid token. Only the provider, the part a deployment writes to
store clients and tokens, is ours, and it keeps them in memory; its "user" consents at once (``authorize``
redirects straight back with a code), where a real one would show a login page. The one tool answers with the
access token's client, so a test can see the call really was signed; another refuses with a JSON-RPC error that
quotes the token it was signed with and the client's refresh tokens, as a careless server's error would.
``OAUTH_TOKEN_SECONDS`` in its environment sets how long an access token lives (a test of refreshes). Refresh tokens
rotate: each is honoured once, as providers that follow OAuth 2.1's advice for public clients do.

Tests start it with ``running`` (a subprocess on a free port, stopped afterwards).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST

TOKEN_SECONDS = int(os.environ.get("OAUTH_TOKEN_SECONDS", "3600"))
# Accepted this long past the lifetime announced, as servers allow for clock skew: the client counts the lifetime
# from when it got the token, later than the server issued it, so without it a token the client still takes for
# valid could be refused for a second (a 401 the bridge cannot recover from without `login`).
LEEWAY_SECONDS = 60


class MemoryProvider:
    """Clients, codes and tokens in memory; consent is given at once."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.registrations = 0
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.issued: list[str] = []  # every access token, in order

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info
        self.registrations += 1

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(24)
        assert client.client_id is not None
        self.codes[code] = AuthorizationCode(
            code=code, scopes=params.scopes or [], expires_at=time.time() + 300, client_id=client.client_id,
            code_challenge=params.code_challenge, redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly, resource=params.resource,
        )  # fmt: skip
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        return self.codes.get(code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        return self._issue(authorization_code.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        return self._issue(refresh_token.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def exchange_identity_assertion(self, client: OAuthClientInformationFull, params: Any) -> OAuthToken:
        raise NotImplementedError("this test server signs in users only through the browser flow")

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self.issued.append(access)
        expires = int(time.time()) + TOKEN_SECONDS
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires + LEEWAY_SECONDS, resource=resource
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=TOKEN_SECONDS, refresh_token=refresh)


def build(port: int, preregistered: tuple[str, str] | None = None) -> Any:
    base = f"http://127.0.0.1:{port}"
    provider = MemoryProvider()
    if preregistered is not None:
        client_id, redirect = preregistered
        provider.clients[client_id] = OAuthClientInformationFull.model_validate(
            {"client_id": client_id, "redirect_uris": [redirect], "token_endpoint_auth_method": "none",
             "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"]}
        )  # fmt: skip
    server: MCPServer[Any] = MCPServer(
        name="signed-in-only",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base,  # type: ignore[arg-type]
            resource_server_url=f"{base}/mcp",  # type: ignore[arg-type]
            client_registration_options=ClientRegistrationOptions(enabled=True),
            validate_token_resource=True,  # tokens only for this resource (RFC 8707), as 3.0 will default to
        ),
    )

    @server.tool()
    def whoami() -> str:
        """Which OAuth client signed this call."""
        from mcp.server.auth.middleware.auth_context import get_access_token

        token = get_access_token()
        signed = f"signed by client {token.client_id}" if token is not None else "not signed"
        return f"{signed}; {provider.registrations} client(s) registered dynamically"

    @server.tool()
    def echo_authorization() -> str:
        """Refuses, quoting the credentials the call came with."""
        from mcp.server.auth.middleware.auth_context import get_access_token

        token = get_access_token()
        assert token is not None
        refresh = " ".join(item.token for item in provider.refresh.values() if item.client_id == token.client_id)
        number = provider.issued.index(token.token) + 1
        raise MCPError(INVALID_REQUEST, f"refused Authorization: Bearer {token.token} (access token #{number}; "
                                        f"refresh token: {refresh})")  # fmt: skip

    return server.streamable_http_app()


@contextlib.contextmanager
def running(port: int, preregistered: tuple[str, str] | None = None, token_seconds: int | None = None,
            patience: float = 60.0) -> Iterator[str]:  # fmt: skip
    """This server in a subprocess on 127.0.0.1:``port`` (with a client registered beforehand, and access tokens
    living ``token_seconds``, when given) until the block ends; its MCP endpoint's URL. ``patience``: how long its
    start may take before the test fails (a hang guard, scaled by the caller)."""
    lifetime = {"OAUTH_TOKEN_SECONDS": str(token_seconds)} if token_seconds is not None else {}
    command = [sys.executable, str(Path(__file__)), str(port), *(preregistered or ())]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env={**os.environ, **lifetime})  # fmt: skip
    try:
        deadline = time.monotonic() + patience
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline, "the authorization server did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


if __name__ == "__main__":
    chosen = int(sys.argv[1])
    given = (sys.argv[2], sys.argv[3]) if len(sys.argv) > 3 else None
    uvicorn.run(build(chosen, given), host="127.0.0.1", port=chosen, log_level="warning")
