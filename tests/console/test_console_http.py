"""The console on the HTTP face, attacked: a real `serve --transport http` with two tokens and the console on, the
SDK's real client making the calls, and plain HTTP requests playing the browser and the second token's holder.

What must hold: a token sees only its own sessions and calls (the other holder cannot list, read, cancel or reset
them, and is told nothing more than "not found"); every action needs the page's CSRF token and the console's own
Origin; a rebound Host is refused; every answer carries a Content-Security-Policy without inline script; and no
token or server secret is ever rendered.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import json
import re
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client

from mcp_codemode.face.principals import principal_of
from mcp_codemode.upstream.model import ServerConfig
from mcp_codemode.upstream.servers.sign_ins import sign_in_key
from tests.support import oauth_server, upstreams
from tests.support.backends import sandbox_settings
from tests.support.clients import (
    HttpServer,
    assert_no_orphans,
    bearer,
    free_port,
    http_client_for,
    require_bubblewrap,
    text_of,
)
from tests.support.patience import patient

pytestmark = [pytest.mark.anyio, pytest.mark.backend]
TOKEN_A = "a" * 16 + uuid.uuid4().hex[:16]
TOKEN_B = "b" * 16 + uuid.uuid4().hex[:16]
SERVER_SECRET = "sk-console-" + uuid.uuid4().hex  # an upstream server's env value: never on a page
ARG_SECRET = "arg-" + uuid.uuid4().hex  # a --token argument of its command line: never on a page either
CSRF = re.compile(r'name="csrf" value="([^"]+)"')
CALL_LINK = re.compile(r'/console/calls/([0-9a-f]{16})"')


@pytest.fixture(scope="module")
def oauth_url() -> Iterator[str]:
    """The SDK's authorization server and OAuth-only MCP server (tests/support/oauth_server.py)."""
    with oauth_server.running(free_port(), patience=patient(60)) as url:
        yield url


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, oauth_url: str) -> Iterator[HttpServer]:
    require_bubblewrap()
    folder = tmp_path_factory.mktemp("console-http")
    config = upstreams.write_config(folder / "servers.json", upstreams.everything())
    # A server that never starts, with secrets in its env and its command line; and one that wants OAuth sign-in.
    vault = {"command": "/bin/false", "args": ["--token", ARG_SECRET], "env": {"API_KEY": SERVER_SECRET}}
    signed = {"type": "http", "url": oauth_url}
    config.write_text(json.dumps({"mcpServers": {**json.loads(config.read_text())["mcpServers"], "vault": vault,
                                                 "signed": signed}}))  # fmt: skip
    policy = folder / "codemode.toml"  # everything/echo waits for approval: in the console (the default with it on)
    policy.write_text('[policy]\nask_tools = ["everything/echo"]\n', encoding="utf-8")
    with HttpServer(
        folder / "server.log", "--token", TOKEN_A, "--token", TOKEN_B, MCP_BRIDGE_CONSOLE="on",
        MCP_CODEMODE_SETTINGS=str(policy),
        MCP_BRIDGE_AUDIT_LOG=str(folder / "audit.jsonl"), MCP_SERVERS_CONFIG=str(config), MCP_BRIDGE_DISCOVER="false",
        MCP_BRIDGE_INTERRUPT_GRACE="30", MCP_BRIDGE_CONSOLE_OPERATORS=principal_of(TOKEN_A),
    ) as server:  # fmt: skip
        yield server
    assert_no_orphans()


def _origin(server: HttpServer) -> str:
    return f"http://127.0.0.1:{server.port}"


class Browser:
    """A signed-in browser, as far as the console can tell: its cookie, the page's CSRF token, its Origin."""

    def __init__(self, http: httpx2.AsyncClient, origin: str) -> None:
        self.http = http
        self.origin = origin
        self.csrf = ""

    async def page(self, path: str, **query: str) -> httpx2.Response:
        answer = await self.http.get(path, params=query)
        found = CSRF.search(answer.text)
        if found:
            self.csrf = found.group(1)
        return answer

    async def act(self, path: str, **form: str) -> httpx2.Response:
        return await self.http.post(path, data={"csrf": self.csrf, **form}, headers={"Origin": self.origin})


