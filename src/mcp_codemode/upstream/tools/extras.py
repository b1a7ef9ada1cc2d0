"""Searching what servers offer besides tools: their prompts, resources and resource templates.

A search is for tools first (its page, total and paging are the tools'); what else fits the query is named beside
them (``SearchPage.also``), so code that searches for "the weather prompt" or "the architecture document" learns
it exists and how to use it. They are ranked by the same ranker as tools, in an index of their own: their scores
say which of them fits best, and never push a tool off its page. The policy is applied here as in every listing:
a refused prompt or resource is never a hit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from mcp import types

from .gate import Gate
from .listing import ExtraHit, ExtraKind, Extras
from .ranking import Entry, Ranker

MAX_PER_KIND = 1000  # of each kind per server: a server with 50,000 resources is searched by its first 1,000
ALSO_HITS = 3  # how many are named beside a page of tools


@dataclasses.dataclass(frozen=True)
class _Offer:
    server: str
    kind: ExtraKind
    name: str
    description: str
    uri: str | None
    arguments: tuple[str, ...]


def limited(items: Iterable[types.Prompt | types.Resource | types.ResourceTemplate]) -> tuple[object, ...]:
    """At most ``MAX_PER_KIND`` of one kind, in the server's order."""
    return tuple(item for _, item in zip(range(MAX_PER_KIND), items, strict=False))


def _prompt(server: str, prompt: types.Prompt) -> tuple[types.Tool, _Offer]:
    arguments = sorted(prompt.arguments or [], key=lambda argument: not argument.required)
    properties = {item.name: {"type": "string", "description": item.description or ""} for item in arguments}
    description = prompt.description or ""
    # The prompt as the ranker reads a tool: its arguments are what a tool's parameters are.
    tool = types.Tool(name=prompt.name, title=prompt.title, description=description,
                      input_schema={"type": "object", "properties": properties})  # fmt: skip
    return tool, _Offer(server, "prompt", prompt.name, description, None, tuple(item.name for item in arguments))


def _resource(server: str, kind: ExtraKind, name: str, title: str | None, description: str | None, uri: str,
              mime: str | None) -> tuple[types.Tool, _Offer]:  # fmt: skip
    said = description or ""
    # The URI's words (scheme, path, file name) and the MIME type are searchable as part of the description.
    searchable = "\n".join(part for part in (said, uri, mime or "") if part)
    tool = types.Tool(name=name, title=title, description=searchable, input_schema={"type": "object"})
    return tool, _Offer(server, kind, name, said, uri, ())


def _offers(server: str, extras: Extras) -> list[tuple[types.Tool, _Offer]]:
    found = [_prompt(server, prompt) for prompt in extras.prompts]
    found += [
        _resource(server, "resource", item.name, item.title, item.description, str(item.uri), item.mime_type)
        for item in extras.resources
    ]
    found += [
        _resource(server, "template", item.name, item.title, item.description, item.uri_template, item.mime_type)
        for item in extras.templates
    ]
    return found


def _allowed(gate: Gate, server: str, alias: str, offer: _Offer) -> bool:
    if offer.kind == "prompt":
        return gate.prompt_refusal(server, alias, offer.name) is None
    return gate.resource_refusal(server, alias, offer.uri or "") is None


class ExtrasIndex:
    """The search index over the prompts, resources and templates of some servers, as the policy allows them."""

    def __init__(self, servers: Sequence[tuple[str, str, str, Extras]], gate: Gate) -> None:
        """``servers``: (name, alias, description, extras) of each server searched."""
        entries: list[Entry] = []
        self.offers: list[_Offer] = []
        for name, alias, description, extras in servers:
            for tool, offer in _offers(name, extras):
                if _allowed(gate, name, alias, offer):
                    entries.append(Entry(name, tool, description))
                    self.offers.append(offer)
        self.ranker = Ranker(entries)

    def best(self, query: str, limit: int = ALSO_HITS) -> tuple[ExtraHit, ...]:
        """The ``limit`` best matches for ``query``, best first."""
        hits = []
        for score, position in self.ranker.search(query)[:limit]:
            offer = self.offers[position]
            hits.append(ExtraHit(score, offer.server, offer.kind, offer.name, offer.description, offer.uri,
                                 offer.arguments))  # fmt: skip
        return tuple(hits)
