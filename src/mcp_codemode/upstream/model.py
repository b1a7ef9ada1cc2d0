"""What one configured upstream MCP server is, once every config format has been normalised.

This is the contract between config discovery (``config/discovery.py``), the hub that connects to servers
(``servers/hub.py``) and everything above them. It is plain data: no I/O, nothing that reads the environment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Literal

from .errors import HIDDEN, MIN_SECRET, secret_args

Transport = Literal["stdio", "http", "sse"]
# "legacy": the initialize handshake (2025-11-25 and earlier); "auto": probe server/discover first (costs up to
# 10 s on servers that ignore unknown requests); or a modern protocol version string such as "2026-07-28".
DEFAULT_PROTOCOL = "legacy"


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    """One upstream server, normalised from whichever client's config file it came from."""

    name: str  # as the user wrote it (the key in mcpServers / servers / [mcp_servers.NAME])
    alias: str  # a Python identifier derived from the name: mcp_<alias> inside the sandbox
    transport: Transport
    source: str  # the file it came from, e.g. "/root/.cursor/mcp.json" (or "--config /x.json")
    command: str = ""  # stdio only
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    cwd: str | None = None
    url: str = ""  # http / sse only
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict, repr=False)  # may carry credentials
    description: str = ""
    protocol: str = DEFAULT_PROTOCOL
    timeout: float | None = None  # per-call timeout in seconds; None: the bridge's default

    @property
    def target(self) -> str:
        """A one-line, secret-free description of what is launched or contacted (for `servers` and errors).

        A value of the entry's ``env`` can reach the command line (``--header Authorization:${AUTH_HEADER}``
        with ``AUTH_HEADER`` in ``env``); like everywhere else it is shown as ``<hidden>``, and so is a credential
        argument (``--token X``).
        """
        if self.transport != "stdio":
            return self.url
        text = " ".join([self.command, *self.args])
        hidden = {*self.env.values(), *secret_args(self.args)}
        for value in sorted({v for v in hidden if len(v) >= MIN_SECRET}, key=len, reverse=True):
            text = text.replace(value, HIDDEN)
        return text


@dataclasses.dataclass(frozen=True)
class SkippedServer:
    """A server entry that was read but will not be used, and why (disabled, shadowed, launches the bridge)."""

    config: ServerConfig
    reason: str


@dataclasses.dataclass(frozen=True)
class ConfigProblem:
    """A config file or entry that could not be used: the file, the server (if one), and a fix-oriented reason."""

    source: str
    server: str | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.source}: server {self.server!r}" if self.server else self.source
        return f"{where}: {self.reason}"


@dataclasses.dataclass(frozen=True)
class Discovery:
    """The outcome of reading every config source: what is used, what was skipped, and what was broken."""

    servers: tuple[ServerConfig, ...] = ()
    skipped: tuple[SkippedServer, ...] = ()
    problems: tuple[ConfigProblem, ...] = ()
    sources: tuple[str, ...] = ()  # every file that was read, in precedence order (highest first)

    def by_name(self) -> Mapping[str, ServerConfig]:
        return {server.name: server for server in self.servers}
