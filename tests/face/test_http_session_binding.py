"""A handshake-era MCP session answers only the token that opened it, and the server's log never names it in full.

A real ``serve --transport http`` with two bearer tokens and real bubblewrap sandboxes; Alice is the SDK's real
client, Bob (the second token's holder, who learned Alice's ``Mcp-Session-Id``) speaks raw HTTP so he can present
that id on POST, GET and DELETE as an attacker would.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_codemode.face.http_sessions import SessionIdTags
from mcp_codemode.face.principals import session_tag
from tests.support.clients import CALL_DEADLINE, LEGACY_VERSION, HttpServer, bearer, require_bubblewrap, text_of
from tests.support.patience import patient

pytestmark = [pytest.mark.anyio, pytest.mark.backend]
TOKEN_A = "a" * 16 + uuid.uuid4().hex[:16]
TOKEN_B = "b" * 16 + uuid.uuid4().hex[:16]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """A loopback server with two tokens, logging at the default level (INFO)."""
    require_bubblewrap()
    log = tmp_path_factory.mktemp("http-bound") / "server.log"
    with HttpServer(log, "--token", TOKEN_A, "--token", TOKEN_B, MCP_BRIDGE_WARM_POOL="0") as server:
        yield server


@contextlib.asynccontextmanager
async def client_with_session_id(url: str, token: str) -> AsyncIterator[tuple[Client, list[str]]]:
    """The SDK's handshake-era client, and the ``Mcp-Session-Id`` the server gave it (read off its responses)."""
    ids: list[str] = []

    async def note(response: httpx2.Response) -> None:
        if response.headers.get("mcp-session-id"):
            ids.append(response.headers["mcp-session-id"])

    timeout = httpx2.Timeout(30.0, read=300.0)
    async with httpx2.AsyncClient(headers=bearer(token), timeout=timeout, event_hooks={"response": [note]}) as http:
        client_of = Client(streamable_http_client(url, http_client=http), mode="legacy",
                           read_timeout_seconds=CALL_DEADLINE)  # fmt: skip
        async with client_of as client:
            yield client, ids


def call(code: str) -> dict[str, Any]:
    arguments = {"name": "run_python", "arguments": {"code": code}}
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": arguments}


async def as_bob(method: str, url: str, session_id: str, body: dict[str, Any] | None = None) -> httpx2.Response:
    headers = {**bearer(TOKEN_B), "Mcp-Session-Id": session_id, "MCP-Protocol-Version": LEGACY_VERSION,
               "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}  # fmt: skip
    async with httpx2.AsyncClient(timeout=patient(30.0)) as http:
        if method == "GET":  # an SSE stream that would stay open: read the head only
            async with http.stream("GET", url, headers=headers) as response:
                await response.aclose()
                return response
        return await http.request(method, url, headers=headers, content=json.dumps(body) if body else None)


def refusal(response: httpx2.Response) -> tuple[int, str]:
    return response.status_code, response.text if response.status_code == 404 else "(not read)"


async def test_another_token_presenting_a_session_id_gets_what_an_unknown_id_gets(guarded: HttpServer) -> None:
    async with client_with_session_id(guarded.url, TOKEN_A) as (alice, ids):
        await alice.call_tool("run_python", {"code": "secret = 'only alice'"})
        assert ids, "the server named no MCP session"
        alice_id, unknown_id = ids[-1], uuid.uuid4().hex
        stolen_post = await as_bob("POST", guarded.url, alice_id, call("secret"))
        assert "only alice" not in stolen_post.text, "another token ran code in Alice's default sandbox"
        assert refusal(stolen_post) == refusal(await as_bob("POST", guarded.url, unknown_id, call("secret")))
        assert refusal(stolen_post)[0] == 404, stolen_post.text
        stolen_get = await as_bob("GET", guarded.url, alice_id)
        assert stolen_get.status_code == (await as_bob("GET", guarded.url, unknown_id)).status_code == 404
        stolen_delete = await as_bob("DELETE", guarded.url, alice_id)
        assert refusal(stolen_delete) == refusal(await as_bob("DELETE", guarded.url, unknown_id))
        still_hers = await alice.call_tool("run_python", {"code": "secret"})
    assert (still_hers.is_error, text_of(still_hers)) == (False, "'only alice'"), "Alice's session was disturbed"

    log = guarded.log_text()
    assert alice_id not in log, "an MCP session id was logged in full at the default level"
    assert session_tag(alice_id) in log, "the log names sessions by their tag"


def test_session_ids_in_sdk_log_lines_become_tags() -> None:
    session_id = uuid.uuid4().hex
    record = logging.LogRecord("mcp.server.streamable_http", logging.INFO, __file__, 1, "Terminating session: %s",
                               (session_id,), None)  # fmt: skip
    SessionIdTags().filter(record)
    assert record.getMessage() == f"Terminating session: {session_tag(session_id)}"
    other = logging.LogRecord("mcp.server.streamable_http", logging.INFO, __file__, 1, "%d sessions open", (3,), None)
    SessionIdTags().filter(other)
    assert other.getMessage() == "3 sessions open"
