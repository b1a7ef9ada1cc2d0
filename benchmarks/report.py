"""Turns the benchmarks' JSON documents into ``summary.md`` and PNG plots (used by ``run_all.py``).

Reads ``<dir>/<benchmark>.json`` for every benchmark that has one, and ``<dir>/run.json`` (what the driver ran,
when, how long it took, and which benchmark failed). Writes ``<dir>/summary.md``: the issue's targets first, then
one table per benchmark (figure, median, p95, n, the baseline measured in the same run, and the target where one
exists), and the plots:

    latency.png           every benchmark's latencies next to their baselines (one panel per benchmark)
    latency_<name>.png    the same panel alone, per benchmark
    sessions_scaling.png  throughput and latency against concurrent sessions, HTTP and the in-process baseline
    sessions_memory.png   memory per concurrent/idle session, and the bridge's RSS over the growth run
    tokens.png            what a model reads to know the tools: the bridge's listing against direct listings

The JSON documents hold medians, nearest-rank p95s and minimums (not every sample), so a latency panel draws each
figure as a range from its minimum to its p95 with a mark at the median: the "distribution" a summary can show.
The sessions benchmark also records every 5th percentile, drawn as a cumulative distribution.

Usage: ``python benchmarks/report.py [DIR]`` re-renders from the JSON in DIR (default benchmarks/results).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, never a window

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.ticker import NullFormatter

BENCHMARKS = (
    "sandbox", "mcp_face", "proxy", "search", "registry_search", "tokens", "sessions", "channel", "remote", "replicas",
    "startup",
)  # fmt: skip
RESULTS = Path(__file__).resolve().parent / "results"
MEASURED_COLOR = "#1f6fb4"
BASELINE_COLOR = "#9a9a9a"
DPI = 110

# The issue's targets (issue 7), each a limit on a median (or on memory per idle session).
WARM_STDIO_TARGET_MS = 3.0
FIRST_CALL_TARGET_MS = 10.0
BWRAP_COLD_TARGET_MS = 60.0
PROXY_OVERHEAD_TARGET_MS = 1.0
IDLE_SESSION_TARGET_MB = 30.0


Stats = dict[str, Any]


def is_stats(value: object) -> bool:
    return isinstance(value, dict) and "median_ms" in value and "p95_ms" in value


def ms(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 100:
        return f"{value:,.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    if value >= 1:
        return f"{value:.2f} ms"
    return f"{value:.3f} ms"


def verdict(met: bool | None) -> str:
    return "—" if met is None else ("met" if met else "**not met**")


@dataclasses.dataclass
class Row:
    figure: str
    stats: Stats | None
    baseline_label: str = ""
    baseline: Stats | None = None
    target: str = ""
    met: bool | None = None


@dataclasses.dataclass
class Section:
    name: str
    title: str
    intro: str
    rows: list[Row] = dataclasses.field(default_factory=list)
    tables: list[str] = dataclasses.field(default_factory=list)  # further markdown tables, after the rows
    covered: list[str] = dataclasses.field(default_factory=list)  # JSON paths whose stats need no fallback row


@dataclasses.dataclass
class Headline:
    target: str
    measured: str
    met: bool | None
    source: str


def get(document: dict[str, Any], *path: str) -> Any:
    node: Any = document
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def stats_paths(node: Any, prefix: str = "") -> Iterator[tuple[str, Stats]]:
    """Every stats dict (median_ms and p95_ms) in a document, with its dotted path."""
    if is_stats(node):
        yield prefix, node
        return
    if isinstance(node, dict):
        for key, value in node.items():
            yield from stats_paths(value, f"{prefix}.{key}" if prefix else str(key))


def limit_cell(limit_ms: float, measured: float | None, what: str = "median") -> tuple[str, bool | None]:
    met = None if measured is None else measured <= limit_ms
    return f"{what} ≤ {limit_ms:g} ms: {verdict(met)}", met


# -- one section per benchmark --------------------------------------------------------------------------------


def sandbox_section(doc: dict[str, Any], heads: list[Headline]) -> Section:
    section = Section(
        "sandbox",
        "Sandbox: cold start and warm round trip (`benchmarks/sandbox.py`)",
        'A new worker until the result of its first cell, and `execute("1")` on a started one, in-process; '
        "the baseline of a cold start is a bare `python3 -c pass` started in the same run.",
        covered=["floor"],
    )
    floor = doc.get("floor")
    section.rows.append(Row("`python3 -c pass` (floor)", floor))
    own = {row["target"]: row for row in doc.get("targets", [])}
    for name, result in (doc.get("backends") or {}).items():
        cold = result.get("cold_start")
        target, met = "", None
        if name == "bubblewrap":
            target, met = limit_cell(BWRAP_COLD_TARGET_MS, cold["median_ms"] if cold else None)
            heads.append(
                Headline(
                    f"bubblewrap cold start ≤ {BWRAP_COLD_TARGET_MS:g} ms (median)", ms(cold and cold["median_ms"]),
                    met, "sandbox",
                )
            )  # fmt: skip
        elif f"{name} cold start" in own:
            row = own[f"{name} cold start"]
            target, met = f"median ≤ {row['median_limit_ms']:g} ms: {verdict(row['met'])}", row["met"]
        section.rows.append(Row(f"{name} cold start to first result", cold, "floor", floor, target, met))
        warm = own.get(f"{name} warm round trip")
        warm_target = f"median ≤ {warm['median_limit_ms']:g} ms: {verdict(warm['met'])}" if warm else ""
        section.rows.append(
            Row(f"{name} warm call round trip", result.get("warm_call"), "", None, warm_target, warm and warm["met"])
        )
        # First calls of new sessions through a SessionManager with k warm workers; k = 0 is the cold baseline.
        first_calls = result.get("new_session_first_call") or {}
        cold_path = first_calls.get("warm_pool_0")
        for key, stats in first_calls.items():
            if not is_stats(stats):
                continue
            pool = key.removeprefix("warm_pool_")
            if pool == "0":
                section.rows.append(Row(f"{name} first call of a new session, no warm pool", stats))
                continue
            target, met = limit_cell(FIRST_CALL_TARGET_MS, stats["median_ms"])
            section.rows.append(
                Row(f"{name} first call of a new session, warm pool {pool}", stats, "no pool", cold_path, target, met)
            )
            heads.append(
                Headline(
                    f"first call of a new session with a warm pool ≤ {FIRST_CALL_TARGET_MS:g} ms (median), {name} "
                    f"in-process (pool {pool})",
                    ms(stats["median_ms"]),
                    met,
                    "sandbox",
                )
            )
    return section


def mcp_face_section(doc: dict[str, Any], heads: list[Headline]) -> Section:
    section = Section(
        "mcp_face",
        'MCP face: `run_python("1")` end to end through the SDK client (`benchmarks/mcp_face.py`)',
        "One `serve` process per series (stdio or Streamable HTTP; handshake era `legacy` or stateless `auto`); "
        "baselines in the same run: the sandbox alone (`SessionManager.execute`), the bridge, the SDK in-process.",
        covered=[
            "baseline.sandbox_warm",
            "baseline.sandbox_cold",
            "baseline.sandbox_cold_burst",
            "baseline.bridge_warm",
            "baseline.inprocess_mcp_warm",
        ],
    )
    base = doc.get("baseline") or {}
    warm_base, cold_base = base.get("sandbox_warm"), base.get("sandbox_cold")
    section.rows.append(Row("sandbox alone, warm (`SessionManager.execute`)", warm_base))
    pace = doc.get("cold_pace_s")
    paced = f"one every {pace:g} s" if isinstance(pace, (int, float)) else "paced"
    section.rows.append(Row(f"sandbox alone, first call of a new session ({paced})", cold_base))
    section.rows.append(
        Row("sandbox alone, first call of a new session (back to back)", base.get("sandbox_cold_burst"))
    )
    section.rows.append(Row("bridge in-process (`Bridge.run`)", base.get("bridge_warm")))
    for mode, stats in (base.get("inprocess_mcp_warm") or {}).items():
        section.rows.append(Row(f"SDK client and server in-process ({mode})", stats))
    for name, series in (doc.get("series") or {}).items():
        section.covered += [f"series.{name}.{key}" for key in ("warm_call", "cold_call", "cold_burst", "ping")]
        stdio = series.get("transport") == "stdio"
        warm, cold = series.get("warm_call"), series.get("cold_call")
        target, met = limit_cell(WARM_STDIO_TARGET_MS, warm and warm["median_ms"]) if stdio else ("", None)
        section.rows.append(Row(f"{name}: warm call", warm, "sandbox alone", warm_base, target, met))
        if stdio:
            heads.append(
                Headline(f"warm `run_python(\"1\")` over stdio ≤ {WARM_STDIO_TARGET_MS:g} ms (median), {name}",
                         ms(warm and warm["median_ms"]), met, "mcp_face")
            )  # fmt: skip
        target, met = limit_cell(FIRST_CALL_TARGET_MS, cold and cold["median_ms"]) if stdio else ("", None)
        section.rows.append(
            Row(f"{name}: first call of a new session ({paced})", cold, "sandbox alone", cold_base, target, met)
        )
        if stdio:
            heads.append(
                Headline(f"first call of a new session with a warm pool ≤ {FIRST_CALL_TARGET_MS:g} ms (median), "
                         f"end to end, new sessions {paced}, {name}",
                         ms(cold and cold["median_ms"]), met, "mcp_face")
            )  # fmt: skip
        burst = series.get("cold_burst")
        if burst:
            section.rows.append(
                Row(f"{name}: first call of a new session (back to back)", burst, "sandbox alone",
                    base.get("sandbox_cold_burst"))
            )  # fmt: skip
        if series.get("ping"):
            section.rows.append(Row(f"{name}: MCP ping", series["ping"]))
    rows = [
        f"| {row['target']} | {row.get('measured_overhead_ms')} ms | {verdict(row.get('met'))} |"
        for row in doc.get("targets", [])
    ]
    if rows:
        section.tables.append("| the benchmark's own target | measured | |\n|---|---|---|\n" + "\n".join(rows))
    return section


def proxy_section(doc: dict[str, Any], heads: list[Headline]) -> Section:
    section = Section(
        "proxy",
        "Proxy: an upstream tool called from sandboxed code (`benchmarks/proxy.py`)",
        "Timed inside the sandbox around each call; the baseline is the same call made directly with the SDK "
        "client to a second copy of the same server, interleaved in the same run.",
        covered=["per_call", "cpu_per_call", "sequential", "gather"],
    )
    for label, entry in (doc.get("per_call") or {}).items():
        if label == "channel_floor":
            continue
        direct = entry.get("direct")
        section.rows.append(Row(f"{label}: direct SDK call", direct))
        for mode, how in (("async", "`await`"), ("sync", "`.sync`"), ("raw", "`.raw`")):
            stats = entry.get(f"proxied_{mode}")
            if stats is None:
                continue
            added = get(entry, "overhead_ms", mode, "median")
            target, met = "", None
            if mode in ("async", "sync") and added is not None:
                met = added <= PROXY_OVERHEAD_TARGET_MS
                target = f"adds ≤ {PROXY_OVERHEAD_TARGET_MS:g} ms: +{ms(added)}, {verdict(met)}"
                heads.append(
                    Headline(f"proxied tool call ≤ {PROXY_OVERHEAD_TARGET_MS:g} ms over a direct SDK call, {label} "
                             f"({how})", f"+{ms(added)}", met, "proxy")
                )  # fmt: skip
            section.rows.append(Row(f"{label}: proxied ({how})", stats, "direct", direct, target, met))
    floor = get(doc, "per_call", "channel_floor")
    if floor:
        section.rows.append(Row("bridge round trip, no upstream (`runtime.list_servers()`)", floor))
    for label, entry in (doc.get("cpu_per_call") or {}).items():
        section.rows.append(
            Row(f"{label}: the bridge's CPU time per call (`await`)", entry.get("bridge"), "direct client",
                entry.get("direct_client"))
        )  # fmt: skip
        section.rows.append(Row(f"{label}: the sandbox's CPU time per call (`await`)", entry.get("sandbox")))
    sequential = doc.get("sequential")
    if sequential:
        section.rows.append(
            Row(
                f"{sequential['calls']:,} sequential calls in one `run_python`, total",
                get(sequential, "proxied", "total"),
                "direct",
                get(sequential, "direct", "total"),
            )
        )
    gather = doc.get("gather")
    if gather:
        section.rows.append(
            Row(f"{gather['concurrency']} calls through `asyncio.gather`", gather.get("proxied"), "direct",
                gather.get("direct"))
        )  # fmt: skip
    return section


def search_section(doc: dict[str, Any], heads: list[Headline]) -> Section:
    section = Section(
        "search",
        "Tool search: `runtime.search_tool_docs` ranking (`benchmarks/search.py`)",
        "Query and index-build times of the product's ranker; the baseline is plain BM25 on the same catalog, in "
        "the same run (the reference substring filter is shown too).",
        covered=["latency"],
    )
    own = {row["target"]: row for row in doc.get("targets", [])}
    for size, rankers in (doc.get("latency") or {}).items():
        ours, bm25 = rankers.get("ours", {}), rankers.get("bm25", {})
        p95_row = next((row for key, row in own.items() if key.startswith("p95 query time") and size in key), None)
        target = f"p95 ≤ {p95_row['limit']:g} ms: {verdict(p95_row['met'])}" if p95_row else ""
        section.rows.append(
            Row(f"ours, one query, {size} tools", ours.get("query"), "BM25", bm25.get("query"), target,
                p95_row and p95_row["met"])
        )  # fmt: skip
        if "reference_filter" in rankers:
            section.rows.append(
                Row(f"reference filter, one query, {size} tools", rankers["reference_filter"].get("query"))
            )
        section.rows.append(Row(f"ours, index build, {size} tools", ours.get("build"), "BM25", bm25.get("build")))
    quality = doc.get("quality") or {}
    if quality:
        lines = ["| recall@1 / recall@5 / MRR@10 (all queries) | " + " | ".join(quality) + " |"]
        lines.append("|---|" + "---|" * len(quality))
        rankers = list(next(iter(quality.values())))
        for ranker in rankers:
            cells = []
            for catalog in quality.values():
                scores = get(catalog, ranker, "all") or {}
                cells.append(
                    " / ".join(f"{scores.get(key, 0):.2f}" for key in ("recall_at_1", "recall_at_5", "mrr_at_10"))
                )
            lines.append(f"| {ranker} | " + " | ".join(cells) + " |")
        section.tables.append("\n".join(lines))
    section.tables += quality_targets(doc)
    return section


def quality_targets(doc: dict[str, Any]) -> list[str]:
    """A search benchmark's quality targets (every target but its p95) as one table, or none."""
    rows = [row for row in doc.get("targets", []) if not row["target"].startswith("p95")]
    if not rows:
        return []
    lines = [f"| {row['target']} | {row['measured']} | {verdict(row['met'])} |" for row in rows]
    return ["| the benchmark's own target | measured | |\n|---|---|---|\n" + "\n".join(lines)]


