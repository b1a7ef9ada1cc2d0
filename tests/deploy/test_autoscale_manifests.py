"""overlays/autoscale: what the scaling and scraping rules notice, what the vendored schemas refuse, what the
autoscaler's query answers in a real PromQL engine, and that docs/kubernetes.md states the cap and target it renders.

The overlay is also rendered, schema-checked and held to every other rule with the other kustomizations in
test_manifests.py; this module breaks it on purpose, one rule at a time (a rule that cannot fail proves nothing).
"""

from __future__ import annotations

import copy
import math
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import autoscale_checks as rules
from tests.deploy.manifest_checks import find
from tests.support.kube_manifests import ROOT
from tests.support.kube_manifests import rendered as _rendered
from tests.support.kube_schemas import schema_errors
from tests.support.observability import promtool

pytestmark = pytest.mark.backend  # renders with the kubectl binary

Obj = dict[str, Any]
OVERLAY = "overlays/autoscale"


def _scaled(o: list[Obj]) -> Obj:
    spec: Obj = find(o, "ScaledObject")[0]["spec"]
    return spec


def _sessions(o: list[Obj]) -> Obj:
    meta: Obj = _scaled(o)["triggers"][0]["metadata"]
    return meta


def _endpoint(o: list[Obj]) -> Obj:
    endpoint: Obj = find(o, "PodMonitor")[0]["spec"]["podMetricsEndpoints"][0]
    return endpoint


