"""Tool docs as sandboxed code reads them: aliases, the detail levels, and a first ranked search.

Pure functions over the SDK's ``types.Tool``; the hub supplies the listings. Everything here is built for
a model's eyes, in four detail levels: ``name``; ``summary``, one line of description and the required
parameters; ``full``, the whole description, both schemas and the annotations; ``stub``, the tool as a
Python ``async def`` with types, defaults, a docstring and its result type (``stubs.py``), and for a
whole server one module (``server_stub``).
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from mcp import types

from . import stubs
from .tool_wire import proxy_info as proxy_info  # callers (the relay, tests) read it here

Detail = Literal["name", "summary", "full", "stub"]
DETAILS: tuple[Detail, ...] = ("name", "summary", "full", "stub")
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


def tool_doc(server: str, tool: types.Tool, alias: str, detail: Detail) -> dict[str, Any]:
    """One tool's docs at a detail level: ``name`` < ``summary`` < ``full``, or ``stub`` (its Python source)."""
    doc: dict[str, Any] = {"server": server, "tool": tool.name, "alias": alias}
    if detail == "name":
        return doc
    if detail == "stub":
        doc["stub"] = stubs.tool_stub(server, tool, alias)
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


def server_stub(
    server: str, server_alias: str, description: str, tools: Sequence[types.Tool], aliases: Mapping[str, str]
) -> str:
    """A whole server as one Python module of stubs (``query_tool_docs(server, detail="stub")``); see stubs.py."""
    return stubs.server_stub(server, server_alias, description, tools, aliases)
