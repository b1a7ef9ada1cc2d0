"""One sign-in shared by two face replicas, refreshed at once, against a real authorization server that rotates
refresh tokens and an EMULATED Kubernetes API (tests/support/kube_emulator.py) holding the sign-ins' Secret.

The authorization and MCP server is the SDK's own (tests/support/oauth_server.py): each refresh token is honoured
once, so two replicas refreshing with the same one leave one of them signed out. ``mcp-codemode login`` runs for
real (a subprocess with ``MCP_BRIDGE_SHARED_STATE=kubernetes`` and a kubeconfig that points at the emulator), and the
"browser" follows its address with httpx. Expiry is written into the stored record (as a day's wait would leave
it); nothing waits on a clock. What only a real cluster and provider prove is listed in docs/kubernetes.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import OAuthClientInformationFull

from mcp_codemode.runs.shared_state import SharedState, shared_state
from mcp_codemode.settings import Settings
from mcp_codemode.upstream.errors import UpstreamCallError
from mcp_codemode.upstream.model import ServerConfig
from mcp_codemode.upstream.servers.oauth import SignInRequired, StoredSignIn, bridge_auth, client_metadata
from mcp_codemode.upstream.servers.sign_ins import sign_in_key
from mcp_codemode.upstream.tools.directory import ToolDirectory
from tests.support import oauth_server
from tests.support.backends import sandbox_settings
from tests.support.clients import free_port
from tests.support.conformance_auth_client import sign_in
from tests.support.kube_deps import KUBE_TEST_DEPS_PROBLEM, require_kube_test_deps
from tests.support.patience import patient
from tests.support.zygote import launch_command

if not KUBE_TEST_DEPS_PROBLEM:
    from tests.support.kube_emulator import ClusterEmulator, emulated_cluster, shared_state_objects

pytestmark = [pytest.mark.anyio, pytest.mark.backend]  # an authorization server, a login process, loopback sockets
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}  # fmt: skip
ACCEPT = {"Accept": "application/json, text/event-stream"}
ECHOED = re.compile(r"access token #(\d+)")


# One authorization server, one emulated cluster and one `login` serve the module: starting them was most of each
# test's time. Each test starts from the stored sign-in as the one before left it, valid (every refresh stores the
# tokens it got), and moves its expiry into the past itself; the test that signs out comes last (pytest runs a
# file's tests in order, on one xdist worker: tests/conftest.py). The access token numbers the server counts are
# compared with each other, never with a count from the server's start.


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with oauth_server.running(free_port(), patience=patient(60)) as url:
        yield url


@pytest.fixture(scope="module")
async def cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[ClusterEmulator, Path]]:
    require_kube_test_deps()
    async with emulated_cluster(tmp_path_factory.mktemp("cluster")) as (emulator, kubeconfig):
        shared_state_objects(emulator)
        yield emulator, kubeconfig


def operator_env(tmp: Path, kubeconfig: Path) -> dict[str, str]:
    """An operator's own machine, pointed at the cluster: the kubernetes store and a kubeconfig."""
    return {**os.environ, "MCP_BRIDGE_STATE_DIR": str(tmp / "operator-state"), "MCP_BRIDGE_SHARED_STATE": "kubernetes",
            "MCP_BRIDGE_KUBECONFIG": str(kubeconfig)}  # fmt: skip


def settings_of(tmp: Path, kubeconfig: Path, name: str) -> Settings:
    return sandbox_settings(state_dir=tmp / f"state-{name}", kube_config=kubeconfig, shared_state="kubernetes")