def registry_search_section(doc: dict[str, Any], heads: list[Headline]) -> Section:
    servers = get(doc, "corpus", "servers")
    section = Section(
        "registry_search",
        "Registry search: `runtime.find_servers` ranking (`benchmarks/registry_search.py`)",
        f"One query over the MCP Registry's seed data ({servers} servers); the baseline is BM25 over the same "
        "entries, in the same run (the registry's own `search=` substring filter is shown too).",
        covered=["latency"],
    )
    latency = doc.get("latency") or {}
    p95_row = next((row for row in doc.get("targets", []) if row["target"].startswith("p95")), None)
    target = f"p95 ≤ {p95_row['limit']:g} ms: {verdict(p95_row['met'])}" if p95_row else ""
    section.rows.append(Row("ours, a whole `find_servers()` call", latency.get("ours_find"), "BM25",
                            latency.get("bm25"), target, p95_row and p95_row["met"]))  # fmt: skip
    section.rows.append(Row("ours, its ranker alone", latency.get("ours_search"), "BM25", latency.get("bm25")))
    section.rows.append(Row("the registry's `search=` filter", latency.get("registry_filter")))
    quality = doc.get("quality") or {}
    if quality:
        lines = ["| recall@1 / recall@5 / MRR@10 | tuning | held_out |", "|---|---|---|"]
        for ranker, result in quality.items():
            cells = [" / ".join(f"{(result.get(half) or {}).get(key, 0):.2f}"
                                for key in ("recall_at_1", "recall_at_5", "mrr_at_10"))
                     for half in ("tuning", "held_out")]  # fmt: skip
            lines.append(f"| {ranker} | " + " | ".join(cells) + " |")
        section.tables.append("\n".join(lines))
    section.tables += quality_targets(doc)
    return section


