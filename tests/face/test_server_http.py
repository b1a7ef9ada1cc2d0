"""The MCP face over Streamable HTTP: real servers on 127.0.0.1, the SDK's real ``Client`` in both eras."""

from __future__ import annotations

import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_codemode.face.placement import SESSION_HEADER
from mcp_codemode.face.web import UNAUTHORIZED
from mcp_codemode.sandbox import cgroups
from tests.support.backends import fail_unless
from tests.support.clients import (
    CALL_DEADLINE,
    LEGACY_VERSION,
    LISTING_LIMIT,
    MODES,
    HttpServer,
    assert_no_orphans,
    bearer,
    clean_environ,
    http_client_for,
    listing_json,
    recording,
    require_bubblewrap,
    text_of,
)
from tests.support.patience import patient
from tests.support.processes import wait_until_gone
from tests.support.zygote import REAL_SERVE, serve_command

pytestmark = [pytest.mark.anyio, pytest.mark.backend]
TOKEN_A = "a" * 16 + uuid.uuid4().hex[:16]
TOKEN_B = "b" * 16 + uuid.uuid4().hex[:16]


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """A loopback server without a token, as a local user runs it."""
    require_bubblewrap()
    log = tmp_path_factory.mktemp("http-plain") / "server.log"
    # No warm pool: the lifecycle tests below find a session's sandbox by its cgroup name, which names the session
    # only when the session started the sandbox itself (a pooled one is named pool-<n>; tests/runs/test_warm_pool.py).
    # A long interrupt grace: the cancel test needs the interrupt to win over a hard kill on a stalled machine too.
    with HttpServer(
        log, MCP_BRIDGE_PROGRESS_INTERVAL="0.2", MCP_BRIDGE_WARM_POOL="0", MCP_BRIDGE_INTERRUPT_GRACE="30"
    ) as server:
        yield server
    assert_no_orphans()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """A loopback server that requires one of two bearer tokens."""
    require_bubblewrap()
    log = tmp_path_factory.mktemp("http-guarded") / "server.log"
    with HttpServer(log, "--token", TOKEN_A, "--token", TOKEN_B) as server:
        yield server
    assert_no_orphans()


# --- the same contract as over stdio ------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_the_listing_is_one_small_tool_in_either_protocol_era(plain: HttpServer, mode: str) -> None:
    async with http_client_for(plain.url, mode) as client:
        assert client.protocol_version == MODES[mode]
        listing = await client.list_tools()
        answer = await client.call_tool("run_python", {"code": "print('over http', 6 * 7)"})
    assert [tool.name for tool in listing.tools] == ["run_python"]
    assert len(listing_json(listing)) <= LISTING_LIMIT, listing_json(listing)
    assert (answer.is_error, text_of(answer).splitlines()[0]) == (False, "over http 42")


async def test_a_legacy_client_keeps_state_in_the_default_session_of_its_mcp_session(plain: HttpServer) -> None:
    async with http_client_for(plain.url, "legacy") as one, http_client_for(plain.url, "legacy") as two:
        await one.call_tool("run_python", {"code": "owner = 'one'"})
        await two.call_tool("run_python", {"code": "owner = 'two'"})
        first = await one.call_tool("run_python", {"code": "owner"})
        second = await two.call_tool("run_python", {"code": "owner"})
    assert (first.is_error, text_of(first)) == (False, "'one'")
    assert (second.is_error, text_of(second)) == (False, "'two'")
    assert first.structured_content is not None
    assert first.structured_content["session"] == "default"