@pytest.fixture(scope="module")
async def signed_in(
    tmp_path_factory: pytest.TempPathFactory, cluster: tuple[ClusterEmulator, Path], server_url: str
) -> tuple[ServerConfig, Path]:
    """``mcp-codemode login signed`` run as an operator would against the cluster, from their own machine: with the
    kubernetes store and a kubeconfig; the server's config as every replica has it."""
    _, kubeconfig = cluster
    tmp_path = tmp_path_factory.mktemp("operator")
    config_file = tmp_path / "servers.json"
    config_file.write_text(json.dumps({"mcpServers": {"signed": {"type": "http", "url": server_url}}}))
    env = operator_env(tmp_path, kubeconfig)
    command = launch_command("login", "signed", "--no-browser", "--no-discover", "--config", str(config_file))
    code = await anyio.to_thread.run_sync(sign_in, command, env)
    assert code == 0
    assert not (tmp_path / "operator-state" / "oauth").exists(), "login wrote files instead of the cluster's Secret"
    return (
        ServerConfig(name="signed", alias="signed", transport="http", url=server_url, source=str(config_file)),
        kubeconfig,
    )


async def expire(state: SharedState, config: ServerConfig) -> dict[str, Any]:
    """Move the stored access token's expiry into the past (as it is when the replicas next use it); its tokens."""
    record = StoredSignIn(state.sign_ins, sign_in_key(config))

    def expired(data: dict[str, Any]) -> dict[str, Any]:
        return data | {"tokens": data["tokens"] | {"expires_at": time.time() - 60}}

    return dict((await record.change(expired))["tokens"])


@contextlib.asynccontextmanager
async def replica(tmp: Path, kubeconfig: Path, name: str, config: ServerConfig) -> AsyncIterator[ToolDirectory]:
    """A face replica's upstream side, as the bridge builds it: its own state directory and API client, the
    kubernetes store handed to its tool directory (and so to the hub's connections)."""
    settings = settings_of(tmp, kubeconfig, name)
    state = shared_state(settings)
    try:
        async with ToolDirectory([config], settings, sign_ins=state.sign_ins) as directory:
            yield directory
    finally:
        await state.aclose()


async def echoed_token_number(directory: ToolDirectory) -> int:
    """Which access token the server issued signed this call (it refuses, quoting the number and, hidden, the token)."""
    with pytest.raises(UpstreamCallError) as refused:
        await directory.hub.call_tool("signed", "echo_authorization", {})
    found = ECHOED.search(str(refused.value))
    assert found, str(refused.value)
    assert "<hidden>" in str(refused.value)
    return int(found[1])


async def test_login_writes_the_clusters_secret_and_two_replicas_refreshing_at_once_both_stay_signed_in(
    tmp_path: Path, signed_in: tuple[ServerConfig, Path]
) -> None:
    config, kubeconfig = signed_in
    state = shared_state(settings_of(tmp_path, kubeconfig, "test"))
    try:
        login_tokens = await expire(state, config)
        async with replica(tmp_path, kubeconfig, "a", config) as a, replica(tmp_path, kubeconfig, "b", config) as b:
            first = await asyncio.gather(echoed_token_number(a), echoed_token_number(b))
            # One refresh: both replicas' calls were signed with the one token it got (two refreshes with the one
            # refresh token would have left one replica signed out, and two tokens would have two numbers).
            assert first[0] == first[1], first
            again = await asyncio.gather(echoed_token_number(a), echoed_token_number(b))
            assert list(again) == list(first)
        stored = await StoredSignIn(state.sign_ins, sign_in_key(config)).get_tokens()
        assert stored is not None and stored.refresh_token not in (None, login_tokens["refresh_token"])
        # A third replica started later, after the token expired again, refreshes once more from what is stored:
        # the next token the server issued.
        await expire(state, config)
        async with replica(tmp_path, kubeconfig, "c", config) as c:
            assert await echoed_token_number(c) == first[0] + 1
    finally:
        await state.aclose()


@pytest.fixture
async def expired_pair(
    tmp_path: Path, signed_in: tuple[ServerConfig, Path]
) -> AsyncIterator[tuple[SharedState, SharedState]]:
    """Two replicas' stores, the signed-in token expired."""
    config, kubeconfig = signed_in
    states = [shared_state(settings_of(tmp_path, kubeconfig, name)) for name in ("a", "b")]
    try:
        await expire(states[0], config)
        yield states[0], states[1]
    finally:
        for state in states:
            await state.aclose()


