"""The official MCP conformance suite against ``mcp-codemode serve --transport http``, once per protocol era.

``conformance server --requirements <revision>`` runs exactly what a spec revision requires, at that revision's wire:
2025-11-25 through ``initialize``, 2026-07-28 stateless. Much of the suite calls tools, prompts and resources
that only its own reference server has (``test_simple_text``, ``test://static-text``, ...); those checks, and only
those, are listed in tests/conformance-baseline.yml. The suite itself exits non-zero on a failure the baseline
does not list and on a listed check that passes (a stale entry); the tests here add that every entry names a
scenario and check the suite really runs, and print what failed.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.inspector import CONFORMANCE, ROOT, node_command, running_bridge
from tests.support.patience import patient

BASELINE = ROOT / "tests" / "conformance-baseline.yml"
REVISIONS = ("2025-11-25", "2026-07-28")
SUITE_SECONDS = round(patient(300))
SCENARIO_MILLISECONDS = 20_000
ENTRY = re.compile(r"^  - (?P<scenario>[a-z0-9/-]+):(?P<check>[a-z0-9-]+)  # (?P<reason>\S.*)$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
FAILED = ("FAILURE", "WARNING")  # what the suite's baseline evaluation counts as failed


def baseline_entries() -> list[tuple[str, str, str]]:
    """``(scenario, check, reason)`` per entry, insisting on the one-entry-one-reason layout."""
    entries: list[tuple[str, str, str]] = []
    section = None
    for number, line in enumerate(BASELINE.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            section = line
            assert section == "server:", f"{BASELINE.name}:{number}: only a server: list belongs here, not {line!r}"
            continue
        match = ENTRY.match(line)
        assert match, f"{BASELINE.name}:{number}: not '  - <scenario>:<check-id>  # <reason>': {line!r}"
        assert section == "server:", f"{BASELINE.name}:{number}: entry outside the server: list"
        entries.append((match["scenario"], match["check"], match["reason"]))
    assert entries, f"{BASELINE.name} lists nothing"
    pairs = [(scenario, check) for scenario, check, _ in entries]
    duplicates = sorted({pair for pair in pairs if pairs.count(pair) > 1})
    assert not duplicates, f"{BASELINE.name} lists these twice: {duplicates}"
    return entries


def required_scenarios(revision: str) -> set[str]:
    """The server scenarios ``--requirements <revision>`` runs, scored or not, as ``conformance list`` names them."""
    command = [*node_command(CONFORMANCE), "list", "--requirements", revision]
    done = subprocess.run(command, capture_output=True, text=True, timeout=SUITE_SECONDS, check=False)
    assert done.returncode == 0, f"{' '.join(command)} exited with {done.returncode}:\n{done.stdout}{done.stderr}"
    text = ANSI.sub("", done.stdout)
    server_part = text.split("Server scenarios", 1)[1].split("Client scenarios", 1)[0]
    return set(re.findall(r"^\s+- (\S+)", server_part, re.MULTILINE))


def load_results(results: Path) -> dict[str, list[dict[str, Any]]]:
    """Checks per scenario from ``--output-dir``: one ``server-<scenario>-<timestamp>/checks.json`` per scenario."""
    checks: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(results.glob("server-*/checks.json")):
        match = re.fullmatch(r"server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z", path.parent.name)
        assert match, f"unexpected results directory {path.parent.name}"
        checks[match[1]] = json.loads(path.read_text())
    return checks


def listed_after(report: str, heading: str) -> list[str]:
    """The ``  ✗ name`` / ``  ✓ name`` lines under one of the suite's baseline headings."""
    if heading not in report:
        return []
    block = report.split(heading, 1)[1].split("\n\n", 1)[0]
    return [line.split(None, 1)[1] for line in block.splitlines() if line.startswith("  ") and " " in line.strip()]