async def test_a_stateless_client_without_a_token_keeps_its_variables_across_calls(plain: HttpServer) -> None:
    marker = uuid.uuid4().hex
    async with http_client_for(plain.url, "auto") as client:
        assert client.protocol_version == MODES["auto"]
        first = await client.call_tool("run_python", {"code": f"kept_{marker} = 1\nkept_{marker}"})
        second = await client.call_tool("run_python", {"code": f"kept_{marker} + 1"})
        strict = await client.call_tool(
            "run_python",
            {"code": f"kept_{marker} + 2", "session": "", "servers": [], "timeout": None, "reset": None},
        )
    assert (first.is_error, text_of(first)) == (False, "1")
    assert (second.is_error, text_of(second)) == (False, "2"), text_of(second)
    assert (strict.is_error, text_of(strict)) == (False, "3"), "session: '' is the default session"
    assert second.structured_content is not None
    assert second.structured_content["session"] == "default"


async def test_local_stateless_clients_without_a_header_share_one_default_session(plain: HttpServer) -> None:
    marker = uuid.uuid4().hex
    async with http_client_for(plain.url, "auto") as one:
        await one.call_tool("run_python", {"code": f"shared_{marker} = 'set by one'"})
    async with http_client_for(plain.url, "auto") as two:
        seen = await two.call_tool("run_python", {"code": f"shared_{marker}"})
        named = await two.call_tool("run_python", {"code": f"shared_{marker}", "session": "default"})
    assert (seen.is_error, text_of(seen)) == (False, "'set by one'")
    assert (named.is_error, text_of(named)) == (False, "'set by one'"), "the default session is the one named default"


def named(session: str) -> dict[str, str]:
    return {SESSION_HEADER: session}


async def test_the_session_header_keeps_two_local_stateless_clients_apart(plain: HttpServer) -> None:
    async with (
        http_client_for(plain.url, "auto", named("header-one")) as one,
        http_client_for(plain.url, "auto", named("header-two")) as two,
    ):
        await one.call_tool("run_python", {"code": "owner = 'one'"})
        await two.call_tool("run_python", {"code": "owner = 'two'"})
        first = await one.call_tool("run_python", {"code": "owner"})
        second = await two.call_tool("run_python", {"code": "owner"})
        argument_wins = await one.call_tool("run_python", {"code": "owner", "session": "header-two"})
    async with http_client_for(plain.url, "auto") as plain_client:
        default = await plain_client.call_tool("run_python", {"code": "'owner' in globals()"})
        by_name = await plain_client.call_tool("run_python", {"code": "owner", "session": "header-one"})
    assert (first.is_error, text_of(first)) == (False, "'one'")
    assert (second.is_error, text_of(second)) == (False, "'two'")
    assert first.structured_content is not None
    assert first.structured_content["session"] == "header-one"
    assert text_of(argument_wins) == "'two'", "the session argument wins over the header"
    assert text_of(default).startswith("False"), text_of(default)
    assert text_of(by_name) == "'one'", "the header names a session like the argument does"


async def test_a_single_bridge_declares_no_routing_header_so_session_works_on_a_first_call(plain: HttpServer) -> None:
    """SEP-2243's ``x-mcp-header`` is for a load balancer in front of replicas: declared on a single bridge, the SDK
    refused (HTTP 400, "Mcp-Param-Session header is missing") every call with ``session`` from a 2026-07-28 client
    that had not listed the tools on that connection first, as fastmcp 4 and openai-agents' cached listing do."""
    async with http_client_for(plain.url, "auto") as first_thing:
        answer = await first_thing.call_tool("run_python", {"code": "first = 1\nfirst", "session": "first-call"})
        empty = await first_thing.call_tool("run_python", {"code": "2", "session": ""})
        listing = await first_thing.list_tools()
    assert (answer.is_error, text_of(answer)) == (False, "1")
    assert (empty.is_error, text_of(empty)) == (False, "2")
    assert "x-mcp-header" not in listing.tools[0].input_schema["properties"]["session"]


async def test_a_handshake_era_client_with_the_session_header_uses_the_named_session(plain: HttpServer) -> None:
    async with http_client_for(plain.url, "legacy", named("header-both-eras")) as legacy:
        await legacy.call_tool("run_python", {"code": "era = 'legacy'"})
    async with http_client_for(plain.url, "auto", named("header-both-eras")) as modern:
        seen = await modern.call_tool("run_python", {"code": "era"})
    assert (seen.is_error, text_of(seen)) == (False, "'legacy'")