@pytest.fixture
async def browsers(server: HttpServer) -> AsyncIterator[tuple[Browser, Browser]]:
    origin = _origin(server)
    async with httpx2.AsyncClient(base_url=origin) as one, httpx2.AsyncClient(base_url=origin) as two:
        pair = Browser(one, origin), Browser(two, origin)
        for browser, token in zip(pair, (TOKEN_A, TOKEN_B), strict=True):
            signed = await browser.http.post("/console/sign-in", data={"token": token}, headers={"Origin": origin})
            assert signed.status_code == 303, signed.text
            assert (await browser.page("/console/sessions")).status_code == 200
        yield pair


async def test_a_token_holder_sees_their_session_and_call_and_the_other_holder_sees_none(
    server: HttpServer, browsers: tuple[Browser, Browser]
) -> None:
    alice, bob = browsers
    async with http_client_for(server.url, headers=bearer(TOKEN_A)) as client:
        answer = await client.call_tool("run_python", {"code": "x = 41\nprint('<script>alert(1)</script>')",
                                                       "session": "ledger"})  # fmt: skip
    assert "<script>alert(1)</script>" in text_of(answer)
    sessions = (await alice.page("/console/sessions")).text
    assert "ledger" in sessions and "bubblewrap" in sessions
    calls = (await alice.page("/console/calls")).text
    call = CALL_LINK.search(calls)
    assert call is not None, calls
    detail = await alice.page(f"/console/calls/{call.group(1)}")
    assert detail.status_code == 200
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in detail.text and "<script>alert" not in detail.text
    assert "x = 41" in detail.text
    # Bob: nothing of Alice's on his pages, and her call's page is "not found" to him, as a made-up one is.
    assert "ledger" not in (await bob.page("/console/sessions")).text
    assert call.group(1) not in (await bob.page("/console/calls")).text
    assert (await bob.page(f"/console/calls/{call.group(1)}")).status_code == 404
    assert (await bob.page("/console/calls/0123456789abcdef")).status_code == 404
    key = f"p:{principal_of(TOKEN_A)}:ledger"
    assert (await bob.act("/console/sessions/reset", session=key)).status_code == 404
    assert (await bob.act("/console/sessions/end", session=key)).status_code == 404
    async with http_client_for(server.url, headers=bearer(TOKEN_A)) as client:
        kept = await client.call_tool("run_python", {"code": "print(x + 1)", "session": "ledger"})
    assert text_of(kept).strip().endswith("42"), text_of(kept)  # her namespace survived his attempts


ECHO = """
import mcp.runtime as runtime
try:
    print(await mcp_everything.echo(message=%r))
except runtime.ApprovalDenied as exc:
    print("ApprovalDenied:", exc.message)
"""
APPROVAL = re.compile(r'name="approval" value="([^"]+)"><input type="hidden" name="digest" value="([^"]+)"')


async def _call_into(client: Client, code: str, answers: list[types.CallToolResult], news: list[str]) -> None:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        news.append(message or "")

    answers.append(await client.call_tool("run_python", {"code": code, "session": "asks", "timeout": 100},
                                          progress_callback=on_progress))  # fmt: skip


