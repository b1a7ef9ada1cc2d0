"""The default session cap follows the memory (session_capacity.py): pure logic, on files the tests write.

What the cap is computed from (the machine's memory, or a lower cgroup limit), that an explicit cap always wins,
that a cap computed for bubblewrap is computed again when ``auto`` lands on a container, and what would stop that
many sessions before memory does (open files, tasks).
"""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_codemode.sandbox.container import ContainerBackend
from mcp_codemode.session_capacity import (
    CEILING,
    COMPUTED,
    FLOOR,
    IDLE_SESSION_COST,
    KUBERNETES_CAP,
    MEMORY_SHARE,
    backend_kind,
    capacity_problems,
    memory_limit,
    raise_open_files,
    session_cap,
    task_limits,
)
from mcp_codemode.settings import Settings
from tests.support.backends import fail_unless

GIB = 1 << 30


def machine(tmp_path: Path, total_kib: int, cgroup_line: str, files: dict[str, str]) -> tuple[Path, Path, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(f"MemTotal:       {total_kib} kB\nMemFree:        1 kB\n", encoding="utf-8")
    proc_cgroup = tmp_path / "cgroup"
    proc_cgroup.write_text(cgroup_line + "\n", encoding="utf-8")
    root = tmp_path / "sys"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return meminfo, root, proc_cgroup


def test_memory_is_the_machines_unless_the_cgroup_allows_less(tmp_path: Path) -> None:
    no_limit = machine(tmp_path / "a", 16 << 20, "0::/svc", {"svc/memory.max": "max\n"})
    assert memory_limit(*no_limit) == (16 * GIB, "the machine's memory")
    v2 = machine(tmp_path / "b", 16 << 20, "0::/pod", {"pod/memory.max": f"{2 * GIB}\n"})
    assert memory_limit(*v2) == (2 * GIB, "the bridge's cgroup memory limit")
    v1 = machine(tmp_path / "c", 16 << 20, "4:memory:/unit\n3:pids:/unit",
                 {"memory/unit/memory.limit_in_bytes": f"{GIB}\n"})  # fmt: skip
    assert memory_limit(*v1) == (GIB, "the bridge's cgroup memory limit")
    unlimited_v1 = machine(
        tmp_path / "d", 16 << 20, "4:memory:/", {"memory/memory.limit_in_bytes": "9223372036854771712"}
    )
    assert memory_limit(*unlimited_v1) == (16 * GIB, "the machine's memory")


def test_the_computed_cap_is_a_share_of_memory_over_the_idle_cost_between_floor_and_ceiling() -> None:
    cap = session_cap(16, "", "bubblewrap", (16 * GIB, "the machine's memory"))
    assert cap.cap == 16 * GIB // MEMORY_SHARE // IDLE_SESSION_COST["bubblewrap"]
    assert "1/4 share of 16.0 GiB (the machine's memory)" in cap.explain() and "bubblewrap" in cap.explain()
    assert session_cap(16, "", "podman", (16 * GIB, "")).cap < cap.cap  # a container session costs more
    assert session_cap(16, "", "bubblewrap", (64 << 20, "")).cap == FLOOR
    assert session_cap(16, "", "bubblewrap", (1 << 50, "")).cap == CEILING
    assert session_cap(16, "", "bubblewrap", (0, "")).cap == FLOOR  # memory unknown
    assert session_cap(16, "", "kubernetes").cap == KUBERNETES_CAP


def test_an_explicit_cap_wins_and_says_where_it_was_set() -> None:
    cap = session_cap(7, "MCP_BRIDGE_MAX_SESSIONS", "bubblewrap", (16 * GIB, ""))
    assert cap.cap == 7 and cap.explain() == "7 (set by MCP_BRIDGE_MAX_SESSIONS)"


def test_gvisor_and_auto_are_costed_as_what_they_run() -> None:
    assert backend_kind("podman", "runsc") == backend_kind("podman", "/usr/bin/runsc") == "gvisor"
    assert backend_kind("podman", "runc") == "podman"
    assert backend_kind("auto", "") == "bubblewrap"


def test_settings_compute_the_cap_unless_it_is_set_and_recompute_it_for_a_container_fallback() -> None:
    computed = Settings.load(env={})
    assert computed.sources["max_sessions"] == COMPUTED
    assert computed.max_sessions == session_cap(0, "", "bubblewrap").cap
    on_podman = computed.sized_for("podman")
    assert on_podman.max_sessions == session_cap(0, "", "podman").cap
    assert computed.sized_for("bubblewrap") is computed
    explicit = Settings.load(env={"MCP_BRIDGE_MAX_SESSIONS": "7"})
    assert explicit.max_sessions == 7 and explicit.sized_for("podman").max_sessions == 7
    in_code = computed.replace(max_sessions=3)  # set by code (tests, benchmarks): explicit from then on
    assert "max_sessions" not in in_code.sources and in_code.sized_for("podman").max_sessions == 3
    assert Settings.load(env={"MCP_BRIDGE_RUNTIME": "kubernetes"}).max_sessions == KUBERNETES_CAP


def test_what_would_stop_the_sessions_before_memory_does() -> None:
    plenty = {"kernel.pid_max": 4_194_304}
    assert capacity_problems(1000, "bubblewrap", (1024, 524_288), plenty) == []
    files = capacity_problems(1000, "bubblewrap", (1024, 1024), plenty)
    assert len(files) == 1 and "open files" in files[0] and "hard limit is 1024" in files[0]
    tasks = capacity_problems(
        1000, "bubblewrap", (1024, 524_288), {"the bridge's cgroup pids.max (systemd: TasksMax)": 4915}
    )
    assert len(tasks) == 1 and "TasksMax" in tasks[0] and "5000 tasks" in tasks[0]
    assert capacity_problems(1000, "kubernetes", (1024, 1024), {}) == []


def test_task_limits_read_the_kernel_and_the_cgroup(tmp_path: Path) -> None:
    kernel = tmp_path / "kernel"
    kernel.mkdir()
    (kernel / "pid_max").write_text("32768\n", encoding="utf-8")
    (kernel / "threads-max").write_text("192730\n", encoding="utf-8")
    _, root, proc_cgroup = machine(tmp_path, 1, "0::/svc", {"svc/pids.max": "4915\n"})
    assert task_limits(root, proc_cgroup, kernel) == {
        "kernel.pid_max": 32768, "kernel.threads-max": 192730, "the bridge's cgroup pids.max (systemd: TasksMax)": 4915
    }  # fmt: skip
    _, root, proc_cgroup = machine(tmp_path / "max", 1, "0::/svc", {"svc/pids.max": "max\n"})
    assert "the bridge's cgroup pids.max (systemd: TasksMax)" not in task_limits(root, proc_cgroup, kernel)


@pytest.fixture
def restored_open_files() -> Iterator[tuple[int, int]]:
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    yield before
    resource.setrlimit(resource.RLIMIT_NOFILE, before)


def test_the_bridge_raises_its_soft_open_files_limit_to_the_hard_one(restored_open_files: tuple[int, int]) -> None:
    _, hard = restored_open_files
    fail_unless(hard == resource.RLIM_INFINITY or hard >= 64, "the open-files hard limit is under 64: raise it")
    resource.setrlimit(resource.RLIMIT_NOFILE, (32, hard))
    soft, after_hard = raise_open_files()
    assert after_hard == hard and soft > 32
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == soft


def test_a_computed_cap_follows_a_change_of_backend_made_in_code() -> None:
    computed = Settings.load(env={})
    podman = computed.replace(runtime="podman")
    assert podman.max_sessions == session_cap(0, "", "podman").cap and podman.sources["max_sessions"] == COMPUTED
    assert computed.replace(oci_runtime="runsc", runtime="podman").max_sessions == session_cap(0, "", "gvisor").cap


def test_rootful_podman_nproc_never_passes_the_bridges_own_hard_limit() -> None:
    """runc may not raise RLIMIT_NPROC above the hard limit of the bridge that starts it: with a cap of thousands,
    pids x sessions would, and every container would fail to start."""
    _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    backend = ContainerBackend(Settings(max_sessions=CEILING, pids=128), "podman")
    if os.geteuid() != 0:  # rootless: nproc is the per-container limit itself, never a sum
        assert backend.nproc_ulimit() == 128
        return
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text(encoding="utf-8"))
    ceiling = pid_max if hard == resource.RLIM_INFINITY else min(hard, pid_max)
    assert 128 <= backend.nproc_ulimit() <= ceiling
