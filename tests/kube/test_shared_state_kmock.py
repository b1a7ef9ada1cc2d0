"""Sign-ins and saved tools shared by face replicas, against an EMULATED Kubernetes API, through the real client.

Not a cluster (tests/support/kube_emulator.py): the emulator stores the Secret and ConfigMaps, authorizes each request
against the Role kustomize renders from deploy/kubernetes/base (the sign-ins' Secret by name), and applies a patch
that names a resourceVersion only to that version, one at a time, as etcd's compare-and-swap does. Each "replica"
here is a store with its own API client, as two face pods have. What is real: kubernetes_asyncio's requests, the
conflicts (409) and the way the stores meet them. Nothing here waits on a clock.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.auth import OAuthToken

from mcp_codemode.cluster import naming
from mcp_codemode.cluster.api import KubeApiError
from mcp_codemode.runs.saved_tools import MAX_SOURCE_CHARS, SavedToolProblem, SavedToolsUnavailable
from mcp_codemode.runs.shared_state import SharedState, shared_state
from mcp_codemode.upstream.model import ServerConfig
from mcp_codemode.upstream.servers.oauth import StoredSecrets, StoredSignIn
from mcp_codemode.upstream.servers.sign_ins import sign_in_key
from tests.support.backends import sandbox_settings
from tests.support.kube_deps import KUBE_TEST_DEPS_PROBLEM, require_kube_test_deps

if not KUBE_TEST_DEPS_PROBLEM:
    from tests.support.kube_emulator import ClusterEmulator, emulated_cluster, shared_state_objects
    from tests.support.kube_manifests import grants_without

pytestmark = [pytest.mark.anyio, pytest.mark.backend]  # a real loopback server and client
NAMESPACE = "mcp-codemode"
DNS_1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[ClusterEmulator, Path]]:
    require_kube_test_deps()
    async with emulated_cluster(tmp_path) as (emulator, kubeconfig):
        shared_state_objects(emulator)  # the empty sign-ins Secret, as `kubectl apply -k deploy/kubernetes/base`
        yield emulator, kubeconfig


@pytest.fixture
async def replicas(cluster: tuple[ClusterEmulator, Path]) -> AsyncIterator[tuple[SharedState, SharedState]]:
    """Two replicas' stores, each with its own API client."""
    _, kubeconfig = cluster
    pair = [shared_state(sandbox_settings(kube_config=kubeconfig, shared_state="kubernetes")) for _ in range(2)]
    try:
        yield pair[0], pair[1]
    finally:
        for state in pair:
            await state.aclose()


def remote(name: str, url: str = "https://docs.example.com/mcp") -> ServerConfig:
    return ServerConfig(name=name, alias="x", transport="http", source="test", url=url)


def stored_secret(emulator: ClusterEmulator) -> dict[str, Any]:
    (secret,) = [o.raw for (kind, _, name), o in emulator.objects.items()
                 if kind.plural == "secrets" and name == naming.SIGN_INS_SECRET and not o.deleted]  # fmt: skip
    return dict(secret)


def tool_objects(emulator: ClusterEmulator) -> list[dict[str, Any]]:
    return [o.raw for (kind, _, _), o in emulator.objects.items() if kind.plural == "configmaps" and not o.deleted]


# ------------------------------------------------------------------------------------------------ sign-ins


def logged(record: dict[str, Any], entry: str) -> dict[str, Any]:
    return record | {"log": [*record.get("log", []), entry]}


async def test_two_replicas_changing_one_sign_in_at_once_lose_no_change(
    cluster: tuple[ClusterEmulator, Path], replicas: tuple[SharedState, SharedState]
) -> None:
    """Each change reads, edits and patches on the version it read; a 409 reads again. 2 x 10 changes, all kept."""
    emulator, _ = cluster
    key = sign_in_key(remote("docs"))
    rounds = 10

    async def append(state: SharedState, who: str) -> None:
        sign_in = StoredSignIn(state.sign_ins, key)
        for n in range(rounds):
            await sign_in.change(functools.partial(logged, entry=f"{who}{n}"))

    patches_before = len(emulator.patch_types)
    await asyncio.gather(append(replicas[0], "a"), append(replicas[1], "b"))
    log = (await replicas[1].sign_ins.read(key) or {})["log"]
    assert sorted(log) == sorted([f"a{n}" for n in range(rounds)] + [f"b{n}" for n in range(rounds)])
    assert [entry for entry in log if entry.startswith("a")] == [f"a{n}" for n in range(rounds)]  # in order
    assert len(emulator.patch_types) - patches_before >= 2 * rounds
    assert set(emulator.patch_types) == {"application/merge-patch+json"}