class Counting:
    """How many token requests went to the authorization server (httpx2 event hooks see the auth flow's too)."""

    def __init__(self) -> None:
        self.refreshes = 0

    async def __call__(self, request: httpx2.Request) -> None:
        if request.url.path.endswith("/token"):
            self.refreshes += 1


async def two_providers_refreshing_at_once(
    state_a: SharedState, state_b: SharedState, config: ServerConfig, make: Any
) -> tuple[list[Any], int]:
    """Two providers built by ``make(store)`` on one sign-in, both holding its (expired) tokens in memory, as two
    replicas do after an hour of use; then a request each, at once. (The answers or errors, the refreshes sent.)"""
    providers = [await make(state.sign_ins) for state in (state_a, state_b)]
    for provider in providers:
        await provider._initialize()  # what each held since its connection started: the same tokens
    counting = Counting()
    assert config.url is not None

    async def post(provider: OAuthClientProvider) -> int:
        async with httpx2.AsyncClient(auth=provider, event_hooks={"request": [counting]}) as http:
            return (await http.post(config.url or "", json=INITIALIZE, headers=ACCEPT)).status_code

    outcomes = await asyncio.gather(*(post(provider) for provider in providers), return_exceptions=True)
    return list(outcomes), counting.refreshes


async def test_with_turns_one_replica_refreshes_and_the_other_uses_what_it_stored(
    signed_in: tuple[ServerConfig, Path], expired_pair: tuple[SharedState, SharedState]
) -> None:
    config, _ = signed_in

    async def make(store: Any) -> Any:
        return await bridge_auth(config, store)

    outcomes, refreshes = await two_providers_refreshing_at_once(expired_pair[0], expired_pair[1], config, make)
    assert outcomes == [200, 200] and refreshes == 1
    record = await expired_pair[1].sign_ins.read(sign_in_key(config))
    assert record is not None and "refreshing" not in record, "the turn ended with the stored refresh"


async def test_without_turns_the_hazard_is_real_one_replica_loses_the_sign_in(
    signed_in: tuple[ServerConfig, Path], expired_pair: tuple[SharedState, SharedState]
) -> None:
    """The control: the SDK's own provider on the same store (told the expiry, as the bridge's was before turns):
    both refresh with the one refresh token; the server honours it once, and the other replica must sign in again."""
    config, _ = signed_in

    class ExpiryOnly(OAuthClientProvider):
        async def _initialize(self) -> None:
            await super()._initialize()
            storage = self.context.storage
            assert isinstance(storage, StoredSignIn)
            self.context.token_expiry_time = storage.expires_at()

    async def cannot_sign_in(url: str) -> None:
        raise SignInRequired(config.name)

    async def cannot_wait() -> Any:
        raise SignInRequired(config.name)

    async def make(store: Any) -> Any:
        storage = StoredSignIn(store, sign_in_key(config))
        client = OAuthClientInformationFull.model_validate((await storage.load())["client"])
        metadata = client_metadata(str(client.redirect_uris[0]) if client.redirect_uris else "http://x")
        return ExpiryOnly(
            config.url or "", metadata, storage, redirect_handler=cannot_sign_in, callback_handler=cannot_wait
        )

    outcomes, refreshes = await two_providers_refreshing_at_once(expired_pair[0], expired_pair[1], config, make)
    assert refreshes == 2
    assert sorted(type(outcome).__name__ for outcome in outcomes) == ["SignInRequired", "int"], outcomes


async def test_logout_from_the_cluster_signs_every_replica_out(
    tmp_path: Path, signed_in: tuple[ServerConfig, Path]
) -> None:
    """(It signs out: the last test of the module.)"""
    config, kubeconfig = signed_in
    env = operator_env(tmp_path, kubeconfig)
    command = launch_command("logout", "signed", "--no-discover", "--config", config.source)
    done = await anyio.run_process(command, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert b"Signed out of signed" in done.stdout and b"Secret mcp-codemode/mcp-codemode-oauth" in done.stdout
    async with replica(tmp_path, kubeconfig, "a", config) as a:
        with pytest.raises(Exception, match=r"run `mcp-codemode login signed` once"):
            await a.hub.call_tool("signed", "whoami", {})
