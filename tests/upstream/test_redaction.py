"""What a failing upstream server's error texts carry into the sandbox, and what stays for the bridge's user.

Sandboxed code may see why a server failed, but never a value of the server's ``env`` or ``headers`` (a server
that prints its own token to stderr is the case that matters), nor host paths: the server's log file, the config
file, the ``PATH`` searched, the URL. The bridge's user (``mcp-codemode servers``, the logs) keeps the paths; only
the server's own log file and the bridge's log keep the secrets themselves.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.auth import OAuthToken

from mcp_codemode.cli.servers_report import servers_report
from mcp_codemode.runs.bridge import Bridge
from mcp_codemode.telemetry.logs import SECRETS
from mcp_codemode.upstream.errors import HIDDEN, ServerUnavailable, secret_args, secret_values
from mcp_codemode.upstream.model import Discovery, ServerConfig
from mcp_codemode.upstream.servers.hub import Hub
from mcp_codemode.upstream.servers.oauth import StoredSignIn, configured_client
from mcp_codemode.upstream.servers.redaction import redaction_for
from mcp_codemode.upstream.servers.sign_ins import FileSignIns, sign_in_key
from tests.support.backends import sandbox_settings
from tests.support.cells import closed_port, private_state_dir, reported, run
from tests.support.clients import require_bubblewrap

pytestmark = pytest.mark.backend

SECRET = "s3cr3t-token-4d1c9b77"
PATH_SECRET = "path-secret-5e02"
URL_SECRET = "url-secret-a83f11"
HEADER_SECRET = "header-secret-1b6d"


def failing(config_file: Path) -> ServerConfig:
    """A server that prints its own credential to stderr and exits: the case that must not leak."""
    return ServerConfig(
        name="leaky",
        alias="leaky",
        transport="stdio",
        source=str(config_file),
        command="/bin/sh",
        args=("-c", 'echo "starting with token=$LEAKY_TOKEN" >&2; exit 1'),
        env={"LEAKY_TOKEN": SECRET},
    )


def missing(config_file: Path) -> ServerConfig:
    return ServerConfig(
        name="missing",
        alias="missing",
        transport="stdio",
        source=str(config_file),
        command="no-such-mcp-server-anywhere",
        env={"PATH": f"/opt/{PATH_SECRET}/bin"},
    )


def remote(config_file: Path) -> ServerConfig:
    return ServerConfig(
        name="remote",
        alias="remote",
        transport="http",
        source=str(config_file),
        url=f"http://127.0.0.1:{closed_port()}/mcp?api_key={URL_SECRET}",
        headers={"Authorization": f"Bearer {HEADER_SECRET}"},
    )


SANDBOX_CODE = """
from mcp._rpc import rpc
seen = {}
for name in ("leaky", "missing", "remote"):
    try:
        rpc.request("call", server=name, tool="anything", arguments={})
    except runtime.MCPError as exc:
        seen[name] = [type(exc).__name__, exc.message]