async def test_sign_ins_of_different_servers_written_at_once_are_both_kept(
    cluster: tuple[ClusterEmulator, Path], replicas: tuple[SharedState, SharedState]
) -> None:
    """One Secret holds every server: a patch that lost to another server's (409) is made again on the new version."""
    emulator, _ = cluster
    configs = [remote("docs"), remote("tickets", "https://tickets.example.com/mcp")]

    async def refresh(state: SharedState, config: ServerConfig) -> None:
        sign_in = StoredSignIn(state.sign_ins, sign_in_key(config))
        for n in range(8):
            await sign_in.set_tokens(OAuthToken(access_token=f"{config.name}-{n}", token_type="Bearer", expires_in=60))

    await asyncio.gather(refresh(replicas[0], configs[0]), refresh(replicas[1], configs[1]))
    for config in configs:
        tokens = await StoredSignIn(replicas[0].sign_ins, sign_in_key(config)).get_tokens()
        assert tokens is not None and tokens.access_token == f"{config.name}-7"
    data = stored_secret(emulator)["data"]
    assert set(data) == {sign_in_key(config) for config in configs}
    record = json.loads(base64.b64decode(data[sign_in_key(configs[0])]))
    assert record["tokens"]["access_token"] == "docs-7" and record["tokens"]["expires_at"] > 0


async def test_a_refresh_on_one_replica_is_what_the_other_adopts_instead_of_refreshing(
    replicas: tuple[SharedState, SharedState],
) -> None:
    """Both hold the same expired tokens; one takes the turn and stores its refresh; the other, asking for the turn
    with the old tokens, is handed the new ones (and its redaction hides them from then on)."""
    key = sign_in_key(remote("docs"))
    a, b = StoredSignIn(replicas[0].sign_ins, key), StoredSignIn(replicas[1].sign_ins, key)
    await a.set_tokens(OAuthToken(access_token="old-access", refresh_token="old-refresh", token_type="Bearer"))
    held = {"access_token": "old-access", "refresh_token": "old-refresh"}
    assert await a.take_turn(held, "replica-a") is None  # a may refresh
    turn = (await b.load())["refreshing"]
    assert turn["by"] == "replica-a"
    hidden = StoredSecrets(replicas[1].sign_ins, key)

    async def refresh_on_a() -> None:
        await a.set_tokens(OAuthToken(access_token="new-access", refresh_token="new-refresh", token_type="Bearer"))

    adopted, _ = await asyncio.gather(b.take_turn(held, "replica-b"), refresh_on_a())  # b waits for a's outcome
    assert adopted is not None and adopted["tokens"]["access_token"] == "new-access"
    assert "refreshing" not in adopted, "storing the refresh ends the turn"
    assert {"new-access", "new-refresh"} <= set(hidden())


async def test_a_turn_given_back_after_a_failed_refresh_passes_to_the_next_replica(
    replicas: tuple[SharedState, SharedState],
) -> None:
    key = sign_in_key(remote("docs"))
    a, b = StoredSignIn(replicas[0].sign_ins, key), StoredSignIn(replicas[1].sign_ins, key)
    await a.set_tokens(OAuthToken(access_token="x", refresh_token="r", token_type="Bearer"))
    held = {"access_token": "x", "refresh_token": "r"}
    assert await a.take_turn(held, "replica-a") is None
    waiting = asyncio.ensure_future(b.take_turn(held, "replica-b"))
    await a.end_turn("replica-a")
    assert await waiting is None
    assert (await a.load())["refreshing"]["by"] == "replica-b"