async def test_a_bad_session_header_is_refused_with_a_message_naming_it(plain: HttpServer) -> None:
    async with http_client_for(plain.url, "auto", named("../etc")) as client:
        refused = await client.call_tool("run_python", {"code": "1"})
        named_call = await client.call_tool("run_python", {"code": "1 + 1", "session": "checks"})
    assert refused.is_error
    assert "Mcp-Codemode-Session header '../etc' is not a valid session name" in text_of(refused)
    assert refused.structured_content is not None
    assert refused.structured_content["status"] == "refused"
    assert (named_call.is_error, text_of(named_call)) == (False, "2"), "an argument does not read the header"


@pytest.mark.parametrize("mode", MODES)
async def test_structured_content_carries_the_traceback(plain: HttpServer, mode: str) -> None:
    async with http_client_for(plain.url, mode) as client:
        raised = await client.call_tool("run_python", {"code": "def f():\n    return 1 / 0\nf()"})
    assert raised.is_error
    assert raised.structured_content is not None
    error = raised.structured_content["error"]
    assert (error["type"], error["message"]) == ("ZeroDivisionError", "division by zero")
    assert error["traceback"].startswith("Traceback (most recent call last):"), error
    assert "line 2, in f" in error["traceback"]
    assert error["traceback"] == text_of(raised).removeprefix("error:\n")


@pytest.mark.parametrize("mode", MODES)
async def test_the_capabilities_resource_is_what_the_sandbox_runtime_says(plain: HttpServer, mode: str) -> None:
    async with http_client_for(plain.url, mode) as client:
        listed = await client.list_resources()
        read = await client.read_resource("codemode://capabilities")
        inside = await client.call_tool(
            "run_python",
            {"code": "import mcp.runtime as runtime; print(runtime.capability_summary())", "session": "caps"},
        )
        with pytest.raises(MCPError) as caught:
            await client.read_resource("codemode://missing")
    # Besides the capabilities, only the listings of this principal's sessions' files (other tests' sessions here).
    others = [str(resource.uri) for resource in listed.resources if str(resource.uri) != "codemode://capabilities"]
    assert len(listed.resources) == len(others) + 1
    assert all(uri.startswith("codemode://sessions/") and uri.endswith("/files/") for uri in others), others
    (contents,) = read.contents
    assert isinstance(contents, types.TextResourceContents)
    assert text_of(inside) == contents.text.rstrip("\n")
    assert "codemode://missing" in str(caught.value)


async def test_bad_arguments_are_tool_errors_and_an_unknown_tool_is_an_mcp_error(plain: HttpServer) -> None:
    async with http_client_for(plain.url, "auto") as client:
        refused = await client.call_tool("run_python", {"code": "1", "timeout": "abc", "session": "checks"})
        with pytest.raises(MCPError) as caught:
            await client.call_tool("run_ruby", {"code": "1"})
        after = await client.call_tool("run_python", {"code": "1 + 1", "session": "checks"})
    assert refused.is_error
    assert "`timeout` must be a whole number" in text_of(refused)
    assert "run_ruby" in str(caught.value)
    assert text_of(after) == "2"