def explain(revision: str, report: str, checks: dict[str, list[dict[str, Any]]]) -> str:
    """What failed, with the suite's own error messages, for a failing run."""
    lines = [f"conformance --requirements {revision}: the suite exited non-zero against mcp-codemode serve."]
    unexpected = listed_after(report, "Unexpected failures (not in baseline):")
    stale = listed_after(report, "Stale baseline entries (now passing - remove from baseline):")
    if unexpected:
        lines.append(
            "Unexpected failures (a server bug unless the check calls a tool, prompt or resource only the suite's "
            f"reference server has; only then does it belong in {BASELINE.name}):"
        )
        for entry in unexpected:
            scenario, _, check_id = entry.partition(":")
            for check in checks.get(scenario, []):
                if check.get("status") in FAILED and check_id in ("", check.get("id")):
                    message = check.get("errorMessage") or check.get("description") or ""
                    lines.append(f"  {scenario}:{check.get('id')} {check.get('status')}: {message}")
    if stale:
        lines.append(f"Stale entries, now passing; remove them from {BASELINE.name}: {', '.join(stale)}")
    if not unexpected and not stale:
        lines.append(report[-4000:])
    return "\n".join(lines)


@pytest.fixture(scope="module")
def conformance_bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    node_command(CONFORMANCE)  # skip (or fail under CI) before starting anything
    with running_bridge(tmp_path_factory.mktemp("bridge") / "serve.log") as url:
        yield url


def test_baseline_excuses_single_checks_that_need_the_reference_fixture() -> None:
    """Each entry is one check, and its reason names what of the suite's reference server it needs."""
    for scenario, check, reason in baseline_entries():
        assert "fixture" in reason, f"{scenario}:{check}: the reason must name the fixture it needs: {reason!r}"


@pytest.mark.backend
def test_baseline_names_only_scenarios_the_requirement_sets_run() -> None:
    runnable = set().union(*(required_scenarios(revision) for revision in REVISIONS))
    assert {"tools-list", "server-initialize", "server-stateless"} <= runnable, "could not read conformance list"
    unknown = sorted({scenario for scenario, _, _ in baseline_entries()} - runnable)
    assert not unknown, f"{BASELINE.name} names scenarios neither requirement set runs: {unknown}"


@pytest.mark.backend
@pytest.mark.parametrize("revision", REVISIONS)
def test_conformance_suite_fails_nothing_outside_the_baseline(
    revision: str, conformance_bridge: str, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    command = [
        *node_command(CONFORMANCE),
        "server",
        "--url",
        conformance_bridge,
        "--requirements",
        revision,
        "--expected-failures",
        str(BASELINE),
        "--timeout",
        str(SCENARIO_MILLISECONDS),
        "--output-dir",
        str(results),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=SUITE_SECONDS, cwd=tmp_path, check=False)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the conformance suite took over {SUITE_SECONDS} s: {' '.join(command)}\n{exc.stdout!r}")
    report = ANSI.sub("", done.stdout)
    checks = load_results(results)
    if done.returncode != 0:
        pytest.fail(explain(revision, report + done.stderr, checks))
    assert "Baseline check passed" in report, report[-4000:]

    # The run reached the server: its core scenarios ran and passed every check.
    for scenario in ("tools-list", "resources-list", "dns-rebinding-protection"):
        assert checks.get(scenario), f"scenario {scenario} did not run:\n{report[-4000:]}"
        assert all(check["status"] not in FAILED for check in checks[scenario]), checks[scenario]

    # The suite tolerates an entry whose check a scenario never emits (so a typo'd or renamed id would sit there
    # unnoticed): every entry for a scenario that ran must name a check that really failed.
    for scenario, check_id, _ in baseline_entries():
        if scenario in checks:
            failed = {check["id"] for check in checks[scenario] if check["status"] in FAILED}
            assert check_id in failed, f"{BASELINE.name}: {scenario}:{check_id} did not fail in {revision}: {failed}"