def _face_env(o: list[Obj]) -> list[Obj]:
    env: list[Obj] = find(o, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    return env


def _metrics_token(o: list[Obj]) -> Obj:
    return next(e for e in _face_env(o) if e["name"] == rules.METRICS_TOKEN_ENV)


BASE_HPA: Obj = {"kind": "HorizontalPodAutoscaler", "metadata": {"name": "cpu"},
                 "spec": {"scaleTargetRef": {"name": "mcp-codemode"}, "maxReplicas": 4}}  # fmt: skip

BREAKAGES: dict[str, Callable[[list[Obj]], object]] = {
    "the base's HPA kept beside it": lambda o: o.append(copy.deepcopy(BASE_HPA)),
    "no autoscaler at all": lambda o: o.remove(find(o, "ScaledObject")[0]),
    "one replica at least": lambda o: _scaled(o).update(minReplicaCount=1),
    "more replicas than the claims quota": lambda o: _scaled(o).update(maxReplicaCount=5),
    "a fast scale-down": lambda o: _scaled(o)["advanced"]["horizontalPodAutoscalerConfig"]["behavior"].pop("scaleDown"),
    "scaled on the sessions alone, not per cap": lambda o: _sessions(o).update(query="sum(mcp_codemode_sessions)"),
    "the cap over the sessions": lambda o: _sessions(o).update(
        query='100 * max(mcp_codemode_sessions_max{job="mcp-codemode"}) / sum(mcp_codemode_sessions{job="x"})'
    ),
    "a renamed metric": lambda o: _sessions(o).update(query=_sessions(o)["query"].replace("sessions{", "session{")),
    "another job": lambda o: _sessions(o).update(query=_sessions(o)["query"].replace('"mcp-codemode"', '"face"')),
    "a target past the cap": lambda o: _sessions(o).update(threshold="100"),
    "a target in sessions, not a share": lambda o: _sessions(o).update(threshold="twelve"),
    "no face scraped reads as no sessions": lambda o: _sessions(o).pop("ignoreNullValues"),
    "a total, not per replica": lambda o: _scaled(o)["triggers"][0].update(metricType="Value"),
    "no sessions trigger": lambda o: _scaled(o)["triggers"].pop(0),
    "a blind autoscaler scales to a fixed count": lambda o: _scaled(o)["fallback"].update(behavior="static"),
    "nothing scrapes the face": lambda o: o.remove(find(o, "PodMonitor")[0]),
    "scraper without a token": lambda o: _endpoint(o).pop("authorization"),
    "scraper with another secret": lambda o: _endpoint(o)["authorization"]["credentials"].update(name="other"),
    "face without the metrics token": lambda o: _face_env(o).remove(_metrics_token(o)),
    "the metrics token written out": lambda o: _metrics_token(o).update(value="m" * 24),
    "scraping the peer port": lambda o: _endpoint(o).update(port="peer"),
    "scraping another path": lambda o: _endpoint(o).update(path="/mcp"),
    "a monitor that selects other pods": lambda o: find(o, "PodMonitor")[0]["spec"]["selector"].update(
        matchLabels={"app": "other"}
    ),
    "another job name": lambda o: find(o, "PodMonitor")[0]["spec"].pop("jobLabel"),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_each_autoscaling_and_scraping_rule_notices_its_breakage(breakage: str) -> None:
    broken = copy.deepcopy(list(_rendered(OVERLAY)))
    assert rules.autoscaling_problems(broken) + rules.scrape_problems(broken) == []
    BREAKAGES[breakage](broken)
    assert rules.autoscaling_problems(broken) + rules.scrape_problems(broken) != []


@pytest.mark.parametrize(
    "breakage",
    [
        lambda o: _endpoint(o).update(bearerTokenSecrett={"name": "x", "key": "token"}),  # a typo the apiserver prunes
        lambda o: _endpoint(o).update(scheme="h2c"),
        lambda o: _scaled(o).update(minReplicaCount=-1),
        lambda o: _scaled(o)["fallback"].update(behavior="hold"),
        lambda o: _scaled(o)["advanced"]["horizontalPodAutoscalerConfig"].update(behaviour={}),
    ],
    ids=["podmonitor typo", "bad scheme", "negative replicas", "unknown fallback", "scaledobject typo"],
)
def test_the_vendored_schemas_refuse_an_invalid_scaledobject_or_podmonitor(
    breakage: Callable[[list[Obj]], object],
) -> None:
    broken = copy.deepcopy(list(_rendered(OVERLAY)))
    breakage(broken)
    assert [error for kind in ("ScaledObject", "PodMonitor") for o in find(broken, kind) for error in schema_errors(o)]


def test_the_query_answers_sessions_in_percent_of_one_replicas_cap_in_a_real_promql_engine(tmp_path: Path) -> None:
    """promtool evaluates the rendered query over three scraped faces (12, 9 and 6 sessions of 16) beside a face of
    another namespace and another job: 100 x 27 / 16 = 168.75, so KEDA's HPA runs ceil(168.75 / 75) = 3 replicas."""
    objects = list(_rendered(OVERLAY))
    meta = _sessions(objects)
    faces = [("a", 12), ("b", 9), ("c", 6)]
    series = [{"series": f'{name}{{job="mcp-codemode",namespace="mcp-codemode",pod="{pod}"}}', "values": f"{value}x5"}
              for pod, sessions in faces
              for name, value in (("mcp_codemode_sessions", sessions), ("mcp_codemode_sessions_max", 16))]  # fmt: skip
    series += [
        {"series": 'mcp_codemode_sessions{job="mcp-codemode",namespace="other",pod="x"}', "values": "99x5"},
        {"series": 'mcp_codemode_sessions{job="other",namespace="mcp-codemode",pod="y"}', "values": "99x5"},
        {"series": 'mcp_codemode_sessions_max{job="other",namespace="mcp-codemode",pod="y"}', "values": "1x5"},
    ]
    expected = 100 * sum(s for _, s in faces) / 16
    case = {
        "interval": "1m",
        "input_series": series,
        "promql_expr_test": [{"expr": meta["query"], "eval_time": "2m", "exp_samples": [{"value": expected}]}],
    }
    tests = tmp_path / "query.test.yaml"
    tests.write_text(yaml.safe_dump({"rule_files": [], "tests": [case]}))
    done = subprocess.run([promtool(), "test", "rules", str(tests)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert math.ceil(expected / float(meta["threshold"])) == len(faces)


def test_the_page_states_the_cap_and_the_target_the_overlay_renders() -> None:
    """docs/kubernetes.md gives the cap, the target in percent and the sessions per replica it makes, together."""
    objects = list(_rendered(OVERLAY))
    cap = int(next(e["value"] for e in _face_env(objects) if e["name"] == "MCP_BRIDGE_MAX_SESSIONS"))
    threshold = float(_sessions(objects)["threshold"])
    text = (ROOT / "docs" / "kubernetes.md").read_text()
    section = text.split("## Autoscaling on sessions", 1)[1].split("\n## ", 1)[0]
    stated = re.search(r"`MCP_BRIDGE_MAX_SESSIONS=(\d+)`.*?threshold `(\d+)`.*?(\d+) sessions per replica", section,
                       re.DOTALL)  # fmt: skip
    assert stated is not None, "the section does not say: `MCP_BRIDGE_MAX_SESSIONS=N` ... threshold `T` ... M sessions"
    assert (int(stated[1]), float(stated[2]), int(stated[3])) == (cap, threshold, int(cap * threshold / 100))