async def test_logout_on_one_replica_signs_every_replica_out(replicas: tuple[SharedState, SharedState]) -> None:
    key = sign_in_key(remote("docs"))
    await StoredSignIn(replicas[0].sign_ins, key).set_tokens(OAuthToken(access_token="x", token_type="Bearer"))
    assert await StoredSignIn(replicas[1].sign_ins, key).signed_in()
    assert await StoredSignIn(replicas[1].sign_ins, key).forget()
    assert not await StoredSignIn(replicas[0].sign_ins, key).signed_in()
    assert not await StoredSignIn(replicas[0].sign_ins, key).forget()


async def test_server_names_give_valid_and_distinct_keys_of_the_secret(
    replicas: tuple[SharedState, SharedState],
) -> None:
    names = ["docs", "../docs", "docs/..", "d/o/c/s", "ドキュメント", "döcs", "docs ", "x" * 300, ".", ".."]
    configs = [remote(name) for name in names] + [remote("docs", "https://elsewhere.example.com/mcp")]
    keys = [sign_in_key(config) for config in configs]
    assert all(SECRET_KEY.fullmatch(key) and key not in (".", "..") for key in keys), keys
    assert len(set(keys)) == len(keys), "two servers (or one name at two URLs) would share tokens"
    for n, key in enumerate(keys):
        await StoredSignIn(replicas[0].sign_ins, key).set_tokens(OAuthToken(access_token=f"t{n}", token_type="Bearer"))
    for n, key in enumerate(keys):
        tokens = await StoredSignIn(replicas[1].sign_ins, key).get_tokens()
        assert tokens is not None and tokens.access_token == f"t{n}"


async def test_sign_ins_that_would_not_fit_in_the_secret_are_refused_naming_the_largest(
    replicas: tuple[SharedState, SharedState],
) -> None:
    key = sign_in_key(remote("docs"))
    huge = OAuthToken(access_token="a" * (1 << 20), token_type="Bearer")
    with pytest.raises(KubeApiError, match=r"would not fit in Secret mcp-codemode/mcp-codemode-oauth") as caught:
        await StoredSignIn(replicas[0].sign_ins, key).set_tokens(huge)
    assert key in str(caught.value) and "mcp-codemode logout SERVER" in (caught.value.fix or "")


async def test_a_missing_secret_is_reported_with_the_command_that_creates_it(
    cluster: tuple[ClusterEmulator, Path],
) -> None:
    emulator, kubeconfig = cluster
    secrets = emulator.declare("", "v1", naming.SECRETS)
    emulator.objects[secrets, NAMESPACE, naming.SIGN_INS_SECRET].delete()
    state = shared_state(sandbox_settings(kube_config=kubeconfig, shared_state="kubernetes"))
    try:
        with pytest.raises(KubeApiError, match=r"Secret 'mcp-codemode-oauth' that holds the sign-ins") as caught:
            await StoredSignIn(state.sign_ins, "docs-0").signed_in()
    finally:
        await state.aclose()
    assert "kubectl create secret generic mcp-codemode-oauth -n mcp-codemode" in (caught.value.fix or "")


async def test_a_role_that_cannot_patch_the_sign_ins_refuses_a_refresh_naming_the_role_line(
    cluster: tuple[ClusterEmulator, Path], tmp_path: Path
) -> None:
    emulator, kubeconfig = cluster
    emulator.grants = grants_without(tmp_path, "secrets", "patch")
    state = shared_state(sandbox_settings(kube_config=kubeconfig, shared_state="kubernetes"))
    try:
        sign_in = StoredSignIn(state.sign_ins, "docs-0")
        assert not await sign_in.signed_in()  # get is still granted
        with pytest.raises(KubeApiError, match=r"RBAC forbids this bridge to patch secrets") as caught:
            await sign_in.set_tokens(OAuthToken(access_token="x", token_type="Bearer"))
    finally:
        await state.aclose()
    fix = caught.value.fix or ""
    assert 'resources: ["secrets"], resourceNames: ["mcp-codemode-oauth"], verbs: ["get", "patch"]' in fix, fix
    assert "kubectl auth can-i patch secrets/mcp-codemode-oauth -n mcp-codemode" in fix


# ------------------------------------------------------------------------------------------------ saved tools


