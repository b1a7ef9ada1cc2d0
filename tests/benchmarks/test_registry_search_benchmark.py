"""The registry-search benchmark's data and script: the seed data reads, the labels name real servers, it runs.

Nothing here judges the rankers: the quality targets and timings are what benchmarks/registry_search.py reports.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
RANKERS = ("ours", "bm25", "registry_filter")
METRICS = ("recall_at_1", "recall_at_5", "mrr_at_10", "n")


def bench_module(name: str) -> ModuleType:
    """A module of benchmarks/, imported as the benchmarks import each other (their directory on sys.path)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)


def test_the_seed_data_reads_as_the_bridge_reads_it_and_every_label_names_an_accepted_server() -> None:
    corpus = bench_module("registry_corpus").load_corpus()
    assert (corpus.listed, len(corpus.entries), len(corpus.refused)) == (476, 375, 101)
    assert all("seed_2025_05_16.json[" in line for line in corpus.refused)
    names = {entry.name for entry in corpus.entries}
    queries = bench_module("registry_search").load_queries()
    assert 80 <= len(queries) <= 120 and all(query.relevant for query in queries)
    assert {name for query in queries for name in query.relevant} <= names
    assert {query.half for query in queries} == {"tuning", "held_out"}


def test_a_may_2025_entry_becomes_the_current_server_json_with_its_texts_unchanged() -> None:
    modern = bench_module("registry_corpus").modern
    old = {
        "id": "x", "name": "io.github.a/b", "description": "d",
        "repository": {"url": "https://g/a/b", "source": "github", "id": "1"},
        "version_detail": {"version": "0.0.1-seed", "release_date": "2025-05-16T18:56:49Z", "is_latest": True},
        "packages": [{"registry_name": "docker", "name": "a/b", "version": "1.0.0",
                      "environment_variables": [{"name": "TOKEN", "description": "t"}],
                      "package_arguments": [{"type": "positional", "value": "v", "is_required": True}]}],
        "remotes": [{"transport_type": "sse", "url": "https://b.example/sse"}],
    }  # fmt: skip
    assert modern(old) == {
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": "io.github.a/b", "description": "d", "repository": {"url": "https://g/a/b", "source": "github"},
        "version": "0.0.1-seed",
        "packages": [{"registryType": "oci", "identifier": "a/b", "transport": {"type": "stdio"}, "version": "1.0.0",
                      "packageArguments": [{"type": "positional", "value": "v", "isRequired": True}],
                      "environmentVariables": [{"name": "TOKEN", "description": "t"}]}],
        "remotes": [{"type": "sse", "url": "https://b.example/sse"}],
    }  # fmt: skip
    current = {"name": "io.github.a/b", "version": "1.0.0", "description": "d"}
    assert modern(current) is current


@pytest.mark.backend  # a subprocess: outside the pure-logic tier, as the tool-search benchmark's run is
def test_registry_search_quick_run_reports_every_ranker_and_shows_only_the_tuning_halfs_misses(tmp_path: Path) -> None:
    out = tmp_path / "registry_search.json"
    completed = subprocess.run(
        [sys.executable, str(BENCHMARKS / "registry_search.py"), "--quick", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert json.loads(out.read_text(encoding="utf-8")) == document
    assert document["benchmark"] == "registry_search" and document["quick"] is True
    tuning = {query.text for query in bench_module("registry_search").load_queries() if query.half == "tuning"}
    for ranker in RANKERS:
        result = document["quality"][ranker]
        for scope in ("all", "typo", "tuning", "held_out"):
            assert set(METRICS) <= set(result[scope])
            assert all(0.0 <= result[scope][metric] <= 1.0 for metric in METRICS[:3])
        assert result["tuning"]["n"] + result["held_out"]["n"] == result["all"]["n"] == 120
        assert all(miss["query"] in tuning for miss in result["misses_at_5"])
        assert isinstance(result["held_out_misses_at_5"], int)
    for name in ("ours_search", "ours_find", "bm25", "registry_filter"):
        assert {"median_ms", "p95_ms", "min_ms", "n"} <= set(document["latency"][name])
    assert [row["met"] in (True, False) for row in document["targets"]] == [True, True, True]
    assert document["corpus"]["servers"] == 373