# --- progress and cancellation ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_a_long_call_with_a_progress_callback_gets_rising_progress(plain: HttpServer, mode: str) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with http_client_for(plain.url, mode) as client:
        done = await client.call_tool(
            "run_python",
            {"code": "import time\ntime.sleep(4)\n'done'", "session": f"progress-{mode}"},
            progress_callback=on_progress,
        )
    assert text_of(done) == "'done'"
    # Every 0.2 s for 4 s is 20 on an ordinary machine; a starved one has delivered two in 2 s. Two show the rise.
    assert len(seen) >= 2, f"{mode}: only {len(seen)} progress notifications arrived"
    assert seen == sorted(seen) and len(set(seen)) == len(seen), seen


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_call_is_interrupted_and_the_session_survives(plain: HttpServer, mode: str) -> None:
    session = f"cancel-{mode}"
    sent: list[dict[str, Any]] = []
    with anyio.fail_after(CALL_DEADLINE):
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=300.0)) as http:
            transport = recording(streamable_http_client(plain.url, http_client=http), sent)
            async with Client(transport, mode=mode, read_timeout_seconds=CALL_DEADLINE) as client:
                await client.call_tool("run_python", {"code": "x = 1", "session": session})
                with anyio.move_on_after(2) as waited:
                    await client.call_tool(
                        "run_python", {"code": "while True:\n    pass", "timeout": 120, "session": session}
                    )
                # The loop had 120 s: an answer well inside that proves the cancel interrupted it.
                with anyio.fail_after(30):
                    after = await client.call_tool("run_python", {"code": "x", "session": session})
    assert waited.cancelled_caught
    assert any(message.get("method") == "notifications/cancelled" for message in sent), sent
    assert (after.is_error, text_of(after)) == (False, "1")


# --- concurrency ---------------------------------------------------------------------------------------


async def test_eight_clients_at_once_each_see_only_their_own_state(plain: HttpServer) -> None:
    secrets = [uuid.uuid4().hex for _ in range(8)]
    seen: dict[int, str] = {}
    stored = 0
    all_stored = anyio.Event()

    async def one(index: int) -> None:
        nonlocal stored
        mode = "legacy" if index < 4 else "auto"
        named: dict[str, Any] = {} if mode == "legacy" else {"session": f"crowd-{index}"}
        async with http_client_for(plain.url, mode) as client:
            await client.call_tool("run_python", {"code": f"secret = {secrets[index]!r}", **named})
            stored += 1
            if stored == len(secrets):
                all_stored.set()
            await all_stored.wait()  # every secret is set before anyone reads
            result = await client.call_tool("run_python", {"code": "import time\ntime.sleep(0.5)\nsecret", **named})
            seen[index] = text_of(result)

    with anyio.fail_after(CALL_DEADLINE):
        async with anyio.create_task_group() as group:
            for index in range(len(secrets)):
                group.start_soon(one, index)
    assert seen == {index: repr(secret) for index, secret in enumerate(secrets)}


async def test_calls_into_one_named_session_queue_instead_of_interleaving(plain: HttpServer) -> None:
    step = (
        "import time\nsteps = globals().setdefault('steps', [])\nsteps.append('{who} start')\n"
        "time.sleep(0.5)\nsteps.append('{who} end')\nlen(steps)"
    )
    lengths: dict[str, str] = {}

    async def run(mode: str, who: str) -> None:
        async with http_client_for(plain.url, mode) as client:
            result = await client.call_tool("run_python", {"code": step.format(who=who), "session": "queue"})
            assert not result.is_error, text_of(result)
            lengths[who] = text_of(result)

    with anyio.fail_after(CALL_DEADLINE):
        async with anyio.create_task_group() as group:
            group.start_soon(run, "legacy", "a")
            group.start_soon(run, "auto", "b")
        async with http_client_for(plain.url, "auto") as client:
            final = await client.call_tool("run_python", {"code": "steps", "session": "queue"})
    assert sorted(lengths.values()) == ["2", "4"], lengths
    assert text_of(final) in (
        "['a start', 'a end', 'b start', 'b end']",
        "['b start', 'b end', 'a start', 'a end']",
    )


def worker_groups(server: HttpServer, kind: str) -> set[str]:
    """The server's live worker cgroups for sessions of one kind (``h_``: an MCP session's default)."""
    parents = cgroups.probe().parents
    return {path.name for parent in parents.values() for path in parent.glob(f"w-{server.bridge_pid}-*-{kind}*")}


