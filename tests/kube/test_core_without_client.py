"""The core install must not pull a Kubernetes client, nor OpenTelemetry's SDK: every host module imports with both
blocked (but the one module that is the tracing extra's, ``telemetry/otel_tracing.py``), and a bridge whose tracing
is off builds its tracing without them (a stdio bridge must start without the SDK's imports).

Why a subprocess: the test process has the dev group's extras installed and maybe imported; a fresh interpreter
with ``sys.modules["kubernetes_asyncio"] = None`` makes any import of it raise, so one stray import fails here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.backend  # it starts a process, which pure test sessions forbid
SRC = Path(__file__).resolve().parents[2] / "src"

SCRIPT = """
import importlib, pathlib, sys
for blocked in ("kubernetes_asyncio", "kubernetes", "kmock", "opentelemetry.sdk", "opentelemetry.exporter"):
    sys.modules[blocked] = None
root = pathlib.Path(sys.argv[1])
names = []
for path in sorted((root / "mcp_codemode").rglob("*.py")):
    parts = path.relative_to(root).with_suffix("").parts
    if "guest" in parts or parts[-1] in ("__main__", "otel_tracing"):
        continue  # the guest runs inside the sandbox with its own path; __main__ runs the command line
    names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
for name in names:
    importlib.import_module(name)
from mcp_codemode.settings import Settings
from mcp_codemode.telemetry.seam import tracing
assert type(tracing(Settings.load(env={}).tracing)).__name__ == "Tracing"
print(len(names))
"""


def test_every_host_module_imports_with_the_kubernetes_client_and_the_tracing_sdk_blocked() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(SRC)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 50  # the scan really found the modules, sandbox/kube's among them
