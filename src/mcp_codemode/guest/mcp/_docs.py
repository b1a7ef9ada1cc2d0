"""Tool docs and search: ``query_tool_docs``, ``search_tool_docs``, ``Stub`` and ``SearchResults``.

Standard library only. The bridge answers these (it holds the catalog and the ranking); this module checks
the request where the mistake is made, and turns the answer into values that read well when printed in a
cell (a stub prints as code, a search as one line per tool).
"""

from __future__ import annotations

from ._proxies import catalog
from ._rpc import ArgumentError, MCPError, rpc

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    _SearchBase = list[dict[str, Any]]
else:
    _SearchBase = list


async def list_tools(server: str) -> list[dict[str, Any]]:
    """A server's tools, one short entry each (server, tool, alias and toolAlias, description, required); starts
    the server if needed."""
    result: list[dict[str, Any]] = _docs_value(
        await rpc.arequest("docs", server=server, tool=None, detail="summary"), "summary"
    )
    return result


def list_tools_sync(server: str) -> list[dict[str, Any]]:
    """Blocking twin of ``list_tools``."""
    result: list[dict[str, Any]] = _docs_value(rpc.request("docs", server=server, tool=None, detail="summary"),
                                               "summary")  # fmt: skip
    return result


DETAILS = ("name", "summary", "full", "stub")
MAX_LIMIT = 200  # the bridge's own bound on search results per page