async def test_an_approval_waits_in_its_owners_console_only_and_her_answer_decides_the_call(
    server: HttpServer, browsers: tuple[Browser, Browser]
) -> None:
    """A client without elicitation gets its ask_tools call approved in the console instead of refused: the call
    waits, shown with its exact server, tool and arguments to its owner alone; the other token's holder can
    neither see nor answer it; an answer must carry the digest of what was shown, counts once, and is audited."""
    alice, bob = browsers
    outcomes: dict[str, str] = {}
    news: list[str] = []
    for label, decision in (("ship-it-<b>", "grant"), ("drop-it", "deny")):
        async with http_client_for(server.url, headers=bearer(TOKEN_A)) as client, anyio.create_task_group() as tg:
            answers: list[types.CallToolResult] = []
            tg.start_soon(_call_into, client, ECHO % label, answers, news)
            with anyio.fail_after(patient(120)):
                while not (found := APPROVAL.search(page := (await alice.page("/console/approvals")).text)):
                    await anyio.sleep(0.1)
            approval, digest = found.groups()
            assert "everything/echo" in page and html.escape(f'"message": "{label}"') in page
            shown_to_bob = (await bob.page("/console/approvals")).text
            assert approval not in shown_to_bob and "echo" not in shown_to_bob
            assert (await bob.act("/console/approvals/answer", approval=approval, digest=digest,
                                  decision="grant")).status_code == 404  # fmt: skip
            assert (await alice.act("/console/approvals/answer", approval=approval, digest="0" * 64,
                                    decision="grant")).status_code == 404  # fmt: skip
            assert not answers  # nothing of the above let it go
            answered = await alice.act("/console/approvals/answer", approval=approval, digest=digest,
                                       decision=decision)  # fmt: skip
            assert answered.status_code == 303
        assert (await alice.act("/console/approvals/answer", approval=approval, digest=digest,
                                decision="grant")).status_code == 404  # fmt: skip  # one answer only
        outcomes[decision] = text_of(answers[0])
    assert "everything/echo: waiting for approval in the web console (Approvals page)" in news, news
    assert "ship-it-<b>" in outcomes["grant"] and "ApprovalDenied" not in outcomes["grant"], outcomes
    assert "ApprovalDenied: not approved: everything/echo: denied in the console" in outcomes["deny"], outcomes
    audit = [json.loads(line) for line in Path(server.settings["MCP_BRIDGE_AUDIT_LOG"]).read_text().splitlines()]
    assert [line.get("approval") for line in audit if line.get("tool") == "echo"][-2:] == [
        "approved in the console", "denied in the console"]  # fmt: skip


LONG = "import time\nfor _ in range(600):\n    time.sleep(0.1)"  # a minute, interruptible


@contextlib.asynccontextmanager
async def running(server: HttpServer, alice: Browser, session: str, code: str) -> AsyncIterator[Running]:
    """Alice's call of ``code`` in ``session``, running (her Calls page lists it) while the block runs; its answer
    is in ``answers`` once the block is left."""
    async with http_client_for(server.url, headers=bearer(TOKEN_A)) as client, anyio.create_task_group() as group:
        answers: list[types.CallToolResult] = []

        async def call() -> None:
            answers.append(await client.call_tool("run_python", {"code": code, "session": session, "timeout": 100}))

        group.start_soon(call)
        with anyio.fail_after(patient(120)):
            while not (found := CALL_LINK.search((await alice.page("/console/calls")).text.split("Finished")[0])):
                await anyio.sleep(0.1)
        yield Running(client, found.group(1), answers)


@dataclasses.dataclass
class Running:
    client: Client
    call: str
    answers: list[types.CallToolResult]


async def test_a_running_call_shows_its_latest_progress_and_is_cancelled_by_its_owner_only(
    server: HttpServer, browsers: tuple[Browser, Browser]
) -> None:
    alice, bob = browsers
    # Its client asked for no progress: the upstream server's still reaches the board, which keeps the latest.
    code = "await mcp_everything.trigger_long_running_operation(duration=1, steps=2)\n" + LONG
    async with running(server, alice, "slow", code) as it:
        with anyio.fail_after(patient(60)):
            while "trigger-long-running-operation: " not in (page := (await alice.page("/console/calls")).text):
                await anyio.sleep(0.1)
        assert "everything/trigger-long-running-operation: " in page.split("Finished")[0]
        assert "trigger-long-running-operation" not in (await bob.page("/console/calls")).text
        assert (await bob.act(f"/console/calls/{it.call}/cancel")).status_code == 404
        assert (await alice.act(f"/console/calls/{it.call}/cancel")).status_code == 303
    (answer,) = it.answers
    assert answer.is_error and "cancelled from the web console" in text_of(answer), text_of(answer)
    assert "cancelled" in (await alice.page(f"/console/calls/{it.call}")).text


