"""The tool-search benchmark's data and script: the corpus loads, the labels name real tools, the script runs.

Nothing here judges the rankers: the quality targets and timings are what benchmarks/search.py reports, not
what a test may assert.
"""

from __future__ import annotations

import importlib
import itertools
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from mcp import types

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
CORPUS = BENCHMARKS / "corpus"
SERVERS = ("everything", "filesystem", "memory", "sequential-thinking", "time", "git", "fetch")
RANKERS = ("ours", "bm25", "reference_filter")
METRICS = ("recall_at_1", "recall_at_5", "mrr_at_10", "n")


def bench_module(name: str) -> ModuleType:
    """A module of benchmarks/, imported as the benchmarks import each other (their directory on sys.path)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)


def corpus_ids() -> set[str]:
    ids: set[str] = set()
    for server in SERVERS:
        for item in json.loads((CORPUS / "tools" / f"{server}.json").read_text(encoding="utf-8")):
            ids.add(f"{server}/{item['name']}")
    return ids


def queries() -> list[dict[str, Any]]:
    document = json.loads((CORPUS / "queries.json").read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = document["queries"]
    return found


def test_corpus_has_every_reference_server_and_valid_tools() -> None:
    files = sorted(path.stem for path in (CORPUS / "tools").glob("*.json"))
    assert files == sorted(SERVERS)
    catalogs = bench_module("catalogs")
    real = catalogs.real_catalog()
    assert list(dict.fromkeys(server for server, _ in real)) == list(SERVERS)
    for server, tool in real:
        assert isinstance(tool, types.Tool)
        assert tool.input_schema.get("type") == "object", f"{server}/{tool.name}"
    ids = [f"{server}/{tool.name}" for server, tool in real]
    assert len(ids) == len(set(ids)) == len(corpus_ids())


def test_corpus_round_trips_as_captured() -> None:
    """Each file is what capture.py writes: the tools as on the wire, sorted keys, and no temporary paths."""
    for server in SERVERS:
        path = CORPUS / "tools" / f"{server}.json"
        text = path.read_text(encoding="utf-8")
        listed = json.loads(text)
        dumped = [
            types.Tool.model_validate(item).model_dump(mode="json", by_alias=True, exclude_none=True) for item in listed
        ]
        assert dumped == listed, path
        assert json.dumps(listed, indent=2, ensure_ascii=False) + "\n" == text, path
        assert "mcp-codemode-corpus-" not in text


def test_queries_are_labelled_with_tools_of_the_corpus() -> None:
    found = queries()
    assert len(found) >= 60
    known = corpus_ids()
    texts = [item["query"] for item in found]
    assert len(texts) == len(set(texts)), "a query appears twice"
    for item in found:
        assert item["query"].strip(), item
        assert item["relevant"], item
        assert set(item["relevant"]) <= known, (item["query"], set(item["relevant"]) - known)
        assert len(item["relevant"]) == len(set(item["relevant"])), item
        assert item["split"] in ("dev", "test", "fresh", "holdout"), item
    splits = {item["split"] for item in found}
    assert splits == {"dev", "test", "fresh", "holdout"}
    covered = {relevant.split("/", 1)[0] for item in found for relevant in item["relevant"]}
    assert covered == set(SERVERS)


def test_the_halves_are_fixed_by_the_query_text_alone() -> None:
    """Issue 37's tuning/held-out halving: the same text always lands in the same half, and both are sizeable."""
    catalogs = bench_module("catalogs")
    loaded = catalogs.load_queries()
    halves = [query.half for query in loaded]
    assert set(halves) == {"tuning", "held_out"}
    assert 0.4 <= halves.count("tuning") / len(halves) <= 0.6
    # sha256("ls a folder") begins with an odd byte, sha256("what files are in this directory") with an even one
    assert catalogs.Query("ls a folder", (), "test", False).half == "held_out"
    assert catalogs.Query("what files are in this directory", (), "test", True).half == "tuning"


