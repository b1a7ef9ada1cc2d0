"""The README's first command ends in scripts/demo_agent.py: it must keep working, through a real client."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.patience import patient

pytestmark = pytest.mark.backend

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_demo_agent_runs_every_call_as_expected(mode: str) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("MCP_BRIDGE_")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo_agent.py"), "--mode", mode],
        capture_output=True,
        text=True,
        timeout=patient(180),
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    expected_protocol = "2026-07-28" if mode == "auto" else "2025-11-25"
    assert f"protocol {expected_protocol}" in done.stdout
    assert "[image content: image/png" in done.stdout
    assert "state survived the timeout" in done.stdout
    assert "network: OSError" in done.stdout
    # The MCP part: tools found by search, two servers composed in one call, an upstream failure caught.
    found = re.search(r"> 3 of \d+ matches for 'read a text file':\n +> +[\d.]+ +(\S+)", done.stdout)
    assert found and found.group(1) == "mcp_filesystem.read_text_file(path)", done.stdout
    assert "> 3 open TODOs in 3 notes\n" in done.stdout
    assert "the time server said: " in done.stdout and "'Europe/Paris'" in done.stdout