async def test_a_reset_stops_the_call_running_in_the_session_first(
    server: HttpServer, browsers: tuple[Browser, Browser]
) -> None:
    alice, _ = browsers
    async with running(server, alice, "busy", "busy = True\n" + LONG) as it:
        reset = await alice.act("/console/sessions/reset", session=f"p:{principal_of(TOKEN_A)}:busy")
        assert reset.status_code == 303
        after = await it.client.call_tool("run_python", {"code": "print('busy' in dir())", "session": "busy"})
    assert "cancelled from the web console" in text_of(it.answers[0])
    assert "reset from the web console" in text_of(after) and "False" in text_of(after), text_of(after)


async def test_saved_tools_are_shown_and_deleted_by_their_owner_only(
    server: HttpServer, browsers: tuple[Browser, Browser]
) -> None:
    alice, bob = browsers
    code = "import mcp.runtime as runtime\ndef double_it(x):\n    return 2 * x\nruntime.save_tool(double_it)"
    async with http_client_for(server.url, headers=bearer(TOKEN_A)) as client:
        saved = await client.call_tool("run_python", {"code": code, "session": "tools"})
    assert not saved.is_error, text_of(saved)
    page = (await alice.page("/console/tools")).text
    assert "double_it" in page and "return 2 * x" in page
    assert "double_it" not in (await bob.page("/console/tools")).text
    assert (await bob.act("/console/tools/delete", name="double_it")).status_code == 404
    assert "double_it" in (await alice.page("/console/tools")).text  # still hers
    assert (await alice.act("/console/tools/delete", name="double_it")).status_code == 303
    assert "double_it" not in (await alice.page("/console/tools")).text


async def test_actions_need_the_pages_csrf_token_and_the_consoles_own_origin(
    server: HttpServer, browsers: tuple[Browser, Browser]
) -> None:
    alice, _ = browsers
    async with http_client_for(server.url, headers=bearer(TOKEN_A)) as client:
        await client.call_tool("run_python", {"code": "y = 1", "session": "guarded"})
    key = f"p:{principal_of(TOKEN_A)}:guarded"
    await alice.page("/console/sessions")
    http = alice.http
    no_token = await http.post("/console/sessions/end", data={"session": key}, headers={"Origin": alice.origin})
    wrong = await http.post("/console/sessions/end", data={"session": key, "csrf": "x" * 32},
                            headers={"Origin": alice.origin})  # fmt: skip
    foreign = await http.post("/console/sessions/end", data={"session": key, "csrf": alice.csrf},
                              headers={"Origin": "http://evil.example"})  # fmt: skip
    bare = await http.post("/console/sessions/end", data={"session": key, "csrf": alice.csrf})
    as_get = await http.get("/console/sessions/end", params={"session": key, "csrf": alice.csrf})
    assert [a.status_code for a in (no_token, wrong, foreign, bare)] == [403, 403, 403, 403]
    assert as_get.status_code == 405
    assert "guarded" in (await alice.page("/console/sessions")).text  # still there
    assert (await alice.act("/console/sessions/end", session=key)).status_code == 303
    assert "guarded" not in (await alice.page("/console/sessions")).text


async def test_a_rebound_host_is_refused_and_every_answer_forbids_inline_script(server: HttpServer) -> None:
    async with httpx2.AsyncClient(base_url=_origin(server)) as http:
        rebound = await http.get("/console/sign-in", headers={"Host": f"evil.example:{server.port}"})
        plain = await http.get("/console/sign-in")
        private = await http.get("/console/sessions")
    assert rebound.status_code == 421
    assert plain.status_code == 200 and private.status_code == 303  # not signed in: sent to sign in
    for answer in (rebound, plain, private):
        policy = answer.headers["content-security-policy"]
        script = next(part for part in policy.split(";") if part.strip().startswith("script-src"))
        assert script.split() == ["script-src", "'self'"] and "default-src 'none'" in policy
        assert answer.headers["x-frame-options"] == "DENY"


