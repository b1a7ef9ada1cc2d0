"""What deploy/observability's alerts, their unit tests and the Grafana dashboard must keep, as functions that list
what is wrong (as manifest_checks.py does for the manifests), so a test can break a copy and see each complain.

promtool proves the rules' syntax and behaviour; these prove what promtool cannot see: that every name the
expressions read is one the bridge exposes (a rename in telemetry/metrics.py would leave an alert that never fires
and a panel that shows nothing), that every alert is shown both firing and quiet, and that the dashboard imports
into any Grafana (its data source chosen by a variable, never a UID from the machine it was drawn on).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from tests.support.promql import exposed_names, metric_names

Obj = dict[str, Any]
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# Grafana's own variables, as PromQL would read them once Grafana has put a value in.
GRAFANA_VALUES = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1h"}
GRID_WIDTH = 24


def alert_rules(rules: Obj) -> list[Obj]:
    return [rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule]


def dashboard_queries(dashboard: Obj) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every panel target and query variable, Grafana's variables given values."""
    for panel in _panels(dashboard):
        for target in panel.get("targets", []):
            yield f"panel {panel.get('title')!r} {target.get('refId')}", grafana_to_promql(target.get("expr", ""))
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            found = re.fullmatch(r"label_values\((?:(.*),\s*)?(\w+)\)", variable["query"]["query"])
            assert found, f"variable {variable['name']}: not a label_values() query"
            yield f"variable {variable['name']}", grafana_to_promql(found[1] or "up")


def grafana_to_promql(expression: str) -> str:
    for name, value in GRAFANA_VALUES.items():
        expression = expression.replace(name, value)
    return expression


def unknown_metric_problems(queries: list[tuple[str, str]]) -> list[str]:
    """Each query names at least one metric, and only metrics a bridge exposes (or Prometheus writes itself)."""
    problems = []
    for where, expression in queries:
        names = metric_names(expression)
        if not names:
            problems.append(f"{where}: reads no metric: {expression}")
        for name in sorted(names - exposed_names()):
            problems.append(f"{where}: {name} is not a metric the bridge exposes (telemetry/metrics.py)")
    return problems


def _panels(dashboard: Obj) -> Iterator[Obj]:
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])  # a collapsed row holds its panels


def _uids(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "uid":
                yield path + ".uid", value
            yield from _uids(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _uids(item, f"{path}[{index}]")


def dashboard_problems(dashboard: Obj) -> list[str]:
    """A Grafana dashboard: a title, a uid and a schemaVersion; a data source variable every panel and target uses,
    and no other data source UID anywhere; panels with unique ids, a place on the 24-column grid that no other
    panel covers, and targets with unique refIds and an expression; every $variable the queries use defined."""
    problems = [f"dashboard: no {key}" for key in ("title", "uid", "schemaVersion", "panels") if key not in dashboard]
    variables = {v["name"]: v for v in dashboard.get("templating", {}).get("list", [])}
    source = variables.get("datasource", {})
    if (source.get("type"), source.get("query")) != ("datasource", "prometheus"):
        problems.append("dashboard: no variable 'datasource' of type datasource choosing a Prometheus")
    problems += [f"dashboard: {where} is {uid!r}, a data source of one Grafana; use ${{datasource}}"
                 for where, uid in _uids(dashboard) if where != ".uid" and uid != DATASOURCE["uid"]]  # fmt: skip
    ids: set[int] = set()
    taken: set[tuple[int, int]] = set()
    for panel in _panels(dashboard):
        where = f"panel {panel.get('id')} {panel.get('title')!r}"
        if panel.get("id") in ids or not isinstance(panel.get("id"), int):
            problems.append(f"{where}: its id is missing or not unique")
        ids.add(panel.get("id", -1))
        grid = panel.get("gridPos", {})
        if not all(isinstance(grid.get(k), int) for k in "hwxy") or grid["x"] + grid["w"] > GRID_WIDTH:
            problems.append(f"{where}: gridPos {grid} is not a place on the {GRID_WIDTH}-column grid")
            continue
        x, y, w, h = (grid[k] for k in "xywh")
        cells = {(column, line) for column in range(x, x + w) for line in range(y, y + h)}
        if cells & taken:
            problems.append(f"{where}: overlaps another panel")
        taken |= cells
        if panel.get("type") == "row":
            continue
        targets = panel.get("targets", [])
        if panel.get("datasource") != DATASOURCE or any(t.get("datasource") != DATASOURCE for t in targets):
            problems.append(f"{where}: its data source is not {DATASOURCE}")
        refs = [t.get("refId") for t in targets]
        if not targets or len(set(refs)) != len(refs) or not all(t.get("expr") for t in targets):
            problems.append(f"{where}: no targets, or targets without an expression or a unique refId")
        used = {name for t in targets for name in re.findall(r"\$(\w+)", t.get("expr", ""))} - {"__rate_interval"}
        problems += [f"{where}: uses ${name}, which no variable defines" for name in sorted(used - set(variables))]
    return problems


def alert_test_problems(rules: Obj, tests: Obj) -> list[str]:
    """Every alert has an evaluation that expects it to fire, and one that shows it quiet: an evaluation expecting
    nothing, or, beside one expecting it, input series that none of the expected alerts was made of."""
    problems = []
    for alert in (rule["alert"] for rule in alert_rules(rules)):
        fires = quiet = False
        for group in tests["tests"]:
            evaluations = [e for e in group.get("alert_rule_test", []) if e["alertname"] == alert]
            expected = [a["exp_labels"] for e in evaluations for a in e.get("exp_alerts", [])]
            fires |= bool(expected)
            quiet |= any(not e.get("exp_alerts") for e in evaluations)
            quiet |= bool(expected) and any(not _covered(s["series"], expected) for s in group["input_series"])
        if not fires or not quiet:
            problems.append(f"alert {alert}: no unit test shows it {'firing' if not fires else 'quiet'}")
    return problems


def _covered(series: str, expected: list[Obj]) -> bool:
    """The series is one an expected alert was made of: it has each of that alert's labels it has at all."""
    labels = dict(re.findall(r'(\w+)="([^"]*)"', series))
    return any(all(labels[key] == str(value) for key, value in alert.items() if key in labels) for alert in expected)