def tokens_section(doc: dict[str, Any], heads: list[Headline]) -> Section:
    section = Section(
        "tokens",
        "Tokens: what a model reads to know the tools (`benchmarks/tokens.py`)",
        "Exact o200k_base token counts (not timings: no median or p95). The baseline is the same tools exposed "
        "directly, as one `tools/list` result.",
    )
    head = doc.get("headline") or {}
    bridge = head.get("bridge_listing")
    if not bridge:
        return section
    lines = ["| figure | o200k tokens | characters | against the bridge's listing |", "|---|---|---|---|"]
    lines.append(f"| bridge `tools/list` (`run_python` only) | {bridge['tokens']:,} | {bridge['chars']:,} | 1× |")
    for key, value in head.items():
        if key.startswith("direct_") and isinstance(value, dict) and "tokens" in value:
            size = key.removeprefix("direct_").replace("_", " ")
            ratio = value["tokens"] / bridge["tokens"] if bridge["tokens"] else 0
            lines.append(
                f"| direct `tools/list`, {size} tools | {value['tokens']:,} | {value['chars']:,} | {ratio:.1f}× |"
            )
    for detail, total in (head.get("docs_total_tokens") or {}).items():
        median = get(head, "docs_median_tokens_per_tool", detail)
        lines.append(f"| docs at detail `{detail}` for every tool (median {median:g} per tool) | {total:,} | | |")
    section.tables.append("\n".join(lines))
    return section


