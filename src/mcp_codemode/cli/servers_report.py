"""``mcp-codemode servers``: every server found, where it came from, whether it starts, and its tools.

Connecting is the only honest test of a config entry (a command can exist and still crash on start), so
the report starts each server whose tools it does not know, concurrently, within the connect timeout,
counts its tools, and shuts it down again. A server whose listing is in the catalog cache and still fresh
(``catalog_ttl``) is not started: its count comes from the cache, and the report says so and how old it is.
``--refresh`` starts every server and lists its tools again (rewriting the cache); ``--no-connect`` starts
nothing and shows what the cache knows.

This is the user's own view, so unlike anything the sandbox sees it shows what the policy refuses: a
refused server is listed as ``refused`` with the rule (and never started), and a server's tool count says
how many of its tools the policy hides. A server that turns out, once connected, to be a code-mode bridge
(this one behind a wrapper script or its HTTP URL) is listed as skipped with the reason, like one that
config discovery recognised by its command line.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

from ..runs.shared_state import shared_state
from ..settings import Settings
from ..upstream.errors import SelfServerSkipped
from ..upstream.model import Discovery, ServerConfig
from ..upstream.servers.oauth import sign_in_of
from ..upstream.servers.sign_ins import SignInStore
from ..upstream.tools.directory import ToolDirectory
from ..upstream.tools.listing import Listing


@dataclasses.dataclass(frozen=True)
class ServerRow:
    name: str
    alias: str
    transport: str
    source: str
    target: str
    state: str  # ready, failed, not started, skipped
    tools: int | None = None
    detail: str = ""  # why it failed or was skipped
    log_file: str = ""
    listing: str = "unknown"  # where the count comes from: live (listed just now), cached, unknown
    listed_at: float | None = None  # when that listing was fetched (epoch seconds)
    stale: bool = False  # a cached listing older than catalog_ttl
    hidden_tools: int = 0  # tools the policy refuses (not counted in ``tools``)
    signed_in: bool | None = None  # a remote server: whether the bridge holds OAuth tokens for it (None: stdio)


@dataclasses.dataclass(frozen=True)
class ServersReport:
    rows: tuple[ServerRow, ...]
    problems: tuple[str, ...]
    sources: tuple[str, ...]
    catalog: str = ""  # the catalog cache's directory
    now: float = dataclasses.field(default_factory=time.time)

    def as_json(self) -> dict[str, Any]:
        servers = []
        for row in self.rows:
            entry = dataclasses.asdict(row)
            entry["listing_age"] = None if row.listed_at is None else round(max(0.0, self.now - row.listed_at), 1)
            servers.append(entry)
        return {"servers": servers, "problems": list(self.problems), "sources": list(self.sources)}

    def listing_text(self, row: ServerRow) -> str:
        if row.listing == "cached" and row.listed_at is not None:
            return f"cached {age_text(self.now - row.listed_at)} ago" + (", stale" if row.stale else "")
        return row.listing

    def as_text(self) -> str:
        used = [row for row in self.rows if row.state != "skipped"]
        skipped = [row for row in self.rows if row.state == "skipped"]
        lines: list[str] = []
        if used:
            table = [("NAME", "TRANSPORT", "STATE", "TOOLS", "LISTING", "SOURCE")]
            for row in used:
                tools = "-" if row.tools is None else str(row.tools)
                if row.hidden_tools:
                    tools += f" (+{row.hidden_tools} refused)"
                table.append((row.name, row.transport, row.state, tools, self.listing_text(row), row.source))
            widths = [max(len(cells[i]) for cells in table) for i in range(5)]
            for cells in table:
                lines.append("  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=False)) +
                             "  " + cells[5])  # fmt: skip
            failed = [row for row in used if row.state == "failed"]
            for row in failed:
                log = f" (log: {row.log_file})" if row.log_file and row.log_file not in row.detail else ""
                lines.append(f"{row.name} failed: {row.detail}{log}")
            for row in used:
                if row.signed_in:
                    lines.append(f"{row.name} is signed in (OAuth); `mcp-codemode logout {row.name}` forgets it")
                if row.state == "refused":
                    lines.append(f"{row.name} is refused by the policy, hidden from sandboxed code: {row.detail}")
            if any(row.listing == "cached" for row in used):
                lines += ["", f"Cached counts come from {self.catalog}; --refresh starts every server and lists again."]
        elif skipped:
            lines.append("No MCP server is used: every one found is skipped (see below).")
        else:
            lines.append("No MCP servers are configured. Add some to a client's config (see docs/configuration.md) or")
            lines.append("pass --config FILE.")
        if skipped:
            lines += ["", "Skipped:"] + [f"  {row.name} ({row.source}): {row.detail}" for row in skipped]
        if self.problems:
            lines += ["", "Problems:"] + [f"  {problem}" for problem in self.problems]
        lines += ["", f"Read {len(self.sources)} config file(s): " + (", ".join(self.sources) or "none")]
        return "\n".join(lines)


def age_text(seconds: float) -> str:
    """A listing's age for a person: ``12 s``, ``5 min``, ``3 h``, ``2 d``."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} d"


