"""The kubernetes backend end to end against STAND-INS: its claims on kmock's EMULATED API, its exec stream to a
REAL bubblewrap worker behind the loopback exec stand-in, both at one address as an apiserver serves them.

No Kubernetes runs here (no registry ships a control plane): the test plays agent-sandbox's controller, binding
each claim to a Sandbox with a pod. What is real: the backend's client calls, its exec stream, the host's
unmodified Worker and the guest behind it. docs/kubernetes.md lists what only a cluster proves.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_codemode.cluster import naming
from mcp_codemode.sandbox.bubblewrap import BubblewrapBackend
from mcp_codemode.sandbox.kube.backend import KubernetesBackend
from mcp_codemode.sandbox.worker import Worker
from mcp_codemode.settings import Settings
from tests.support.backends import require_usable, sandbox_settings
from tests.support.cells import private_state_dir
from tests.support.exec_endpoint import ExecEndpoint
from tests.support.kube_deps import KUBE_TEST_DEPS_PROBLEM, require_kube_test_deps

if not KUBE_TEST_DEPS_PROBLEM:
    from tests.support.kube_emulator import agent_sandbox_controller, emulated_cluster, write_kubeconfig

pytestmark = pytest.mark.backend
NAMESPACE = "mcp-codemode"


@contextlib.contextmanager
def _state() -> Iterator[tuple[Path, Settings]]:
    """A private state directory, and bubblewrap settings on it (the workers behind the exec stand-in)."""
    require_kube_test_deps()
    with private_state_dir() as state:
        base = sandbox_settings(state_dir=state)
        require_usable(BubblewrapBackend(base))
        yield state, base


@contextlib.asynccontextmanager
async def _cluster(
    tmp_path: Path, base: Settings, runtime_class: str | None = "gvisor"
) -> AsyncIterator[tuple[Any, list[str], ExecEndpoint, Path]]:
    """The emulated API, its stand-in controller (Sandboxes naming ``runtime_class``), the exec stand-in at the same
    address, and a kubeconfig that points the backend at it."""
    async with (
        emulated_cluster(tmp_path) as (emulator, _),
        agent_sandbox_controller(emulator, NAMESPACE, runtime_class) as pods,
        ExecEndpoint(base, api_url=emulator.address, authorize=emulator.decide) as endpoint,
    ):
        yield emulator, pods, endpoint, write_kubeconfig(tmp_path / "through-endpoint", endpoint.url)


def test_emulated_cluster_backend_claims_execs_keeps_state_and_deletes_its_claim(tmp_path: Path) -> None:
    with _state() as (state, base):

        async def main() -> dict[str, Any]:
            async with _cluster(tmp_path, base) as (emulator, pods, endpoint, kubeconfig):
                settings = sandbox_settings(state_dir=state, kube_config=kubeconfig, replica="replica-a")
                backend = KubernetesBackend(settings)
                worker = Worker(backend, settings, "kube-test")
                await worker.start()
                try:
                    (claim,) = [json.loads(json.dumps(obj.raw)) for obj in emulator.objects.values()
                                if not obj.deleted and obj.get("kind") == "SandboxClaim"]  # fmt: skip
                    first = await worker.execute("x = 21", 20)
                    second = await worker.execute("x * 2", 20)
                    # The client's files travel on the same exec stream (FILES / FILE_REPLY frames).
                    wrote = await worker.files({"op": "write", "path": "in/k.txt", "data": "a3ViZQ=="}, 20)
                    read = await worker.files({"op": "read", "path": "in/k.txt"}, 20)
                    seen = await worker.execute("open('/workspace/in/k.txt').read()", 20)
                finally:
                    await worker.close()
                    await backend.close()
                left = [obj for obj in emulator.objects.values() if not obj.deleted
                            and obj.get("kind") == "SandboxClaim"]  # fmt: skip
                exec_asked = [d for d in emulator.decisions if d[0][2:] == ("pods", "exec")]
                return {"claim": claim, "first": first, "second": second, "left": left,
                            "pods": list(pods), "commands": endpoint.commands,
                            "files": (wrote, read, seen.value), "exec": exec_asked}  # fmt: skip

        found = asyncio.run(main())
    claim = found["claim"]
    assert claim["metadata"]["annotations"][naming.OWNER_ANNOTATION] == "replica-a"
    assert claim["metadata"]["labels"][naming.MANAGED_BY] == naming.MANAGER
    assert found["pods"] == ["warm-pod-1"]  # exec went to the pod the Sandbox names, not to the Sandbox
    assert found["first"].status == "ok" and found["second"].value == "42"
    assert found["files"] == ({"size": 4}, {"data": "a3ViZQ==", "size": 4}, "'kube'")
    (command,) = found["commands"]
    assert command[:2] == ["env", "-i"] and not any(part.startswith("KUBERNETES_") for part in command)
    # No per-pod process limit exists in Kubernetes: the guest is told to set MCP_BRIDGE_PIDS on itself.
    assert json.loads(command[-1])["rlimits"]["NPROC"] == sandbox_settings().pids
    assert found["left"] == []  # closing the worker deleted its claim
    # The exec WebSocket was authorized as an API server from 1.35 does it, and the rendered Role allowed both.
    assert found["exec"] == [(("get", "", "pods", "exec"), True), (("create", "", "pods", "exec"), True)]


def test_emulated_cluster_a_sandbox_without_the_required_runtime_class_runs_nothing_unless_chosen(
    tmp_path: Path,
) -> None:
    """A claim bound to a Sandbox whose pod template names no runtime class (the node's runc) is refused before any
    exec, and its claim deleted; with MCP_BRIDGE_KUBE_RUNTIME_CLASS=none (overlays/no-gvisor) the same runs."""
    with _state() as (state, base):

        async def main() -> dict[str, Any]:
            async with _cluster(tmp_path, base, runtime_class=None) as (emulator, _, endpoint, kubeconfig):
                found: dict[str, Any] = {}
                for wanted in ("gvisor", "none"):
                    settings = sandbox_settings(state_dir=state, kube_config=kubeconfig, kube_runtime_class=wanted)
                    backend = KubernetesBackend(settings)
                    worker = Worker(backend, settings, f"kube-{wanted}")
                    try:
                        await worker.start()
                        found[wanted] = (await worker.execute("6 * 7", 20)).value
                    except Exception as exc:  # the refusal, whatever the worker wraps it in
                        found[wanted] = str(exc)
                    finally:
                        await worker.close()
                        await backend.close()
                    found[f"{wanted} execs"] = len(endpoint.commands)
                    found[f"{wanted} left"] = [obj for obj in emulator.objects.values() if not obj.deleted
                                               and obj.get("kind") == "SandboxClaim"]  # fmt: skip
                return found

        found = asyncio.run(main())
    refusal = found["gvisor"]
    assert "runs its pod with no runtime class (the node's runc)" in refusal, refusal
    assert "requires 'gvisor' (MCP_BRIDGE_KUBE_RUNTIME_CLASS)" in refusal and "overlays/no-gvisor" in refusal
    assert found["gvisor execs"] == 0 and found["gvisor left"] == [], "no exec, and the claim is deleted"
    assert found["none"] == "42" and found["none execs"] == 1
