"""How well, and how fast, ``runtime.find_servers(query)`` finds the server an agent asks for in a registry.

Why this exists
    An agent that lacks a tool asks the registries in its own words ("send an email", "kuberntes pods"). Issue 37
    item 5 asks recall@5 ≥ 0.95 and MRR@10 ≥ 0.85 on registry search too. This measures the product's ranking of
    real registry entries against two baselines, on labelled queries written before any ranker ran on them.

The data (benchmarks/corpus/registry, see its README)
    seed.json, seed_2025_05_16.json   the official MCP Registry's seed data (MIT), 476 entries; the bridge's parser
                                      accepts 375 (373 distinct names) and refuses 101 (``registry_corpus.py``)
    queries.json                      120 labelled queries, each naming every server an agent would accept, in two
                                      halves by a hash of their text (``Query.half``): ``tuning`` (the only half
                                      whose misses are shown) and ``held_out`` (counted, never shown); a target
                                      counts as met when the held-out half meets it

The rankers
    ours          ``Finder.find(query, limit=10)``, the code behind ``find_servers()``, over a local catalog file
                  holding the seed entries (no registry, no network): the product's documents
                  (``registry/documents.py``) ranked by the product's ranker (``tools/ranking.py``).
    bm25          ``search.BM25`` (Okapi BM25, one field, no stemming or synonyms) over each server's full name,
                  title, description, package identifiers, environment variables and remote URLs.
    registry_filter  what the registry's own ``search=`` parameter does: the query, lowercased, a substring of the
                  lowercased server name; matches in listing order.

What is measured
    quality.<ranker>.<scope>: recall_at_1, recall_at_5, mrr_at_10 and n over all queries, the typo queries and the
    tuning and held_out halves; ``misses_at_5`` lists the tuning half's misses with what came first instead.
    latency.<ranker>: one query over the whole seed set, each timed alone with ``time.perf_counter``, the rankers
    taking turns query by query, repeated until at least ``--n`` are timed after an untimed warm-up pass: for ours
    ``Ranker.search`` over the finder's documents (``search``) and the whole ``Finder.find`` call (``find``: the
    ranking, the catalog's freshness check and the rendering of ten candidates); median_ms, p95_ms, min_ms, n.
    targets: recall@5 ≥ 0.95 and MRR@10 ≥ 0.85 for ours on the held_out half; a p95 ``find`` under 20 ms.

Usage
    python benchmarks/registry_search.py [--n N] [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from catalogs import Query
from common import emit, fill_defaults, machine_info, positive, summarize
from mcp_codemode.upstream.registry.catalog import Catalogs
from mcp_codemode.upstream.registry.documents import searchable, server_document
from mcp_codemode.upstream.registry.entries import ServerEntry
from mcp_codemode.upstream.registry.finder import Configured, Finder
from mcp_codemode.upstream.tools.ranking import Ranker
from registry_corpus import FILES, REGISTRY_CORPUS, load_corpus, modern
from search import BM25, first_relevant, metrics

QUERIES_FILE = REGISTRY_CORPUS / "queries.json"
DEFAULT_N = 1000
QUICK = {"n": 1}
RANKERS = ("ours", "bm25", "registry_filter")
SCOPES = ("all", "typo", "tuning", "held_out")
TOP = 10
RECALL_AT_5_TARGET = 0.95
MRR_AT_10_TARGET = 0.85
FIND_P95_TARGET_MS = 20.0


def load_queries() -> list[Query]:
    document = json.loads(QUERIES_FILE.read_text(encoding="utf-8"))
    return [Query(item["query"], tuple(item["relevant"]), "registry", bool(item.get("typo", False)))
            for item in document["queries"]]  # fmt: skip


@dataclasses.dataclass(frozen=True)
class _Settings:
    """The finder's settings (``finder.RegistrySettings``): no registry, one catalog file."""

    state_dir: Path
    registry_catalog: tuple[Path, ...]
    registries: tuple[str, ...] = ()
    registry_ttl: float = 3600.0
    registry_timeout: float = 15.0


