"""The rules for how the face is scaled and scraped (overlays/autoscale, and the base's CPU HPA), as functions that
list what is wrong, so a test can feed each a deliberately broken copy and see it complain (as manifest_checks.py).

What a schema cannot say: KEDA's trigger metadata is a map of strings, and the operator reads a Secret the face must
read too. A cluster would accept every breakage below and then scale on nothing, scrape nothing, or lose sessions.
"""

from __future__ import annotations

from typing import Any

from mcp_codemode.settings import Settings
from tests.deploy.manifest_checks import CLAIMS_QUOTA_KEY, find
from tests.support.promql import exposed_names, metric_names

Obj = dict[str, Any]
SESSIONS, SESSIONS_MAX = "mcp_codemode_sessions", "mcp_codemode_sessions_max"
JOB = "mcp-codemode"  # the job deploy/observability's alerts and dashboard select
METRICS_TOKEN_ENV = "MCP_BRIDGE_METRICS_TOKEN"
SLOW_SCALE_DOWN_S = 300  # at least the HPA's default window: a scale-down loses the removed replica's sessions


def _face(objects: list[Obj]) -> Obj | None:
    deployments = find(objects, "Deployment")
    return deployments[0] if len(deployments) == 1 else None


def _env(deployment: Obj) -> list[Obj]:
    env: list[Obj] = deployment["spec"]["template"]["spec"]["containers"][0].get("env", [])
    return env


def autoscaling_problems(objects: list[Obj]) -> list[str]:
    """One autoscaler for the face (KEDA refuses a ScaledObject beside an HPA, and two HPAs fight), never fewer than
    two replicas (a drain must leave one to take the sessions over), never more than the claims quota holds, and a
    slow scale-down; a ScaledObject scales on sessions as a share of the cap, and holds still when blind."""
    deployment = _face(objects)
    if deployment is None:
        return []
    name = deployment["metadata"]["name"]
    hpas = [h for h in find(objects, "HorizontalPodAutoscaler") if h["spec"]["scaleTargetRef"]["name"] == name]
    scaled = [s for s in find(objects, "ScaledObject") if s["spec"]["scaleTargetRef"]["name"] == name]
    if len(hpas) + len(scaled) != 1:
        return [f"face: {len(hpas)} HPAs and {len(scaled)} ScaledObjects scale it; exactly one autoscaler may"]
    if hpas:
        spec = hpas[0]["spec"]
        low, high, behavior = spec.get("minReplicas", 1), spec["maxReplicas"], spec.get("behavior", {})
    else:
        spec = scaled[0]["spec"]
        low, high = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100)
        behavior = spec.get("advanced", {}).get("horizontalPodAutoscalerConfig", {}).get("behavior", {})
    problems = []
    if low < 2:
        problems.append(f"face autoscaler: minimum {low} replicas; a drain of the last one loses every session")
    env = {e["name"]: e.get("value") for e in _env(deployment)}
    defaults = Settings()
    per_replica = int(env.get("MCP_BRIDGE_MAX_SESSIONS") or defaults.max_sessions)
    per_replica += int(env.get("MCP_BRIDGE_WARM_POOL") or defaults.warm_pool)
    quotas = [int(q["spec"]["hard"][CLAIMS_QUOTA_KEY]) for q in find(objects, "ResourceQuota")
              if CLAIMS_QUOTA_KEY in q["spec"].get("hard", {})]  # fmt: skip
    if quotas and high * per_replica > min(quotas):
        problems.append(f"face autoscaler: {high} replicas x {per_replica} claims is over the quota of {min(quotas)}; "
                        "the last replicas' sessions would be refused")  # fmt: skip
    down = behavior.get("scaleDown", {})
    pods_policies = [p for p in down.get("policies", []) if p["type"] == "Pods"]
    if (
        down.get("stabilizationWindowSeconds", 0) < SLOW_SCALE_DOWN_S
        or not pods_policies
        or any(p["value"] > 1 for p in pods_policies)
    ):
        problems.append(f"face autoscaler: scale-down faster than one replica at a time after {SLOW_SCALE_DOWN_S} s; "
                        "each replica removed loses its sessions")  # fmt: skip
    if scaled:
        problems += _session_trigger_problems(scaled[0], objects)
    return problems


def names_ok(expression: str) -> bool:
    """``expression`` names metrics, and only metrics the bridge exposes (or Prometheus writes itself)."""
    names = metric_names(expression)
    return bool(names) and names <= exposed_names()