def sessions_section(doc: dict[str, Any], heads: list[Headline]) -> Section:
    section = Section(
        "sessions",
        "Sessions: concurrent sessions over HTTP, and memory (`benchmarks/sessions.py`)",
        f'`run_python("1")` from K SDK clients at once, each in its own named session, on `serve --transport http` '
        f"({doc.get('backend')}, {doc.get('mode')} protocol, warm pool {doc.get('warm_pool')}); the baseline is the "
        "same sessions and calls through `SessionManager.execute` in the benchmark's own process, in the same run.",
        covered=["levels", "memory", "growth"],
    )
    levels = doc.get("levels") or {}
    for key, level in levels.items():
        section.rows.append(
            Row(f"{key} concurrent session(s): a call", level.get("latency"), "in-process",
                get(level, "baseline", "latency"))
        )  # fmt: skip
    for key, level in levels.items():
        section.rows.append(
            Row(f"{key} concurrent session(s): first calls, all started at once", level.get("first_call"))
        )
    if levels:
        lines = [
            "| sessions | calls/s over HTTP | calls/s in-process (baseline) | calls | CPU ms per call: bridge "
            "/ sandboxes / clients | bridge RSS | sandboxes RSS (workers) |",
            "|---|---|---|---|---|---|---|",
        ]
        for key, level in levels.items():
            memory = level.get("memory") or {}
            cpu = level.get("cpu_ms_per_call") or {}
            lines.append(
                f"| {key} | {level.get('throughput_per_s')} | {get(level, 'baseline', 'throughput_per_s')} | "
                f"{level.get('calls')} | {cpu.get('bridge')} / {cpu.get('sandboxes')} / {cpu.get('clients')} | "
                f"{get(memory, 'bridge', 'rss_mb')} MB | "
                f"{get(memory, 'sandboxes', 'rss_mb')} MB ({get(memory, 'sandboxes', 'trees')}) |"
            )
        section.tables.append("\n".join(lines))
        section.tables.append(
            "The clients run in the benchmark's own process on the same 2 cores: the CPU per call of the bridge, "
            "the sandboxes and the clients, summed, is what one call costs the machine, and the throughput levels "
            "off where that sum fills both cores."
        )
    memory = doc.get("memory")
    if memory:
        per = memory["per_idle_session"]
        met = per["total_rss_mb"] <= IDLE_SESSION_TARGET_MB
        heads.append(
            Headline(f"idle session ≤ {IDLE_SESSION_TARGET_MB:g} MB RSS", f"{per['total_rss_mb']} MB", met, "sessions")
        )
        rest, idle = memory["at_rest"], memory["with_idle"]
        lines = [
            "| memory | RSS | PSS | target |",
            "|---|---|---|---|",
            f"| bridge process at rest | {rest['bridge']['rss_mb']} MB | {rest['bridge']['pss_mb']} MB | |",
            f"| its sandbox processes at rest ({rest['sandboxes']['trees']} workers) | "
            f"{rest['sandboxes']['rss_mb']} MB | {rest['sandboxes']['pss_mb']} MB | |",
            f"| bridge and sandboxes with {memory['idle_sessions']} idle sessions | {idle['total']['rss_mb']} MB | "
            f"{idle['total']['pss_mb']} MB | |",
            f"| **per idle session** (bridge and sandbox) | {per['total_rss_mb']} MB | {per['total_pss_mb']} MB | "
            f"RSS ≤ {IDLE_SESSION_TARGET_MB:g} MB: {verdict(met)} |",
            f"| of which the bridge | {per['bridge_rss_mb']} MB | {per['bridge_pss_mb']} MB | |",
        ]
        growth = doc.get("growth")
        if growth:
            rss, pss, sandbox = growth["bridge_rss_mb"], growth["bridge_pss_mb"], growth["sandbox_rss_mb"]
            lines.append(
                f"| bridge over {growth['calls']:,} calls: start → end (growth; in the second half) | {rss['start']} "
                f"→ {rss['end']} MB ({rss['growth']:+} MB; {rss['growth_second_half']:+} MB) | {pss['start']} "
                f"→ {pss['end']} MB ({pss['growth']:+} MB; {pss['growth_second_half']:+} MB) "
                "| reported, no limit |"
            )
            lines.append(
                f"| its sandboxes (the session's and the warm pool's) | {sandbox['start']} → {sandbox['end']} MB "
                f"({sandbox['growth']:+} MB; {sandbox['growth_second_half']:+} MB) | | |"
            )
        section.tables.append("\n".join(lines))
        section.tables.append(
            "RSS counts a page shared by several processes once in each (the guest interpreter, shared libraries), so "
            "summed RSS overstates what the machine spends; PSS shares such pages out and is the closer total. The "
            "bridge is the `serve` process; its sandboxes are all its live descendants (for bubblewrap: `bwrap`, its "
            "namespace init and the guest Python of each worker, the warm pool's included)."
        )
    if doc.get("growth"):
        section.rows.append(Row(f"one session, {doc['growth']['calls']:,} sequential calls", doc["growth"]["latency"]))
    return section


