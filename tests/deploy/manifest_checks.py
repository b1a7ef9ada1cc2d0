"""The security and consistency rules deploy/kubernetes must keep, as functions that list what is wrong.

Apart from the test module so that a test can feed each rule a deliberately broken copy of the rendered objects
and see it complain: a rule that cannot fail proves nothing. Each function returns problems as sentences, empty
when the objects are sound.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

from mcp_codemode.cluster.naming import SIGN_INS_SECRET
from mcp_codemode.cluster.permissions import PERMISSIONS
from mcp_codemode.face.probes import HEALTH_PATH, READY_PATH
from mcp_codemode.face.stopping import MARGIN_S
from mcp_codemode.face.web import AFTER_DRAIN_S
from mcp_codemode.sandbox.kube.start_check import TIMEOUT_S
from mcp_codemode.settings import Settings
from tests.support.kube_manifests import face_grants

Obj = dict[str, Any]
NAMESPACE = "mcp-codemode"
SANDBOX_UID = 65534
SANDBOX_COMMAND = ["sleep", "infinity"]
CLAIMS_QUOTA_KEY = "count/sandboxclaims.extensions.agents.x-k8s.io"
RUNTIME_CLASS_ENV = "MCP_BRIDGE_KUBE_RUNTIME_CLASS"
# Every (verb, apiGroup, resource, subresource) the bridge uses: the table doctor checks, so the two cannot drift.
NEEDED = {(p.verb, p.group, p.resource, p.subresource, name) for p in PERMISSIONS for name in p.names or ("",)}
_UNITS = {"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "k": 10**3, "M": 10**6, "G": 10**9}


def quantity(text: str | int) -> int:
    """Bytes in a Kubernetes quantity such as ``512Mi`` (the forms these manifests use)."""
    found = re.fullmatch(r"(\d+)([KMG]i|[kMG])?", str(text))
    if found is None:
        raise ValueError(f"unsupported quantity {text!r}")
    return int(found.group(1)) * _UNITS[found.group(2) or ""]


def find(objects: list[Obj], kind: str, name: str | None = None) -> list[Obj]:
    return [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]


def _effective(pod: Obj, container: Obj, key: str) -> Any:
    """A security setting as it applies to the container: its own value, else the pod's."""
    own = container.get("securityContext", {})
    return own[key] if key in own else pod.get("securityContext", {}).get(key)


def container_problems(pod: Obj, where: str, uid: int | None) -> list[str]:
    """Non-root (uid ``uid`` when given), read-only root, no capability, no escalation, seccomp, sized resources."""
    problems = []
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            problems.append(f"{where}: {field} is on")
    if any("hostPath" in volume for volume in pod.get("volumes", [])):
        problems.append(f"{where}: a hostPath volume")
    for container in pod.get("initContainers", []) + pod["containers"]:
        at = f"{where} container {container['name']}"
        sc = container.get("securityContext", {})
        if _effective(pod, container, "runAsNonRoot") is not True:
            problems.append(f"{at}: runAsNonRoot is not true")
        user, group = _effective(pod, container, "runAsUser"), _effective(pod, container, "runAsGroup")
        if uid is not None and (user, group) != (uid, uid):
            problems.append(f"{at}: runs as {user}:{group}, not {uid}:{uid}")
        if user == 0 or group == 0:
            problems.append(f"{at}: runs as root")
        if sc.get("readOnlyRootFilesystem") is not True:
            problems.append(f"{at}: root filesystem is writable")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{at}: allowPrivilegeEscalation is not false")
        if sc.get("privileged"):
            problems.append(f"{at}: privileged")
        capabilities = sc.get("capabilities", {})
        if capabilities.get("drop") != ["ALL"] or capabilities.get("add"):
            problems.append(f"{at}: capabilities are not exactly drop [ALL]: {capabilities}")
        if (_effective(pod, container, "seccompProfile") or {}).get("type") != "RuntimeDefault":
            problems.append(f"{at}: seccompProfile is not RuntimeDefault")
        resources = container.get("resources", {})
        for part in ("requests", "limits"):
            for resource in ("cpu", "memory"):
                if resource not in resources.get(part, {}):
                    problems.append(f"{at}: no {part}.{resource}")
    return problems


