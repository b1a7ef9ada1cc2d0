"""The metric names a PromQL expression reads, and the names a bridge exposes: so an alert, a dashboard panel or an
autoscaler's query that names a metric the bridge does not expose (renamed in telemetry/metrics.py, or misspelt)
fails a test instead of answering nothing, for ever, in production.

Not a PromQL parser: what is not a metric name (strings, label matchers, ranges, grouping labels, functions,
keywords, numbers) is cut away, and what is left is. ``promtool check rules`` proves the syntax; this proves the names.
"""

from __future__ import annotations

import re
from functools import cache

from prometheus_client.parser import text_string_to_metric_families

from mcp_codemode.telemetry.seam import Recording
from mcp_codemode.telemetry.snapshot import ServerSnapshot, Snapshot

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NAME = re.compile(r"(?<![\w.$])[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?")
KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
                      "group_right", "inf", "nan", "Inf", "NaN"})  # fmt: skip
# Series Prometheus writes itself for every target it scrapes, and for alerts.
PROMETHEUS_OWN = frozenset({"up", "scrape_duration_seconds", "scrape_samples_scraped", "ALERTS", "ALERTS_FOR_STATE"})
_SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_count", "_sum", "_created"), "gauge": ("",),
             "summary": ("", "_count", "_sum", "_created"), "info": ("_info",), "unknown": ("",)}  # fmt: skip


def metric_names(expression: str) -> set[str]:
    """Every metric name ``expression`` selects."""
    text = _STRINGS.sub('""', expression)
    for pattern in (_MATCHERS, _RANGES, _GROUPING):
        text = pattern.sub(" ", text)
    found = (match.group().rstrip("( \t\n") for match in _NAME.finditer(text) if not match.group(1))
    return {name for name in found if name not in KEYWORDS}


@cache
def exposed_names() -> frozenset[str]:
    """Every series name a bridge with its metrics on serves, read from a real ``Recording``'s exposition (with an
    upstream server, so the labelled gauges appear), and those Prometheus adds of its own."""
    recording = Recording()
    servers = (ServerSnapshot("tickets", "ready", 0),)
    recording.watch(lambda: Snapshot(version="0", backend="bubblewrap", sessions=1, sessions_max=16, servers=servers))
    names = set(PROMETHEUS_OWN)
    for family in text_string_to_metric_families(recording.exposition().decode()):
        names |= {family.name + suffix for suffix in _SUFFIXES[family.type]}
    return frozenset(names)