def channel_section(doc: dict[str, Any], heads: list[Headline]) -> Section:
    section = Section(
        "channel",
        "The byte-stream seam on pipes (`benchmarks/channel.py`)",
        "One frame out and back through an echoing child: through `PipeChannel` against the raw pipes, interleaved.",
        covered=["results"],
    )
    for size, entry in (doc.get("results") or {}).items():
        section.rows.append(Row(f"{size}: through the channel", entry.get("channel"), "raw pipes", entry.get("raw")))
    return section


def remote_section(doc: dict[str, Any], heads: list[Headline]) -> Section:
    section = Section(
        "remote",
        "Remote workers: the pods/exec stream against pipes (`benchmarks/remote.py`)",
        "A real bubblewrap worker behind the loopback exec stand-in against one over pipes, interleaved; no apiserver "
        "or kubelet hop is in it.",
        covered=["pipes", "exec_stand_in"],
    )
    kinds = (("start", "worker start"), ("cell", "a cell"), ("relayed_cell", "a cell with one relayed call"))
    for kind, label in kinds:
        section.rows.append(
            Row(f"{label} over the exec stream", get(doc, "exec_stand_in", kind), "pipes", get(doc, "pipes", kind))
        )
    for target in doc.get("targets") or []:
        heads.append(Headline(target["name"], f"+{ms(target['measured_median_ms'])}", target["met"], "remote"))
    return section


def replicas_section(doc: dict[str, Any], heads: list[Headline]) -> Section:
    section = Section(
        "replicas",
        "Replicas that share sessions: a forwarded call (`benchmarks/replicas.py`)",
        "A warm call sent to the replica that is not the session's owner (it forwards the call) against the same call "
        "sent to the owner, alternating; the Leases are on the emulated API.",
        covered=["owner", "forwarded"],
    )
    section.rows.append(Row("warm call through the other replica", doc.get("forwarded"), "owner", doc.get("owner")))
    return section