def test_synthetic_catalog_is_deterministic_and_valid() -> None:
    catalogs = bench_module("catalogs")
    first = catalogs.synthetic_catalog(300, seed=7)
    again = catalogs.synthetic_catalog(300, seed=7)
    assert [(server, tool.model_dump()) for server, tool in first] == [
        (server, tool.model_dump()) for server, tool in again
    ]
    assert len(first) == 300
    for server, tool in first:
        assert server not in SERVERS
        schema = tool.input_schema
        assert schema["type"] == "object"
        properties = schema["properties"]
        assert len(properties) <= 6, tool.name
        assert set(schema.get("required", [])) <= set(properties), tool.name
        assert all(prop.get("type") and prop.get("description") for prop in properties.values()), tool.name
        assert tool.description, tool.name
    with pytest.raises(ValueError, match="cannot draw"):
        catalogs.synthetic_catalog(len(catalogs.synthetic_pool()) + 1)


def test_mixed_catalog_holds_every_real_tool_once() -> None:
    catalogs = bench_module("catalogs")
    mixed = catalogs.mixed_catalog(1000)
    assert len(mixed) == 1000
    ids = [f"{server}/{tool.name}" for server, tool in mixed]
    assert len(ids) == len(set(ids))
    assert corpus_ids() <= set(ids)
    servers = [server for server, _ in mixed]
    assert len(set(servers)) >= 40
    # each server's tools sit together, as a listing would have them
    changes = sum(1 for left, right in itertools.pairwise(servers) if left != right)
    assert changes == len(set(servers)) - 1


def test_baselines_behave_as_specified() -> None:
    search = bench_module("search")
    catalogs = bench_module("catalogs")

    def tool(name: str, description: str) -> types.Tool:
        return types.Tool(name=name, description=description, input_schema={"type": "object"})

    catalog = [
        ("a", tool("list_directory", "List the files in a directory")),
        ("a", tool("read_file", "Read a file")),
        ("b", tool("get_time", "Current time in a timezone")),
    ]
    bm25 = search.BM25(catalog)
    assert bm25.search("read a file")[0] == 1
    assert bm25.search("mkdir") == []
    reference = search.ReferenceFilter(catalog)
    assert reference.search("FILE") == [0, 1]  # listing order, case-insensitive substrings
    assert reference.search("read file") == [1]
    assert reference.search("read directory") == []
    assert catalogs.tokens("getCurrentTime in-UTC") == ["getcurrenttime", "in", "utc"]


@pytest.mark.backend
def test_search_benchmark_quick_run_reports_every_ranker(tmp_path: Path) -> None:
    out = tmp_path / "search.json"
    completed = subprocess.run(
        [sys.executable, str(BENCHMARKS / "search.py"), "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert json.loads(out.read_text(encoding="utf-8")) == document
    assert document["benchmark"] == "search"
    assert document["quick"] is True
    count = len(queries())
    tuning = {query.text for query in bench_module("catalogs").load_queries() if query.half == "tuning"}
    for catalog_key in ("real", "mixed_1000"):
        for ranker in RANKERS:
            result = document["quality"][catalog_key][ranker]
            for scope in ("all", "dev", "test", "fresh", "holdout", "typo", "tuning", "held_out"):
                assert set(METRICS) <= set(result[scope]), (catalog_key, ranker, scope)
                for metric in METRICS[:3]:
                    assert 0.0 <= result[scope][metric] <= 1.0
            assert result["all"]["n"] == count
            assert result["dev"]["n"] + result["test"]["n"] + result["fresh"]["n"] + result["holdout"]["n"] == count
            assert result["tuning"]["n"] + result["held_out"]["n"] == count
            assert isinstance(result["misses_at_5"], list)  # the tuning half's only
            assert all(miss["query"] in tuning for miss in result["misses_at_5"])
            assert isinstance(result["held_out_misses_at_5"], int)
    assert document["corpus"]["tools"] == {"real": 52, "mixed_1000": 1000}
    for size in ("52", "1000"):
        for ranker in RANKERS:
            for phase in ("query", "query_floor", "build"):
                stats = document["latency"][size][ranker][phase]
                assert {"median_ms", "p95_ms", "min_ms", "n"} <= set(stats)
            assert document["latency"][size][ranker]["query"]["n"] >= count
    assert document["targets"]
    assert all(isinstance(row["met"], bool) for row in document["targets"])
    assert "recall@5" in completed.stderr  # the human-readable table