async def test_a_legacy_clients_default_sandbox_closes_when_its_mcp_session_ends(plain: HttpServer) -> None:
    fail_unless(bool(cgroups.probe().parents), "this host gives us no cgroups, which show a worker's life")
    before = worker_groups(plain, "h_")
    async with http_client_for(plain.url, "legacy") as client:
        await client.call_tool("run_python", {"code": "1"})
        during = worker_groups(plain, "h_") - before
    assert len(during) == 1, during
    assert wait_until_gone(lambda: sorted(worker_groups(plain, "h_") & during)) == []


# --- guards --------------------------------------------------------------------------------------------


def initialize_body() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }


async def post_initialize(url: str, headers: dict[str, str]) -> httpx2.Response:
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx2.AsyncClient(timeout=patient(30.0)) as http:
        return await http.post(url, json=initialize_body(), headers={**base, **headers})


async def test_requests_without_the_right_bearer_token_get_401(guarded: HttpServer) -> None:
    missing = await post_initialize(guarded.url, {})
    wrong = await post_initialize(guarded.url, bearer("w" * 32))
    basic = await post_initialize(guarded.url, {"Authorization": f"Basic {TOKEN_A}"})
    right = await post_initialize(guarded.url, bearer(TOKEN_A))
    for refused in (missing, wrong, basic):
        assert refused.status_code == 401, refused.text
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert refused.json()["error"]["code"] == UNAUTHORIZED  # a JSON-RPC error, whose message clients show
        assert "bearer token" in refused.json()["error"]["message"]
    assert right.status_code == 200, right.text


@pytest.mark.parametrize("mode", MODES)
async def test_the_sdk_client_with_a_wrong_token_shows_why_it_was_refused(guarded: HttpServer, mode: str) -> None:
    """A 401 whose body was not a JSON-RPC error reached the SDK's user as "Server returned an error response"."""
    with pytest.raises(Exception) as caught:  # noqa: PT011 - what the SDK raises differs by era; the words matter
        async with http_client_for(guarded.url, mode, bearer("w" * 32)) as client:
            await client.call_tool("run_python", {"code": "1"})
    shown = repr(caught.value)
    assert "missing or wrong bearer token" in shown, shown


async def test_a_request_from_a_foreign_origin_gets_403(plain: HttpServer, guarded: HttpServer) -> None:
    evil = {"Origin": "http://evil.example"}
    unguarded = await post_initialize(plain.url, evil)
    with_token = await post_initialize(guarded.url, {**evil, **bearer(TOKEN_A)})
    local = await post_initialize(plain.url, {"Origin": f"http://127.0.0.1:{plain.port}"})
    assert unguarded.status_code == 403, unguarded.text
    assert with_token.status_code == 403, with_token.text
    assert "http://evil.example" in unguarded.json()["error"]["message"]
    assert local.status_code == 200, local.text


async def test_a_request_naming_a_foreign_host_is_refused_on_loopback(plain: HttpServer) -> None:
    rebound = await post_initialize(plain.url, {"Host": f"evil.example:{plain.port}"})
    local = await post_initialize(plain.url, {"Host": f"localhost:{plain.port}"})
    assert rebound.status_code == 421, rebound.text  # DNS rebinding: a page on evil.example resolved to us
    assert local.status_code == 200, local.text


async def test_the_sdk_client_works_with_a_token_and_fails_without_one(guarded: HttpServer) -> None:
    for mode in MODES:
        async with http_client_for(guarded.url, mode, bearer(TOKEN_B)) as client:
            answer = await client.call_tool("run_python", {"code": "'authorised'"})
        assert text_of(answer) == "'authorised'", mode
    # The SDK reports the 401 as an MCPError, wrapped in its task groups' exception groups.
    with pytest.raises((MCPError, ExceptionGroup)) as caught:
        async with http_client_for(guarded.url, "legacy", deadline=20) as client:
            await client.list_tools()
    assert any(isinstance(leaf, MCPError) for leaf in leaves(caught.value)), caught.value


def leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


