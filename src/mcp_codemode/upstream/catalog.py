"""Tool docs as sandboxed code reads them: aliases, the detail levels, and a first ranked search.

Pure functions over the SDK's ``types.Tool``; the hub supplies the listings. Everything here is built for
a model's eyes: a ``summary`` is one line of description and the required parameters, ``full`` adds the
schemas. (Issue 5 replaces the search with a tuned ranker and a catalog cache; the shapes stay.)
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from mcp import types

Detail = Literal["name", "summary", "full"]
DETAILS: tuple[Detail, ...] = ("name", "summary", "full")
_NON_WORD = re.compile(r"[^0-9A-Za-z_]+")
_SUMMARY_CHARS = 240


def identifier(name: str, fallback: str = "tool") -> str:
    """A Python identifier for a tool name: ``get-tiny-image`` → ``get_tiny_image``; keywords get a ``_``."""
    alias = _NON_WORD.sub("_", name).strip("_") or fallback
    if alias[0].isdigit():
        alias = f"t_{alias}"
    if keyword.iskeyword(alias) or alias.startswith("__"):
        alias += "_"
    return alias


def tool_aliases(tools: Iterable[types.Tool]) -> dict[str, str]:
    """Each tool name's alias, unique within one server (``_2``, ``_3`` on collisions, in listing order)."""
    aliases: dict[str, str] = {}
    taken: set[str] = set()
    for tool in tools:
        base = alias = identifier(tool.name)
        number = 2
        while alias in taken:
            alias, number = f"{base}_{number}", number + 1
        taken.add(alias)
        aliases[tool.name] = alias
    return aliases


def first_line(text: str | None, limit: int = _SUMMARY_CHARS) -> str:
    """The first sentence or line of a description, short enough for a listing."""
    text = (text or "").strip()
    if not text:
        return ""
    line = text.split("\n", 1)[0].strip()
    sentence = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0]
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"


def required_parameters(tool: types.Tool) -> list[str]:
    schema = tool.input_schema or {}
    required = schema.get("required")
    return [str(name) for name in required] if isinstance(required, list) else []


def proxy_info(tool: types.Tool, alias: str) -> dict[str, Any]:
    """What the guest needs to build a typed proxy: names, description and both schemas."""
    info: dict[str, Any] = {"name": tool.name, "alias": alias, "description": tool.description or ""}
    info["inputSchema"] = tool.input_schema or {"type": "object"}
    if tool.output_schema:
        info["outputSchema"] = tool.output_schema
    return info


def tool_doc(server: str, tool: types.Tool, alias: str, detail: Detail) -> dict[str, Any]:
    """One tool's docs at a detail level: ``name`` < ``summary`` < ``full``."""
    doc: dict[str, Any] = {"server": server, "tool": tool.name, "alias": alias}
    if detail == "name":
        return doc
    if detail == "summary":
        doc["description"] = first_line(tool.description)
        doc["required"] = required_parameters(tool)
        return doc
    doc["title"] = tool.title or ""
    doc["description"] = tool.description or ""
    doc["inputSchema"] = tool.input_schema or {"type": "object"}
    if tool.output_schema:
        doc["outputSchema"] = tool.output_schema
    if tool.annotations is not None:
        doc["annotations"] = tool.annotations.model_dump(by_alias=True, exclude_none=True)
    return {key: value for key, value in doc.items() if value != ""}


# ---------------------------------------------------------------------------------------------- search

_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "the",
        "of",
        "to",
        "in",
        "on",
        "for",
        "with",
        "from",
        "by",
        "at",
        "as",
        "is",
        "are",
        "be",
        "it",
        "this",
        "that",
        "me",
        "my",
        "i",
    ]
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def words(text: str) -> list[str]:
    """Lower-case word stems of a name or text: split on snake_case, camelCase, kebab-case and dots."""
    out = []
    for raw in re.split(r"[^0-9A-Za-z]+", _CAMEL.sub(" ", text or "")):
        word = raw.lower()
        if not word or word in _STOP:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


def search(
    listings: Mapping[str, Sequence[types.Tool]], descriptions: Mapping[str, str], query: str, limit: int
) -> list[tuple[float, str, types.Tool]]:
    """Rank every tool against the query: name words weigh most, then server, then description and parameters."""
    wanted = set(words(query))
    if not wanted:
        return []
    ranked: list[tuple[float, str, types.Tool]] = []
    for server, tools in listings.items():
        server_words = set(words(server)) | set(words(descriptions.get(server, "")))
        for tool in tools:
            name_words = set(words(tool.name)) | set(words(tool.title or ""))
            text_words = set(words(tool.description or ""))
            properties = (tool.input_schema or {}).get("properties")
            if isinstance(properties, dict):
                for name, prop in properties.items():
                    text_words |= set(words(str(name)))
                    if isinstance(prop, dict):
                        text_words |= set(words(str(prop.get("description", ""))))
            score = 0.0
            for word in wanted:
                if word in name_words:
                    score += 3
                elif any(w.startswith(word) or word.startswith(w) for w in name_words if min(len(w), len(word)) >= 3):
                    score += 1.5
                if word in server_words:
                    score += 1
                if word in text_words:
                    score += 1
            if score > 0:
                ranked.append((round(score / len(wanted), 3), server, tool))
    ranked.sort(key=lambda item: (-item[0], item[1], item[2].name))
    return ranked[:limit]
