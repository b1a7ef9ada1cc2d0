"""The face's RBAC against the EMULATED API server's authorizer, which allows only what the RENDERED Role grants.

Not a cluster (tests/support/kube_emulator.py): the authorizer is a stand-in that applies RBAC's rule matching to
the Role kustomize renders from deploy/kubernetes/base, and authorizes the exec WebSocket as an API server from 1.35
does (get AND create on pods/exec). What is real: the bridge's client requests, the verbs they need, and how each
refusal (RBAC, quota, an expired credential) becomes an error that names its cause and fix. A broken Role here is a
COPY of the manifest with one verb removed, rendered the same way (kube_manifests.grants_without).
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.auth import OAuthToken

from mcp_codemode.cluster import naming
from mcp_codemode.cluster.api import KubeApiError, connect
from mcp_codemode.cluster.leases import SessionLeases, lease_signing_key
from mcp_codemode.cluster.permissions import PERMISSIONS
from mcp_codemode.runs.shared_state import shared_state
from mcp_codemode.sandbox.kube.backend import KubernetesBackend
from mcp_codemode.sandbox.kube.checks import cluster_checks
from mcp_codemode.sandbox.kube.claims import ClaimStore
from mcp_codemode.upstream.servers.oauth import StoredSignIn
from tests.support.backends import sandbox_settings
from tests.support.cells import private_state_dir
from tests.support.exec_endpoint import ExecEndpoint
from tests.support.kube_deps import KUBE_TEST_DEPS_PROBLEM, require_kube_test_deps

if not KUBE_TEST_DEPS_PROBLEM:
    from tests.support.kube_emulator import (
        ClusterEmulator,
        agent_sandbox_controller,
        emulated_cluster,
        shared_state_objects,
        write_kubeconfig,
    )
    from tests.support.kube_manifests import grants_without

pytestmark = [pytest.mark.anyio, pytest.mark.backend]  # loopback servers and kubectl
NAMESPACE = "mcp-codemode"
EXEC_LINE = '`- {apiGroups: [""], resources: ["pods/exec"], verbs: ["get", "create"]}`'


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[Any, Path]]:
    require_kube_test_deps()
    async with emulated_cluster(tmp_path) as (emulator, kubeconfig):
        emulator.declare(naming.GROUP, naming.VERSION, naming.CLAIMS)
        emulator.declare(naming.SANDBOX_GROUP, naming.VERSION, naming.SANDBOXES)
        yield emulator, kubeconfig


async def launch_once(emulator: ClusterEmulator, tmp: Path, state_dir: Path, expired: bool = False) -> None:
    """One kubernetes-backend launch through the exec stand-in, whose handshake the emulator authorizes (as for an
    expired token when ``expired``); the refusal comes before any worker would start."""

    def authorize(attributes: tuple[str, str, str, str], namespace: str, header: str) -> Any:
        return emulator.decide(attributes, namespace, "Bearer expired" if expired else header)

    base = sandbox_settings(state_dir=state_dir)
    async with (
        agent_sandbox_controller(emulator, NAMESPACE),
        ExecEndpoint(base, api_url=emulator.address, authorize=authorize) as endpoint,
    ):
        kubeconfig = write_kubeconfig(tmp / "through-endpoint", endpoint.url)
        backend = KubernetesBackend(sandbox_settings(state_dir=state_dir, kube_config=kubeconfig, replica="r-a"))
        try:
            await backend.launch("w1", {})
        finally:
            await backend.close()


def live_claims(emulator: ClusterEmulator) -> list[str]:
    return [o.raw["metadata"]["name"] for o in emulator.objects.values()
            if not o.deleted and o.get("kind") == "SandboxClaim"]  # fmt: skip


@pytest.mark.parametrize("verb", ["get", "create"])  # get: every API server; create: from Kubernetes 1.35
async def test_a_role_without_a_verb_on_pods_exec_refuses_the_exec_stream_and_the_error_names_the_line(
    cluster: tuple[Any, Path], tmp_path: Path, verb: str
) -> None:
    emulator, _ = cluster
    emulator.grants = grants_without(tmp_path, "pods/exec", verb)
    with private_state_dir() as state_dir, pytest.raises(KubeApiError) as caught:
        await launch_once(emulator, tmp_path, state_dir)
    message = str(caught.value)
    assert caught.value.status == 403
    assert "RBAC forbids this bridge to open the exec stream" in message and f"lacks {verb} on pods/exec" in message
    assert "HTTP GET" in message and EXEC_LINE in message
    assert f"kubectl auth can-i {verb} pods --subresource=exec -n mcp-codemode" in message
    assert ((verb, "", "pods", "exec"), False) in emulator.decisions
    assert live_claims(emulator) == []  # the failed launch deleted its claim


async def test_an_expired_credential_at_the_exec_handshake_is_named_as_such(
    cluster: tuple[Any, Path], tmp_path: Path
) -> None:
    emulator, _ = cluster
    with private_state_dir() as state_dir, pytest.raises(KubeApiError) as caught:
        await launch_once(emulator, tmp_path, state_dir, expired=True)
    assert caught.value.status == 401
    assert "refused the bridge's credentials" in str(caught.value) and "expired" in str(caught.value)
    assert "RBAC" not in str(caught.value) and "refresh the kubeconfig's credentials" in str(caught.value)


CLAIMS_LINE = 'resources: ["sandboxclaims"], verbs: ["create", "get", "watch", "patch", "delete", "list"]'


# watch: readiness is watched, so a Role written for the old poll (get only) is refused at the first wait
@pytest.mark.parametrize("verb", ["list", "watch"])
async def test_the_emulator_refuses_a_verb_the_role_lacks_and_the_error_names_its_line(
    cluster: tuple[Any, Path], tmp_path: Path, verb: str
) -> None:
    emulator, kubeconfig = cluster
    emulator.grants = grants_without(tmp_path, "sandboxclaims", verb)
    store = ClaimStore(await connect(kubeconfig, ""), namespace=NAMESPACE, warm_pool="p", replica="r-a", ttl=1200)
    claim = await store.acquire(naming.ClaimKey("alice", "one"))  # create is granted
    with pytest.raises(KubeApiError) as caught:
        await (store.sweep(set()) if verb == "list" else store.wait_bound(claim.name, 30, claim.seen))
    message = str(caught.value)
    assert caught.value.status == 403 and f"RBAC forbids this bridge to {verb} sandboxclaims" in message
    assert CLAIMS_LINE in message and f"kubectl auth can-i {verb} sandboxclaims -n mcp-codemode" in message
    assert ((verb, naming.GROUP, naming.CLAIMS, ""), False) in emulator.decisions


async def test_the_emulator_refuses_another_namespace_and_a_stale_token(cluster: tuple[Any, Path]) -> None:
    emulator, kubeconfig = cluster
    elsewhere = ClaimStore(await connect(kubeconfig, ""), namespace="other", warm_pool="p", replica="r-a", ttl=1200)
    with pytest.raises(KubeApiError) as caught:
        await elsewhere.acquire(naming.ClaimKey("alice", "one"))
    assert caught.value.status == 403  # the Role is namespaced: nothing is granted outside mcp-codemode
    emulator.token = "rotated"
    store = ClaimStore(await connect(kubeconfig, ""), namespace=NAMESPACE, warm_pool="p", replica="r-a", ttl=1200)
    with pytest.raises(KubeApiError) as caught:
        await store.acquire(naming.ClaimKey("alice", "one"))
    assert caught.value.status == 401 and "refused the bridge's credentials" in str(caught.value)


async def test_a_quota_refusal_of_a_claim_is_reported_as_the_quota_not_rbac(cluster: tuple[Any, Path]) -> None:
    emulator, kubeconfig = cluster
    used = "count/sandboxclaims.extensions.agents.x-k8s.io"
    quota = {  # what ResourceQuota admission answers (k8s.io/apiserver admission/plugin/resourcequota)
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
        "message": f'sandboxclaims.extensions.agents.x-k8s.io "mcp-x" is forbidden: exceeded quota: '
                   f"mcp-codemode-claims, requested: {used}=1, used: {used}=72, limited: {used}=72",
    }  # fmt: skip
    emulator["post"] << 403 << quota
    store = ClaimStore(await connect(kubeconfig, ""), namespace=NAMESPACE, warm_pool="p", replica="r-a", ttl=1200)
    with pytest.raises(KubeApiError) as caught:
        await store.acquire(naming.ClaimKey("alice", "one"))
    message = str(caught.value)
    assert caught.value.status == 403 and "ResourceQuota refuses" in message and "exceeded quota" in message
    assert "RBAC" not in message and "MCP_BRIDGE_MAX_SESSIONS" in message and "resourcequota.yaml" in message


async def test_claims_leases_shared_state_and_doctor_use_exactly_the_table_and_the_role_allows_all_of_it(
    cluster: tuple[Any, Path],
) -> None:
    """Every API call but the exec stream's (test_backend_emulated covers it) under the rendered Role, denying by
    default: nothing is refused, and the calls made are exactly the table's rows for these resources (the sign-ins'
    Secret by its name, as the Role's resourceNames allow)."""
    emulator, kubeconfig = cluster
    emulator.declare(naming.LEASE_GROUP, naming.LEASE_VERSION, naming.LEASES)
    emulator.declare(naming.GROUP, naming.VERSION, naming.WARM_POOLS)
    api = await connect(kubeconfig, "")
    now = datetime.datetime(2026, 11, 27, tzinfo=datetime.UTC)
    stores = [ClaimStore(api, namespace=NAMESPACE, warm_pool="p", replica=r, ttl=1200, refresh_interval=0,
                         now=lambda: now) for r in ("r-a", "r-b")]  # fmt: skip
    key = naming.ClaimKey("alice", "one")
    async with agent_sandbox_controller(emulator, NAMESPACE):
        claim = await stores[0].acquire(key)
        await stores[0].wait_bound(claim.name, 5, claim.seen)  # watch
        await stores[1].acquire(key)  # adopts: get and patch
        await stores[1].touch(claim.name)
        await stores[0].sweep(set(), replica="r-b")  # list and delete
    clock = [now]
    leases = [SessionLeases(api, namespace=NAMESPACE, replica=r, url=f"http://{r}", key=lease_signing_key("t" * 32),
                            duration=30, now=lambda: clock[0]) for r in ("r-a", "r-b")]  # fmt: skip
    await leases[0].holder(key)  # create
    held = await leases[1].holder(key)  # get
    clock[0] += datetime.timedelta(seconds=60)
    await leases[1].take_over(key, held)  # patch
    await leases[1].renew()
    await leases[1].release_all()  # delete
    await api.close()
    await cluster_checks(sandbox_settings(kube_config=kubeconfig, runtime="kubernetes"))
    shared_state_objects(emulator)
    shared = shared_state(sandbox_settings(kube_config=kubeconfig, shared_state="kubernetes"))
    sign_in = StoredSignIn(shared.sign_ins, "docs-0123456789abcdef")
    await sign_in.set_tokens(OAuthToken(access_token="a-1", token_type="Bearer"))  # get, patch
    await shared.saved_tools.save("alice", "f", "def f(): pass")  # list, create
    await shared.saved_tools.save("alice", "f", "def f(): return 1")  # list, create (409), patch
    assert [tool.name for tool in (await shared.saved_tools.load("alice"))[0]] == ["f"]
    assert await shared.saved_tools.delete("alice", "f")
    await sign_in.forget()
    await shared.aclose()

    refused = [attributes for attributes, ok in emulator.decisions if not ok]
    assert refused == []
    table = {(p.verb, p.group, p.resource, p.subresource) for p in PERMISSIONS if p.what != "pods/exec"}
    assert emulator.used() == table


async def test_the_ssar_answers_follow_the_rendered_role(cluster: tuple[Any, Path], tmp_path: Path) -> None:
    emulator, kubeconfig = cluster
    settings = sandbox_settings(kube_config=kubeconfig, runtime="kubernetes")
    allowed = {c.name: c.ok for c in await cluster_checks(settings) if c.name.startswith("may ")}
    emulator.grants = grants_without(tmp_path, "leases", "delete")
    after = {c.name: c.ok for c in await cluster_checks(settings) if c.name.startswith("may ")}
    assert all(allowed.values()) and [name for name, ok in after.items() if not ok] == ["may delete leases"]