async def test_no_token_or_server_secret_is_ever_rendered(
    server: HttpServer, browsers: tuple[Browser, Browser]
) -> None:
    alice, _ = browsers
    shown = []
    for path in ("/console/sessions", "/console/calls", "/console/doctor", "/console/sign-in"):
        answer = await alice.page(path)
        assert answer.status_code == 200, (path, answer.text)
        shown.append(answer.text + json.dumps(dict(answer.headers)))
    call = CALL_LINK.search(shown[1])
    if call:
        shown.append((await alice.page(f"/console/calls/{call.group(1)}")).text)
    for secret in (TOKEN_A, TOKEN_B, SERVER_SECRET):
        assert not any(secret in text for text in shown)
    assert "Doctor" in shown[2] and "bubblewrap" in shown[2]


EVERYTHING_ROW = re.compile(r'<tr><td><span class="server">everything</span>(.*?)</tr>')


def _restarts(page: str) -> int:
    """The restarts the Servers page shows for the everything server (its row's sixth cell)."""
    row = EVERYTHING_ROW.search(page)
    assert row is not None, page
    return int(row.group(1).split("</td><td>")[5].removesuffix("</td>"))


async def test_servers_show_state_and_tools_without_secrets_and_only_the_operator_restarts_one(
    server: HttpServer, browsers: tuple[Browser, Browser]
) -> None:
    alice, bob = browsers  # Alice's token is the operator's (MCP_BRIDGE_CONSOLE_OPERATORS); Bob's is not
    async with http_client_for(server.url, headers=bearer(TOKEN_A)) as client:
        used = await client.call_tool("run_python", {"code": "await mcp_everything.get_tiny_image()",
                                                     "session": "servers"})  # fmt: skip
    assert not used.is_error, text_of(used)
    page = (await alice.page("/console/servers")).text
    assert "ready" in page and "get-tiny-image" in page and "mcp-codemode login NAME" in page
    assert "vault" in page and "--token &lt;hidden&gt;" in page  # its command line, as `servers` shows it
    before = _restarts(page)
    # Bob's page is read-only, and his restart is refused even with his own page's CSRF token and Origin.
    bobs = (await bob.page("/console/servers")).text
    assert "get-tiny-image" in bobs and "servers/restart" not in bobs and "Read-only" in bobs
    assert (await bob.act("/console/servers/restart", name="everything")).status_code == 403
    assert _restarts((await alice.page("/console/servers")).text) == before  # not restarted by him
    assert "servers/restart" in page
    assert (await alice.act("/console/servers/restart", name="everything")).status_code == 303
    after = (await alice.page("/console/servers")).text
    assert _restarts(after) == before + 1, after
    assert (await alice.act("/console/servers/restart", name="no-such-server")).status_code == 404
    async with http_client_for(server.url, headers=bearer(TOKEN_A)) as client:  # the restarted server answers
        again = await client.call_tool("run_python", {"code": "await mcp_everything.get_tiny_image()",
                                                      "session": "servers"})  # fmt: skip
    assert not again.is_error, text_of(again)
    for secret in (TOKEN_A, TOKEN_B, SERVER_SECRET, ARG_SECRET):
        assert secret not in page + bobs + after


async def test_search_ranks_every_servers_tools_as_code_would_and_shows_the_query_as_text(
    server: HttpServer, browsers: tuple[Browser, Browser]
) -> None:
    _, bob = browsers  # any signed-in token holder may search: their code could anyway
    query = "<script>alert(1)</script> echo a message"
    with anyio.fail_after(patient(120)):  # the first search may find the servers still listing their tools
        while '<span class="tool">echo</span>' not in (found := await bob.page("/console/search", q=query)).text:
            await anyio.sleep(0.2)
    assert found.status_code == 200
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in found.text and "<script>alert" not in found.text
    assert "<code>echo</code>" in found.text and "tools match" in found.text  # how code calls it: mcp_everything.echo
    assert "Query" in (await bob.page("/console/search")).text


def test_the_server_log_names_no_sign_in_link_when_tokens_guard_the_face(server: HttpServer) -> None:
    log = Path(server.log).read_text(encoding="utf-8")
    assert "web console at http://127.0.0.1" in log and "sign-in?code=" not in log


REFRESH_TO = re.compile(r'<meta http-equiv="refresh" content="0;url=([^"]+)">')


