"""What the run tells about itself while it runs: the security tally per backend, and the tests that took long.

A pytest plugin of the root conftest, because with pytest-xdist the tests run in worker processes and only their
reports reach the controller; hooks in ``tests/security/conftest.py`` would count on each worker and print nothing.
Reports are read in ``pytest_runtest_logreport``, which runs where the reports meet (the one pytest process, or the
controller); the worker only labels each report with its attack.

The slow-test lines are printed as the tests end, with the time since the run started, so that a CI run cut off
at its wall still shows in its log where its time went (``--durations`` prints only at the very end).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from .backends import IN_CI
from .security import RECORDS, REPORT_FILE, ROOT, SECURITY_BACKENDS, attack_id

SLOW_SECONDS = 60.0  # setup + call + teardown of one test; the slowest take about a minute on an ordinary machine
_ATTACK = "attack"
_started = time.monotonic()
_spent: dict[str, float] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Label the report with its attack (module, name, backend), which only the item knows."""
    report_box = yield
    key = attack_id(item)
    if key is not None:
        report: pytest.TestReport = report_box.get_result()  # type: ignore[attr-defined]
        report.user_properties.append((_ATTACK, list(key)))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _count_attack(report)
    _note_if_slow(report)


def _count_attack(report: pytest.TestReport) -> None:
    found = [value for name, value in report.user_properties if name == _ATTACK and isinstance(value, list)]
    if not found:
        return
    key = (str(found[0][0]), str(found[0][1]))
    if report.failed:
        RECORDS[key] = "failed"
    elif report.skipped and report.when in ("setup", "call"):
        RECORDS.setdefault(key, "skipped")
    elif report.when == "call" and report.passed:
        RECORDS.setdefault(key, "passed")


def _note_if_slow(report: pytest.TestReport) -> None:
    spent = _spent.pop(report.nodeid, 0.0) + report.duration
    if report.when != "teardown":
        _spent[report.nodeid] = spent
        return
    if spent < SLOW_SECONDS:
        return
    worker = getattr(report, "node", None)
    where = f" on {worker.gateway.id}" if worker is not None else ""
    elapsed = time.monotonic() - _started
    _write(f"[slow] {spent:.0f} s {report.nodeid}{where}, {elapsed / 60:.1f} min into the run")


_terminal: list[Any] = []


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        _terminal.append(reporter)


def _write(line: str) -> None:
    if _terminal:
        _terminal[0].write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not RECORDS or hasattr(session.config, "workerinput"):  # a worker's RECORDS are empty; the controller writes
        return
    rows = [{"attack": a, "backend": b, "outcome": o} for (a, b), o in sorted(RECORDS.items())]
    REPORT_FILE.parent.mkdir(parents=True, exist_ok=True)
    REPORT_FILE.write_text(json.dumps({"ci": IN_CI, "results": rows}, indent=2) + "\n")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not RECORDS:
        return
    terminalreporter.section("security suite: attacks per backend")
    for backend in SECURITY_BACKENDS:
        outcomes = [o for (_, b), o in RECORDS.items() if b == backend]
        if not outcomes:
            continue
        contained = outcomes.count("passed")
        failed = outcomes.count("failed")
        skipped = outcomes.count("skipped")
        terminalreporter.write_line(
            f"{backend:>10}: {len(outcomes)} tried, {contained} contained, {failed} not contained/failed"
            + (f", {skipped} skipped" if skipped else "")
        )
    for (attack, backend), result in sorted(RECORDS.items()):
        if result == "failed":
            terminalreporter.write_line(f"  FAILED {backend}: {attack}")
    terminalreporter.write_line(f"(written to {REPORT_FILE.relative_to(ROOT)})")
