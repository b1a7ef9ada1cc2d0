"""benchmarks/density.py in a tiny run on bubblewrap: the document has the shape docs/density.md describes.

A handful of sessions, never a number judged: how many fit in 4 GiB and what each costs is what the benchmark
reports on a real run (benchmarks/results/density.json), not what a test may assert. What is asserted is that the
sessions it opened were real and live (each answered its own variable again) and that every figure is there.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.clients import require_bubblewrap

pytestmark = pytest.mark.backend

ROOT = Path(__file__).resolve().parents[2]


def test_density_tiny_run_reports_the_count_and_the_cost(tmp_path: Path) -> None:
    require_bubblewrap()
    out = tmp_path / "density.json"
    completed = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "density.py"), "--quick", "--max-sessions", "3", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-4000:]
    document = json.loads(out.read_text(encoding="utf-8"))
    assert json.loads(completed.stdout) == document
    assert document["benchmark"] == "density" and document["quick"] is True
    assert "summed PSS" in document["memory_counted"] and document["budget"] == "4g"
    section = document["backends"]["bubblewrap"]
    assert section["sessions_opened"] == 3 and section["stopped_by"] == "max_sessions"
    assert section["alive"] == {"sessions": 3, "checked": 3, "ok": 3, "wrong": []}
    assert section["fit"]["how"] == "projected" and isinstance(section["fit"]["sessions"], int)
    assert {"median_ms", "p95_ms", "min_ms", "n"} <= set(section["open_call"]) and section["open_call"]["n"] == 3
    per = section["per_session"]
    assert set(per) == {"total_pss_mib", "bridge_pss_mib", "sandbox_pss_mib", "threads", "page_tables_mib"}
    assert section["sandbox_pss_kib"]["n"] == section["at_end"]["groups"] >= 3
    assert {"bwrap", "python3"} <= set(section["at_end"]["by_process"])
    points = section["points"]
    assert points[0]["sessions"] == 0 and points[-1]["sessions"] == 3
    assert [p["sessions"] for p in points] == sorted(p["sessions"] for p in points)
    assert "bubblewrap" in completed.stderr and "projected" in completed.stderr  # the table
