"""deploy/kubernetes/smoke.sh and its MCP client, checked as far as a machine without a cluster can.

No Kubernetes control plane runs here, so the script meets a kubectl STAND-IN (tests/support/kubectl_stand_in.py):
what the stand-in answers about the face's claims, Sandboxes, Leases and rights comes from the emulated API server
and the rendered Role; its port-forwards reach REAL face replicas (``mcp-codemode serve`` on the kubernetes backend,
their pods real bubblewrap workers behind the loopback exec stand-in); the guest it execs for the script's own claim
is the real guest. So the script's bash, its client's MCP (handshake, SSE answers, files, images, DELETE), the
forwarded call, the takeover and the cleanup the script checks are real; the cluster around them is not.
docs/kubernetes.md says what only a real cluster proves.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

from mcp_codemode.cluster.permissions import PERMISSIONS
from tests.support.backends import fail_unless
from tests.support.clients import HttpServer, require_bubblewrap
from tests.support.kube_deps import require_kube_test_deps
from tests.support.kube_manifests import DEPLOY, base_grants, render
from tests.support.replicas import claims_of, replicas_on_cluster

pytestmark = pytest.mark.backend  # runs bash, shellcheck, face replicas and guests

SMOKE = DEPLOY / "smoke.sh"
CLIENT = DEPLOY / "smoke_client.py"
STAND_IN = Path(__file__).resolve().parents[1] / "support" / "kubectl_stand_in.py"
TOKEN = "smoke-token-" + "7" * 24


def _load_client() -> ModuleType:
    spec = importlib.util.spec_from_file_location("smoke_client", CLIENT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


smoke_client = _load_client()


def test_smoke_script_parses_with_bash_no_cluster_involved() -> None:
    done = subprocess.run(["bash", "-n", str(SMOKE)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("script", [SMOKE, DEPLOY / "local" / "kind-up.sh"], ids=["smoke.sh", "kind-up.sh"])
def test_scripts_are_shellcheck_clean_and_executable_no_cluster_involved(script: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    fail_unless(
        shellcheck is not None, "shellcheck is missing (scripts/setup.sh installs it: apt-get install shellcheck)"
    )
    assert shellcheck is not None
    done = subprocess.run([shellcheck, "--severity=style", str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert script.stat().st_mode & 0o111


def _rows(name: str) -> list[tuple[str, str, str, str, str]]:
    """smoke.sh's array ``name`` of "verb resource[.group][/name] [subresource]" rows, as (verb, group, resource,
    sub, object name)."""
    found = re.search(rf"^{name}=\((.*?)^\)", SMOKE.read_text(), re.MULTILINE | re.DOTALL)
    assert found, f"smoke.sh has no array {name}"
    rows = []
    for row in re.findall(r'"([^"]+)"', found.group(1)):
        verb, what, *sub = row.split()
        what, _, object_name = what.partition("/")
        resource, _, group = what.partition(".")
        rows.append((verb, group, resource, sub[0] if sub else "", object_name))
    return rows


TABLE = {(p.verb, p.group, p.resource, p.subresource, p.names[0] if p.names else "") for p in PERMISSIONS}


def test_smoke_asks_the_face_account_about_exactly_the_verbs_of_the_permissions_table() -> None:
    asked = _rows("face_may")
    assert len(asked) == len(set(asked))
    assert set(asked) == TABLE


def test_what_smoke_says_the_face_must_not_do_the_rendered_role_refuses() -> None:
    refused = _rows("face_may_not")
    assert refused and not set(refused) & TABLE
    grants = base_grants()
    allowed = [row for row in refused if grants.allows(row[:4], grants.namespace, row[4] or None)]
    assert allowed == []


def test_smoke_client_is_standard_library_python_3_8_no_cluster_involved() -> None:
    """The operator's python3 has no MCP SDK and may be old: the client must parse as 3.8 and import nothing else.
    (Only the syntax is checked for 3.8; the functions it calls are run here under this Python.)"""
    tree = ast.parse(CLIENT.read_text(), feature_version=(3, 8))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}  # fmt: skip
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 and node.module}  # fmt: skip
    assert imported - {"__future__"} <= sys.stdlib_module_names, imported - sys.stdlib_module_names


@pytest.mark.parametrize(("kustomization", "runtime_class"), [("base", "gvisor"), ("overlays/no-gvisor", "none")])
def test_smoke_reads_the_rendered_deployments_facts(kustomization: str, runtime_class: str) -> None:
    (deployment,) = [o for o in render(DEPLOY / kustomization) if o["kind"] == "Deployment"]
    facts = smoke_client.deployment_facts({**deployment, "status": {"readyReplicas": 2}})
    selector = "app.kubernetes.io/component=face,app.kubernetes.io/name=mcp-codemode"
    assert facts == ["mcp-codemode", runtime_class, "mcp-codemode-http", "tokens", "2", selector, "8765"]


def test_smoke_client_reads_answers_sent_as_events_and_finds_claims_and_outcomes() -> None:
    events = (b"event: message\r\ndata: {\"jsonrpc\": \"2.0\", \"method\": \"notifications/progress\"}\r\n\r\n"
              b"data: {\"jsonrpc\": \"2.0\",\r\ndata: \"id\": 7, \"result\": {\"ok\": 1}}\r\n\r\n")  # fmt: skip
    assert smoke_client._answer_in_events(io.BytesIO(events), 7) == {"jsonrpc": "2.0", "id": 7, "result": {"ok": 1}}

    sandboxes = {"items": [{"metadata": {"name": "sbx-1", "annotations": {"agents.x-k8s.io/pod-name": "warm-9"}}},
                           {"metadata": {"name": "sbx-2"}}]}  # fmt: skip
    claims = {"items": [{"metadata": {"name": "mcp-a"}, "status": {"sandbox": {"name": "sbx-1"}}},
                        {"metadata": {"name": "mcp-b"}, "status": {"sandbox": {"name": "sbx-2"}}},
                        {"metadata": {"name": "mcp-c"}}]}  # fmt: skip
    found = [smoke_client.claim_of_pod(claims, sandboxes, pod) for pod in ("warm-9", "sbx-2", "sbx-1", "other")]
    assert found == ["mcp-a", "mcp-b", None, None]

    def answer(text: str, error: str = "") -> dict[str, Any]:
        structured = {"error": {"type": error}} if error else {}
        return {"content": [{"type": "text", "text": text}], "isError": bool(error), "structuredContent": structured}

    notice = "[This session lived on replica pod-a, which stopped answering, so its state was lost; ...]\nFalse"
    handed = notice.replace("stopped answering", "shut down (a rollout, a drain or a scale-down)")
    outcomes = [smoke_client.after_owner_deleted(a, "pod-a")[0] for a in (
        answer(notice), answer(handed), answer("False"), answer("True"), answer("did not answer", "ReplicaUnreachable"),
        answer(notice.replace("False", "True")),
    )]  # fmt: skip
    assert outcomes == ["takeover", "handed-over", "released", "kept", "error", "error"]


def test_smoke_client_against_a_real_face_state_a_file_an_image_and_the_sessions_end(tmp_path: Path) -> None:
    """The MCP half against a real ``serve --transport http`` (bubblewrap, a bearer token), no cluster: every check
    of a session's life passes, DELETE ends the session, and a request on it then gets 404."""
    require_bubblewrap()
    report = smoke_client.Report()
    lines = io.StringIO()
    with HttpServer(tmp_path / "face.log", MCP_BRIDGE_HTTP_TOKEN=TOKEN) as face, contextlib.redirect_stdout(lines):
        wrong = smoke_client.McpSession(face.url, "w" * 24, 60)
        with pytest.raises(smoke_client.McpError, match="HTTP 401"):
            wrong.open()
        mcp = smoke_client.McpSession(face.url, TOKEN, 60)
        hostname = smoke_client.session_checks(mcp, report)
        ended, after = mcp.close(), mcp.status_of_a_request()
    said = lines.getvalue().splitlines()
    assert report.failed == 0 and len(said) == 5 and all(line.startswith("ok    ") for line in said), said
    assert hostname == "sandbox"  # bubblewrap's; in a pod, the pod's name
    assert (ended, after) == (200, 404)


