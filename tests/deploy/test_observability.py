"""deploy/observability: the alerting rules checked and unit-tested by promtool (each alert shown firing and quiet,
and each unit test shown to fail when its alert no longer fires), the dashboard's queries parsed by promtool too,
and, without any process, every metric name they and the autoscaler's query read checked against what a bridge
exposes, and the dashboard's structure against what Grafana imports."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import observability_checks as checks
from tests.support.kube_manifests import DEPLOY
from tests.support.observability import ALERTS, ALERTS_TESTS, DASHBOARD, promtool

Obj = dict[str, Any]
SCALED_OBJECT = DEPLOY / "overlays" / "autoscale" / "scaledobject.yaml"


def _rules() -> Obj:
    rules: Obj = yaml.safe_load(ALERTS.read_text())
    return rules


def _dashboard() -> Obj:
    dashboard: Obj = json.loads(DASHBOARD.read_text())
    return dashboard


def _queries(rules: Obj, dashboard: Obj) -> list[tuple[str, str]]:
    queries = [(f"alert {rule['alert']}", rule["expr"]) for rule in checks.alert_rules(rules)]
    queries += list(checks.dashboard_queries(dashboard))
    for trigger in yaml.safe_load(SCALED_OBJECT.read_text())["spec"]["triggers"]:
        if trigger["type"] == "prometheus":
            queries.append(("the autoscaler's query", trigger["metadata"]["query"]))
    return queries


def test_every_metric_the_alerts_dashboard_and_autoscaler_read_is_one_the_bridge_exposes() -> None:
    queries = _queries(_rules(), _dashboard())
    assert len(queries) > 30
    assert checks.unknown_metric_problems(queries) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [("mcp_codemode_sessions_max", "mcp_codemode_session_cap"), ("calls_total", "calls"), ("seconds_bucket", "bucket")],
)
def test_a_renamed_metric_is_noticed_wherever_it_is_read(old: str, new: str) -> None:
    rules = yaml.safe_load(ALERTS.read_text().replace(old, new))
    dashboard = json.loads(DASHBOARD.read_text().replace(old, new))
    for where in ("alert", "panel"):
        queries = [query for query in _queries(rules, dashboard) if query[0].startswith(where)]
        assert any(new in problem for problem in checks.unknown_metric_problems(queries)), where


def test_the_dashboard_is_a_grafana_dashboard_on_a_chosen_prometheus() -> None:
    dashboard = _dashboard()
    assert checks.dashboard_problems(dashboard) == []
    titles = {panel["title"] for panel in dashboard["panels"]}
    assert {"Calls by outcome", "Call latency (successful calls)", "Sessions per replica and the cap",
            "Sandbox starts", "Wait for a sandbox", "Upstream calls by server and outcome",
            "Upstream servers not ready", "Approvals by decision"} <= titles  # fmt: skip


def _panel(dashboard: Obj) -> Obj:
    panel: Obj = next(p for p in dashboard["panels"] if p["type"] == "timeseries")
    return panel


DASHBOARD_BREAKAGES: dict[str, Callable[[Obj], object]] = {
    "a data source UID of one Grafana": lambda d: _panel(d)["datasource"].update(uid="P1809F7CD0C75ACF3"),
    "a target's data source hard-coded": lambda d: _panel(d)["targets"][0].update(datasource={"uid": "prom-1"}),
    "no data source variable": lambda d: d["templating"]["list"].pop(0),
    "a panel without targets": lambda d: _panel(d).update(targets=[]),
    "two targets with one refId": lambda d: _panel(d)["targets"].append(dict(_panel(d)["targets"][0])),
    "an undefined variable": lambda d: _panel(d)["targets"][0].update(expr='up{job=~"$cluster"}'),
    "panels on top of each other": lambda d: d["panels"].append(dict(_panel(d), id=999)),
    "a panel off the grid": lambda d: _panel(d)["gridPos"].update(x=20, w=12),
    "two panels with one id": lambda d: d["panels"][-1].update(id=_panel(d)["id"]),
    "no schemaVersion": lambda d: d.pop("schemaVersion"),
}


@pytest.mark.parametrize("breakage", sorted(DASHBOARD_BREAKAGES))
def test_each_dashboard_rule_notices_its_breakage(breakage: str) -> None:
    dashboard = copy.deepcopy(_dashboard())
    DASHBOARD_BREAKAGES[breakage](dashboard)
    assert checks.dashboard_problems(dashboard) != []


def test_every_alert_has_a_unit_test_showing_it_firing_and_one_showing_it_quiet() -> None:
    rules, tests = _rules(), yaml.safe_load(ALERTS_TESTS.read_text())
    assert {rule["alert"] for rule in checks.alert_rules(rules)} >= {
        "MCPCodemodeCallErrorRatioHigh", "MCPCodemodeCallLatencyHigh", "MCPCodemodeSessionsNearCap",
        "MCPCodemodeUpstreamServerDown", "MCPCodemodeSandboxStartsFailing",
    }  # fmt: skip
    assert checks.alert_test_problems(rules, tests) == []
    untested = copy.deepcopy(tests)
    for group in untested["tests"]:  # the quiet neighbours dropped: only what fires is left
        for evaluation in group["alert_rule_test"]:
            if evaluation["alertname"] == "MCPCodemodeUpstreamServerDown":
                fired = f'server="{evaluation["exp_alerts"][0]["exp_labels"]["server"]}"'
                group["input_series"] = [s for s in group["input_series"] if fired in s["series"]]
    assert checks.alert_test_problems(rules, untested) == [
        "alert MCPCodemodeUpstreamServerDown: no unit test shows it quiet"
    ]


def _promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *map(str, args)], capture_output=True, text=True, timeout=60)


@pytest.mark.backend
def test_promtool_checks_the_rules_and_their_unit_tests_pass() -> None:
    checked = _promtool("check", "rules", ALERTS)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(checks.alert_rules(_rules()))} rules found" in checked.stdout
    tested = _promtool("test", "rules", ALERTS_TESTS)
    assert tested.returncode == 0, tested.stdout + tested.stderr


@pytest.mark.backend
def test_each_alerts_unit_test_fails_once_the_alert_never_fires(tmp_path: Path) -> None:
    """The unit tests are evaluated, not just read: with every alert's expression made one that never fires (one
    promtool run), promtool test fails, and names each alert."""
    shutil.copy(ALERTS_TESTS, tmp_path / ALERTS_TESTS.name)
    rules = _rules()
    for rule in checks.alert_rules(rules):
        rule["expr"] = "vector(1) == 0"
    (tmp_path / ALERTS.name).write_text(yaml.safe_dump(rules))
    done = _promtool("test", "rules", tmp_path / ALERTS_TESTS.name)
    assert done.returncode != 0
    said = done.stdout + done.stderr
    silent = [rule["alert"] for rule in checks.alert_rules(rules) if f"alertname: {rule['alert']}," not in said]
    assert silent == []


@pytest.mark.backend
def test_every_dashboard_query_is_promql_promtool_accepts(tmp_path: Path) -> None:
    queries = list(checks.dashboard_queries(_dashboard()))
    records = [{"record": f"dashboard:query_{n}", "expr": expression} for n, (_, expression) in enumerate(queries)]
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}))
    checked = _promtool("check", "rules", path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump({"groups": [{"name": "d", "rules": [dict(records[0], expr="sum(rate(x[5m])")]}]}))
    assert _promtool("check", "rules", broken).returncode != 0
