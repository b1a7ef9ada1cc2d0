"""How the console reads a sandbox's memory: its cgroup's count where it has one, else its process tree's RSS, and
nothing (None, shown as "unknown") where neither can be read. A /proc and a cgroup directory laid out in tmp."""

from __future__ import annotations

import os
from pathlib import Path

from mcp_codemode.sandbox.cgroups import WorkerCgroup
from mcp_codemode.sandbox.processes import tree_rss


def _process(proc: Path, pid: int, parent: int, name: str, pages: int) -> None:
    (proc / str(pid)).mkdir()
    (proc / str(pid) / "stat").write_text(f"{pid} ({name}) S {parent} {pid} {pid} 0 -1\n")
    (proc / str(pid) / "statm").write_text(f"{pages * 3} {pages} 10 1 0 {pages} 0\n")


def test_a_process_trees_memory_counts_its_descendants_and_a_gone_process_has_none(tmp_path: Path) -> None:
    page = os.sysconf("SC_PAGE_SIZE")
    _process(tmp_path, 10, 1, "bwrap", 100)
    _process(tmp_path, 11, 10, "python3 ) S 999", 1000)  # a name that looks like more fields: still child of 10
    _process(tmp_path, 12, 11, "sleep", 5)
    _process(tmp_path, 13, 1, "other", 7777)  # not of the tree
    (tmp_path / "self").mkdir()
    assert tree_rss(10, tmp_path) == 1105 * page
    assert tree_rss(11, tmp_path) == 1005 * page  # a subtree: itself and below
    assert tree_rss(14, tmp_path) is None  # gone
    assert (tree_rss(os.getpid()) or 0) >= int(Path("/proc/self/statm").read_text().split()[1]) * page // 2


def test_a_cgroups_memory_is_its_kernel_count_in_v1_and_v2_and_none_without_a_memory_group(tmp_path: Path) -> None:
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "memory.usage_in_bytes").write_text("12345678\n")
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "memory.current").write_text("4096\n")
    assert WorkerCgroup("v1", {"memory": tmp_path / "v1", "pids": tmp_path}).memory_current() == 12345678
    assert WorkerCgroup("v2", {"unified": tmp_path / "v2"}).memory_current() == 4096
    assert WorkerCgroup("v1", {"pids": tmp_path}).memory_current() is None  # no memory controller here
    assert WorkerCgroup("v2", {"unified": tmp_path / "gone"}).memory_current() is None
