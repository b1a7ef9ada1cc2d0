"""The fault harness (benchmarks/faults.py) on a tiny run: two faults under load, on bubblewrap, and every check.

A worker killed mid-call must end that call with the lost state said, in time; a bridge out of file descriptors
must refuse new sandboxes with the cause and its fix (it answered "Internal server error" and left cgroups behind
before issue 35); the sessions no fault hit keep their state; nothing is left running; the audit log has one record
per upstream call. No timing is judged beyond each call's own timeout plus the harness's grace.
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


def test_two_faults_under_load_end_every_call_and_leave_nothing_behind(tmp_path: Path) -> None:
    require_bubblewrap()
    out = tmp_path / "faults.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "faults.py"), "--clients", "2", "--seconds", "5",
               "--only", "kill_mid_call,fd_limit", "--out", str(out)]  # fmt: skip
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    document = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    failed = {name: check for name, check in document.get("checks", {}).items() if check is not True and not (
        isinstance(check, dict) and check.get("ok"))}  # fmt: skip
    assert completed.returncode == 0 and document.get("all_ok"), (failed, completed.stderr[-4000:])
    assert set(document["faults"]) == {"kill_mid_call", "fd_limit"}
    killed = document["faults"]["kill_mid_call"]["call"]
    assert killed["error"] == "is_error" and "state was lost" in killed["text"] and killed["in_time"]
    checks = document["checks"]
    assert checks["every_call_in_time"] and checks["unhit_sessions_kept_state"]
    assert (
        checks["nothing_left_behind"]["alive_after_stop"] == [] and checks["nothing_left_behind"]["cgroups_left"] == []
    )
    assert checks["audit_one_record_per_call"]["calls_twice"] == []
    assert document["background"]["cross_session"] == 0