seen["servers"] = rpc.request("servers")
seen["search"] = rpc.request("search", query="anything")
report(seen)
"""


def test_the_sandbox_sees_hidden_secrets_and_no_host_paths_while_the_host_keeps_the_detail(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    require_bubblewrap()
    config_file = tmp_path / "clients" / "mcp.json"
    servers = (failing(config_file), missing(config_file), remote(config_file))

    async def body() -> tuple[dict[str, Any], dict[str, Any], Path, dict[str, str]]:
        with private_state_dir() as state:
            settings = sandbox_settings(runtime="bubblewrap", state_dir=state)
            async with Bridge(settings, Discovery(servers=servers)) as bridge:
                assert bridge.backend_name == "bubblewrap", bridge.backend_error
                seen = reported(await run(bridge, SANDBOX_CODE, "redaction"))
                details = {name: bridge.hub.state(name).detail for name in ("leaky", "missing", "remote")}
                log_file = bridge.hub.state("leaky").log_file
                assert log_file is not None
                server_log = log_file.read_text()
            report = await servers_report(settings.replace(state_dir=state), Discovery(servers=servers))
            return seen, report.as_json(), Path(server_log), details

    caplog.handler.addFilter(SECRETS)  # as the command line puts it on the bridge's log handler
    with caplog.at_level(logging.INFO):
        seen, report, server_log, details = asyncio.run(body())
    shown = json.dumps(seen)

    # The sandbox: each failure is explained, with every secret hidden and no host path.
    assert seen["leaky"][0] == "ServerUnavailable"
    assert f"token={HIDDEN}" in seen["leaky"][1], seen["leaky"]
    assert f"not found on PATH ({HIDDEN})" in seen["missing"][1], seen["missing"]
    assert "could not connect to its URL" in seen["remote"][1], seen["remote"]
    for secret in (SECRET, PATH_SECRET, URL_SECRET, HEADER_SECRET, str(config_file), str(tmp_path), ".log"):
        assert secret not in shown, secret

    # The bridge's user: paths kept (config file, URL, log), secrets still hidden.
    assert f"give its full path in {config_file}" in details["missing"]
    assert "127.0.0.1" in details["remote"] and f"api_key={HIDDEN}" in details["remote"]
    rows = {row["name"]: row for row in report["servers"]}
    assert f"token={HIDDEN}" in rows["leaky"]["detail"] and "Its log: " in rows["leaky"]["detail"]
    assert f"not found on PATH ({HIDDEN})" in rows["missing"]["detail"]
    assert str(config_file) in rows["missing"]["detail"]
    shown_to_user = json.dumps([row["detail"] for row in rows.values()]) + json.dumps(details)
    for secret in (SECRET, PATH_SECRET, URL_SECRET, HEADER_SECRET):
        assert secret not in shown_to_user, secret

    # The server's own log file (private to the bridge's user) keeps the whole story; the bridge's log says where,
    # with the configured secret hidden like every log line (telemetry/logs.py's filter; issue 34, item 3).
    assert f"token={SECRET}" in str(server_log)
    assert any(f"token={HIDDEN}" in record.getMessage() for record in caplog.records)
    assert not [record for record in caplog.records if SECRET in record.getMessage()]


def test_secrets_given_to_the_hub_are_hidden_from_every_server_text(tmp_path: Path) -> None:
    """The bridge's own secrets (its HTTP tokens, credential-like variables) are hidden wherever a server says them."""
    bridge_secret = "bridge-own-secret-9931"
    chatty = ServerConfig(
        name="chatty",
        alias="chatty",
        transport="stdio",
        source="--config /etc/somewhere/mcp.json",
        command="/bin/sh",
        args=("-c", f'echo "the bridge said {bridge_secret}" >&2; exit 2'),
    )

    async def body() -> ServerUnavailable:
        async with Hub([chatty], log_dir=tmp_path, secrets=[bridge_secret]) as hub:
            with pytest.raises(ServerUnavailable) as caught:
                await hub.tools("chatty")
            state = hub.state("chatty")
            assert bridge_secret not in state.error + state.detail
            return caught.value

    error = asyncio.run(body())
    assert f"the bridge said {HIDDEN}" in str(error) and f"the bridge said {HIDDEN}" in error.host_message
    assert str(tmp_path) not in str(error) and str(tmp_path) in error.host_message


def test_what_counts_as_a_secret() -> None:
    env = {"GITHUB_TOKEN": "ghp_abcdef", "DB_PASSWORD": "hunter22", "HOME": "/root", "API_KEY": "k", "LANG": "C"}
    assert set(secret_values(env)) == {"ghp_abcdef", "hunter22"}  # "k" is too short to hide anywhere
    args = ["--port", "8080", "--token", "tok-1234", "--api-key=key-5678", "--verbose", "--password"]
    assert secret_args(args) == ("tok-1234", "key-5678")
    config = dataclasses.replace(remote(Path("/x/mcp.json")), args=())
    redaction = redaction_for(config, Path("/state/logs/remote.log"), ["extra-secret"])
    text = f"{config.url} via /state/logs/remote.log in /x/mcp.json: Bearer {HEADER_SECRET} extra-secret"
    assert redaction.for_sandbox(text) == f"its URL via its log file in its config file: {HIDDEN} {HIDDEN}"
    host = redaction.for_host(text)
    assert "/state/logs/remote.log" in host and "/x/mcp.json" in host and f"api_key={HIDDEN}" in host
    assert URL_SECRET not in host and HEADER_SECRET not in host and "extra-secret" not in host


def test_stored_oauth_secrets_are_hidden_and_a_refreshed_token_from_the_moment_it_is_stored(tmp_path: Path) -> None:
    """The client secret and every token ``login`` stored (and the SDK replaced at a refresh), old ones included."""
    config = ServerConfig(name="remote", alias="remote", transport="http", url="https://example.test/mcp", source="t")
    store = StoredSignIn(FileSignIns(tmp_path / "oauth"), sign_in_key(config))
    redaction = redaction_for(config, None, sign_ins=FileSignIns(tmp_path / "oauth"))
    assert redaction.for_sandbox("nothing stored yet") == "nothing stored yet"
    asyncio.run(store.keep_client(configured_client("client-id-1", "client-secret-77", "http://127.0.0.1:5/callback")))
    asyncio.run(store.set_tokens(OAuthToken(access_token="access-one-11", refresh_token="refresh-one-22")))
    first = "Bearer access-one-11, refresh-one-22, client-secret-77"
    assert redaction.for_sandbox(first) == f"Bearer {HIDDEN}, {HIDDEN}, {HIDDEN}"
    asyncio.run(store.set_tokens(OAuthToken(access_token="access-two-33", refresh_token="refresh-two-44")))
    later = "now access-two-33 and refresh-two-44; before access-one-11"
    assert redaction.for_host(later) == f"now {HIDDEN} and {HIDDEN}; before {HIDDEN}"
