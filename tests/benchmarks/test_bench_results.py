"""The benchmark driver and its report: files are written and well-formed. No timing is judged here.

The driver runs the search benchmark in its quick form (no sandbox needed); the sessions benchmark runs in a tiny
configuration on bubblewrap and the report is rendered from the JSON it wrote. What the numbers are is what
benchmarks/*.py report, not what a test may assert.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import require_bubblewrap

pytestmark = pytest.mark.backend

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run(*command: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [sys.executable, *command], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return completed


def check_png(path: Path) -> None:
    import matplotlib.image

    assert path.read_bytes()[:8] == PNG_SIGNATURE, path
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[0] > 50 and image.shape[1] > 50, (path, image.shape)


def check_stats(stats: dict[str, Any]) -> None:
    assert {"median_ms", "p95_ms", "min_ms", "n"} <= set(stats)
    assert stats["n"] >= 1
    assert 0 <= stats["min_ms"] <= stats["median_ms"] <= stats["p95_ms"]


def test_driver_runs_a_benchmark_and_renders_summary_and_plots(tmp_path: Path) -> None:
    completed = run(str(BENCHMARKS / "run_all.py"), "--only", "search", "--quick", "--out", str(tmp_path))
    document = json.loads((tmp_path / "search.json").read_text(encoding="utf-8"))
    assert document["benchmark"] == "search" and document["quick"] is True
    assert not list(tmp_path.glob("*.partial"))

    record = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert record["ran"] == ["search"] and record["quick"] is True
    entry = record["benchmarks"]["search"]
    assert entry["status"] == "ok" and entry["returncode"] == 0 and entry["args"] == ["--quick"]
    assert isinstance(record["total_s"], float)

    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert summary.startswith("# Benchmark results")
    assert "## Tool search" in summary and "quick run" in summary
    assert "| figure | median | p95 | n | baseline (same run): median / p95 | target |" in summary
    assert "ours, one query, 1000 tools" in summary and "BM25:" in summary
    rows, inside = 0, False
    for line in summary.splitlines():  # every row of a figure table has the header's six cells
        if line.startswith("| figure | median"):
            inside = True
        elif not line.startswith("|"):
            inside = False
        if inside:
            assert line.count("|") == 7, line
            rows += 1
    assert rows > 4
    listed = {Path(line).name for line in completed.stdout.split()}
    assert {"summary.md", "latency.png", "latency_search.png"} <= listed
    for image in summary.split("](")[1:]:
        name = image.split(")", 1)[0]
        assert (tmp_path / name).exists(), f"summary.md links {name}, which was not written"
    for path in tmp_path.glob("*.png"):
        check_png(path)


def test_driver_reports_a_failed_benchmark_and_drops_its_old_document(tmp_path: Path) -> None:
    (tmp_path / "sandbox.json").write_text('{"benchmark": "sandbox", "stale": true}\n', encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, str(BENCHMARKS / "run_all.py"), "--only", "sandbox", "--out", str(tmp_path),
         "--timeout", "120"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={"PATH": "/usr/bin:/bin", "MCP_BRIDGE_RUNTIME": "no-such-backend"},
    )  # fmt: skip
    record = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    entry = record["benchmarks"]["sandbox"]
    assert completed.returncode == 1 and entry["status"] == "failed", completed.stderr[-2000:]
    assert entry["stderr_tail"]
    assert not (tmp_path / "sandbox.json").exists()
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "## sandbox: failed" in summary


@pytest.mark.backend
def test_sessions_benchmark_tiny_run_and_its_report(tmp_path: Path) -> None:
    require_bubblewrap()
    out = tmp_path / "sessions.json"
    # One level, of two sessions: each level starts a server of its own, and one of two sessions shows all a level
    # of one does (its sessions, calls, memory, and the report's line for it) and concurrency besides.
    completed = run(
        str(BENCHMARKS / "sessions.py"), "--levels", "2", "--calls", "4", "--idle", "2", "--growth-calls", "40",
        "--out", str(out),
    )  # fmt: skip
    document = json.loads(out.read_text(encoding="utf-8"))
    assert json.loads(completed.stdout) == document
    assert document["benchmark"] == "sessions" and document["backend"] == "bubblewrap"
    assert set(document["levels"]) == {"2"}
    for key, level in document["levels"].items():
        assert level["sessions"] == int(key)
        for stats in (level["latency"], level["first_call"], level["baseline"]["latency"]):
            check_stats(stats)
        assert level["calls"] == level["baseline"]["calls"] == int(key) * level["calls_per_session"]
        assert level["throughput_per_s"] > 0 and level["baseline"]["throughput_per_s"] > 0
        cdf = level["cdf_ms"]
        assert len(cdf) == 21 and cdf == sorted(cdf)
        assert level["memory"]["sandboxes"]["trees"] >= int(key)
    memory = document["memory"]
    assert memory["idle_sessions"] == 2
    assert memory["at_rest"]["bridge"]["rss_mb"] > 0
    assert memory["with_idle"]["sandboxes"]["trees"] >= memory["at_rest"]["sandboxes"]["trees"] + 2
    assert memory["per_idle_session"]["sandbox_rss_mb"] > 0
    growth = document["growth"]
    assert growth["calls"] == 40 and growth["points"][0]["calls"] == 0 and growth["points"][-1]["calls"] == 40
    check_stats(growth["latency"])
    assert [row["met"] in (True, False) for row in document["targets"]] == [True]

    run(str(BENCHMARKS / "run_all.py"), "--render-only", "--out", str(tmp_path))
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "## Sessions" in summary and "idle session ≤ 30 MB RSS" in summary
    assert "2 concurrent session(s): a call" in summary and "in-process:" in summary
    for name in ("sessions_scaling.png", "sessions_memory.png", "latency_sessions.png", "latency.png"):
        check_png(tmp_path / name)