@contextlib.contextmanager
def _stand_in(tmp_path: Path, state: dict[str, Any]) -> Iterator[dict[str, str]]:
    """The environment smoke.sh runs in: the stand-in as $KUBECTL, its state in a folder of its own."""
    folder = tmp_path / "stand-in"
    folder.mkdir(exist_ok=True)
    (folder / "state.json").write_text(json.dumps(state))
    kubectl = folder / "kubectl"
    kubectl.write_text(f'#!/bin/sh\nexec {sys.executable} {STAND_IN} "$@"\n')
    kubectl.chmod(0o755)
    yield {"PATH": os.environ["PATH"], "KUBECTL": str(kubectl), "FAKE_STATE": str(folder), "HOME": str(tmp_path)}


def _run_smoke(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SMOKE), "-t", "30"], capture_output=True, text=True, timeout=900, env=env)


@pytest.mark.anyio
async def test_smoke_script_against_a_kubectl_stand_in_and_two_real_face_replicas(tmp_path: Path) -> None:
    """Twice, against the same two replicas: first as a one-replica no-gvisor deployment (the two-replica checks
    skipped, runc reported as chosen), then as the base with two ready replicas, where deleting the owner's pod kills
    its replica (SIGKILL: a pod that dies without stopping) and the script sees the takeover and the cleanup."""
    require_kube_test_deps()
    require_bubblewrap()
    fail_unless(shutil.which("unshare") is not None, "unshare (util-linux) is missing")
    deployments = {name: next(o for o in render(DEPLOY / name) if o["kind"] == "Deployment")
                   for name in ("base", "overlays/no-gvisor")}  # fmt: skip
    async with replicas_on_cluster(tmp_path, MCP_BRIDGE_HTTP_TOKEN=TOKEN) as (emulator, a, b):
        emulator.admin_token = "operator-" + "5" * 24
        state: dict[str, Any] = {
            "api": emulator.address, "admin_token": emulator.admin_token, "face_token": emulator.token,
            "account": emulator.grants.account, "namespace": "mcp-codemode", "tokens": f"{TOKEN},another-{TOKEN}",
            "pods": {name: {"port": server.port, "pid": server.bridge_pid}  # a pod's deletion kills the bridge
                     for name, server in (("replica-a", a), ("replica-b", b))},
            "deleted": [], "guest_boot": str(DEPLOY.parents[1] / "src" / "mcp_codemode" / "guest" / "boot.py"),
            "guest_boot_in_pod": "/opt/mcp-codemode/boot.py",
        }  # fmt: skip
        with _stand_in(tmp_path, {**state, "deployment": deployments["overlays/no-gvisor"], "ready": 1,
                                  "kernel": "runc"}) as env:  # fmt: skip
            alone = await anyio.to_thread.run_sync(_run_smoke, env)
        fail_unless("unshare failed" not in alone.stderr, f"unshare --net is not allowed here: {alone.stderr}")
        with _stand_in(tmp_path, {**state, "deployment": deployments["base"], "ready": 2, "kernel": "gvisor"}) as env:
            both = await anyio.to_thread.run_sync(_run_smoke, env)
        calls = [json.loads(line) for line in (tmp_path / "stand-in" / "calls.log").read_text().splitlines()]
        left = claims_of(emulator)
        killed = a.process is not None and a.process.poll() is not None
    assert alone.returncode == 0, alone.stdout + alone.stderr
    for said in (
        f"ok    as system:serviceaccount:mcp-codemode:mcp-codemode: all {len(PERMISSIONS)} verbs the bridge uses",
        "none of the 5 rights it must not have is allowed",
        "skip  RuntimeClass: the face accepts sandboxes without one",
        "ok    runc (no-gvisor overlay, chosen)",
        "x + 1 gave '42'", "no network from the sandbox", "no claim, sandbox or pod left",
        "ok    MCP handshake: protocol 2025-11-25", "ok    state across two run_python calls: x + 1 gave '42'",
        "ok    a file in with the call, out as a resource link", "read back as written",
        "ok    an image from runtime.show comes back as image content (1 image(s), image/png)",
        "ok    the session runs in claim mcp-", "(its Sandbox's pod is warm-pod-",
        "ok    the session ended with DELETE (HTTP 200); a request on it now gets HTTP 404",
        "ok    its claim mcp-", "skip  two replicas: needs 2 ready replicas of deployment/mcp-codemode, it has 1",
        "smoke: all 18 checks that ran passed (2 skipped, not counted)",
    ):  # fmt: skip
        assert said in alone.stdout, alone.stdout
    assert not re.search("^FAIL", alone.stdout, re.MULTILINE)

    assert both.returncode == 0, both.stdout + both.stderr
    for said in (
        "ok    RuntimeClass gvisor exists", "ok    gVisor present: [    0.000000] Starting gVisor...",
        "ok    a call through pod replica-a runs", "ok    a call through pod replica-b runs",
        "is forwarded there: x + 1 gave '42'", "ok    pod replica-a deleted",
        "ok    pod replica-b took session smoke-",
        "with the notice: 'False\\n[This session lived on replica replica-a, which stopped answering, so its state",
        "ok    no claim of replica-a and no liveness Lease of it left",
        "(its guest exited): its claim mcp-", "smoke: all 26 checks that ran passed (0 skipped, not counted)",
    ):  # fmt: skip
        assert said in both.stdout, both.stdout
    assert not re.search("^(FAIL|skip)", both.stdout, re.MULTILINE)
    assert killed, "the deleted pod's replica is dead"
    assert left == {}, "the sessions the script made ended, and their claims with them"
    forwarded = [call[call.index("port-forward") + 1] for call in calls if "port-forward" in call]
    assert forwarded == ["svc/mcp-codemode", "svc/mcp-codemode", "pod/replica-a", "pod/replica-b"]
    secrets = [call[4] for call in calls if call[2:4] == ["get", "secret"]]
    assert secrets and set(secrets) == {"mcp-codemode-http"}, "the token came from the Secret the Deployment names"
    assert TOKEN not in json.dumps(calls), "no token on a command line"