async def test_tools_saved_at_once_on_two_replicas_are_both_kept_and_a_delete_is_seen_everywhere(
    cluster: tuple[ClusterEmulator, Path], replicas: tuple[SharedState, SharedState]
) -> None:
    emulator, _ = cluster
    a, b = replicas[0].saved_tools, replicas[1].saved_tools
    await asyncio.gather(
        *(a.save("alice", f"from_a_{n}", f"def from_a_{n}():\n    return {n}\n") for n in range(5)),
        *(b.save("alice", f"from_b_{n}", f"def from_b_{n}():\n    return {n}\n") for n in range(5)),
    )
    expected = sorted([f"from_a_{n}" for n in range(5)] + [f"from_b_{n}" for n in range(5)])
    for store in (a, b):
        tools, problems = await store.load("alice")
        assert sorted(tool.name for tool in tools) == expected and problems == []
    assert await b.delete("alice", "from_a_3")
    assert "from_a_3" not in [tool.name for tool in (await a.load("alice"))[0]]
    assert not await a.delete("alice", "from_a_3")
    assert all("alice" not in json.dumps(obj) for obj in tool_objects(emulator)), "only hashes name the owner"


async def test_one_tool_saved_again_on_two_replicas_at_once_is_one_object_holding_one_of_the_saves(
    cluster: tuple[ClusterEmulator, Path], replicas: tuple[SharedState, SharedState]
) -> None:
    emulator, _ = cluster
    await asyncio.gather(
        replicas[0].saved_tools.save("alice", "f", "def f():\n    return 'a'\n", "from a"),
        replicas[1].saved_tools.save("alice", "f", "def f():\n    return 'b'\n", "from b"),
    )
    (tool,), _ = await replicas[0].saved_tools.load("alice")
    assert (tool.source, tool.description) in {("def f():\n    return 'a'\n", "from a"),
                                               ("def f():\n    return 'b'\n", "from b")}  # fmt: skip
    assert len(tool_objects(emulator)) == 1


OWNERS = ["alice", "bob", "../alice", "alice/..", "al/ice", "ålice", "ALICE", "", " ", "t-" + "0" * 12, "x" * 500,
          "alice\x00bob", "\u202ealice"]  # fmt: skip


async def test_no_owner_reads_or_overwrites_another_ones_tools_and_every_name_is_valid(
    cluster: tuple[ClusterEmulator, Path], replicas: tuple[SharedState, SharedState]
) -> None:
    emulator, _ = cluster
    for n, owner in enumerate(OWNERS):
        await replicas[n % 2].saved_tools.save(owner, "shared_name", f"def shared_name():\n    return {n}\n")
        await replicas[n % 2].saved_tools.save(owner, "ñame", "def ñame():\n    pass\n")
        await replicas[n % 2].saved_tools.save(owner, "name", "def name():\n    pass\n")
    for n, owner in enumerate(OWNERS):
        tools, problems = await replicas[(n + 1) % 2].saved_tools.load(owner)
        assert problems == [] and sorted(tool.name for tool in tools) == ["name", "shared_name", "ñame"]
        assert next(t for t in tools if t.name == "shared_name").source.endswith(f"return {n}\n"), owner
    objects = tool_objects(emulator)
    assert len(objects) == 3 * len(OWNERS), "two owners (or two tool names) would share an object"
    for obj in objects:
        meta = obj["metadata"]
        assert DNS_1123_SUBDOMAIN.fullmatch(meta["name"]) and len(meta["name"]) <= 63, meta["name"]
        assert all(LABEL_VALUE.fullmatch(value) for value in meta["labels"].values()), meta["labels"]


async def test_a_planted_object_with_another_owners_label_is_not_loaded_as_theirs(
    cluster: tuple[ClusterEmulator, Path], replicas: tuple[SharedState, SharedState]
) -> None:
    """The label selects; the object's name, derived from owner and tool, is what binds the tool to its owner."""
    emulator, _ = cluster
    await replicas[0].saved_tools.save("mallory", "steal", "def steal():\n    return 'mallory'\n")
    (planted,) = tool_objects(emulator)
    configmaps = emulator.declare("", "v1", naming.CONFIGMAPS)
    emulator.objects[configmaps, NAMESPACE, planted["metadata"]["name"]].patch(
        {"metadata": {"labels": naming.saved_tool_labels("alice")}}
    )
    tools, problems = await replicas[1].saved_tools.load("alice")
    assert tools == [] and len(problems) == 1 and "'steal' could not be read" in problems[0]


