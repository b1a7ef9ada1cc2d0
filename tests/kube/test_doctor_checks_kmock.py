"""``doctor``'s cluster checks, and the readiness check of ``/readyz``, against an EMULATED API server (kmock on
127.0.0.1) through the real client.

Not a cluster: the emulator stands in for discovery, the objects and the authorizer (tests/support/kube_emulator.py
says how). What is real: the client's requests and how every answer becomes a check with a fix.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcp_codemode.cluster import naming
from mcp_codemode.cluster.permissions import PERMISSIONS
from mcp_codemode.sandbox.base import StartCheck
from mcp_codemode.sandbox.kube import start_check
from mcp_codemode.sandbox.kube.backend import KubernetesBackend
from mcp_codemode.sandbox.kube.checks import WARM_POOLS, Check, cluster_checks
from tests.support.backends import sandbox_settings
from tests.support.kube_deps import KUBE_TEST_DEPS_PROBLEM, require_kube_test_deps

if not KUBE_TEST_DEPS_PROBLEM:
    from tests.support.kube_emulator import ClusterEmulator, emulated_cluster, write_kubeconfig
    from tests.support.kube_manifests import grants_without

pytestmark = [pytest.mark.anyio, pytest.mark.backend]
NAMESPACE = "mcp-codemode"
POOL = "mcp-codemode-sandbox"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[Any, Path]]:
    require_kube_test_deps()
    async with emulated_cluster(tmp_path) as (emulator, kubeconfig):
        yield emulator, kubeconfig


def install_agent_sandbox(emulator: ClusterEmulator, ready: int) -> None:
    emulator.declare(naming.GROUP, naming.VERSION, naming.CLAIMS)
    emulator.declare(naming.SANDBOX_GROUP, naming.VERSION, naming.SANDBOXES)
    pools = emulator.declare(naming.GROUP, naming.VERSION, WARM_POOLS)
    emulator.objects[pools, NAMESPACE, POOL] = {
        "apiVersion": f"{naming.GROUP}/{naming.VERSION}", "kind": "SandboxWarmPool",
        "metadata": {"name": POOL, "namespace": NAMESPACE},
        "spec": {"replicas": 4, "sandboxTemplateRef": {"name": POOL}}, "status": {"readyReplicas": ready},
    }  # fmt: skip


async def checks_for(kubeconfig: Path) -> dict[str, Check]:
    settings = sandbox_settings(kube_config=kubeconfig, runtime="kubernetes")
    return {check.name: check for check in await cluster_checks(settings)}


async def test_emulated_api_a_ready_install_passes_every_check_but_the_runtime_class(
    cluster: tuple[Any, Path],
) -> None:
    emulator, kubeconfig = cluster
    install_agent_sandbox(emulator, ready=4)
    found = await checks_for(kubeconfig)
    assert found["credentials"].ok and emulator.address in found["credentials"].detail
    assert found["agent-sandbox CRDs"].ok, found["agent-sandbox CRDs"]
    assert found["warm pool"].ok and "4 of 4" in found["warm pool"].detail
    verbs = [name for name in found if name.startswith("may ")]
    # One review per row of the table, each allowed by the rendered Role (the emulator denies what it does not grant).
    assert verbs == [f"may {p.verb} {p.what}" for p in PERMISSIONS] and all(found[name].ok for name in verbs), found
    assert "may get pods/exec" in verbs and "may create pods/exec" in verbs
    assert found["runtime class"].ok is None and "smoke.sh" in found["runtime class"].fix


async def test_emulated_api_the_runtime_class_line_says_what_each_claim_must_run_under(
    cluster: tuple[Any, Path],
) -> None:
    _, kubeconfig = cluster
    for wanted, said in (("gvisor", "must run under RuntimeClass 'gvisor'"), ("none", "without gVisor")):
        settings = sandbox_settings(kube_config=kubeconfig, runtime="kubernetes", kube_runtime_class=wanted)
        (line,) = [check for check in await cluster_checks(settings) if check.name == "runtime class"]
        assert line.ok is None and said in line.detail, line


async def test_emulated_api_missing_crds_an_empty_pool_and_a_denied_verb_each_name_a_fix(
    cluster: tuple[Any, Path], tmp_path: Path
) -> None:
    emulator, kubeconfig = cluster
    emulator.grants = grants_without(tmp_path, "pods/exec", "get")  # a copy of the Role without get on pods/exec
    found = await checks_for(kubeconfig)  # nothing of agent-sandbox installed
    assert not found["agent-sandbox CRDs"].ok and "kubectl apply -k deploy/kubernetes/base" in found[
        "agent-sandbox CRDs"].fix  # fmt: skip
    assert not found["warm pool"].ok
    denied = found["may get pods/exec"]
    assert denied.ok is False and "WebSocket" in denied.detail
    assert '`- {apiGroups: [""], resources: ["pods/exec"], verbs: ["get", "create"]}`' in denied.fix
    assert "kubectl auth can-i get pods --subresource=exec -n mcp-codemode" in denied.fix
    assert found["may create pods/exec"].ok and found["may create sandboxclaims"].ok

    install_agent_sandbox(emulator, ready=0)
    found = await checks_for(kubeconfig)
    assert found["agent-sandbox CRDs"].ok
    assert not found["warm pool"].ok and "no ready sandbox (0 of 4)" in found["warm pool"].detail


async def test_no_credentials_is_one_failed_check_with_its_fix(tmp_path: Path) -> None:
    require_kube_test_deps()
    found = await checks_for(tmp_path / "absent-kubeconfig")
    assert list(found) == ["credentials"]
    assert found["credentials"].ok is False and "MCP_BRIDGE_KUBECONFIG" in found["credentials"].fix


async def test_emulated_api_readiness_reads_the_warm_pool_once_a_while_and_names_what_fails(
    cluster: tuple[Any, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What /readyz asks of the cluster (sandbox/kube/start_check.py): the pool is there and the API answers this
    face; an empty pool still gives sandboxes (started cold), so it counts as ready; probes within TTL_S share one
    read."""
    emulator, kubeconfig = cluster
    backend = KubernetesBackend(sandbox_settings(kube_config=kubeconfig, runtime="kubernetes"))
    try:
        missing = await backend.start_check()  # nothing of agent-sandbox installed
        install_agent_sandbox(emulator, ready=0)
        kept = await backend.start_check()
        monkeypatch.setattr(start_check, "TTL_S", 0.0)
        empty = await backend.start_check()
        emulator.token = "another-token"  # the face's credentials are refused from now on
        refused = await backend.start_check()
    finally:
        await backend.close()
    assert (missing.ok, missing.problem) == (False, "warm-pool-missing")
    assert kept == missing, "a second probe within TTL_S asked the API server again"
    assert empty == StartCheck(
        True, None, f"SandboxWarmPool {POOL!r} in namespace {NAMESPACE!r}: 0 of 4 sandboxes ready"
    )
    assert (refused.ok, refused.problem) == (False, "cluster-refused")
    nobody = write_kubeconfig(tmp_path / "nobody", "http://127.0.0.1:9")  # the discard port: nothing listens
    away = KubernetesBackend(sandbox_settings(kube_config=nobody, runtime="kubernetes"))
    try:
        unreachable = await away.start_check()
    finally:
        await away.close()
    assert (unreachable.ok, unreachable.problem) == (False, "cluster-unreachable"), unreachable
