"""Signing in to a remote server with OAuth 2.1, against a real authorization server on 127.0.0.1.

The server is the MCP SDK's own authorization and resource server (tests/support/oauth_server.py): discovery,
dynamic client registration, PKCE, codes, refresh tokens and 401s are the SDK's, only the in-memory store and the
at-once consent are ours. The "browser" is httpx following the printed address, as a person's would. What only a
real provider can show (a login page, consent screens, a provider's own token lifetimes) is not checked here.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.support import oauth_server
from tests.support.cli_here import cli_here
from tests.support.clients import free_port, require_bubblewrap
from tests.support.conformance_auth_client import start_login
from tests.support.patience import patient
from tests.support.zygote import launch_command

pytestmark = pytest.mark.backend  # a bridge, a sandbox and an HTTP server per test

ROOT = Path(__file__).resolve().parents[2]
WHOAMI = """
try:
    print(await mcp_signed.whoami())
except runtime.MCPError as exc:
    print(type(exc).__name__, exc.message)
"""


PRECONFIGURED = "preconfigured-client"


@pytest.fixture
def callback_port() -> int:
    """The loopback port the preconfigured client's redirect URI names (as a provider's admin registers it)."""
    return free_port()


@pytest.fixture
def token_seconds() -> int | None:
    """How long the server's access tokens live (None: an hour); a test parametrizes it to see refreshes."""
    return None


@pytest.fixture
def authorization_server(callback_port: int, token_seconds: int | None) -> Iterator[str]:
    """The SDK's authorization + MCP server on a free loopback port, with one client registered beforehand; its
    MCP endpoint's URL."""
    redirect = f"http://127.0.0.1:{callback_port}/callback"
    with oauth_server.running(free_port(), (PRECONFIGURED, redirect), token_seconds, patient(60)) as url:
        yield url


@pytest.fixture
def home(tmp_path: Path, authorization_server: str) -> dict[str, str]:
    """A config naming the server ``signed``, and an environment with a private state directory."""
    require_bubblewrap()
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"signed": {"type": "http", "url": authorization_server}}}))
    state = tmp_path / "state"
    return {**os.environ, "MCP_BRIDGE_STATE_DIR": str(state), "CONFIG": str(config), "STATE": str(state)}


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``mcp-codemode ARGS`` in this process (tests/support/cli_here.py): ``login`` (``sign_in``) is the command
    that runs as a process of its own here, and the tokens it stores reach these commands only through the store."""
    return cli_here(env, *args, "--no-discover", "--config", env["CONFIG"])


def sign_in(env: dict[str, str], *options: str) -> str:
    """Run ``login`` as a person would: open the printed address (here with httpx), follow the redirect home."""
    command = launch_command("login", "signed", "--no-browser", *options, "--no-discover", "--config", env["CONFIG"])
    login, seen, address = start_login(command, env)
    assert address is not None and address.startswith("http://") and "/authorize?" in address, seen
    consent = httpx2.get(address, follow_redirects=False, timeout=patient(30))
    assert consent.status_code in (302, 303, 307), consent.text
    back = consent.headers["location"]
    assert back.startswith("http://127.0.0.1:") and "/callback?code=" in back, back
    page = httpx2.get(back, timeout=patient(30))
    assert "Signed in" in page.text
    out, err = login.communicate(timeout=patient(120))
    assert login.returncode == 0, seen + out + err
    return seen + out + err


def token_file(env: dict[str, str]) -> Path:
    files = list((Path(env["STATE"]) / "oauth").glob("signed-*.json"))
    assert len(files) == 1, files
    return files[0]


def everything_written(env: dict[str, str]) -> str:
    """Every log and audit file the bridge wrote under its state directory, but the token store."""
    state = Path(env["STATE"])
    return "".join(
        path.read_text(errors="replace")
        for path in state.rglob("*")
        if path.is_file() and "oauth" not in path.parts and path.suffix in (".log", ".jsonl")
    )


def test_login_once_then_the_bridge_signs_its_calls_refreshes_and_logout_forgets(home: dict[str, str]) -> None:
    before = cli(home, "run", "-c", WHOAMI)
    assert before.returncode == 0, before.stderr
    assert before.stdout.startswith("ServerUnavailable"), before.stdout
    assert "run `mcp-codemode login signed` once" in before.stdout, before.stdout

    said = sign_in(home)
    assert "Signed in to signed." in said
    stored = token_file(home)
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600 and stat.S_IMODE(stored.parent.stat().st_mode) == 0o700
    tokens = json.loads(stored.read_text())["tokens"]
    secrets: tuple[str, ...] = (tokens["access_token"], tokens["refresh_token"])
    assert not any(secret in said for secret in secrets), "login printed a token"

    signed = cli(home, "run", "-c", WHOAMI)
    assert signed.returncode == 0 and signed.stdout.startswith("{'result': 'signed by client "), signed
    assert "1 client(s) registered dynamically" in signed.stdout, signed.stdout
    listed = cli(home, "servers", "--json")
    assert [row["signed_in"] for row in json.loads(listed.stdout)["servers"]] == [True], listed.stdout
    assert "signed is signed in (OAuth)" in cli(home, "servers").stdout

    # The access token has expired (as stored tokens have, a day later): the bridge refreshes it and the call goes.
    data = json.loads(stored.read_text())
    assert data["tokens"]["expires_at"] > time.time()
    data["tokens"]["expires_at"] = time.time() - 60
    stored.write_text(json.dumps(data))
    refreshed = cli(home, "run", "-c", WHOAMI)
    assert refreshed.stdout.startswith("{'result': 'signed by client "), refreshed
    renewed = json.loads(stored.read_text())["tokens"]
    assert renewed["access_token"] != tokens["access_token"] and renewed["expires_at"] > time.time()
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    secrets = (*secrets, renewed["access_token"], renewed["refresh_token"])
    written = everything_written(home) + before.stdout + before.stderr + signed.stdout + signed.stderr
    written += refreshed.stdout + refreshed.stderr + listed.stdout
    assert not any(secret in written for secret in secrets), "a token reached a log, the audit log or an output"

    out = cli(home, "logout", "signed")
    assert out.returncode == 0 and "Signed out of signed" in out.stdout
    assert not stored.exists()
    after = cli(home, "run", "-c", WHOAMI)
    assert "run `mcp-codemode login signed` once" in after.stdout, after.stdout


# Two calls to a server whose error quotes the credentials it was sent, with the access token's lifetime (3 s) between
# them: the second call is signed with a token refreshed inside this one bridge.
ECHO_TWICE = """
import time
for round in (1, 2):
    try:
        await mcp_signed.echo_authorization()
    except runtime.MCPError as exc:
        print(exc.message)
    if round == 1:
        time.sleep(4)
