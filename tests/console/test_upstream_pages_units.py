"""The console's Servers and Search pages, their pure parts: who may restart, what a server's row shows of its
configuration (no secret), the hub's states as a person reads them, and escaping. Nothing starts or listens."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging

import pytest

from mcp_codemode.console.oauth_routes import Pending, PendingSignIns
from mcp_codemode.console.pages import moving_on, search_page, servers_page
from mcp_codemode.console.upstream_routes import operators
from mcp_codemode.errors import SettingsError
from mcp_codemode.runs.upstream_view import ServerView, shown, state_name
from mcp_codemode.settings import Settings
from mcp_codemode.telemetry.logs import hide_in_logs
from mcp_codemode.upstream.model import ServerConfig
from mcp_codemode.upstream.servers.state import ServerState

OPERATOR, OTHER = "t-0123456789ab", "t-ba9876543210"


def test_the_local_user_restarts_without_tokens_and_with_tokens_only_the_operators_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert operators("local", [], ()) == {"local"}
    assert operators("local", [OPERATOR, OTHER], ()) == set()  # tokens and no operator: read-only for all
    with caplog.at_level(logging.WARNING):
        assert operators("local", [OPERATOR, OTHER], (OPERATOR, "t-ffffffffffff")) == {OPERATOR}
    assert "t-ffffffffffff, which is not one of the bridge's tokens" in caplog.text


def test_the_operators_setting_takes_token_names_never_tokens() -> None:
    assert Settings.load(env={}).console_operators == ()
    named = Settings.load(env={"MCP_BRIDGE_CONSOLE_OPERATORS": f"{OPERATOR}, {OTHER},{OPERATOR}"})
    assert named.console_operators == (OPERATOR, OTHER)
    with pytest.raises(SettingsError, match="MCP_BRIDGE_CONSOLE_OPERATORS='a-real-token-value' is not valid"):
        Settings.load(env={"MCP_BRIDGE_CONSOLE_OPERATORS": "a-real-token-value"})


def test_a_servers_secrets_are_hidden_from_what_its_row_shows() -> None:
    remote = ServerConfig(name="remote", alias="remote", transport="http", source="x",
                          url="https://alice:pw-URL-secret@mcp.example/mcp?key=query-secret-1")  # fmt: skip
    target = shown(remote.target, remote)
    assert "pw-URL-secret" not in target and "query-secret-1" not in target and "mcp.example" in target
    local = ServerConfig(name="local", alias="local", transport="stdio", source="x", command="/bin/tool",
                         args=("--api-key", "arg-secret-123", "--header", "X:env-secret-456"),
                         env={"KEY": "env-secret-456"})  # fmt: skip
    assert shown(local.target, local) == "/bin/tool --api-key <hidden> --header X:<hidden>"
    hide_in_logs(["bridge-known-secret-789"])  # what the process-wide log filter knows is hidden too
    assert shown("failed: bridge-known-secret-789", local) == "failed: <hidden>"


def test_the_hubs_states_read_as_a_person_says_them() -> None:
    assert state_name(ServerState("idle")) == "not started"
    assert state_name(ServerState("connecting")) == "starting"
    assert state_name(ServerState("ready")) == "ready"
    assert state_name(ServerState("failed", retry_in=0.0)) == "failed"
    assert state_name(ServerState("failed", retry_in=None)) == "skipped"  # a code-mode bridge: never started again


def test_a_servers_row_is_escaped_and_restart_is_offered_to_operators_only() -> None:
    view = ServerView("<img src=x>", "stdio", "<b>cmd</b>", "failed", tools=("<script>t</script>",),
                      listing="live", restarts=2, error="<i>boom</i>", retry_in=4.0, restartable=True)  # fmt: skip
    page = servers_page([view], True, "/console", "csrf-1")
    assert "<img src=x>" not in page and "&lt;img src=x&gt;" in page
    assert "<script>t" not in page and "&lt;script&gt;t&lt;/script&gt;" in page
    assert "&lt;b&gt;cmd&lt;/b&gt;" in page and "&lt;i&gt;boom&lt;/i&gt;" in page and "again in 4 s" in page
    assert 'action="/console/servers/restart"' in page and "mcp-codemode login NAME" in page
    read_only = servers_page([view], False, "/console", "csrf-1")
    assert "servers/restart" not in read_only and "Read-only" in read_only
    skipped = ServerView("bridge", "stdio", "mcp-codemode serve", "skipped", error="it is a code-mode bridge")
    assert "servers/restart" not in servers_page([skipped], True, "/console", "csrf-1")  # no process to restart


def test_search_results_and_the_query_are_shown_as_text() -> None:
    found = {"query": "q", "total": 1, "offset": 0, "pending": ["slow"],
             "unavailable": [{"server": "gone", "reason": "<b>crashed</b>"}],
             "results": [{"server": "s", "tool": "<svg onload=x>", "alias": "svg", "description": "<i>d</i>",
                          "required": ["<p>"], "score": 1.5}],
             "also": [{"kind": "prompt", "server": "s", "name": "<u>n</u>", "description": "",
                       "use": "<x>"}]}  # fmt: skip
    page = search_page("<script>q</script>", found, "/console")
    assert "<script>q" not in page and 'value="&lt;script&gt;q&lt;/script&gt;"' in page
    for raw in ("<svg", "<i>d", "<p>", "<u>n", "<x>", "<b>crashed"):
        assert raw not in page
    assert "&lt;svg onload=x&gt;" in page and "1.5" in page and "slow" in page and "Prompts and resources" in page
    assert "search_tool_docs" in search_page("", None, "/console")


def test_sign_in_is_offered_to_operators_for_remote_servers_without_tokens_and_its_name_is_escaped() -> None:
    remote = ServerView('<x">', "http", "https://mcp.example/mcp", "failed", signed_in=False, restartable=True,
                        sign_in=True)  # fmt: skip
    page = servers_page([remote], True, "/console", "csrf-1")
    assert 'action="/console/servers/sign-in"' in page and 'value="&lt;x&quot;&gt;"' in page
    assert "not signed in" in page and '<x">' not in page
    assert "servers/sign-in" not in servers_page([remote], False, "/console", "csrf-1")  # read-only: no sign-in
    signed = dataclasses.replace(remote, state="ready", signed_in=True, sign_in=False)
    assert "servers/sign-in" not in servers_page([signed], True, "/console", "csrf-1")


def test_a_page_that_moves_on_escapes_its_address_and_runs_no_script() -> None:
    page = moving_on("Sign in", "on to <b>it</b>", 'https://as.example/authorize?a=1&state=x"><script>', "Go",
                     "/console")  # fmt: skip
    assert '<meta http-equiv="refresh" content="0;url=https://as.example/authorize?a=1&amp;state=x&quot;&gt;' in page
    assert "<script>" not in page.replace('<script src="/console/static/console.js" defer></script>', "")
    assert "on to &lt;b&gt;it&lt;/b&gt;" in page


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _pending(server: str, principal: str, browser: str, expires: float) -> Pending:
    loop = asyncio.get_running_loop()
    return Pending(server, principal, hashlib.sha256(browser.encode()).digest(), expires, loop.create_future(),
                   loop.create_task(asyncio.sleep(3600)))  # fmt: skip


def test_a_sign_in_callback_is_taken_once_from_the_browser_and_principal_that_started_it_before_it_expires() -> None:
    async def main() -> None:
        clock = _Clock()
        waiting = PendingSignIns(clock)
        first = _pending("signed", OPERATOR, "browser-1", clock.now + 600)
        waiting.add("state-1", first)
        assert waiting.take("state-2", "browser-1", OPERATOR) == "this sign-in is unknown or was finished already"
        assert "someone else" in str(waiting.take("state-1", None, OPERATOR))  # no cookie of the browser
        assert "someone else" in str(waiting.take("state-1", "browser-2", OPERATOR))  # another browser's
        assert "someone else" in str(waiting.take("state-1", "browser-1", OTHER))  # another principal's console
        assert waiting.take("state-1", "browser-1", None) is first  # the provider's redirect: no console cookie
        assert waiting.take("state-1", "browser-1", None) == "this sign-in is unknown or was finished already"
        late = _pending("other", OPERATOR, "browser-1", clock.now + 600)
        waiting.add("state-3", late)
        clock.now += 601
        assert waiting.take("state-3", "browser-1", OPERATOR) == "this sign-in expired"
        await asyncio.sleep(0)
        assert late.flow.cancelled()  # its flow ends with it
        again = _pending("other", OPERATOR, "browser-1", clock.now + 600)
        newer = _pending("other", OPERATOR, "browser-1", clock.now + 600)
        waiting.add("state-4", again)
        waiting.add("state-5", newer)  # the same server's sign-in, started again: the earlier one ends
        assert waiting.take("state-4", "browser-1", OPERATOR) == "this sign-in is unknown or was finished already"
        assert waiting.take("state-5", "browser-1", OPERATOR) is newer
        for each in (first, newer):
            each.flow.cancel()

    asyncio.run(main())