class Ours:
    """The product: ``Finder.find`` for quality and the whole call's time, its ranker alone for ``search``."""

    def __init__(self, finder: Finder, entries: Sequence[ServerEntry]) -> None:
        self.finder = finder
        self.ranker = Ranker([server_document(entry) for entry in entries])
        self.loop = asyncio.new_event_loop()

    def ranked(self, query: str) -> list[str]:
        found = self.loop.run_until_complete(self.finder.find(query, TOP, Configured()))
        return [candidate["name"] for candidate in found.candidates]

    def find(self, query: str) -> object:
        return self.loop.run_until_complete(self.finder.find(query, TOP, Configured()))


class RegistryFilter:
    """The registry's ``search=``: the whole query a substring of the server's name, in listing order."""

    def __init__(self, entries: Sequence[ServerEntry]) -> None:
        self.names = [entry.name for entry in entries]

    def ranked(self, query: str) -> list[str]:
        needle = query.lower()
        return [name for name in self.names if needle in name.lower()][:TOP]


class Bm25:
    def __init__(self, entries: Sequence[ServerEntry]) -> None:
        self.names = [entry.name for entry in entries]
        self.bm25 = BM25.from_texts([entry_text(entry) for entry in entries])

    def ranked(self, query: str) -> list[str]:
        return [self.names[index] for index in self.bm25.search(query)[:TOP]]


def entry_text(entry: ServerEntry) -> str:
    """Everything searchable of an entry as one text: BM25's single field."""
    parts = [entry.name, entry.title, entry.description]
    for package in entry.packages:
        parts.append(package.identifier)
        parts += [f"{need.name} {need.description}" for need in package.environment]
    parts += [remote.url for remote in entry.remotes]
    return " ".join(parts)


def quality(queries: Sequence[Query], ranked: Callable[[str], list[str]]) -> dict[str, Any]:
    ranks: list[int | None] = []
    misses: list[dict[str, Any]] = []
    for query in queries:
        found = ranked(query.text)[:TOP]
        rank = first_relevant(found, query.relevant)
        ranks.append(rank)
        if (rank is None or rank > 5) and query.half == "tuning":
            misses.append({"query": query.text, "relevant": list(query.relevant), "rank": rank, "top_5": found[:5]})
    scoped: dict[str, Callable[[Query], bool]] = {
        "all": lambda q: True,
        "typo": lambda q: q.typo,
        "tuning": lambda q: q.half == "tuning",
        "held_out": lambda q: q.half == "held_out",
    }
    result: dict[str, Any] = {
        scope: metrics([rank for rank, query in zip(ranks, queries, strict=True) if keep(query)])
        for scope, keep in scoped.items()
    }
    result["misses_at_5"] = misses
    result["held_out_misses_at_5"] = sum(
        1 for rank, query in zip(ranks, queries, strict=True) if query.half == "held_out" and (rank is None or rank > 5)
    )
    return result