"""
ECHOED = re.compile(r"refused Authorization: Bearer <hidden> \(access token #(\d+); refresh token: <hidden>\)$")


@pytest.mark.parametrize("token_seconds", [3])
def test_a_server_that_quotes_the_stored_tokens_in_an_error_shows_sandboxed_code_none_even_after_a_refresh(
    home: dict[str, str],
) -> None:
    sign_in(home)
    signed_in_with = json.loads(token_file(home).read_text())["tokens"]
    ran = cli(home, "run", "-c", ECHO_TWICE)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert len(lines) == 2 and all(ECHOED.search(line) for line in lines), ran.stdout
    first, second = (int(ECHOED.search(line)[1]) for line in lines)  # type: ignore[index]
    assert second > first, "the second call was not signed with a refreshed token"
    now = json.loads(token_file(home).read_text())["tokens"]
    assert now["access_token"] != signed_in_with["access_token"]
    secrets = {
        signed_in_with["access_token"],
        signed_in_with["refresh_token"],
        now["access_token"],
        now["refresh_token"],
    }
    written = ran.stdout + ran.stderr + everything_written(home)
    assert not any(secret in written for secret in secrets), "a stored token reached the sandbox, a log or the output"


def test_login_names_what_is_wrong_with_the_server_it_is_given(home: dict[str, str]) -> None:
    unknown = cli(home, "login", "nope")
    assert unknown.returncode == 125 and "no configured server is called 'nope'" in unknown.stderr
    assert "use one of the remote servers found: signed" in unknown.stderr
    assert cli(home, "logout", "signed").stdout.startswith("Not signed in to signed: nothing to delete.")


def test_login_with_a_client_id_the_admin_registered_uses_it_and_registers_nothing(
    home: dict[str, str], callback_port: int
) -> None:
    refused = cli(home, "login", "signed", "--client-id", PRECONFIGURED)
    assert refused.returncode == 125 and "--client-id needs --port" in refused.stderr, refused.stderr
    sign_in(home, "--client-id", PRECONFIGURED, "--port", str(callback_port))
    signed = cli(home, "run", "-c", WHOAMI)
    assert f"signed by client {PRECONFIGURED}; 0 client(s) registered dynamically" in signed.stdout, signed
    # Signing in again later finds the configured client and its port without being told.
    sign_in(home)
    again = cli(home, "run", "-c", WHOAMI)
    assert f"signed by client {PRECONFIGURED}; 0 client(s) registered dynamically" in again.stdout, again