def _session_trigger_problems(scaled: Obj, objects: list[Obj]) -> list[str]:
    triggers = [t for t in scaled["spec"]["triggers"] if t["type"] == "prometheus"]
    if len(triggers) != 1:
        return [f"scaledobject: {len(triggers)} prometheus triggers, not one on the sessions"]
    trigger, problems = triggers[0], []
    meta = trigger["metadata"]
    query = meta.get("query", "")
    if trigger.get("metricType") != "AverageValue":
        problems.append("scaledobject: the sessions trigger is not AverageValue: the target would not be per replica")
    above, _, below = query.partition("/")
    if not names_ok(query) or SESSIONS not in metric_names(above) or SESSIONS_MAX not in metric_names(below):
        problems.append(f"scaledobject: the query does not divide {SESSIONS} by {SESSIONS_MAX} (the cap), or names "
                        "a metric the bridge does not expose")  # fmt: skip
    if f'job="{JOB}"' not in query:
        problems.append(f"scaledobject: the query does not select the job {JOB!r} the PodMonitor scrapes as")
    try:
        threshold = float(meta.get("threshold", ""))
    except ValueError:
        threshold = -1
    if not 0 < threshold < 100:
        problems.append(f"scaledobject: threshold {meta.get('threshold')!r} is not a share of the cap below 100 %: "
                        "replicas would fill before more are added, and evict")  # fmt: skip
    if meta.get("ignoreNullValues") != "false":
        problems.append("scaledobject: ignoreNullValues is not false: no face scraped would read as no sessions, "
                        "and scale down")  # fmt: skip
    fallback = scaled["spec"].get("fallback") or {}
    if fallback.get("behavior") not in ("currentReplicas", "currentReplicasIfHigher"):
        problems.append("scaledobject: no fallback that keeps the current replicas while Prometheus cannot answer")
    if not find(objects, "PodMonitor"):
        problems.append("scaledobject: nothing scrapes the face (no PodMonitor): its query would answer nothing")
    return problems


def scrape_problems(objects: list[Obj]) -> list[str]:
    """Tokens only from Secrets, and a PodMonitor that can read the face: it selects the face pods, asks /metrics on
    the MCP port, names the job the alerts expect, and sends the token the face's MCP_BRIDGE_METRICS_TOKEN reads
    (any other gets 401, and the autoscaler is blind)."""
    deployment = _face(objects)
    if deployment is None:
        return []
    env = {e["name"]: e for e in _env(deployment)}
    problems = [f"face: {name} is written out in the manifest; take it from a Secret (secretKeyRef)"
                for name, e in env.items() if name.endswith("TOKEN") and "value" in e]  # fmt: skip
    template = deployment["spec"]["template"]
    pod_labels = template["metadata"]["labels"]
    container = template["spec"]["containers"][0]
    http_port = int((env.get("MCP_BRIDGE_HTTP_PORT") or {}).get("value") or Settings().http_port)
    mcp_port = next((p.get("name") for p in container.get("ports", []) if p["containerPort"] == http_port), None)
    reads = (env.get(METRICS_TOKEN_ENV) or {}).get("valueFrom", {}).get("secretKeyRef") or {}
    for monitor in find(objects, "PodMonitor"):
        where = f"podmonitor {monitor['metadata']['name']}"
        spec = monitor["spec"]
        if not spec["selector"].get("matchLabels", {}).items() <= pod_labels.items():
            problems.append(f"{where} does not select the face pods")
        if pod_labels.get(spec.get("jobLabel", "")) != JOB:
            problems.append(f"{where}: the job is not {JOB!r}, which the alerts and the autoscaler's query select")
        for endpoint in spec["podMetricsEndpoints"]:
            if endpoint.get("path") != "/metrics" or endpoint.get("port") is None or endpoint["port"] != mcp_port:
                problems.append(f"{where}: scrapes {endpoint.get('path')} on {endpoint.get('port')}, not /metrics on "
                                "the MCP port")  # fmt: skip
            sends = (endpoint.get("authorization") or {}).get("credentials") or {}
            if not reads or (sends.get("name"), sends.get("key")) != (reads.get("name"), reads.get("key")):
                problems.append(f"{where}: sends {sends or 'no token'}, not the Secret key the face's "
                                f"{METRICS_TOKEN_ENV} reads ({reads or 'none'}): every scrape gets 401")  # fmt: skip
    return problems
