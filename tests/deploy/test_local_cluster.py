"""deploy/kubernetes/local: the kind recipe's files agree with each other and with the manifests, checked offline.

The recipe itself (a kind cluster with gVisor in its node) cannot run here: no Docker engine, no registry, no way to
fetch kind's node image. What can be checked is that its names line up: the containerd handler the kind config adds
is the one the RuntimeClass names, that RuntimeClass is the one the sandbox template asks for, gVisor's two binaries
are mounted where containerd finds them, and the images kind-up.sh builds and loads are the ones the overlay runs.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

import pytest
import yaml

from tests.support.kube_manifests import DEPLOY, render

pytestmark = pytest.mark.backend  # runs the kubectl binary (kustomize)

LOCAL = DEPLOY / "local"


def _kind() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load((LOCAL / "kind-gvisor.yaml").read_text())
    return config


def _handlers() -> dict[str, Any]:
    """The containerd runtimes the kind config's patches declare, by handler name."""
    runtimes: dict[str, Any] = {}
    for patch in _kind()["containerdConfigPatches"]:
        cri = tomllib.loads(patch)["plugins"]["io.containerd.grpc.v1.cri"]
        runtimes |= cri["containerd"]["runtimes"]
    return runtimes


def test_the_kind_config_gives_containerd_a_runsc_handler_and_mounts_gvisors_binaries() -> None:
    config = _kind()
    assert (config["kind"], config["apiVersion"]) == ("Cluster", "kind.x-k8s.io/v1alpha4")
    assert _handlers() == {"runsc": {"runtime_type": "io.containerd.runsc.v1"}}
    (node,) = config["nodes"]
    mounts = {m["containerPath"]: m for m in node["extraMounts"]}
    # containerd finds containerd-shim-runsc-v1 on its PATH, and the shim runs runsc from there too.
    assert set(mounts) == {"/usr/local/bin/runsc", "/usr/local/bin/containerd-shim-runsc-v1"}
    assert all(m["hostPath"] == path and m["readOnly"] for path, m in mounts.items())


def test_the_runtime_class_names_that_handler_and_is_the_one_the_sandboxes_ask_for() -> None:
    runtime_class = yaml.safe_load((LOCAL / "runtimeclass.yaml").read_text())
    assert (runtime_class["apiVersion"], runtime_class["kind"]) == ("node.k8s.io/v1", "RuntimeClass")
    assert runtime_class["handler"] in _handlers()
    (template,) = [o for o in render(LOCAL) if o["kind"] == "SandboxTemplate"]
    assert template["spec"]["podTemplate"]["spec"]["runtimeClassName"] == runtime_class["metadata"]["name"]


def test_kind_up_builds_and_loads_the_images_the_local_overlay_runs() -> None:
    script = (LOCAL / "kind-up.sh").read_text()
    built = set(re.findall(r"-t (\S+:\S+)", script))
    (loaded,) = re.findall(r"kind load docker-image --name \"\$cluster\" (.+)", script)
    running = {c["image"] for o in render(LOCAL) if (pod := _pod(o)) for c in pod["containers"]}
    assert built == set(loaded.split()) == running == {"mcp-codemode:dev", "mcp-codemode-sandbox:dev"}
    for name in ("kind-gvisor.yaml", "runtimeclass.yaml"):
        assert f'"$here/{name}"' in script


def _pod(obj: dict[str, Any]) -> dict[str, Any] | None:
    spec = obj.get("spec", {})
    pod: dict[str, Any] | None = (spec.get("template") or spec.get("podTemplate") or {}).get("spec")
    return pod
