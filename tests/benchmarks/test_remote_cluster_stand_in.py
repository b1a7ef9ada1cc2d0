"""``benchmarks/remote.py``'s cluster measurement run end to end as a STAND-IN run: the emulated API server (kmock)
and the loopback exec endpoint with real bubblewrap workers, the test's controller binding every claim at once.

It proves the code path a ``--kubeconfig`` run takes (claims cold and warm through the watch, the bridge's warm
pool, two real face replicas forwarding), and that the output labels itself as no cluster's figures. No timing is
judged: what the numbers are is what the benchmark reports, and these are not a cluster's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.clients import require_bubblewrap
from tests.support.kube_deps import require_kube_test_deps
from tests.support.patience import patient

pytestmark = pytest.mark.backend

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ("cold_claim", "warm_pool_claim", "warm_call", "warm_pool_first_call", "owner_call", "forwarded_call")


def remote(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "remote.py"), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=patient(600), check=False,
    )  # fmt: skip


def test_a_stand_in_run_measures_every_figure_and_says_it_is_no_cluster(tmp_path: Path) -> None:
    require_kube_test_deps()
    require_bubblewrap()
    out = tmp_path / "remote-cluster.json"
    done = remote("--stand-in", "--quick", "--n", "3", "--out", str(out))
    assert done.returncode == 0, done.stderr[-4000:]
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["benchmark"] == "remote-cluster" and document["quick"] is True
    assert document["api_server"] == "emulated" and "not cluster figures" in document["what"]
    for figure in FIGURES:
        stats = document[figure]
        assert stats["n"] == 3 and 0 <= stats["min_ms"] <= stats["median_ms"] <= stats["p95_ms"], (figure, stats)
    assert [target["name"] for target in document["targets"]] == [
        "cold claim <= 1500 ms",
        "warm-pool first call <= 10 ms over a warm call",
        "forwarding adds <= 1 ms",
    ]
    assert all(isinstance(target["met"], bool) for target in document["targets"])


def test_fewer_than_30_samples_are_refused_without_quick() -> None:
    done = remote("--stand-in", "--n", "3")
    assert done.returncode == 2 and "give --quick" in done.stderr
