"""deploy/observability's files and promtool, the Prometheus tool that checks and unit-tests alerting rules (from
Debian's prometheus package, which scripts/setup.sh installs). A missing promtool fails a test under CI=true and
skips it elsewhere, naming the setup script."""

from __future__ import annotations

import shutil

from .backends import fail_unless
from .kube_manifests import ROOT

OBSERVABILITY = ROOT / "deploy" / "observability"
ALERTS = OBSERVABILITY / "mcp-codemode-alerts.yaml"
ALERTS_TESTS = OBSERVABILITY / "mcp-codemode-alerts.test.yaml"
DASHBOARD = OBSERVABILITY / "mcp-codemode-dashboard.json"


def promtool() -> str:
    found = shutil.which("promtool")
    fail_unless(found is not None, "promtool is not installed (Debian's prometheus package); run scripts/setup.sh")
    assert found is not None
    return found
