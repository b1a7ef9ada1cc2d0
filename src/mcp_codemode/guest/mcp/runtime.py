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


__all__ = [
    "ArgumentError",
    "Audio",
    "Image",
    "MCPError",
    "Media",
    "PolicyError",
    "ServerNotFound",
    "ServerUnavailable",
    "ToolError",
    "ToolNotFound",
    "ToolTimeout",
    "call_tool",
    "call_tool_sync",
    "capability_summary",
    "delete_saved_tool",
    "describe_server",
    "discovered_servers",
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
    return callable(getattr(obj, "_repr_png_", None)) or callable(getattr(obj, "_repr_jpeg_", None))


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


class _State:
    display: Display | None = None
    summary: str = ""


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


async def list_servers() -> list[dict[str, Any]]:
    """Every server with its state (idle, ready, failed...) and tool count when known; starts nothing."""
    result: list[dict[str, Any]] = await rpc.arequest("servers")
    return result


def list_servers_sync() -> list[dict[str, Any]]:
    """Blocking twin of ``list_servers``."""
    result: list[dict[str, Any]] = rpc.request("servers")
    return result


def server(name: str) -> ServerProxy:
    """The proxy of one server by name or alias (the same object as ``mcp_<alias>`` and ``mcp_servers[name]``)."""
    return catalog.proxy(name)


def describe_server(name: str) -> dict[str, Any]:
    """A server's name, alias, description, transport and its tools (name, alias, one line each); starts it."""
    result: dict[str, Any] = rpc.request("describe", server=name)
    return result


async def list_tools(server: str) -> list[dict[str, Any]]:
    """A server's tools, one short entry each (name, alias, description); starts the server if needed."""
    result: list[dict[str, Any]] = await rpc.arequest("docs", server=server, tool=None, detail="summary")
    return result


def list_tools_sync(server: str) -> list[dict[str, Any]]:
    """Blocking twin of ``list_tools``."""
    result: list[dict[str, Any]] = rpc.request("docs", server=server, tool=None, detail="summary")
    return result


async def query_tool_docs(server: str, tool: str | None = None, detail: str = "summary") -> Any:
    """Docs of a server's tools (or one tool): detail "name", "summary" (default) or "full" (with schemas)."""
    return await rpc.arequest("docs", server=server, tool=tool, detail=detail)


def query_tool_docs_sync(server: str, tool: str | None = None, detail: str = "summary") -> Any:
    """Blocking twin of ``query_tool_docs``."""
    return rpc.request("docs", server=server, tool=tool, detail=detail)


async def search_tool_docs(query: str, limit: int = 5, detail: str = "summary") -> list[dict[str, Any]]:
    """The tools of every configured server that best match a description of what you want, best first."""
    result: list[dict[str, Any]] = await rpc.arequest("search", query=query, limit=limit, detail=detail)
    return result


def search_tool_docs_sync(query: str, limit: int = 5, detail: str = "summary") -> list[dict[str, Any]]:
    """Blocking twin of ``search_tool_docs``."""
    result: list[dict[str, Any]] = rpc.request("search", query=query, limit=limit, detail=detail)
    return result


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


def _configure(context: dict[str, Any], namespace: dict[str, Any]) -> list[str]:
    """Apply what the bridge sent with a call: the servers, their catalog versions, saved tools to define."""
    from . import _proxies

    servers = context.get("servers")
    if isinstance(servers, list):
        versions = context.get("versions")
        catalog.configure(servers, versions if isinstance(versions, dict) else {})
        _proxies.install_finder()
        namespace.setdefault("runtime", sys.modules[__name__])
        if "mcp_servers" not in namespace:
            namespace["mcp_servers"] = _proxies.ServerMap(catalog)
        for entry in catalog.servers:
            key = f"mcp_{entry.get('alias')}"
            if key not in namespace or isinstance(namespace[key], ServerProxy):
                namespace[key] = catalog.proxy(entry["name"])
    elif isinstance(context.get("versions"), dict):
        catalog.configure(catalog.servers, context["versions"])
    saved = context.get("saved")
    notes = [str(problem)[:500] for problem in context.get("saved_problems") or [] if isinstance(problem, str)]
    return notes + (_load_saved(namespace, saved) if isinstance(saved, list) else [])
