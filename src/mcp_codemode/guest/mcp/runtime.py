"""The API of code running in the sandbox: MCP servers and their tools, images, saved tools.

Standard library only, importable on any Python >= 3.10. The worker binds a ``Display`` for each cell and
tells this module which MCP servers the session may use; outside a running cell (or outside the worker)
the helpers say so instead of failing obscurely.

Every helper that talks to the bridge exists twice: ``name(...)`` is a coroutine (``await`` it, or gather
many), ``name_sync(...)`` blocks and returns the value. Errors are ``MCPError`` subclasses, all catchable.
"""

from __future__ import annotations

import io
import os
import sys

from ._proxies import Audio, Media, ServerProxy, catalog, natural, resource_value
from ._rpc import (
    ArgumentError,
    MCPError,
    PolicyError,
    ServerNotFound,
    ServerUnavailable,
    ToolError,
    ToolNotFound,
    ToolTimeout,
    rpc,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    _SearchBase = list[dict[str, Any]]
else:
    _SearchBase = list


__all__ = [
    "ArgumentError",
    "Audio",
    "Image",
    "MCPError",
    "Media",
    "PolicyError",
    "SearchResults",
    "ServerNotFound",
    "ServerUnavailable",
    "Stub",
    "ToolError",
    "ToolNotFound",
    "ToolTimeout",
    "call_tool",
    "call_tool_sync",
    "capability_summary",
    "delete_saved_tool",
    "describe_server",
    "discovered_servers",
    "list_loaded_server_metadata",
    "list_resources",
    "list_resources_sync",
    "list_saved_tools",
    "list_servers",
    "list_servers_sync",
    "list_tools",
    "list_tools_sync",
    "query_tool_docs",
    "query_tool_docs_sync",
    "read_resource",
    "read_resource_sync",
    "save_tool",
    "search_tool_docs",
    "search_tool_docs_sync",
    "server",
    "show",
]

_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def sniff(data: bytes) -> str | None:
    """The image type of ``data`` from its first bytes, or None when it is not an image we can send."""
    for magic, mime in _SIGNATURES:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


class Image:
    """Image bytes with their type; returning one as a cell's last value shows it to the client."""

    def __init__(self, data: bytes | bytearray | memoryview, mime: str | None = None) -> None:
        raw = bytes(data)
        found = sniff(raw)
        if found is None:
            raise ValueError("these bytes are not a PNG, JPEG, GIF or WebP image")
        if mime is not None and mime != found:
            raise ValueError(f"the bytes are {found}, not {mime}")
        self.data = raw
        self.mime = found

    def __repr__(self) -> str:
        return f"<Image {self.mime}, {len(self.data)} bytes>"

    def _repr_png_(self) -> bytes | None:
        return self.data if self.mime == "image/png" else None


def is_image_like(obj: object) -> bool:
    """Whether a cell's last value should be shown as an image rather than only as text."""
    if isinstance(obj, Image):
        return True
    kind = type(obj)
    module = getattr(kind, "__module__", "") or ""
    if module.startswith("matplotlib.") and hasattr(obj, "savefig"):
        return True
    if module.startswith("PIL.") and hasattr(obj, "save") and hasattr(obj, "mode"):
        return True
    # Looked up on the type, as for the items of a value: an instance's __getattr__ is user code.
    return callable(getattr(kind, "_repr_png_", None)) or callable(getattr(kind, "_repr_jpeg_", None))


def to_image(obj: object) -> Image:
    """Turn what user code wants to show into image bytes, or explain what it can pass instead."""
    if isinstance(obj, Image):
        return obj
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return Image(obj)
    if isinstance(obj, (str, os.PathLike)):
        with open(obj, "rb") as handle:
            return Image(handle.read())
    module = getattr(type(obj), "__module__", "") or ""
    savefig = getattr(obj, "savefig", None)
    if callable(savefig):
        buffer = io.BytesIO()
        savefig(buffer, format="png")
        return Image(buffer.getvalue())
    if module.startswith("PIL.") and callable(getattr(obj, "save", None)):
        return Image(_pil_png(obj))
    for method in ("_repr_png_", "_repr_jpeg_"):
        render = getattr(obj, method, None)
        if callable(render):
            data = render()
            if isinstance(data, (bytes, bytearray)):
                return Image(data)
    raise TypeError(
        f"cannot show a {type(obj).__name__}: pass PNG/JPEG/GIF/WebP bytes, a file path, "
        "a PIL image or a matplotlib figure"
    )


def _pil_png(picture: Any) -> bytes:
    buffer = io.BytesIO()
    try:
        picture.save(buffer, format="PNG")
    except (OSError, ValueError):  # modes PNG cannot hold (CMYK, ...) become RGB
        buffer = io.BytesIO()
        picture.convert("RGB").save(buffer, format="PNG")
    return buffer.getvalue()


def _format_bytes(size: int) -> str:
    for unit, factor in (("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:.1f} {unit}"
    return f"{size} bytes"


class Display:
    """The images of one cell, capped in size and number; the worker sends them with the cell's result."""

    def __init__(self, image_limit: int, max_images: int) -> None:
        self.image_limit = image_limit
        self.max_images = max_images
        self.images: list[Image] = []
        self.notes: list[str] = []
        self.shown: set[int] = set()

    def add(self, obj: object, strict: bool, quiet: bool = False) -> None:
        """Attach an image; ``strict`` (runtime.show) raises on a problem, automatic capture only notes it.

        ``quiet`` is for a cell's last value, which merely looked like an image: if it cannot be rendered,
        its text is shown as usual and nothing is said.
        """
        if id(obj) in self.shown:
            return
        self.shown.add(id(obj))  # tried once: a figure refused here is not tried (and noted) again later
        try:
            image = to_image(obj)
        except Exception as exc:
            if strict:
                raise
            if not quiet:
                self.notes.append(f"an image could not be shown: {exc}")
            return
        problem = self._refusal(image)
        if problem:
            if strict:
                raise ValueError(problem)
            self.notes.append(f"an image was not shown: {problem}")
            return
        self.images.append(image)

    def _refusal(self, image: Image) -> str:
        if len(image.data) > self.image_limit:
            return (
                f"the image is {_format_bytes(len(image.data))}, over the {_format_bytes(self.image_limit)} cap "
                "per image; make it smaller (lower dpi or size) or save it as JPEG"
            )
        if len(self.images) >= self.max_images:
            return f"at most {self.max_images} images can be shown per call"
        return ""

    def add_found_in(self, value: object) -> None:
        """Attach the images a cell's last value holds: itself, or inside lists, tuples, sets and dict values.

        An upstream result that mixes text and images (a list holding ``Image``s) is the common case. The walk is
        bounded (``SCAN_DEPTH`` levels, ``SCAN_ITEMS`` items), so a huge or self-referencing value costs little,
        and it only looks at an item's type, never at its attributes: an object whose ``__getattr__`` does work
        (a server proxy asks the bridge) is not woken. Images past the caps are counted in one note.
        """
        if is_image_like(value):  # the value itself (a figure, a PIL image...), judged as before
            self.add(value, strict=False, quiet=True)
            return
        found = _images_in(value)
        room = max(self.max_images - len(self.images), 0)
        for item in found[:room]:
            self.add(item, strict=False, quiet=True)
        if len(found) > room:
            extra = len(found) - room
            self.notes.append(
                f"{extra} image{'s' if extra > 1 else ''} in the value {'were' if extra > 1 else 'was'} not shown: "
                f"at most {self.max_images} images can be shown per call"
            )

    def collect_figures(self) -> None:
        """Show matplotlib figures left open (or 'shown': the Agg backend keeps them open), then close them."""
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None:
            return
        try:
            numbers = list(pyplot.get_fignums())
            for number in numbers:
                self.add(pyplot.figure(number), strict=False)
            if numbers:
                pyplot.close("all")
        except Exception as exc:  # noqa: BLE001 - a broken pyplot must not cost the cell its result
            self.notes.append(f"open matplotlib figures could not be collected: {exc}")

    def payload(self) -> dict[str, Any]:
        import base64

        images = [{"mime": i.mime, "data": base64.b64encode(i.data).decode("ascii")} for i in self.images]
        return {"images": images, "notes": self.notes}


SCAN_DEPTH = 6  # how deep a cell's last value is searched for images
SCAN_ITEMS = 10_000  # and how many of its items are looked at in all


def _nested_image_like(obj: object) -> bool:
    """``is_image_like`` judged on the type alone: items of a value may be anything, proxies included."""
    kind = type(obj)
    if issubclass(kind, Image):
        return True
    module = getattr(kind, "__module__", "") or ""
    if module.startswith("matplotlib.") and hasattr(kind, "savefig"):
        return True
    if module.startswith("PIL.") and hasattr(kind, "save") and hasattr(kind, "mode"):
        return True
    return callable(getattr(kind, "_repr_png_", None)) or callable(getattr(kind, "_repr_jpeg_", None))


def _images_in(value: object) -> list[object]:
    """The image-like items inside ``value`` (not ``value`` itself), in reading order, each object once."""
    import itertools

    found: list[object] = []
    seen: set[int] = set()
    budget = SCAN_ITEMS
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack and budget > 0:
        node, depth = stack.pop()
        if not isinstance(node, (dict, list, tuple, set, frozenset)) or id(node) in seen or depth >= SCAN_DEPTH:
            continue
        seen.add(id(node))
        items = list(itertools.islice(node.values() if isinstance(node, dict) else node, budget))
        budget -= len(items)
        children = []
        for item in items:
            if item is None or isinstance(item, (str, bytes, bytearray, int, float)):
                continue
            if _nested_image_like(item):
                if id(item) not in seen:
                    seen.add(id(item))
                    found.append(item)
            else:
                children.append((item, depth + 1))
        stack.extend(reversed(children))
    return found


class _State:
    display: Display | None = None
    summary: str = ""
    bound = False  # the bridge has sent the server list: the namespace gets the proxies before every cell


_state = _State()


def show(obj: object) -> None:
    """Send an image to the client with this call's result: PNG/JPEG bytes, a file path, PIL image or figure."""
    if _state.display is None:
        raise RuntimeError("runtime.show() works only while a run_python call is running")
    _state.display.add(obj, strict=True)


def capability_summary() -> str:
    """What this sandbox offers and how to use it (the same text as the bridge's capabilities resource)."""
    return _state.summary or "No capability summary was provided by the bridge."


# ------------------------------------------------------------------------------------ MCP servers


def discovered_servers(detailed: bool = False) -> Any:
    """The configured MCP servers this session may use: names, or dicts with alias, description, transport.

    Answered from what the bridge sent with this call, so it costs nothing; no server is started.
    """
    if detailed:
        return [dict(server) for server in catalog.servers]
    return tuple(catalog.names())


def _servers_value(entries: Any, detailed: bool) -> Any:
    if detailed:
        return entries
    return tuple(entry["name"] for entry in entries if isinstance(entry, dict) and isinstance(entry.get("name"), str))


async def list_servers(detailed: bool = False) -> Any:
    """The names of the servers the bridge serves now, as a tuple (``"time" in await list_servers()``).

    Asked of the bridge, not of this call's context; starts nothing. ``detailed=True`` gives one dict per server
    instead: ``name``, ``alias``, ``transport``, ``description`` (when set), ``state`` (idle, connecting, ready,
    failed), ``tools`` (a count, or None until listed), ``listing`` and ``error`` (when failed).
    """
    return _servers_value(await rpc.arequest("servers"), detailed)


def list_servers_sync(detailed: bool = False) -> Any:
    """Blocking twin of ``list_servers``."""
    return _servers_value(rpc.request("servers"), detailed)


def list_loaded_server_metadata() -> tuple[dict[str, Any], ...]:
    """The servers that are loaded, each as ``describe_server`` gives it (its tools with their ``input_schema``).

    Loaded means started by the bridge and running (or starting): those named in this call's ``servers``
    argument, and those some earlier call, search or hint started. Every other configured server is still
    reachable (its first call starts it); this only starts nothing new. A server that fails while starting is
    left out (``list_servers(detailed=True)`` says why).
    """
    result = rpc.request("loaded")
    return tuple(entry for entry in result if isinstance(entry, dict)) if isinstance(result, list) else ()


def server(name: str) -> ServerProxy:
    """The proxy of one server by name or alias (the same object as ``mcp_<alias>`` and ``mcp_servers[name]``)."""
    return catalog.proxy(name)


def describe_server(name: str) -> dict[str, Any]:
    """A server's name, alias, description, transport, cwd and its tools (name, alias, the first sentence of
    the description, input_schema); starts it."""
    result: dict[str, Any] = rpc.request("describe", server=name)
    return result


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
    - ``unavailable``: ``{"server": ..., "reason": ...}`` for each server that could not be listed.

    Printed, it is a short listing: the score, the call (``mcp_<alias>.<tool>(required parameters)``) and the
    description, or the stubs for ``detail="stub"``.
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
    ) -> None:
        super().__init__(item for item in results if isinstance(item, dict))
        self.query = query
        self.offset = offset
        self.total = total if isinstance(total, int) and not isinstance(total, bool) else offset + len(self)
        self.detail = detail
        self.server = server
        self.pending = [str(name) for name in pending]
        self.unavailable = [dict(entry) for entry in unavailable if isinstance(entry, dict)]

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


def _tool_call_params(server: str, tool: str, arguments: dict[str, Any] | None, timeout: float | None) -> Any:
    if arguments is not None and not isinstance(arguments, dict):
        raise ArgumentError(f"arguments must be a dict of the tool's parameters, not {type(arguments).__name__}")
    params: dict[str, Any] = {"server": server, "tool": tool, "arguments": arguments or {}}
    if timeout is not None:
        params["timeout"] = timeout
    return params


async def call_tool(
    server: str, tool: str, arguments: dict[str, Any] | None = None, *, raw: bool = False, timeout: float | None = None
) -> Any:
    """Call a tool by name; returns its natural value (or the raw CallToolResult dict with ``raw=True``)."""
    result = await rpc.arequest("call", **_tool_call_params(server, tool, arguments, timeout))
    return result if raw else natural(result, server, tool)


def call_tool_sync(
    server: str, tool: str, arguments: dict[str, Any] | None = None, *, raw: bool = False, timeout: float | None = None
) -> Any:
    """Blocking twin of ``call_tool``."""
    result = rpc.request("call", **_tool_call_params(server, tool, arguments, timeout))
    return result if raw else natural(result, server, tool)


async def list_resources(server: str) -> list[dict[str, Any]]:
    """The resources a server offers (uri, name, mimeType, description)."""
    result: list[dict[str, Any]] = await rpc.arequest("resources", server=server)
    return result


def list_resources_sync(server: str) -> list[dict[str, Any]]:
    """Blocking twin of ``list_resources``."""
    result: list[dict[str, Any]] = rpc.request("resources", server=server)
    return result


def _resource_value(result: Any) -> Any:
    contents = [item for item in (result or {}).get("contents") or [] if isinstance(item, dict)]
    values = [resource_value(item) for item in contents]
    if not values:
        return None
    return values[0] if len(values) == 1 else values


async def read_resource(server: str, uri: str) -> Any:
    """A resource's contents: text (parsed when it is JSON) or bytes; several contents come as a list."""
    return _resource_value(await rpc.arequest("read_resource", server=server, uri=uri))


def read_resource_sync(server: str, uri: str) -> Any:
    """Blocking twin of ``read_resource``."""
    return _resource_value(rpc.request("read_resource", server=server, uri=uri))


# ------------------------------------------------------------------------------------ saved tools


def save_tool(func: Any = None, *, name: str | None = None, description: str | None = None) -> Any:
    """Save a function so that later sessions start with it defined; use as ``save_tool(f)`` or ``@save_tool``.

    The function's source is sent to the bridge, which keeps it outside the sandbox. It should be
    self-contained: import what it needs inside, and call MCP tools through ``mcp_<alias>`` proxies.
    """
    if func is None:
        return lambda f: save_tool(f, name=name, description=description)
    import inspect
    import textwrap

    if not inspect.isfunction(func) or func.__name__ == "<lambda>":
        raise TypeError("save_tool() takes a function defined with def (or async def)")
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError) as exc:
        raise TypeError(f"the source of {func.__name__}() cannot be found ({exc}); define it in a cell") from None
    source = _without_save_decorator(source)
    saved_name = name or func.__name__
    if saved_name != func.__name__:
        source += f"\n{saved_name} = {func.__name__}\n"
    doc = description if description is not None else (inspect.getdoc(func) or "").split("\n\n")[0]
    rpc.request("save_tool", name=saved_name, source=source, description=doc)
    return func


def _without_save_decorator(source: str) -> str:
    """Drop ``@save_tool`` / ``@runtime.save_tool(...)`` decorators (however many lines): loading must not re-save."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    node = tree.body[0] if tree.body else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return source
    lines = source.splitlines(True)
    drop: set[int] = set()
    for decorator in node.decorator_list:
        if "save_tool" in (ast.get_source_segment(source, decorator) or ""):
            drop.update(range(decorator.lineno - 1, (decorator.end_lineno or decorator.lineno)))
    return "".join(line for number, line in enumerate(lines) if number not in drop)


def list_saved_tools() -> list[dict[str, Any]]:
    """The saved tools (name, description, saved_at); each one is defined in every new session."""
    result: list[dict[str, Any]] = rpc.request("saved_tools")
    return result


def delete_saved_tool(name: str) -> bool:
    """Forget a saved tool (sessions that already have it keep their copy); True if it existed."""
    return bool(rpc.request("delete_saved_tool", name=name))


def _load_saved(namespace: dict[str, Any], saved: list[Any]) -> list[str]:
    """Define saved tools in a fresh namespace; one that fails is reported and the others still load."""
    import linecache

    notes: list[str] = []
    for entry in saved:
        if not isinstance(entry, dict) or not isinstance(entry.get("source"), str):
            continue
        name = str(entry.get("name", "?"))
        filename = f"<saved tool {name}>"
        source = entry["source"]
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        try:
            exec(compile(source, filename, "exec", dont_inherit=True), namespace)  # noqa: S102 - the user's own code
        except BaseException as exc:  # noqa: BLE001 - one broken saved tool must not break the session
            notes.append(
                f"saved tool {name!r} could not be loaded ({type(exc).__name__}: {exc}); fix it with "
                f"runtime.save_tool() or remove it with runtime.delete_saved_tool({name!r})"
            )
    return notes


def _bind_names(namespace: dict[str, Any]) -> None:
    """Put ``runtime``, ``mcp_servers`` and each ``mcp_<alias>`` back into the namespace, before every cell.

    The bridge sends the servers only when they change, so this runs on its own too: a name the code deleted
    or that a reset never had comes back, and a name the code rebound to something else is left alone.
    """
    if not _state.bound:
        return
    from . import _proxies

    namespace.setdefault("runtime", sys.modules[__name__])
    if "mcp_servers" not in namespace:
        namespace["mcp_servers"] = _proxies.ServerMap(catalog)
    for entry in catalog.servers:
        key = f"mcp_{entry.get('alias')}"
        if key not in namespace or isinstance(namespace[key], ServerProxy):
            namespace[key] = catalog.proxy(entry["name"])


def _configure(context: dict[str, Any], namespace: dict[str, Any]) -> list[str]:
    """Apply what the bridge sent with a call: the servers, their catalog versions, saved tools to define."""
    from . import _proxies

    rpc.limit(context.get("policy"))
    servers = context.get("servers")
    if isinstance(servers, list):
        versions = context.get("versions")
        catalog.configure(servers, versions if isinstance(versions, dict) else {})
        _proxies.install_finder()
        _state.bound = True
    elif isinstance(context.get("versions"), dict):
        catalog.configure(catalog.servers, context["versions"])
    _bind_names(namespace)
    saved = context.get("saved")
    notes = [str(problem)[:500] for problem in context.get("saved_problems") or [] if isinstance(problem, str)]
    return notes + (_load_saved(namespace, saved) if isinstance(saved, list) else [])