async def test_limits_are_the_files_limits_with_the_same_words(replicas: tuple[SharedState, SharedState]) -> None:
    store = replicas[0].saved_tools
    biggest = "def f():\n    return '" + "é" * (MAX_SOURCE_CHARS - 40) + "'\n"
    await store.save("alice", "f", biggest)  # 100,000 characters, two bytes each: fits a ConfigMap
    assert (await replicas[1].saved_tools.load("alice"))[0][0].source == biggest
    with pytest.raises(SavedToolProblem, match="at most 100,000 are kept"):
        await store.save("alice", "g", "x" * (MAX_SOURCE_CHARS + 1))
    with pytest.raises(SavedToolProblem, match="not a usable tool name"):
        await store.save("alice", "../etc", "def f(): pass")
    with pytest.raises(SavedToolProblem, match="not valid Unicode"):
        await store.save("alice", "h", "def h():\n    return '\ud800'\n")


async def test_a_role_that_cannot_list_configmaps_says_so_in_the_log_and_generically_to_the_code(
    cluster: tuple[ClusterEmulator, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    emulator, kubeconfig = cluster
    emulator.grants = grants_without(tmp_path, "configmaps", "list")
    state = shared_state(sandbox_settings(kube_config=kubeconfig, shared_state="kubernetes"))
    try:
        tools, problems = await state.saved_tools.load("alice")
        assert tools == [] and problems and "did not answer" in problems[0] and "RBAC" not in problems[0]
        with pytest.raises(SavedToolsUnavailable, match="the tool was not saved") as caught:
            await state.saved_tools.save("alice", "f", "def f(): pass")
    finally:
        await state.aclose()
    assert emulator.address not in str(caught.value)
    logged = caplog.text
    assert "RBAC forbids this bridge to list configmaps" in logged and 'verbs: ["create", "list"' in logged


async def test_a_write_of_another_server_between_read_and_patch_costs_one_409_and_loses_nothing(
    cluster: tuple[ClusterEmulator, Path], replicas: tuple[SharedState, SharedState]
) -> None:
    """The patch names the version it read; another replica's write to another key lands in between (409): the
    store reads again, finds its own key unchanged and patches the new version, keeping the other write."""
    emulator, _ = cluster
    secrets = emulator.declare("", "v1", naming.SECRETS)
    other = base64.b64encode(json.dumps({"tokens": {"access_token": "theirs"}}).encode()).decode()
    emulator.before_patches.append(
        lambda: emulator.write(secrets, NAMESPACE, naming.SIGN_INS_SECRET, {"data": {"tickets-0": other}})
    )
    mine = StoredSignIn(replicas[0].sign_ins, "docs-0")
    await mine.set_tokens(OAuthToken(access_token="mine", token_type="Bearer"))
    assert emulator.conflicts == 1
    assert set(stored_secret(emulator)["data"]) == {"docs-0", "tickets-0"}
    theirs = await StoredSignIn(replicas[1].sign_ins, "tickets-0").get_tokens()
    assert theirs is not None and theirs.access_token == "theirs"


async def test_a_write_of_the_same_server_between_read_and_patch_is_a_lost_swap_and_the_change_is_made_again(
    cluster: tuple[ClusterEmulator, Path], replicas: tuple[SharedState, SharedState]
) -> None:
    """A swap that finds its own key changed reports it (the caller's edit was made on what is no longer there);
    ``SignIn.change`` then edits the new record, so both writers' changes survive."""
    emulator, _ = cluster
    secrets = emulator.declare("", "v1", naming.SECRETS)
    sign_in = StoredSignIn(replicas[0].sign_ins, "docs-0")
    await sign_in.change(lambda record: record | {"wanted_scope": "read"})
    theirs = base64.b64encode(json.dumps({"wanted_scope": "read", "client": {"client_id": "c"}}).encode()).decode()
    emulator.before_patches.append(
        lambda: emulator.write(secrets, NAMESPACE, naming.SIGN_INS_SECRET, {"data": {"docs-0": theirs}})
    )
    await sign_in.change(lambda record: record | {"wanted_scope": "read write"})
    assert emulator.conflicts == 1
    assert await replicas[1].sign_ins.read("docs-0") == {"wanted_scope": "read write", "client": {"client_id": "c"}}