def time_queries(functions: dict[str, Callable[[str], object]], texts: Sequence[str], at_least: int) -> dict[str, Any]:
    """Each query timed alone on each function, interleaved, so a slow spell of a busy machine lands on all."""
    for function in functions.values():
        for text in texts:
            function(text)
    passes = max(1, -(-at_least // len(texts)))
    samples: dict[str, list[float]] = {name: [] for name in functions}
    clock = time.perf_counter
    for _ in range(passes):
        for text in texts:
            for name, function in functions.items():
                started = clock()
                function(text)
                samples[name].append((clock() - started) * 1000)
    return {name: summarize(values) for name, values in samples.items()}


def build_targets(document: dict[str, Any]) -> list[dict[str, Any]]:
    ours = document["quality"]["ours"]["held_out"]
    rows = [
        {"target": f"{metric} ≥ {limit:g} on registry search (held_out queries)", "limit": limit,
         "measured": ours[metric], "met": ours[metric] >= limit}
        for metric, limit in (("recall_at_5", RECALL_AT_5_TARGET), ("mrr_at_10", MRR_AT_10_TARGET))
    ]  # fmt: skip
    p95 = document["latency"]["ours_find"]["p95_ms"]
    rows.append({"target": f"p95 of a whole find_servers() call ≤ {FIND_P95_TARGET_MS:g} ms over the seed set",
                 "limit": FIND_P95_TARGET_MS, "measured": p95, "met": p95 <= FIND_P95_TARGET_MS})  # fmt: skip
    return rows


def table(document: dict[str, Any]) -> str:
    lines = [f"registry search ({document['corpus']['servers']} servers)  recall@1 / recall@5 / MRR@10   "
             + " | ".join(SCOPES) + "   misses@5 (tuning+held_out)"]  # fmt: skip
    for ranker in RANKERS:
        result = document["quality"][ranker]
        cells = [" ".join(f"{result[scope][m]:.2f}" for m in ("recall_at_1", "recall_at_5", "mrr_at_10"))
                 for scope in SCOPES]  # fmt: skip
        lines.append(f"  {ranker:<16}" + " | ".join(cells)
                     + f"   {len(result['misses_at_5'])}+{result['held_out_misses_at_5']}")  # fmt: skip
    lines.append("latency (ms): median / p95 (n)")
    for name, stats in document["latency"].items():
        lines.append(f"  {name:<16}{stats['median_ms']:>8.3f} / {stats['p95_ms']:<8.3f} ({stats['n']})")
    lines += [
        f"  [{'PASS' if row['met'] else 'FAIL'}] {row['target']}: {row['measured']}" for row in document["targets"]
    ]
    return "\n".join(lines)


def check_labels(queries: Sequence[Query], entries: Sequence[ServerEntry]) -> None:
    known = {entry.name for entry in entries}
    unknown = sorted({name for query in queries for name in query.relevant} - known)
    if unknown:
        raise SystemExit(f"benchmarks/registry_search.py: queries.json names servers the corpus lacks: {unknown}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--n", type=positive, default=None, help=f"timed queries per ranker (default: {DEFAULT_N})")
    parser.add_argument("--quick", action="store_true", help="a smoke run: one timed pass over the queries")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON document to this file")
    return fill_defaults(parser.parse_args(argv), QUICK, {"n": DEFAULT_N})


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    corpus = load_corpus()
    queries = load_queries()
    with tempfile.TemporaryDirectory(prefix="registry-search-") as scratch:
        catalog = Path(scratch) / "catalog.json"
        items = [modern(item) for name in FILES for item in json.loads((REGISTRY_CORPUS / name).read_text("utf-8"))]
        catalog.write_text(json.dumps(items), encoding="utf-8")
        finder = Finder(_Settings(state_dir=Path(scratch), registry_catalog=(catalog,)))
        # What the finder ranks of a catalog: its latest entry of each name (``Finder._ranker``).
        entries = searchable([entry for entry in Catalogs((catalog,)).entries() if entry.is_latest], set())
        check_labels(queries, entries)
        ours = Ours(finder, entries)
        rankers: dict[str, Any] = {"ours": ours, "bm25": Bm25(entries), "registry_filter": RegistryFilter(entries)}
        quality_doc = {name: quality(queries, ranker.ranked) for name, ranker in rankers.items()}
        load_before = os.getloadavg()
        timed = {"ours_search": ours.ranker.search, "ours_find": ours.find, "bm25": rankers["bm25"].bm25.search,
                 "registry_filter": rankers["registry_filter"].ranked}  # fmt: skip
        latency = time_queries(timed, [query.text for query in queries], args.n)
        load_after = os.getloadavg()
        ours.loop.close()
    document: dict[str, Any] = {
        "benchmark": "registry_search",
        "quick": args.quick,
        "corpus": {
            "files": list(FILES),
            "entries_listed": corpus.listed,
            "entries_accepted": len(corpus.entries),
            "entries_refused": len(corpus.refused),
            "servers": len(entries),
            "queries": {
                "all": len(queries),
                "typo": sum(1 for q in queries if q.typo),
                **{half: sum(1 for q in queries if q.half == half) for half in ("tuning", "held_out")},
            },
        },
        "rankers": {
            "ours": "mcp_codemode.upstream.registry.finder.Finder.find over a catalog of the seed entries",
            "bm25": "benchmarks/search.py BM25 over name, title, description, package identifiers, environment "
            "variables and remote URLs",
            "registry_filter": "the registry's search=: the query a substring of the server name, listing order",
        },
        "quality": quality_doc,
        "latency": latency,
    }
    document["targets"] = build_targets(document)
    document["all_targets_met"] = all(row["met"] for row in document["targets"])
    document["machine"] = machine_info()
    document["load_average_1_5_15"] = {"before": [round(v, 2) for v in load_before],
                                       "after": [round(v, 2) for v in load_after]}  # fmt: skip
    document["elapsed_s"] = round(time.perf_counter() - began, 2)
    print(table(document), file=sys.stderr)
    emit(document, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
