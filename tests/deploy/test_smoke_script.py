"""deploy/kubernetes/smoke.sh checked without a cluster: bash parses it and shellcheck finds nothing.

The script is for a user's own cluster (no control plane runs here), so this proves only that it is well-formed
shell; its frame-speaking part is the same protocol the host's tests drive against real guests.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.backends import fail_unless

pytestmark = pytest.mark.backend  # runs bash and shellcheck

SMOKE = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "smoke.sh"


def test_smoke_script_parses_with_bash_no_cluster_involved() -> None:
    done = subprocess.run(["bash", "-n", str(SMOKE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_smoke_script_is_shellcheck_clean_no_cluster_involved() -> None:
    shellcheck = shutil.which("shellcheck")
    fail_unless(
        shellcheck is not None, "shellcheck is missing (scripts/setup.sh installs it: apt-get install shellcheck)"
    )
    assert shellcheck is not None
    done = subprocess.run([shellcheck, "--severity=style", str(SMOKE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_smoke_script_is_executable() -> None:
    assert SMOKE.stat().st_mode & 0o111
