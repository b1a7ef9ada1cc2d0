"""The OAuth token store and the 401 hint (pure logic; the sign-in itself runs for real in tests/cli)."""

from __future__ import annotations

import asyncio
import stat
import time
from pathlib import Path

import httpx2
import pytest
from mcp.shared.auth import OAuthToken

from mcp_codemode.upstream.model import ServerConfig
from mcp_codemode.upstream.oauth import SignInRequired, TokenFile, TokenRefused, bridge_auth, token_path


def remote(name: str = "docs", url: str = "https://docs.example.com/mcp", **headers: str) -> ServerConfig:
    return ServerConfig(name=name, alias=name, transport="http", source="/etc/servers.json", url=url,
                        headers=headers)  # fmt: skip


def test_tokens_are_kept_private_with_their_expiry_and_keyed_by_name_and_url(tmp_path: Path) -> None:
    path = token_path(tmp_path, remote())
    assert path != token_path(tmp_path, remote(url="https://other.example.com/mcp"))  # a name moved elsewhere
    assert path.name.startswith("docs-")
    store = TokenFile(path)
    assert not store.signed_in() and asyncio.run(store.get_tokens()) is None
    asyncio.run(store.set_tokens(OAuthToken(access_token="a1", token_type="Bearer", expires_in=600)))
    assert store.signed_in() and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    expires = store.expires_at()
    assert expires is not None and 590 < expires - time.time() <= 600
    again = asyncio.run(store.get_tokens())
    assert again is not None and again.access_token == "a1"
    assert not list(path.parent.glob("*.partial"))


def test_without_tokens_a_401_says_to_sign_in_or_names_the_configured_token(tmp_path: Path) -> None:
    def unauthorized(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(401, headers={"WWW-Authenticate": 'Bearer resource_metadata="x"'})

    async def ask(config: ServerConfig) -> None:
        auth = bridge_auth(config, tmp_path)
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(unauthorized), auth=auth) as http:
            await http.post("https://docs.example.com/mcp", json={})

    with pytest.raises(SignInRequired, match=r"run `mcp-codemode login docs` once"):
        asyncio.run(ask(remote()))
    with pytest.raises(TokenRefused, match=r"Authorization header of its entry in /etc/servers.json"):
        asyncio.run(ask(remote(Authorization="Bearer wrong")))
    stdio = ServerConfig(name="local", alias="local", transport="stdio", source="/etc/servers.json", command="x")
    assert bridge_auth(stdio, tmp_path) is None
