"""Whole groups of tests to one pytest-xdist worker (``--dist loadgroup``, tests/conftest.py makes the groups).

pytest-xdist 3.8's loadgroup tells the controller each test's group by renaming the test on the worker
(``nodeid@group``); pytest 9.2 builds a node id from its parts, so that renaming is lost and every test was
scheduled alone: a file's module fixtures (its bridge, its installs) were built on each worker that got one of its
tests. Here each worker writes the groups it collected to a file, and the controller's scheduler reads them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]  # xdist ships no types

ENV = "CODEMODE_TEST_GROUPS"  # the folder the workers write their groups to, made by the controller
# The files whose tests took longest, in seconds summed over their tests (a --durations=0 run on a loaded machine,
# 2026-11-28): their groups are handed out first, so that no worker starts one of them when the others are nearly
# done. Only the order depends on it: a file renamed or grown is still run, merely in collection order.
HEAVY = {
    "tests/security/test_protocol.py": 642, "tests/upstream/test_client_requests_e2e.py": 411,
    "tests/cli/test_conformance_auth.py": 388, "tests/security/test_resources.py": 328,
    "tests/runs/test_warm_pool.py": 321, "tests/upstream/test_hub.py": 286, "tests/deploy/test_smoke_script.py": 242,
    "tests/face/test_agent_frameworks.py": 230, "tests/runs/test_proxy.py": 217,
    "tests/upstream/test_upstream_e2e.py": 210, "tests/runs/test_sessions.py": 198,
    "tests/security/test_filesystem.py": 170, "tests/face/test_inspector.py": 170, "tests/face/test_replicas.py": 169,
    "tests/upstream/test_search_e2e.py": 162, "tests/benchmarks/test_bench_results.py": 144,
    "tests/kube/test_oauth_replicas_kmock.py": 139, "tests/upstream/test_approvals_e2e.py": 124,
    "tests/benchmarks/test_remote_cluster_stand_in.py": 124, "tests/face/test_session_files_e2e.py": 119,
    "tests/face/test_server_http.py": 117, "tests/upstream/test_add_server_e2e.py": 100,
    "tests/security/test_privilege.py": 96, "tests/face/test_server_stdio.py": 91, "tests/security/test_secrets.py": 90,
}  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or config.getoption("dist", "no") != "loadgroup":
        return
    folder = tempfile.mkdtemp(prefix="pytest-groups-")
    os.environ[ENV] = folder  # before the workers start: they inherit it
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


@pytest.hookimpl(trylast=True)  # after the conftest's hook marked the groups and after deselection
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    folder, worker = os.environ.get(ENV), os.environ.get("PYTEST_XDIST_WORKER")
    if not folder or not worker:
        return
    # Heaviest files first; stable, so a file's tests stay together and in order (every worker sorts alike).
    items.sort(key=lambda item: -HEAVY.get(item.nodeid.split("::", 1)[0], 0))
    groups = {}
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        if mark is not None:
            groups[item.nodeid] = str(mark.kwargs.get("name", mark.args[0] if mark.args else "default"))
    part = Path(folder) / f"{worker}.json.part"
    part.write_text(json.dumps(groups), encoding="utf-8")
    part.replace(Path(folder) / f"{worker}.json")  # whole, before the worker says its collection finished


class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]  # an untyped base
    """pytest-xdist's scope scheduling with the groups the workers wrote as scopes (a test without one: alone)."""

    groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self.groups is None:
            self.groups = {}
            for path in sorted(Path(os.environ[ENV]).glob("*.json")):
                self.groups.update(json.loads(path.read_text(encoding="utf-8")))
        return self.groups.get(nodeid, nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
    if config.getoption("dist", "no") == "loadgroup" and os.environ.get(ENV):
        return GroupScheduling(config, log)
    return None