class Stub(str):
    """Python source text (one tool's stub, or a whole server's module): a ``str`` shown as the code itself.

    ``print()`` it, ``exec()`` it, or keep it as the last value of a cell: it is displayed as source, not
    as a quoted string full of ``\\n``.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


def _check_detail(detail: object) -> str:
    if not isinstance(detail, str) or detail not in DETAILS:
        raise ArgumentError(f"detail must be one of {', '.join(DETAILS)}, not {detail!r:.40}")
    return detail


def _docs_value(value: Any, detail: str) -> Any:
    """The docs the bridge sent, with stub text (a module, or a tool doc's ``stub``) as a ``Stub``, and each
    tool's ``alias`` also under ``toolAlias``, the key code written for the reference bridge reads."""
    if detail == "stub":
        if isinstance(value, str):
            return Stub(value)
        if isinstance(value, dict) and isinstance(value.get("stub"), str):
            return Stub(value["stub"])
    if isinstance(value, list):
        return [_with_tool_alias(doc) for doc in value]
    return _with_tool_alias(value)


def _with_tool_alias(doc: Any) -> Any:
    """A tool doc with ``toolAlias`` right after ``alias`` (the same value)."""
    if not isinstance(doc, dict) or "alias" not in doc or "toolAlias" in doc:
        return doc
    out: dict[str, Any] = {}
    for key, item in doc.items():
        out[key] = item
        if key == "alias":
            out["toolAlias"] = item
    return out


async def query_tool_docs(server: str, tool: str | None = None, detail: str = "summary") -> Any:
    """Docs of a server's tools (a list, one entry per tool) or of one tool (one entry), at a detail level:

    - ``"name"``: ``server``, ``tool`` (its name) and ``alias`` (the attribute of ``mcp_<alias>``);
    - ``"summary"`` (the default): adds ``description`` (the first sentence) and ``required`` (parameter names);
    - ``"full"``: the whole ``description``, ``title``, ``inputSchema``, ``outputSchema`` and ``annotations``;
    - ``"stub"``: Python source, as a ``Stub`` (a ``str``). Without a tool, one module for the whole server: a
      docstring on how to call and what comes back, the typing import, then every tool as an ``async def`` with
      types, defaults, a docstring and its result type (a ``TypedDict`` from the tool's ``outputSchema``);
      with a tool, that tool's result type and ``async def`` alone. It is the cheapest way to read a server.
    """
    detail = _check_detail(detail)
    return _docs_value(await rpc.arequest("docs", server=server, tool=tool, detail=detail), detail)


def query_tool_docs_sync(server: str, tool: str | None = None, detail: str = "summary") -> Any:
    """Blocking twin of ``query_tool_docs``."""
    detail = _check_detail(detail)
    return _docs_value(rpc.request("docs", server=server, tool=tool, detail=detail), detail)


class SearchResults(_SearchBase):
    """What ``search_tool_docs`` found: a list of tool docs, best first, each with a ``score``, and about the search:

    - ``query``, ``detail``, ``server`` (the one searched, or None for all);
    - ``total``: how many tools matched in all (``len()`` counts this page only);
    - ``offset``: where this page starts; the next one starts at ``offset + len(results)``;
    - ``pending``: servers still connecting, whose tools were not searched yet: search again in a moment;
    - ``unavailable``: ``{"server": ..., "reason": ...}`` for each server that could not be listed;
    - ``also`` (first page only): the prompts, resources and resource templates that best fit the query, each
      ``{"kind", "server", "name", "uri"?, "arguments"?, "description", "score", "use"}``, ``use`` being the
      call that uses it (``runtime.get_prompt(...)`` or ``runtime.read_resource(...)``).

    Printed, it is a short listing: the score, the call (``mcp_<alias>.<tool>(required parameters)``) and the
    description, or the stubs for ``detail="stub"``; then what ``also`` holds, one line each.
    """

    def __init__(
        self,
        results: Any = (),
        *,
        query: str = "",
        total: int | None = None,
        offset: int = 0,
        detail: str = "summary",
        server: str | None = None,
        pending: Any = (),
        unavailable: Any = (),
        also: Any = (),
    ) -> None:
        super().__init__(item for item in results if isinstance(item, dict))
        self.query = query
        self.offset = offset
        self.total = total if isinstance(total, int) and not isinstance(total, bool) else offset + len(self)
        self.detail = detail
        self.server = server
        self.pending = [str(name) for name in pending]
        self.unavailable = [dict(entry) for entry in unavailable if isinstance(entry, dict)]
        self.also = [dict(entry) for entry in also if isinstance(entry, dict)]

    @classmethod
    def from_reply(cls, reply: Any, params: dict[str, Any]) -> SearchResults:
        """The bridge's reply (``{"results", "total", ...}``) as SearchResults."""
        query, offset, detail, server = params["query"], params["offset"], params["detail"], params.get("server")
        if not isinstance(reply, dict):
            raise MCPError(f"the bridge answered a search with {type(reply).__name__}, not a dict")
        found_offset = reply.get("offset")
        return cls(
            reply.get("results") or [],
            query=str(reply.get("query", query)),
            total=reply.get("total"),
            offset=found_offset if isinstance(found_offset, int) and not isinstance(found_offset, bool) else offset,
            detail=detail,
            server=server,
            pending=[name for name in reply.get("pending") or [] if isinstance(name, str)],
            unavailable=reply.get("unavailable") or [],
            also=reply.get("also") or [],
        )

    def __repr__(self) -> str:
        where = f" in {self.server}" if self.server else ""
        matches = "match" if self.total == 1 else "matches"
        if not self:
            head = f"No tools match {self.query!r}{where}{' yet' if self.pending else ''}."
            if self.total:
                head = f"No matches from offset {self.offset}: {self.query!r}{where} has {self.total} in all."
        elif self.offset:
            span = (
                f"match {self.offset + 1}" if len(self) == 1 else f"matches {self.offset + 1}-{self.offset + len(self)}"
            )
            head = f"{span} of {self.total} for {self.query!r}{where}:"
        else:
            head = f"{len(self)} of {self.total} {matches} for {self.query!r}{where}:"
        scores = [_score(doc.get("score")) for doc in self]
        width = max(map(len, scores), default=0)
        lines = [head]
        for doc, score in zip(self, scores, strict=True):
            lines.extend(self._entry(doc, score.rjust(width)))
        if lines[-1] == "":
            lines.pop()
        if self.pending:
            lines.append(f"still connecting (search again in a moment): {', '.join(self.pending)}")
        if self.unavailable:
            gone = [f"{entry.get('server')} ({_clip(str(entry.get('reason', '')), 120)})" for entry in self.unavailable]
            lines.append(f"unavailable: {'; '.join(gone)}")
        if self and self.offset + len(self) < self.total:
            lines.append(f"more: offset={self.offset + len(self)}")
        if self.also:
            lines.append("also (prompts and resources):")
            for entry in self.also:
                what = f"{entry.get('kind')} {entry.get('server')}/{entry.get('name')}"
                description = _clip(str(entry.get("description") or ""), 80)
                lines.append(f"  {_score(entry.get('score'))}  {what}" + (f" — {description}" if description else ""))
                lines.append(f"        {entry.get('use')}")
        return "\n".join(lines)

    __str__ = __repr__

    def _entry(self, doc: dict[str, Any], score: str) -> list[str]:
        import json

        call = f"{_proxy_name(doc.get('server'))}.{doc.get('alias') or doc.get('tool')}"
        if self.detail == "stub" and isinstance(doc.get("stub"), str):
            return [f"# {score}  {call}", doc["stub"].rstrip("\n"), ""]
        if self.detail == "name":
            return [f"  {score}  {call}"]
        schema = doc.get("inputSchema")
        required = doc.get("required", schema.get("required", []) if isinstance(schema, dict) else None)
        if isinstance(required, list):
            call += "(" + ", ".join(str(name) for name in required) + ")"
        description = str(doc.get("description") or "")
        if self.detail != "full":
            return [f"  {score}  {call}" + (f" — {_clip(description, 100)}" if description else "")]
        lines = [f"  {score}  {call}"]
        lines += [f"      {line}" for line in description.strip().splitlines()]
        for key in ("inputSchema", "outputSchema", "annotations"):
            if key in doc:
                lines.append(f"      {key}: {json.dumps(doc[key], ensure_ascii=False)}")
        return lines


def _score(score: Any) -> str:
    return f"{score:.2f}" if isinstance(score, (int, float)) and not isinstance(score, bool) else "-"


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _proxy_name(server: Any) -> str:
    """``mcp_<alias>`` of a server by name, as code in the sandbox reaches it."""
    for entry in catalog.servers:
        if server in (entry["name"], entry.get("alias")):
            return f"mcp_{entry.get('alias') or entry['name']}"
    return f"mcp_servers[{server!r}]"


def _search_params(query: Any, limit: Any, detail: Any, offset: Any, server: Any) -> dict[str, Any]:
    """The search request, checked here so a mistake is named at once (the bridge checks again)."""
    if not isinstance(query, str) or not query.strip():
        raise ArgumentError(f"query must be a non-empty string saying what you need, not {query!r:.40}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ArgumentError(f"limit must be a whole number from 1 to {MAX_LIMIT}, not {limit!r:.40}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ArgumentError(f"offset must be a whole number from 0 (the first result) up, not {offset!r:.40}")
    if server is not None and not isinstance(server, str):
        raise ArgumentError(f"server must be a server's name or alias (a str) or None, not {type(server).__name__}")
    params: dict[str, Any] = {"query": query, "limit": limit, "offset": offset, "detail": _check_detail(detail)}
    if server is not None:
        params["server"] = server
    return params


async def search_tool_docs(
    query: str, limit: int = 5, detail: str = "summary", offset: int = 0, server: str | None = None
) -> SearchResults:
    """The tools that best match a description of what you want, best first, from every server or one ``server``.

    Returns a ``SearchResults``: a list of docs at ``detail`` (as ``query_tool_docs`` gives them, each with a
    ``score``), ``limit`` (1 to 200) of them from ``offset``, plus ``.total`` matches in all, ``.pending``
    servers still connecting (search again shortly to include them) and ``.unavailable`` ones. Printing it
    shows one line per tool: ``score  mcp_<alias>.<tool>(required) — description``.
    """
    params = _search_params(query, limit, detail, offset, server)
    return SearchResults.from_reply(await rpc.arequest("search", **params), params)


def search_tool_docs_sync(
    query: str, limit: int = 5, detail: str = "summary", offset: int = 0, server: str | None = None
) -> SearchResults:
    """Blocking twin of ``search_tool_docs``."""
    params = _search_params(query, limit, detail, offset, server)
    return SearchResults.from_reply(rpc.request("search", **params), params)
