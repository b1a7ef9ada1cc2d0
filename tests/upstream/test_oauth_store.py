"""The OAuth token store and the 401 hint (pure logic; the sign-in itself runs for real in tests/cli)."""

from __future__ import annotations

import asyncio
import functools
import stat
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.shared.auth import OAuthToken

from mcp_codemode.upstream.model import ServerConfig
from mcp_codemode.upstream.servers.oauth import (
    SignInRequired,
    StoredSignIn,
    TokenRefused,
    bridge_auth,
    configured_client,
)
from mcp_codemode.upstream.servers.sign_ins import TURN_SECONDS, FileSignIns, sign_in_key


def remote(name: str = "docs", url: str = "https://docs.example.com/mcp", **headers: str) -> ServerConfig:
    return ServerConfig(name=name, alias=name, transport="http", source="/etc/servers.json", url=url,
                        headers=headers)  # fmt: skip


def test_tokens_are_kept_private_with_their_expiry_and_keyed_by_name_and_url(tmp_path: Path) -> None:
    files = FileSignIns(tmp_path / "oauth")
    key = sign_in_key(remote())
    assert key != sign_in_key(remote(url="https://other.example.com/mcp"))  # a name moved elsewhere
    path = files.path(key)
    assert path.name.startswith("docs-")
    store = StoredSignIn(files, key)
    assert not asyncio.run(store.signed_in()) and asyncio.run(store.get_tokens()) is None
    asyncio.run(store.set_tokens(OAuthToken(access_token="a1", token_type="Bearer", expires_in=600)))
    assert asyncio.run(store.signed_in()) and stat.S_IMODE(path.stat().st_mode) == 0o600
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
        auth = await bridge_auth(config, FileSignIns(tmp_path / "oauth"))
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(unauthorized), auth=auth) as http:
            await http.post("https://docs.example.com/mcp", json={})

    with pytest.raises(SignInRequired, match=r"run `mcp-codemode login docs` once"):
        asyncio.run(ask(remote()))
    with pytest.raises(TokenRefused, match=r"Authorization header of its entry in /etc/servers.json"):
        asyncio.run(ask(remote(Authorization="Bearer wrong")))
    stdio = ServerConfig(name="local", alias="local", transport="stdio", source="/etc/servers.json", command="x")
    assert asyncio.run(bridge_auth(stdio, FileSignIns(tmp_path / "oauth"))) is None


def logged(record: dict[str, Any], entry: str) -> dict[str, Any]:
    return record | {"log": [*record.get("log", []), entry]}


def test_two_bridges_on_one_state_directory_changing_one_sign_in_at_once_lose_no_change(tmp_path: Path) -> None:
    """Two local clients each start a bridge on the same state directory: each change is a swap under the
    directory's lock, made again on what the other wrote when it lost."""
    key = sign_in_key(remote())
    bridges = [StoredSignIn(FileSignIns(tmp_path / "oauth"), key) for _ in range(2)]

    async def append(sign_in: StoredSignIn, who: str) -> None:
        for n in range(25):
            await sign_in.change(functools.partial(logged, entry=f"{who}{n}"))

    async def both() -> None:
        await asyncio.gather(append(bridges[0], "a"), append(bridges[1], "b"))

    asyncio.run(both())
    log = asyncio.run(bridges[0].load())["log"]
    assert sorted(log) == sorted([f"a{n}" for n in range(25)] + [f"b{n}" for n in range(25)])
    assert not list((tmp_path / "oauth").glob("*.partial"))


def test_a_refresh_turn_waits_for_the_holders_tokens_and_a_lapsed_one_is_taken_over(tmp_path: Path) -> None:
    key = sign_in_key(remote())
    a, b = (StoredSignIn(FileSignIns(tmp_path / "oauth"), key) for _ in range(2))
    asyncio.run(a.set_tokens(OAuthToken(access_token="old", refresh_token="r-old", token_type="Bearer")))
    held = {"access_token": "old", "refresh_token": "r-old"}
    now = time.time()
    assert asyncio.run(a.take_turn(held, "a", clock=lambda: now)) is None
    # Another holder's turn that has not lapsed is waited for: here its refresh arrives, and is adopted.

    async def wait_then_refresh() -> dict[str, object] | None:
        waiting = asyncio.ensure_future(b.take_turn(held, "b", clock=lambda: now))
        await asyncio.sleep(0)
        await a.set_tokens(OAuthToken(access_token="new", refresh_token="r-new", token_type="Bearer"))
        return await waiting

    adopted = asyncio.run(wait_then_refresh())
    assert adopted is not None and adopted["tokens"] == asyncio.run(a.load())["tokens"]
    # A holder that died holding its turn: once the turn lapses, the next one takes it.
    fresh = {"access_token": "new", "refresh_token": "r-new"}
    assert asyncio.run(a.take_turn(fresh, "a", clock=lambda: now)) is None
    later = now + TURN_SECONDS + 1
    assert asyncio.run(b.take_turn(fresh, "b", clock=lambda: later)) is None
    assert asyncio.run(b.load())["refreshing"]["by"] == "b"
    # Signed out meanwhile (logout on another bridge): the record without tokens is the answer, nothing to refresh.
    asyncio.run(a.forget())
    assert asyncio.run(b.take_turn(fresh, "b")) == {}


def test_a_refresh_refused_because_another_bridge_spent_the_token_adopts_what_that_bridge_stored(
    tmp_path: Path,
) -> None:
    """A bridge that does not take turns (an older release) refreshes while this one holds the turn: the provider
    refuses this one's spent refresh token, and instead of signing out it uses the tokens the other one stored."""
    key = sign_in_key(remote())
    storage = StoredSignIn(FileSignIns(tmp_path / "oauth"), key)
    other = StoredSignIn(FileSignIns(tmp_path / "oauth"), key)
    signed: list[str] = []

    async def provider_and_server(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/token":
            await other.set_tokens(OAuthToken(access_token="a-new", refresh_token="r-new", token_type="Bearer"))
            return httpx2.Response(400, json={"error": "invalid_grant"})
        signed.append(request.headers.get("Authorization", ""))
        return httpx2.Response(200 if request.headers.get("Authorization") == "Bearer a-new" else 401)

    async def call() -> int:
        await storage.keep_client(configured_client("cid", None, "http://127.0.0.1:9/callback"))
        await storage.set_tokens(OAuthToken(access_token="a-old", refresh_token="r-old", token_type="Bearer"))
        await storage.change(lambda record: record | {"tokens": record["tokens"] | {"expires_at": time.time() - 60}})
        auth = await bridge_auth(remote(), storage.store)
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(provider_and_server), auth=auth) as http:
            return (await http.post("https://docs.example.com/mcp", json={})).status_code

    assert asyncio.run(call()) == 200
    assert signed == ["Bearer a-new"]
    assert "refreshing" not in asyncio.run(other.load())
