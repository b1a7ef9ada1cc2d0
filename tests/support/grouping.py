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
