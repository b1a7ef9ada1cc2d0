"""``mcp-codemode servers``: every server found, where it came from, and whether it really starts.

Connecting is the only honest test of a config entry (a command can exist and still crash on start), so
the report starts each server once, concurrently, within the connect timeout, counts its tools, and shuts
it down again. ``--no-connect`` reads the files only.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from .settings import Settings
from .upstream.hub import Hub
from .upstream.model import Discovery, ServerConfig


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


@dataclasses.dataclass(frozen=True)
class ServersReport:
    rows: tuple[ServerRow, ...]
    problems: tuple[str, ...]
    sources: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "servers": [dataclasses.asdict(row) for row in self.rows],
            "problems": list(self.problems),
            "sources": list(self.sources),
        }

    def as_text(self) -> str:
        used = [row for row in self.rows if row.state != "skipped"]
        skipped = [row for row in self.rows if row.state == "skipped"]
        lines: list[str] = []
        if used:
            table = [("NAME", "TRANSPORT", "STATE", "TOOLS", "SOURCE")]
            for row in used:
                tools = "-" if row.tools is None else str(row.tools)
                table.append((row.name, row.transport, row.state, tools, row.source))
            widths = [max(len(cells[i]) for cells in table) for i in range(4)]
            for cells in table:
                lines.append("  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=False)) +
                             "  " + cells[4])  # fmt: skip
            failed = [row for row in used if row.state == "failed"]
            for row in failed:
                log = f" (log: {row.log_file})" if row.log_file and row.log_file not in row.detail else ""
                lines.append(f"{row.name} failed: {row.detail}{log}")
        else:
            lines.append("No MCP servers are configured. Add some to a client's config (see docs/configuration.md) or")
            lines.append("pass --config FILE.")
        if skipped:
            lines += ["", "Skipped:"] + [f"  {row.name} ({row.source}): {row.detail}" for row in skipped]
        if self.problems:
            lines += ["", "Problems:"] + [f"  {problem}" for problem in self.problems]
        lines += ["", f"Read {len(self.sources)} config file(s): " + (", ".join(self.sources) or "none")]
        return "\n".join(lines)


def _row(config: ServerConfig, state: str, **extra: Any) -> ServerRow:
    return ServerRow(config.name, config.alias, config.transport, config.source, config.target, state, **extra)


async def servers_report(settings: Settings, discovery: Discovery, connect: bool = True) -> ServersReport:
    rows: list[ServerRow] = []
    if connect and discovery.servers:
        async with Hub(
            discovery.servers,
            log_dir=settings.state_dir / "logs",
            call_timeout=settings.tool_timeout,
            connect_timeout=settings.connect_timeout,
        ) as hub:
            names = hub.names()
            outcomes = await asyncio.gather(*(hub.tools(name) for name in names), return_exceptions=True)
            for config, outcome in zip(discovery.servers, outcomes, strict=True):
                log_file = hub.state(config.name).log_file
                log = str(log_file) if log_file else ""
                if isinstance(outcome, BaseException):
                    rows.append(_row(config, "failed", detail=str(outcome), log_file=log))
                else:
                    rows.append(_row(config, "ready", tools=len(outcome), log_file=log))
    else:
        rows += [_row(config, "not started") for config in discovery.servers]
    rows += [_row(skip.config, "skipped", detail=skip.reason) for skip in discovery.skipped]
    return ServersReport(tuple(rows), tuple(str(problem) for problem in discovery.problems), discovery.sources)