async def test_with_tokens_each_principal_has_its_own_default_and_named_sessions(guarded: HttpServer) -> None:
    async with (
        http_client_for(guarded.url, "auto", bearer(TOKEN_A)) as alice,
        http_client_for(guarded.url, "auto", bearer(TOKEN_B)) as bob,
    ):
        await alice.call_tool("run_python", {"code": "mine = 'A'"})
        await bob.call_tool("run_python", {"code": "mine = 'B'"})
        await alice.call_tool("run_python", {"code": "plan = 'A plan'", "session": "shared-name"})
        alice_default = await alice.call_tool("run_python", {"code": "mine"})
        bob_default = await bob.call_tool("run_python", {"code": "mine"})
        bob_named = await bob.call_tool("run_python", {"code": "'plan' in globals()", "session": "shared-name"})
    async with http_client_for(guarded.url, "auto", bearer(TOKEN_A)) as alice_again:
        later = await alice_again.call_tool("run_python", {"code": "mine"})
        named_later = await alice_again.call_tool("run_python", {"code": "plan", "session": "shared-name"})
    assert text_of(alice_default) == "'A'"
    assert text_of(bob_default) == "'B'"
    assert text_of(bob_named).startswith("False"), text_of(bob_named)
    assert text_of(later) == "'A'", "a stateless client's default session belongs to its token"
    assert text_of(named_later) == "'A plan'"


async def test_with_tokens_one_session_header_names_a_separate_session_per_token(guarded: HttpServer) -> None:
    async with (
        http_client_for(guarded.url, "auto", {**bearer(TOKEN_A), **named("desk")}) as alice,
        http_client_for(guarded.url, "auto", {**bearer(TOKEN_B), **named("desk")}) as bob,
    ):
        await alice.call_tool("run_python", {"code": "desk_owner = 'A'"})
        bob_sees = await bob.call_tool("run_python", {"code": "'desk_owner' in globals()"})
        alice_sees = await alice.call_tool("run_python", {"code": "desk_owner"})
    assert text_of(bob_sees).startswith("False"), text_of(bob_sees)
    assert (alice_sees.is_error, text_of(alice_sees)) == (False, "'A'")


def test_listening_beyond_loopback_without_a_token_is_refused_before_binding() -> None:
    # Hold the port on loopback: should the server try to bind 0.0.0.0 anyway, it fails instead of exposing.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        port = str(holder.getsockname()[1])
        done = subprocess.run(
            [*serve_command(), "--transport", "http", "--host", "0.0.0.0", "--port", port],
            env=clean_environ(),
            capture_output=True,
            text=True,
            timeout=CALL_DEADLINE,
            check=False,
        )
    assert done.returncode == 125, done.stderr  # the bridge could not run: bad settings
    assert "MCP_BRIDGE_HTTP_TOKEN" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert "in use" not in done.stderr, "the server tried to bind before checking for a token"


# --- shutdown ------------------------------------------------------------------------------------------


async def test_sigterm_closes_every_sandbox_before_the_server_exits(tmp_path: Path) -> None:
    require_bubblewrap()
    parents = cgroups.probe().parents
    fail_unless(bool(parents), "this host gives us no cgroups, where each worker's group shows it was closed")
    server = HttpServer(tmp_path / "server.log", serve=REAL_SERVE).start()  # about the process: exec'd for real
    try:
        async with http_client_for(server.url, "auto") as client:
            answer = await client.call_tool("run_python", {"code": "'up'", "session": "until-sigterm"})
        pid = server.bridge_pid
        groups_while_running = [path for parent in parents.values() for path in parent.glob(f"w-{pid}-*")]
    finally:
        server.stop()
    assert text_of(answer) == "'up'"
    assert groups_while_running, "the worker's cgroup should exist while the server runs"
    left = [str(path) for parent in parents.values() for path in parent.glob(f"w-{pid}-*")]
    assert_no_orphans()
    assert left == [], (
        "after SIGTERM the server exited without closing its sessions (worker cgroups left behind); "
        f"log:\n{server.log_text()}"
    )
