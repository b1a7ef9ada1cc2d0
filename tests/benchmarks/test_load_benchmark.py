"""The load benchmark (benchmarks/load.py): its session check catches a foreign answer, and a tiny real run reports
every figure in the document's shape with no answer from another session. No timing is judged here.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from tests.support.clients import require_bubblewrap

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def bench_module(name: str) -> ModuleType:
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)


def reply(text: str, is_error: bool = False, image: bool = False) -> Any:
    blocks = [SimpleNamespace(type="text", text=text)] + ([SimpleNamespace(type="image")] if image else [])
    return SimpleNamespace(content=blocks, is_error=is_error)


def test_an_answer_counts_only_when_its_id_and_count_are_the_clients_own() -> None:
    work = bench_module("load_work")
    state = work.ClientState(7, "http-modern", "bridge")
    assert state.check("init", reply("'@@c7 0@@'")) is None
    assert state.check("cell", reply("'@@c7 1@@'")) is None
    assert state.check("cell", reply("'@@c8 2@@'")) == "wrong_session"  # another client's session answered
    assert state.check("cell", reply("'@@c7 5@@'")) == "wrong_count"  # a step lost or repeated
    assert state.check("image", reply("'@@c7 2@@'")) == "no_image"
    assert state.check("cell", reply("NameError: name '_load' is not defined", is_error=True)) == "state_lost"
    assert state.check("timeout", reply("[Timed out after 1 s; ...]", is_error=True)) is None
    assert state.check("timeout", reply("'@@c7 2@@'")) == "timeout_not_reported"
    killed = "[Timed out after 1 s and did not stop within 2 s of an interrupt, so the sandbox was killed: ... was lost"
    assert state.check("timeout", reply(killed, is_error=True)) == "timeout_killed"
    assert state.arguments("cell")[1]["session"] == "c7"  # a stateless client names its session
    assert "session" not in work.ClientState(1, "http-legacy", "bridge").arguments("cell")[1]


def test_the_mix_has_every_kind_and_the_floor_waits_out_the_timeout() -> None:
    work = bench_module("load_work")
    kinds = {work.kind_of(index, 0) for index in range(work.TIMEOUT_EVERY)}
    assert kinds == set(work.KINDS)
    floor = work.ClientState(0, "stdio", "floor")
    assert floor.arguments("timeout") == ("wait", {"seconds": work.TIMEOUT_S}, work.TIMEOUT_S)
    assert floor.arguments("everything")[0] == "noop"
    assert work.eras_for(5, 1) == ["http-legacy", "http-modern", "http-legacy", "http-modern", "stdio"]


def test_throughput_takes_the_deliberate_wait_out_of_each_clients_time() -> None:
    work, figures = bench_module("load_work"), bench_module("load_figures")
    states = [work.ClientState(0, "stdio", "bridge"), work.ClientState(1, "stdio", "bridge")]
    outcomes = [work.Outcome(0, "stdio", "cell", 0.1 * i, 100.0, None) for i in range(10)]
    outcomes += [work.Outcome(1, "stdio", "cell", 0.1 * i, 100.0, None) for i in range(5)]
    outcomes += [work.Outcome(1, "stdio", "timeout", 0.5, 1000.0, None)]  # 0.5 s of calls, then 1 s of waiting
    assert figures.throughput(states, outcomes, 1.0) == pytest.approx(10 / 1.0 + 5 / 0.5, abs=0.1)
    # over two windows a client's rate is all its calls over all its busy time, not the mean of its windows' rates
    second = [work.Outcome(0, "stdio", "cell", 0.0, 1000.0, None)]  # one call in the whole second window
    assert figures.throughput_over(states[:1], [(outcomes, 1.0), (second, 1.0)]) == pytest.approx(11 / 2.0, abs=0.1)


def test_the_sides_take_turns_and_each_pair_of_windows_gives_a_ratio() -> None:
    figures = bench_module("load_figures")
    order = [side for _, side in figures.schedule(["floor", "bridge"], 3)]
    assert order == ["floor", "bridge", "bridge", "floor", "floor", "bridge"]  # ABBA: a steady drift cancels
    assert [index for index, _ in figures.schedule(["floor", "bridge"], 2)] == [0, 0, 1, 1]

    def window(rate: float, p99: float | None) -> dict[str, Any]:
        return {"throughput_per_s": rate, "latency": {"n": 0} if p99 is None else {"p99_ms": p99}}

    floor = [window(100.0, 10.0), window(50.0, 20.0), window(80.0, None)]
    bridge = [window(90.0, 12.0), window(50.0, 30.0), window(0.0, 5.0)]
    paired = figures.pairs(floor, bridge)
    assert [row["throughput_ratio"] for row in paired["pairs"]] == [0.9, 1.0, 0.0]
    assert paired["throughput_ratio"] == {"median": 0.9, "min": 0.0, "max": 1.0, "n": 3}
    assert paired["p99_ratio"] == {"median": 1.35, "min": 1.2, "max": 1.5, "n": 2}  # a window without a p99 is left out
    assert figures.pairs([window(0.0, None)], [window(9.0, None)])["throughput_ratio"] == {"n": 0}


def test_cpu_per_call_counts_only_the_calls_that_ended_in_the_window() -> None:
    work, figures = bench_module("load_work"), bench_module("load_figures")
    outcomes = [work.Outcome(0, "stdio", "cell", 0.5 * i, 400.0, None) for i in range(4)]  # end at 0.4 ... 1.9 s
    assert figures.calls_ended_in(outcomes, 1.0) == 2  # the calls still running when the CPU was read are left out
    assert figures.per_call({"servers": 0.3, "clients": 0.1}, 2) == {"servers": 150.0, "clients": 50.0, "total": 200.0}
    assert figures.per_call({"servers": 0.3}, 0) == {"servers": 0.0, "total": 0.0}


@pytest.mark.backend
def test_a_tiny_run_reports_both_sides_and_no_answer_from_another_session(tmp_path: Path) -> None:
    require_bubblewrap()
    out = tmp_path / "load.json"
    command = [sys.executable, str(BENCHMARKS / "load.py"), "--clients", "3", "--stdio", "1", "--seconds", "1",
               "--windows", "2", "--out", str(out)]  # fmt: skip
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert completed.returncode == 0, completed.stderr[-4000:]
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["benchmark"] == "load" and document["eras"] == {"http-legacy": 1, "http-modern": 1, "stdio": 1}
    for side in ("floor", "bridge"):
        figures = document[side]
        assert figures["calls"] > 0 and figures["throughput_per_s"] > 0
        assert {"p50_ms", "p95_ms", "p99_ms", "max_ms", "n"} <= set(figures["latency"])
        assert set(figures["latency_by_era"]) == {"http-legacy", "http-modern", "stdio"}
        assert {"count", "by_kind", "examples"} <= set(figures["errors"])
        assert set(figures["cpu"]["seconds"]) == {"servers", "started", "clients"}
        assert set(figures["cpu"]["ms_per_call"]) == {"servers", "started", "clients", "total"}
        assert figures["memory"]["rss_mb"]["after"]["servers"] > 0
        assert (
            len(figures["windows"]) == 2 and sum(window["calls"] for window in figures["windows"]) == figures["calls"]
        )
    # each side's servers are its own: the floor starts nothing, the bridge its sandboxes and upstream servers
    assert document["floor"]["memory"]["processes"] == {"servers": 2, "started": 0}
    bridge = document["bridge"]
    assert bridge["cross_session"] == 0 and "wrong_count" not in bridge["errors"]["by_kind"]
    assert bridge["errors"]["count"] == 0, bridge["errors"]
    assert bridge["memory"]["processes"]["started"] > 0  # the sandboxes and upstream servers were counted
    assert [row["target"].split()[0] for row in document["targets"]] == ["throughput", "p99", "no"]
    assert all(isinstance(row["met"], bool) for row in document["targets"])
    alternation = document["alternation"]
    assert alternation["order"] == ["floor", "bridge", "bridge", "floor"] and len(alternation["pairs"]) == 2
    assert alternation["throughput_ratio"]["n"] == 2  # every window of both sides made calls