def startup_section(doc: dict[str, Any], heads: list[Headline]) -> Section:
    section = Section(
        "startup",
        "Start-up over stdio: the bridge against a bare SDK server (`benchmarks/startup.py`)",
        "From spawning each server to its first answer, its listing and its first call, interleaved start by start "
        "with a bare MCP SDK server with one no-op tool run by the same interpreter.",
        covered=["series"],
    )
    for era, servers in (doc.get("series") or {}).items():
        for figure, label in (("first_answer", "first answer"), ("listing", "listing"), ("first_call", "first call")):
            section.rows.append(
                Row(f"{era}: {label}", get(servers, "ours", figure), "bare SDK server", get(servers, "bare", figure))
            )
    for target in doc.get("targets") or []:
        heads.append(Headline(target["target"], f"{target['ratio']:.2f}× the bare server's", target["met"], "startup"))
    return section


SECTIONS = {
    "channel": channel_section,
    "remote": remote_section,
    "replicas": replicas_section,
    "startup": startup_section,
    "sandbox": sandbox_section,
    "mcp_face": mcp_face_section,
    "proxy": proxy_section,
    "search": search_section,
    "registry_search": registry_search_section,
    "tokens": tokens_section,
    "sessions": sessions_section,
}


def fallback_rows(doc: dict[str, Any], section: Section) -> list[Row]:
    """Stats in the document that no row shows (e.g. a measurement added later), so none goes unreported."""
    shown = {id(row.stats) for row in section.rows} | {id(row.baseline) for row in section.rows}
    rows = []
    for path, stats in stats_paths(doc):
        if id(stats) in shown or any(path == p or path.startswith(p + ".") for p in section.covered):
            continue
        rows.append(Row(f"`{path}`", stats))
    return rows


# -- markdown -----------------------------------------------------------------------------------------------------