def _memory_volume(pod: Obj, container: Obj, path: str) -> Obj | None:
    """The emptyDir mounted at ``path``, when it is memory-backed; None otherwise."""
    names = [m["name"] for m in container.get("volumeMounts", []) if m["mountPath"] == path]
    for volume in pod.get("volumes", []):
        if volume["name"] in names and volume.get("emptyDir", {}).get("medium") == "Memory":
            empty_dir: Obj = volume["emptyDir"]
            return empty_dir
    return None


def sandbox_problems(template: Obj, settings: Settings) -> list[str]:
    """The sandbox pod: no token, uid 65534, idle PID 1, memory /tmp and /workspace sized as the bridge's (its
    runtime class: ``runtime_class_problems``, which reads the face's setting too)."""
    pod = template["spec"]["podTemplate"]["spec"]
    problems = container_problems(pod, "sandbox pod", SANDBOX_UID)
    if pod.get("automountServiceAccountToken") is not False:
        problems.append("sandbox pod: the service account token is mounted")
    if len(pod["containers"]) != 1:
        problems.append("sandbox pod: the face execs into one container; there must be exactly one")
    container = pod["containers"][0]
    if container.get("command") != SANDBOX_COMMAND:
        problems.append(f"sandbox pod: command is {container.get('command')}, not {SANDBOX_COMMAND}")
    limits = container.get("resources", {}).get("limits", {})
    if quantity(limits.get("memory", 0)) != settings.memory:
        problems.append(f"sandbox pod: memory limit {limits.get('memory')} is not MCP_BRIDGE_MEMORY {settings.memory}")
    for path, size in (("/tmp", settings.tmp_size), ("/workspace", settings.workspace_size)):
        volume = _memory_volume(pod, container, path)
        if volume is None:
            problems.append(f"sandbox pod: {path} is not a memory-backed emptyDir")
        elif "sizeLimit" not in volume or quantity(volume["sizeLimit"]) != size:
            problems.append(f"sandbox pod: {path} sizeLimit is {volume.get('sizeLimit')}, not {size} bytes")
    return problems


def runtime_class_problems(objects: list[Obj]) -> list[str]:
    """gVisor, or no runtime class only where the face was told so (MCP_BRIDGE_KUBE_RUNTIME_CLASS=none: the
    no-gvisor overlay's explicit choice); a face that requires what the template does not name would refuse every
    sandbox, and one told "none" under a gVisor template is a choice nobody needed."""
    deployments = find(objects, "Deployment")
    env = {e["name"]: e.get("value") for e in deployments[0]["spec"]["template"]["spec"]["containers"][0]["env"]}
    wanted = env.get(RUNTIME_CLASS_ENV) or Settings().kube_runtime_class
    problems = []
    for template in find(objects, "SandboxTemplate"):
        has = template["spec"]["podTemplate"]["spec"].get("runtimeClassName")
        if has is None and wanted == "none":
            continue
        if has != "gvisor":
            chosen = "" if wanted == "none" else f" and the face does not say {RUNTIME_CLASS_ENV}=none"
            problems.append(f"sandbox pod: runtimeClassName is {has!r}, not gvisor{chosen}")
        elif wanted != has:
            problems.append(f"face: {RUNTIME_CLASS_ENV}={wanted!r}, but the sandbox pods run under {has!r}")
    return problems