async def test_an_operator_signs_a_remote_server_in_and_nobody_else_can_start_or_finish_the_sign_in(
    server: HttpServer, browsers: tuple[Browser, Browser], oauth_url: str
) -> None:
    alice, bob = browsers  # Alice's token is the operator's; Bob's is not
    page = (await alice.page("/console/servers")).text
    assert 'action="/console/servers/sign-in"' in page and "not signed in" in page
    start = "/console/servers/sign-in"
    assert (await bob.act(start, name="signed")).status_code == 403  # no operator: refused before any flow
    assert (await alice.http.post(start, data={"name": "signed"}, headers={"Origin": alice.origin})).status_code == 403
    foreign = await alice.http.post(start, data={"name": "signed", "csrf": alice.csrf},
                                    headers={"Origin": "http://evil.example"})  # fmt: skip
    assert foreign.status_code == 403
    assert (await alice.act(start, name="everything")).status_code == 404  # stdio: nothing to sign in to
    assert (await alice.act(start, name="no-such-server")).status_code == 404
    started = await alice.act(start, name="signed")
    assert started.status_code == 200, started.text
    moved = REFRESH_TO.search(started.text)
    assert moved is not None, started.text
    async with httpx2.AsyncClient() as provider:  # the authorization server consents at once: a redirect back
        consent = await provider.get(html.unescape(moved.group(1)))
    callback = consent.headers["location"]
    assert callback.startswith(f"{alice.origin}/console/servers/signed-in?"), callback
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(callback).query)
    code = query["code"][0]
    wrong = await alice.http.get("/console/servers/signed-in", params={"code": code, "state": "x" * 43})
    assert wrong.status_code == 400 and code not in wrong.text
    assert (await bob.http.get(callback)).status_code == 403  # another principal's browser, the right state
    async with httpx2.AsyncClient() as stranger:  # the link opened in a browser that did not start the sign-in
        assert (await stranger.get(callback)).status_code == 403
    path = callback.removeprefix(alice.origin)
    rebound = await alice.http.get(path, headers={"Host": f"evil.example:{server.port}"})  # DNS rebinding
    assert rebound.status_code == 421
    done = await alice.http.get(callback)  # still waiting: the refused callbacks did not end it
    assert done.status_code == 200 and "Signed in to signed" in done.text, done.text
    assert (await alice.http.get(callback)).status_code == 400  # replayed
    assert code not in done.text + wrong.text
    listed = (await alice.page("/console/servers")).text  # listed before the callback's page answered
    assert "whoami" in listed, listed
    assert "signed in" in listed and "not signed in" not in listed
    async with http_client_for(server.url, headers=bearer(TOKEN_A)) as client:
        signed = await client.call_tool("run_python", {"code": "print(await mcp_signed.whoami())", "session": "o"})
    assert "signed by client" in text_of(signed), text_of(signed)
    remote = ServerConfig(name="signed", alias="signed", transport="http", source="x", url=oauth_url)
    record = json.loads((sandbox_settings().state_dir / "oauth" / f"{sign_in_key(remote)}.json").read_text())
    tokens = [record["tokens"]["access_token"], record["tokens"]["refresh_token"]]
    assert tokens
    logged = server.log_text()
    assert code not in logged and not any(token in logged for token in tokens)
    assert "signed in to upstream server 'signed'" in logged


async def test_the_servers_page_is_told_of_a_restart_made_elsewhere_by_its_event_stream(
    server: HttpServer, browsers: tuple[Browser, Browser]
) -> None:
    alice, bob = browsers  # Bob watches the Servers page; Alice, an operator, restarts a server from hers
    live = re.search(r'<main data-live="([^"]+)"', (await bob.page("/console/servers")).text)
    assert live is not None and "&amp;servers=" in live.group(1)
    await alice.page("/console/servers")
    async with bob.http.stream("GET", html.unescape(live.group(1))) as events:
        lines = events.aiter_lines()
        with anyio.fail_after(patient(30)):
            while (await anext(lines)) != ": still here":  # nothing changed since his page was drawn
                pass
        assert (await alice.act("/console/servers/restart", name="everything")).status_code == 303  # no call
        with anyio.fail_after(patient(30)):
            while (await anext(lines)) != "event: change":
                pass