def _row(config: ServerConfig, state: str, **extra: Any) -> ServerRow:
    return ServerRow(config.name, config.alias, config.transport, config.source, config.target, state, **extra)


def _counted(listing: Listing | None, directory: ToolDirectory) -> dict[str, Any]:
    if listing is None:
        return {}
    return {
        "tools": len(listing.tools),
        "listing": listing.origin,
        "listed_at": listing.fetched_at,
        "stale": directory.is_stale(listing),
        "hidden_tools": len(listing.hidden),
    }


async def servers_report(
    settings: Settings, discovery: Discovery, connect: bool = True, refresh: bool = False
) -> ServersReport:
    """The report; ``connect`` starts the servers whose listing is unknown or stale (all of them with ``refresh``)."""
    rows: list[ServerRow] = []
    catalog = ""
    shared = shared_state(settings)
    try:
        rows, catalog = await _rows(settings, discovery, shared.sign_ins, connect, refresh)
    finally:
        await shared.aclose()
    return ServersReport(tuple(rows), tuple(str(problem) for problem in discovery.problems), discovery.sources, catalog)


async def _rows(settings: Settings, discovery: Discovery, sign_ins: SignInStore, connect: bool,
                refresh: bool) -> tuple[list[ServerRow], str]:  # fmt: skip
    rows: list[ServerRow] = []
    catalog = ""
    if discovery.servers:
        async with ToolDirectory(discovery.servers, settings, sign_ins=sign_ins) as directory:
            catalog = str(directory.cache.root)
            await directory.load()
            wanted = []
            if connect:
                for config in discovery.servers:
                    if config.name in directory.refused:
                        continue
                    known = directory.known(config.name)
                    if refresh or known is None or directory.is_stale(known):
                        wanted.append(config.name)
            outcomes = await asyncio.gather(
                *(directory.listing(name, live=True) for name in wanted), return_exceptions=True
            )
            tried = dict(zip(wanted, outcomes, strict=True))
            for config in discovery.servers:
                refused = directory.refused.get(config.name)
                if refused is not None:
                    detail = f"{refused[1].reason} ({settings.policy.where})"
                    rows.append(_row(config, "refused", detail=detail))
                    continue
                log_file = directory.hub.state(config.name).log_file
                log = str(log_file) if log_file else ""
                known = directory.known(config.name)
                if config.name not in tried:
                    rows.append(_row(config, "not started", log_file=log, **_counted(known, directory)))
                    continue
                outcome = tried[config.name]
                if isinstance(outcome, SelfServerSkipped):
                    # Found out on connecting (a wrapper script, an HTTP URL): skipped, like one found in the file.
                    rows.append(_row(config, "skipped", detail=outcome.reason))
                elif isinstance(outcome, BaseException):
                    # What the cache knew still counts, marked as cached: the server failed just now.
                    shown = _shown(outcome)
                    rows.append(_row(config, "failed", detail=shown, log_file=log, **_counted(known, directory)))
                else:
                    rows.append(_row(config, "ready", log_file=log, **_counted(outcome, directory)))
    rows += [_row(skip.config, "skipped", detail=skip.reason) for skip in discovery.skipped]
    remote = {c.name: c for c in discovery.servers if c.transport in ("http", "sse")}
    for index, row in enumerate(rows):
        if row.name in remote:
            signed_in = await sign_in_of(remote[row.name], sign_ins).signed_in()
            rows[index] = dataclasses.replace(row, signed_in=signed_in)
    return rows, catalog


def _shown(error: BaseException) -> str:
    """An upstream error as the bridge's user may see it: paths kept, the server's env and header values hidden."""
    return str(getattr(error, "host_message", None) or error)