def rows_table(rows: Sequence[Row]) -> str:
    lines = [
        "| figure | median | p95 | n | baseline (same run): median / p95 | target |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        stats = row.stats or {}
        baseline = ""
        if row.baseline:
            baseline = f"{row.baseline_label}: {ms(row.baseline['median_ms'])} / {ms(row.baseline['p95_ms'])}"
        lines.append(
            f"| {row.figure} | {ms(stats.get('median_ms'))} | {ms(stats.get('p95_ms'))} | {stats.get('n', '—')} "
            f"| {baseline} | {row.target} |"
        )
    return "\n".join(lines)


def header(run: dict[str, Any], documents: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["# Benchmark results", ""]
    lines.append(
        "Written by `benchmarks/run_all.py` (`make bench`) from the JSON documents beside this file; re-render with "
        "`python benchmarks/report.py`. Medians and nearest-rank p95s; every baseline was measured in the same run."
    )
    lines.append("")
    machine: dict[str, Any] = run.get("machine") or next(
        (doc["machine"] for doc in documents.values() if "machine" in doc), {}
    )
    if machine:
        lines.append(
            f"Machine: {machine.get('nproc')} CPUs, {machine.get('system')} {machine.get('kernel')} "
            f"{machine.get('machine')}, Python {machine.get('python')}."
        )
    git = run.get("git") or {}
    if git:
        lines.append(f"Code: commit `{git.get('commit')}`{' with uncommitted changes' if git.get('dirty') else ''}.")
    entries = run.get("benchmarks") or {}
    if entries:
        lines.append("")
        lines.append("| benchmark | status | run time | finished | options |")
        lines.append("|---|---|---|---|---|")
        for name, entry in entries.items():
            options = " ".join(entry.get("args", [])) or "defaults"
            lines.append(
                f"| {name} | {entry.get('status')} | {entry.get('elapsed_s')} s | {entry.get('finished', '')} | "
                f"`{options}` |"
            )
        if run.get("total_s") is not None:
            lines.append("")
            lines.append(
                f"The last driver run took {run['total_s']:.0f} s in all{' (--quick)' if run.get('quick') else ''}."
            )
    return lines


def render_summary(run: dict[str, Any], documents: dict[str, dict[str, Any]]) -> str:
    heads: list[Headline] = []
    sections = []
    for name in BENCHMARKS:
        if name in documents:
            section = SECTIONS[name](documents[name], heads)
            section.rows += fallback_rows(documents[name], section)
            sections.append(section)
    lines = header(run, documents)
    if heads:
        lines += ["", "## The issue's targets", "", "| target | measured | | from |", "|---|---|---|---|"]
        lines += [f"| {h.target} | {h.measured} | {verdict(h.met)} | {h.source} |" for h in heads]
    failed = {name: entry for name, entry in (run.get("benchmarks") or {}).items() if entry.get("status") != "ok"}
    for name, entry in failed.items():
        lines += ["", f"## {name}: {entry.get('status')}", ""]
        lines.append(f"`{' '.join(entry.get('command', []))}` ended with status {entry.get('returncode')}:")
        lines += ["", "```", *(entry.get("stderr_tail") or ["(no output)"]), "```"]
    for section in sections:
        quick = " (quick run: too few samples to compare)" if documents[section.name].get("quick") else ""
        lines += ["", f"## {section.title}{quick}", "", section.intro, ""]
        if section.rows:
            lines += [rows_table(section.rows), ""]
        for table in section.tables:
            lines += [table, ""]
        plot = f"latency_{section.name}.png"
        lines.append(f"![{section.name}]({plot})" if section.rows else "")
    if "sessions" in documents:
        lines += ["", "![sessions scaling](sessions_scaling.png)", "", "![sessions memory](sessions_memory.png)"]
    if "tokens" in documents:
        lines += ["", "![tokens](tokens.png)"]
    return "\n".join(line for line in lines).rstrip() + "\n"


# -- plots --------------------------------------------------------------------------------------------------------


def range_panel(axes: Axes, title: str, rows: Sequence[Row]) -> None:
    """Each figure (and its baseline) as a line from min to p95, with a dot at the median; log time axis."""
    labels: list[str] = []
    ticks: list[float] = []
    position = 0.0
    for row in reversed(rows):  # top to bottom in the order of the table
        pairs = (
            (row.baseline, BASELINE_COLOR, f"baseline: {row.baseline_label}"),
            (row.stats, MEASURED_COLOR, row.figure),
        )
        for stats, color, label in pairs:
            if not stats:
                continue
            median = float(stats["median_ms"])
            low = max(float(stats.get("min_ms", median)), 1e-3)
            axes.plot([low, max(float(stats["p95_ms"]), low)], [position, position], color=color, linewidth=3)
            axes.plot([median], [position], "o", color="black", markersize=4)
            labels.append(label.replace("`", "")[:60])
            ticks.append(position)
            position += 1
        position += 0.5
    axes.set_yticks(ticks, labels, fontsize=7)
    axes.set_xscale("log")
    axes.set_xlabel("ms (line: min to p95, dot: median; grey: baseline)", fontsize=8)
    axes.set_title(title, fontsize=9)
    axes.grid(axis="x", which="both", alpha=0.3)


def plot_rows(name: str, rows: Sequence[Row]) -> list[Row]:
    """The rows a latency panel shows: those with stats, at most 16 (the busiest benchmarks have more)."""
    return [row for row in rows if row.stats][:16]


def save(figure: Any, path: Path) -> None:
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    plt.close(figure)


def plot_latency(sections: dict[str, list[Row]], out: Path) -> list[Path]:
    written = []
    panels = {name: plot_rows(name, rows) for name, rows in sections.items() if plot_rows(name, rows)}
    for name, rows in panels.items():
        figure, axes = plt.subplots(figsize=(9, 0.32 * sum(2 if r.baseline else 1 for r in rows) + 1.4))
        range_panel(axes, name, rows)
        path = out / f"latency_{name}.png"
        save(figure, path)
        written.append(path)
    if panels:
        count = len(panels)
        columns = 2 if count > 1 else 1
        lines = (count + columns - 1) // columns
        figure, grid = plt.subplots(lines, columns, figsize=(8 * columns, 4.2 * lines), squeeze=False)
        for axes, (name, rows) in zip(grid.flat, panels.items(), strict=False):
            range_panel(axes, name, rows)
        for axes in list(grid.flat)[count:]:
            axes.set_visible(False)
        path = out / "latency.png"
        save(figure, path)
        written.append(path)
    return written


def plot_sessions(doc: dict[str, Any], out: Path) -> list[Path]:
    levels = doc.get("levels") or {}
    written = []
    if levels:
        counts = [int(key) for key in levels]
        figure, (left, middle, right) = plt.subplots(1, 3, figsize=(15, 4.2))
        left.plot(counts, [levels[k]["throughput_per_s"] for k in levels], "o-", color=MEASURED_COLOR, label="HTTP")
        left.plot(counts, [levels[k]["baseline"]["throughput_per_s"] for k in levels], "s--", color=BASELINE_COLOR,
                  label="in-process baseline")  # fmt: skip
        left.set(xscale="log", xlabel="concurrent sessions", ylabel="run_python calls/s", title="throughput")
        left.set_xticks(counts, [str(c) for c in counts])
        left.xaxis.set_minor_formatter(NullFormatter())
        left.set_ylim(bottom=0)
        left.legend(fontsize=8)
        for key, color, style in (("median_ms", MEASURED_COLOR, "o-"), ("p95_ms", MEASURED_COLOR, "o:")):
            middle.plot(counts, [levels[k]["latency"][key] for k in levels], style, color=color,
                        label=f"HTTP {key[:-3]}")  # fmt: skip
            middle.plot(counts, [levels[k]["baseline"]["latency"][key] for k in levels], style.replace("o", "s"),
                        color=BASELINE_COLOR, label=f"in-process {key[:-3]}")  # fmt: skip
        middle.set(xscale="log", yscale="log", xlabel="concurrent sessions", ylabel="ms per call", title="latency")
        middle.set_xticks(counts, [str(c) for c in counts])
        middle.xaxis.set_minor_formatter(NullFormatter())
        middle.legend(fontsize=8)
        colors = plt.get_cmap("viridis")
        for index, (key, level) in enumerate(levels.items()):
            points = level.get("cdf_ms") or []
            if points:
                shares = [step / (len(points) - 1) for step in range(len(points))]
                middle_color = colors(index / max(1, len(levels) - 1))
                right.plot(points, shares, "-", color=middle_color, label=f"{key} HTTP")
                base = get(level, "baseline", "cdf_ms") or []
                if base:
                    right.plot(base, shares, ":", color=middle_color)
        right.set(xscale="log", xlabel="ms per call", ylabel="share of calls", title="distribution (dotted: baseline)")
        right.legend(fontsize=7)
        for axes in (left, middle, right):
            axes.grid(alpha=0.3, which="both")
        path = out / "sessions_scaling.png"
        save(figure, path)
        written.append(path)
    memory, growth = doc.get("memory"), doc.get("growth")
    if memory or growth or levels:
        figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
        if levels:
            counts = [int(key) for key in levels]
            for part, style, label in (("bridge", "o-", "bridge"), ("sandboxes", "s-", "sandboxes"),
                                       ("total", "^-", "both")):  # fmt: skip
                left.plot(
                    counts, [get(levels[k], "memory", part, "rss_mb") for k in levels], style, label=f"{label} RSS"
                )
            left.plot(counts, [get(levels[k], "memory", "total", "pss_mb") for k in levels], "^--", label="both PSS")
        if memory:
            rest = memory["at_rest"]["total"]["rss_mb"]
            left.axhline(rest, color=BASELINE_COLOR, linestyle=":", label="at rest (RSS)")
        left.set(xlabel="sessions (warmed, idle at the snapshot)", ylabel="MB", title="memory against sessions")
        left.set_ylim(bottom=0)
        left.legend(fontsize=8)
        if growth:
            points = growth["points"]
            calls = [point["calls"] for point in points]
            right.plot(calls, [p["bridge_rss_mb"] for p in points], "o-", color=MEASURED_COLOR, label="bridge RSS")
            right.plot(calls, [p["bridge_pss_mb"] for p in points], "o--", color=MEASURED_COLOR, label="bridge PSS")
            right.plot(calls, [p["sandbox_rss_mb"] for p in points], "s-", color=BASELINE_COLOR, label="sandboxes RSS")
            right.set(xlabel="run_python calls", ylabel="MB", title=f"over {growth['calls']:,} calls in one session")
            right.set_ylim(bottom=0)
            right.legend(fontsize=8)
        for axes in (left, right):
            axes.grid(alpha=0.3)
        path = out / "sessions_memory.png"
        save(figure, path)
        written.append(path)
    return written


def plot_tokens(doc: dict[str, Any], out: Path) -> list[Path]:
    head = doc.get("headline") or {}
    if not head.get("bridge_listing"):
        return []
    labels = ["bridge (run_python)"]
    values = [head["bridge_listing"]["tokens"]]
    for key, value in head.items():
        if key.startswith("direct_") and isinstance(value, dict) and "tokens" in value:
            labels.append("direct, " + key.removeprefix("direct_").replace("_", " ") + " tools")
            values.append(value["tokens"])
    figure, axes = plt.subplots(figsize=(8, 3.6))
    bars = axes.barh(labels[::-1], values[::-1], color=[BASELINE_COLOR] * (len(values) - 1) + [MEASURED_COLOR])
    axes.bar_label(bars, [f"{v:,}" for v in values[::-1]], fontsize=8, padding=3)
    axes.set_xscale("log")
    axes.set_xlabel("o200k_base tokens of the tools/list result")
    axes.set_title("what a model reads to know the tools", fontsize=9)
    path = out / "tokens.png"
    save(figure, path)
    return [path]


# -- entry points -----------------------------------------------------------------------------------------------


def load(out: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    run_path = out / "run.json"
    run: dict[str, Any] = json.loads(run_path.read_text(encoding="utf-8")) if run_path.exists() else {}
    documents = {}
    for name in BENCHMARKS:
        path = out / f"{name}.json"
        if path.exists():
            documents[name] = json.loads(path.read_text(encoding="utf-8"))
    return run, documents


def render(out: Path) -> list[Path]:
    """Write summary.md and the plots from the JSON in ``out``; returns the files written."""
    run, documents = load(out)
    summary = out / "summary.md"
    summary.write_text(render_summary(run, documents), encoding="utf-8")
    written = [summary]
    rows: dict[str, list[Row]] = {}
    for name in BENCHMARKS:
        if name in documents:
            section = SECTIONS[name](documents[name], [])
            rows[name] = section.rows + fallback_rows(documents[name], section)
    written += plot_latency(rows, out)
    if "sessions" in documents:
        written += plot_sessions(documents["sessions"], out)
    if "tokens" in documents:
        written += plot_tokens(documents["tokens"], out)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    out = Path(args[0]) if args else RESULTS
    for path in render(out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
