"""What the tool directory hands out: one server's listing as served, its prompts and resources, and one page
of a search's hits.

Apart from the directory (``directory.py``) because they are values, read far from it: the relay builds proxies
and refusals from a ``Listing``, ``mcp-codemode servers`` counts and names its tools, and the CLI and the
sandbox's ``search_tool_docs`` render a ``SearchPage``. None of them needs the machinery that produces these
(the hub, the catalog cache, the search index, background listings), and the directory stays the one place
that keeps them current.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from mcp import types

from . import catalog
from .gate import Refused

Origin = Literal["live", "cached"]


@dataclasses.dataclass(frozen=True)
class Listing:
    """One server's tools as the directory serves them, where they came from, and their per-server aliases."""

    server: str
    tools: tuple[types.Tool, ...]
    origin: Origin
    fetched_at: float  # epoch seconds
    digest: str  # of the tools' wire form: equal digests, equal listings
    aliases: dict[str, str]  # tool name -> Python identifier, unique within the server
    lookup: dict[str, types.Tool]  # by alias and by name
    refused: Mapping[str, Refused] = dataclasses.field(default_factory=dict)  # tools the policy hides, by name/alias
    hidden: tuple[str, ...] = ()  # the names of those tools, for the user's own view (``mcp-codemode servers``)


@dataclasses.dataclass(frozen=True)
class Extras:
    """What a server offers besides tools, as it last listed it: prompts, resources and resource templates.

    Searched beside the tools (``SearchPage.also``), so code finds a prompt or a resource by what it is for."""

    prompts: tuple[types.Prompt, ...] = ()
    resources: tuple[types.Resource, ...] = ()
    templates: tuple[types.ResourceTemplate, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.prompts or self.resources or self.templates)


NO_EXTRAS = Extras()
ExtraKind = Literal["prompt", "resource", "template"]


@dataclasses.dataclass(frozen=True)
class ExtraHit:
    """A prompt, resource or resource template that matches a search, and how code uses it."""

    score: float
    server: str
    kind: ExtraKind
    name: str
    description: str
    uri: str | None = None  # a resource's URI, a template's URI template
    arguments: tuple[str, ...] = ()  # a prompt's argument names, required ones first

    def reply(self) -> dict[str, Any]:
        found: dict[str, Any] = {"kind": self.kind, "server": self.server, "name": self.name}
        if self.uri is not None:
            found["uri"] = self.uri
        if self.arguments:
            found["arguments"] = list(self.arguments)
        found["description"] = self.description
        found["score"] = round(self.score, 3)
        found["use"] = self.use()
        return found

    def use(self) -> str:
        """The call that uses it, to show beside it."""
        if self.kind == "prompt":
            arguments = ", {" + ", ".join(f"{name!r}: ..." for name in self.arguments) + "}" if self.arguments else ""
            return f"await runtime.get_prompt({self.server!r}, {self.name!r}{arguments})"
        if self.kind == "resource":
            return f"await runtime.read_resource({self.server!r}, {self.uri!r})"
        return f"await runtime.read_resource({self.server!r}, <{self.uri} filled in>)"


@dataclasses.dataclass(frozen=True)
class Hit:
    score: float
    server: str
    tool: types.Tool
    alias: str


@dataclasses.dataclass(frozen=True)
class SearchPage:
    """One page of ranked hits, the number of all matches, and the servers the search could not look into.

    ``pending``: servers whose listing is not known yet; they are being started in the background and the
    next search includes them. ``unavailable``: (server, reason) for servers that could not be started.
    """

    query: str
    total: int
    offset: int
    hits: tuple[Hit, ...]
    pending: tuple[str, ...]
    unavailable: tuple[tuple[str, str], ...]
    searched: int = 0  # how many tools the query was ranked against
    also: tuple[ExtraHit, ...] = ()  # the best prompts and resources for the query (first page only)

    def reply(self, detail: catalog.Detail) -> dict[str, Any]:
        """The page as sandboxed code (``runtime.search_tool_docs``) and ``mcp-codemode search --json`` see it."""
        results = []
        for hit in self.hits:
            doc = catalog.tool_doc(hit.server, hit.tool, hit.alias, detail)
            doc["score"] = round(hit.score, 3)
            results.append(doc)
        return {
            "query": self.query,
            "total": self.total,
            "offset": self.offset,
            "results": results,
            "pending": list(self.pending),
            "unavailable": [{"server": name, "reason": reason} for name, reason in self.unavailable],
            "also": [hit.reply() for hit in self.also],
        }