def network_problems(objects: list[Obj]) -> list[str]:
    """Deny-all both ways: the template's managed policy with empty rules, and the plain policy under it."""
    problems = []
    for template in find(objects, "SandboxTemplate"):
        spec = template["spec"]
        if spec.get("networkPolicyManagement") != "Managed":
            problems.append("template: networkPolicyManagement is not Managed")
        policy = spec.get("networkPolicy")
        # Left out, agent-sandbox applies its default, which allows egress to the public internet.
        if policy is None or policy.get("ingress") != [] or policy.get("egress") != []:
            problems.append(f"template: networkPolicy is not deny-all both ways: {policy}")
        labels = spec["podTemplate"].get("metadata", {}).get("labels", {})
        plain = [
            p for p in find(objects, "NetworkPolicy")
            if p["spec"]["podSelector"].get("matchLabels")
            and p["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
            and sorted(p["spec"].get("policyTypes", [])) == ["Egress", "Ingress"]
            and not p["spec"].get("ingress") and not p["spec"].get("egress")
        ]  # fmt: skip
        if not plain:
            problems.append("no plain deny-all NetworkPolicy (both policy types, no rule) selects the sandbox pods")
    return problems


def face_network_problems(objects: list[Obj]) -> list[str]:
    """The face's peer port (MCP_BRIDGE_PEER_PORT of its Deployment) is open to the face pods alone, and the face
    pods have a policy of both kinds (egress too: a compromised face reaches only what its rules allow)."""
    deployments = find(objects, "Deployment")
    if len(deployments) != 1:
        return []
    pod_labels = deployments[0]["spec"]["template"]["metadata"]["labels"]
    env = {e["name"]: e.get("value") for e in deployments[0]["spec"]["template"]["spec"]["containers"][0]["env"]}
    peer_port = int(env.get("MCP_BRIDGE_PEER_PORT") or 0)
    policies = [p for p in find(objects, "NetworkPolicy")
                if (p["spec"]["podSelector"].get("matchLabels") or {}).items() <= pod_labels.items()
                and p["spec"]["podSelector"].get("matchLabels")]  # fmt: skip
    if not peer_port:
        return ["face: no MCP_BRIDGE_PEER_PORT: forwarded calls would share the clients' port"]
    if not any(sorted(p["spec"].get("policyTypes", [])) == ["Egress", "Ingress"] for p in policies):
        return ["face: no NetworkPolicy of both kinds selects the face pods"]
    problems = []
    for policy in policies:
        for rule in policy["spec"].get("ingress", []):
            ports = {port.get("port") for port in rule.get("ports", [])}
            if rule.get("ports") and peer_port not in ports:
                continue
            sources = rule.get("from", [])
            only_faces = sources and all(
                (source.get("podSelector", {}).get("matchLabels") or {}).items() <= pod_labels.items()
                and source.get("podSelector", {}).get("matchLabels") and "namespaceSelector" not in source
                and "ipBlock" not in source
                for source in sources
            )  # fmt: skip
            if not only_faces:
                problems.append(f"networkpolicy {policy['metadata']['name']}: the peer port {peer_port} is open to "
                                "more than the face pods")  # fmt: skip
    return problems


def rbac_problems(objects: list[Obj]) -> list[str]:
    """Only Roles in the namespace, bound to the face's account, granting it exactly what the bridge uses: a verb
    missing fails on a real cluster, one too many is a right nobody needs."""
    problems = []
    for kind in ("ClusterRole", "ClusterRoleBinding"):
        problems += [f"a {kind} {o['metadata']['name']}: nothing may be cluster-wide" for o in find(objects, kind)]
    for role in find(objects, "Role"):
        for rule in role.get("rules", []):
            if rule.get("nonResourceURLs") or rule.get("resourceNames") == []:
                problems.append(f"role {role['metadata']['name']}: unexpected rule {rule}")
    for binding in find(objects, "RoleBinding"):
        if binding["roleRef"]["kind"] != "Role":
            problems.append(f"rolebinding {binding['metadata']['name']} binds a {binding['roleRef']['kind']}")
        for subject in binding["subjects"]:
            if subject["kind"] != "ServiceAccount" or subject.get("namespace") != NAMESPACE:
                problems.append(f"rolebinding {binding['metadata']['name']}: subject {subject}")
    granted = face_grants(objects).granted()
    problems += [f"the face's Role lacks {verb} on {group}/{resource} {sub} {name or '(any name)'}"
                 for verb, group, resource, sub, name in sorted(NEEDED - granted)]  # fmt: skip
    problems += [f"the face's Role grants {verb} on {group}/{resource} {sub} {name or '(any name)'}, which the bridge "
                 "does not use" for verb, group, resource, sub, name in sorted(granted - NEEDED)]  # fmt: skip
    return problems


def quota_problems(objects: list[Obj]) -> list[str]:
    quotas = [q for q in find(objects, "ResourceQuota") if CLAIMS_QUOTA_KEY in q["spec"].get("hard", {})]
    return [] if quotas else [f"no ResourceQuota caps {CLAIMS_QUOTA_KEY}"]


def namespace_problems(objects: list[Obj]) -> list[str]:
    """Everything in its own namespace, which enforces Pod Security "restricted"."""
    problems = []
    namespaces = find(objects, "Namespace", NAMESPACE)
    labels = namespaces[0]["metadata"].get("labels", {}) if namespaces else {}
    if labels.get("pod-security.kubernetes.io/enforce") != "restricted":
        problems.append(f"namespace {NAMESPACE} does not enforce Pod Security restricted")
    for o in objects:
        if o["kind"] != "Namespace" and o["metadata"].get("namespace") != NAMESPACE:
            problems.append(f"{o['kind']} {o['metadata']['name']} is in {o['metadata'].get('namespace')!r}")
    return problems


def face_problems(objects: list[Obj]) -> list[str]:
    """The face: hardened pod, probes, and a Service, HPA and PDB that really point at it."""
    deployments = find(objects, "Deployment")
    if len(deployments) != 1:
        return [f"expected one face Deployment, found {len(deployments)}"]
    deployment = deployments[0]
    pod = deployment["spec"]["template"]["spec"]
    problems = container_problems(pod, "face pod", None)
    container = pod["containers"][0]
    if container.get("args", [])[:3] != ["serve", "--transport", "http"]:
        problems.append(f"face: args {container.get('args')} do not serve HTTP")
    problems += probe_problems(container)
    env = {item["name"]: item.get("value") for item in container.get("env", [])}
    if env.get("MCP_BRIDGE_SHARED_STATE") != "kubernetes":
        problems.append("face: MCP_BRIDGE_SHARED_STATE is not kubernetes: each replica would keep its own sign-ins and "
                        "saved tools in its emptyDir, lost with the pod")  # fmt: skip
    elif not find(objects, "Secret", SIGN_INS_SECRET):
        problems.append(f"face: no Secret {SIGN_INS_SECRET} for the sign-ins replicas share (the Role names it, and "
                        "the face may not create Secrets)")  # fmt: skip
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    name = deployment["metadata"]["name"]
    for service in find(objects, "Service"):
        if not service["spec"]["selector"].items() <= pod_labels.items():
            problems.append(f"service {service['metadata']['name']} does not select the face pods")
    scalers = [
        h
        for kind in ("HorizontalPodAutoscaler", "ScaledObject")
        for h in find(objects, kind)
        if h["spec"]["scaleTargetRef"]["name"] == name
    ]  # an HPA, or KEDA's ScaledObject that makes one
    budgets = find(objects, "PodDisruptionBudget")
    pdbs = [p for p in budgets if p["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()]
    if not find(objects, "Service") or not scalers or not pdbs:
        problems.append("face: a Service, an autoscaler (HPA or ScaledObject) and a PDB must all target the Deployment")
    spread = {c.get("topologyKey") for c in pod.get("topologySpreadConstraints", [])
              if c.get("labelSelector", {}).get("matchLabels", {}).items() <= pod_labels.items()}  # fmt: skip
    for key in ("kubernetes.io/hostname", "topology.kubernetes.io/zone"):
        if key not in spread:
            problems.append(f"face: replicas are not spread over {key} (one node or zone would hold every session)")
    return problems + stop_problems(pod, container) + ingress_problems(objects)


PROBE_PATHS = {"startupProbe": HEALTH_PATH, "readinessProbe": READY_PATH, "livenessProbe": HEALTH_PATH}


def probe_problems(container: Obj) -> list[str]:
    """The face's probes ask its endpoints (src/mcp_codemode/face/probes.py), not whether a port is open: readiness
    asks /readyz (a face that cannot take a session leaves the Service), startup and liveness ask /healthz, never
    /readyz (a full or cut-off face must not be restarted, which would lose its sessions), and readiness waits longer
    than the face's own read of the cluster (sandbox/kube/start_check.py), or a slow API server would fail it."""
    problems = []
    ports = {port.get("name") for port in container.get("ports", [])} | {8765}
    for probe, path in PROBE_PATHS.items():
        asks = (container.get(probe) or {}).get("httpGet") or {}
        if not asks:
            problems.append(f"face: no {probe} asking {path} over HTTP")
        elif asks.get("path") != path or asks.get("port") not in ports:
            problems.append(f"face: {probe} asks {asks.get('path')} on {asks.get('port')}, not {path} on the MCP port")
    waits = (container.get("readinessProbe") or {}).get("timeoutSeconds", 1)
    if waits <= TIMEOUT_S:
        problems.append(f"face: the readinessProbe gives up after {waits} s, before the face's read of the cluster "
                        f"({TIMEOUT_S:g} s) does")  # fmt: skip
    return problems


CLOSE_S = 5  # after the drain: hand over what is left, close the sandboxes (delete the claims), end the liveness


def stop_problems(pod: Obj, container: Obj) -> list[str]:
    """A rollout, a drain or a scale-down stops a face pod (src/mcp_codemode/face/stopping.py): a preStop sleep lets
    the Service drop the pod before it closes its port, then the grace period must hold the longest call (the
    container's MCP_BRIDGE_MAX_TIMEOUT and MCP_BRIDGE_INTERRUPT_GRACE, or their defaults), the drain's margin,
    uvicorn's last seconds and the close; shorter, the kubelet kills calls the replica would have finished."""
    env = {var["name"]: var.get("value") for var in container.get("env", [])}
    defaults = Settings()
    longest = float(env.get("MCP_BRIDGE_MAX_TIMEOUT") or defaults.max_timeout)
    longest += float(env.get("MCP_BRIDGE_INTERRUPT_GRACE") or defaults.interrupt_grace)
    waits = ((container.get("lifecycle") or {}).get("preStop") or {}).get("sleep") or {}
    problems = []
    if not waits.get("seconds"):
        problems.append(
            "face: no preStop sleep: a stopping pod would close its port while clients are still sent there"
        )
    needed = float(waits.get("seconds") or 0) + longest + MARGIN_S + AFTER_DRAIN_S + CLOSE_S
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if grace < needed:
        problems.append(f"face: terminationGracePeriodSeconds {grace} is shorter than a stop needs ({needed:g} s: "
                        "preStop, the longest call, the drain's margin and the close)")  # fmt: skip
    return problems


def ingress_problems(objects: list[Obj]) -> list[str]:
    """An Ingress routes clients to the MCP endpoint only: the replicas' peer endpoint (/internal/...) shares the
    port, and must never be reachable from outside the cluster through it."""
    problems = []
    for ingress in find(objects, "Ingress"):
        for rule in ingress["spec"].get("rules", []):
            for path in rule.get("http", {}).get("paths", []):
                if path.get("path") != "/mcp" or path.get("pathType") not in ("Prefix", "Exact"):
                    problems.append(f"ingress {ingress['metadata']['name']}: path {path.get('path')!r} reaches more "
                                    "than /mcp")  # fmt: skip
        if "defaultBackend" in ingress["spec"]:
            problems.append(f"ingress {ingress['metadata']['name']}: a default backend reaches every path")
    return problems


# A header whose name says it carries a credential (Authorization, X-API-Key, Cookie, ...).
_CREDENTIAL_HEADER = re.compile(r"auth|token|key|secret|cookie|password", re.IGNORECASE)


def team_config_problems(objects: list[Obj]) -> list[str]:
    """A face given its upstream servers by a ConfigMap and their credentials by a Secret (overlays/team-config):
    both mounted read-only as whole directories (a subPath mount is never updated, so it would never refresh), the
    refresh on, the Secret's files not readable by everyone in the pod, only those files read, and the ConfigMap
    holding HTTP servers only (a stdio one is refused in the pod) and no credential of its own. Nothing to check for
    a face that names no MCP_SERVERS_CONFIG."""
    deployments = find(objects, "Deployment")
    if len(deployments) != 1:
        return []
    pod = deployments[0]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    if "MCP_SERVERS_CONFIG" not in env:
        return []
    problems = []
    if not float(env.get("MCP_BRIDGE_CONFIG_REFRESH") or 0) > 0:
        problems.append("face: MCP_BRIDGE_CONFIG_REFRESH is off: an edited ConfigMap or rotated Secret needs a restart")
    if str(env.get("MCP_BRIDGE_DISCOVER")).lower() not in ("false", "0", "no", "off"):
        problems.append("face: MCP_BRIDGE_DISCOVER is not false: client config files in the image would be read too")
    mounts = {m["mountPath"]: m for m in container.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    # The server list may be a Secret too (the face's Role may patch every ConfigMap of its namespace, no Secret).
    for setting, kinds in (("MCP_SERVERS_CONFIG", ("configMap", "secret")), ("MCP_BRIDGE_SECRETS_DIR", ("secret",))):
        mount = mounts.get(str(env.get(setting)))
        volume = volumes.get(mount["name"], {}) if mount is not None else {}
        kind = next((kind for kind in kinds if kind in volume), "")
        if mount is None or not kind:
            problems.append(f"face: {setting} ({env.get(setting)}) is not the mount of a {' or '.join(kinds)} volume")
            continue
        if "subPath" in mount or "subPathExpr" in mount:
            problems.append(f"face: {setting} is mounted with subPath, which the kubelet never updates")
        if not mount.get("readOnly"):
            problems.append(f"face: {setting} is not mounted read-only")
        if kind == "secret" and volume["secret"].get("defaultMode", 0o644) & 0o007:
            problems.append("face: the upstream secrets are readable by every user of the pod; defaultMode 0440")
    names = {v["configMap"]["name"] for v in volumes.values() if "configMap" in v}
    for config_map in [o for o in find(objects, "ConfigMap") if o["metadata"]["name"] in names]:
        problems += _servers_problems(config_map)
    return problems


def _servers_problems(config_map: Obj) -> list[str]:
    problems = []
    for key, text in config_map.get("data", {}).items():
        try:
            servers = json.loads(text).get("mcpServers", {})
        except (ValueError, AttributeError):
            problems.append(f"configmap {config_map['metadata']['name']}: {key} is not a JSON object")
            continue
        for name, entry in servers.items():
            where = f"configmap {config_map['metadata']['name']}: server {name!r}"
            if "command" in entry:
                problems.append(f"{where} is a stdio server, which the face refuses in its pod: run it over HTTP")
            if urlsplit(entry.get("url", "")).password:
                problems.append(f"{where} has a password in its url")
            for header, value in entry.get("headers", {}).items():
                if _CREDENTIAL_HEADER.search(header) and "${secret:" not in value:
                    problems.append(f"{where}: header {header} is written out; use ${{secret:NAME}} from the Secret")
    return problems
