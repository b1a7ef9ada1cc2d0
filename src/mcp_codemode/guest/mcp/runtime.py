"""The API of code running in the sandbox: MCP servers and their tools, images, saved tools.

Start with ``print(capability_summary())``: this sandbox's limits, how sessions, output and images work, the user's
MCP servers and how to find and call their tools (``await search_tool_docs("...")``, ``await
mcp_<alias>.<tool>(...)``). The run_python listing says only enough to get here.

Standard library only, importable on any Python >= 3.10. The worker binds a ``Display`` for each cell and
tells this module which MCP servers the session may use; outside a running cell (or outside the worker)
the helpers say so instead of failing obscurely.

Every helper that talks to the bridge exists twice: ``name(...)`` is a coroutine (``await`` it, or gather
many), ``name_sync(...)`` blocks and returns the value. Errors are ``MCPError`` subclasses, all catchable.

This module is the one name code imports (``mcp.runtime``), so it re-exports the public API from the modules
that hold each part: ``_images`` (``Image``), ``_display`` (a cell's images), ``_results`` (natural values),
``_proxies`` and ``_signatures`` (the server proxies and their tool functions), ``_docs`` (tool docs and
search), ``_saved`` (saved tools). What stays here is the per-cell context the worker sets (``_state``,
``_configure``, ``_bind_names``) and the plain server, call and resource helpers. Imports run one way: each of
those modules imports only the ones listed before it, never this one.
"""

from __future__ import annotations

import sys

from . import _proxies

# Names that were module-level here before the split (the worker builds its per-cell Display through this
# module; the tests reach the scan and the sniffing; code in a cell may have used the rest) stay reachable.
from ._display import SCAN_DEPTH as SCAN_DEPTH
from ._display import SCAN_ITEMS as SCAN_ITEMS
from ._display import Display as Display
from ._display import _images_in as _images_in
from ._files import SharedFile, share_file
from ._files import take_links as _take_links  # noqa: F401 - the worker sends them with each result
from ._images import Image
from ._images import is_image_like as is_image_like
from ._images import sniff as sniff
from ._images import to_image as to_image
from ._proxies import ServerProxy, catalog
from ._results import (
    Audio,
    EmbeddedBytes,
    EmbeddedDict,
    EmbeddedList,
    EmbeddedText,
    Media,
    ResourceLink,
    natural,
    prompt_value,
    read_resource_value,
)
from ._rpc import (
    ApprovalDenied,
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

    from ._adding import add_server, added_servers, remove_server
    from ._docs import DETAILS as DETAILS
    from ._docs import MAX_LIMIT as MAX_LIMIT
    from ._docs import (
        SearchResults,
        Stub,
        list_tools,
        list_tools_sync,
        query_tool_docs,
        query_tool_docs_sync,
        search_tool_docs,
        search_tool_docs_sync,
    )
    from ._finding import FoundServers, find_servers, find_servers_sync
    from ._saved import delete_saved_tool, list_saved_tools, save_tool

# Tool docs and search (``_docs``) and saved tools (``_saved``) load at their first use: most cells never call them,
# and an idle sandbox keeps in memory whatever its guest imported (docs/density.md). Type checkers see them above.
_LATER = dict.fromkeys(
    (
        "DETAILS",
        "MAX_LIMIT",
        "SearchResults",
        "Stub",
        "list_tools",
        "list_tools_sync",
        "query_tool_docs",
        "query_tool_docs_sync",
        "search_tool_docs",
        "search_tool_docs_sync",
    ),
    "_docs",
)
_LATER.update(dict.fromkeys(("_load_saved", "delete_saved_tool", "list_saved_tools", "save_tool"), "_saved"))
_LATER.update(dict.fromkeys(("FoundServers", "find_servers", "find_servers_sync"), "_finding"))
_LATER.update(dict.fromkeys(("add_server", "added_servers", "remove_server"), "_adding"))


def __getattr__(name: str) -> Any:
    module = _LATER.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(module, globals(), None, [name], 1), name)  # from .<module> import <name>
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LATER))


__all__ = [
    "ApprovalDenied",
    "ArgumentError",
    "Audio",
    "EmbeddedBytes",
    "EmbeddedDict",
    "EmbeddedList",
    "EmbeddedText",
    "FoundServers",
    "Image",
    "MCPError",
    "Media",
    "PolicyError",
    "ResourceLink",
    "SearchResults",
    "ServerNotFound",
    "ServerUnavailable",
    "SharedFile",
    "Stub",
    "ToolError",
    "ToolNotFound",
    "ToolTimeout",
    "add_server",
    "added_servers",
    "call_tool",
    "call_tool_sync",
    "capability_summary",
    "delete_saved_tool",
    "describe_server",
    "discovered_servers",
    "find_servers",
    "find_servers_sync",
    "get_prompt",
    "get_prompt_sync",
    "hibernation",
    "list_loaded_server_metadata",
    "list_prompts",
    "list_prompts_sync",
    "list_resource_templates",
    "list_resource_templates_sync",
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
    "remove_server",
    "save_tool",
    "search_tool_docs",
    "search_tool_docs_sync",
    "server",
    "share_file",
    "show",
]


class _State:
    display: Display | None = None
    summary: str = ""
    bound = False  # the bridge has sent the server list: the namespace gets the proxies before every cell
    hibernate = True  # hibernation(False): the session is dropped, not written to disk, when it ends


_state = _State()


def show(obj: object) -> None:
    """Send an image to the client with this call's result: PNG/JPEG bytes, a file path, PIL image or figure."""
    if _state.display is None:
        raise RuntimeError("runtime.show() works only while a run_python call is running")
    _state.display.add(obj, strict=True)


def hibernation(enabled: bool | None = None) -> bool:
    """Whether this session is written to disk when it idles out, is closed for another or the bridge stops (when the
    bridge hibernates sessions at all), so its next call brings it back. ``hibernation(False)`` opts out: the session
    is then dropped as it ends, with any snapshot of it. Returns the setting in force after the call."""
    if enabled is not None:
        if not isinstance(enabled, bool):
            raise TypeError("hibernation() takes True, False or nothing")
        _state.hibernate = enabled
    return _state.hibernate


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


def _entries(reply: Any) -> list[dict[str, Any]]:
    """A listing's entries (resources, templates, prompts): the dicts of the reply's list."""
    return [entry for entry in reply if isinstance(entry, dict)] if isinstance(reply, list) else []


async def list_resources(server: str) -> list[dict[str, Any]]:
    """The resources a server offers and the policy allows (uri, name, mimeType, description)."""
    return _entries(await rpc.arequest("resources", server=server))


def list_resources_sync(server: str) -> list[dict[str, Any]]:
    """Blocking twin of ``list_resources``."""
    return _entries(rpc.request("resources", server=server))


async def list_resource_templates(server: str) -> list[dict[str, Any]]:
    """A server's resource templates (uriTemplate, name, mimeType, description): fill one in, then
    ``read_resource`` the URI."""
    return _entries(await rpc.arequest("resource_templates", server=server))


def list_resource_templates_sync(server: str) -> list[dict[str, Any]]:
    """Blocking twin of ``list_resource_templates``."""
    return _entries(rpc.request("resource_templates", server=server))


async def read_resource(server: str, uri: str) -> Any:
    """A resource's contents: text (parsed when it is JSON) or bytes; several contents come as a list."""
    return read_resource_value(await rpc.arequest("read_resource", server=server, uri=uri))


def read_resource_sync(server: str, uri: str) -> Any:
    """Blocking twin of ``read_resource``."""
    return read_resource_value(rpc.request("read_resource", server=server, uri=uri))


async def list_prompts(server: str) -> list[dict[str, Any]]:
    """The prompts a server offers and the policy allows (name, title, description, arguments)."""
    return _entries(await rpc.arequest("prompts", server=server))


def list_prompts_sync(server: str) -> list[dict[str, Any]]:
    """Blocking twin of ``list_prompts``."""
    return _entries(rpc.request("prompts", server=server))


def _prompt_params(server: str, name: str, arguments: dict[str, str] | None) -> dict[str, Any]:
    if arguments is not None and not isinstance(arguments, dict):
        raise ArgumentError(f"arguments must be a dict of the prompt's arguments, not {type(arguments).__name__}")
    return {"server": server, "prompt": name, "arguments": arguments or {}}


async def get_prompt(server: str, name: str, arguments: dict[str, str] | None = None, *, raw: bool = False) -> Any:
    """A prompt filled in with ``arguments`` (strings): ``{"description", "messages": [{"role", "content"}]}``
    with each content a natural value (text, ``Image``, ...), or the raw GetPromptResult dict with ``raw=True``."""
    result = await rpc.arequest("get_prompt", **_prompt_params(server, name, arguments))
    return result if raw else prompt_value(result, server)


def get_prompt_sync(server: str, name: str, arguments: dict[str, str] | None = None, *, raw: bool = False) -> Any:
    """Blocking twin of ``get_prompt``."""
    result = rpc.request("get_prompt", **_prompt_params(server, name, arguments))
    return result if raw else prompt_value(result, server)


def _bind_names(namespace: dict[str, Any]) -> None:
    """Put ``runtime``, ``mcp_servers`` and each ``mcp_<alias>`` back into the namespace, before every cell.

    The bridge sends the servers only when they change, so this runs on its own too: a name the code deleted
    or that a reset never had comes back, and a name the code rebound to something else is left alone.
    """
    _proxies.catalog.rebind = lambda: _rebound(namespace)  # add_server's new proxy is bound at once, in this namespace
    if not _state.bound:
        return
    namespace.setdefault("runtime", sys.modules[__name__])
    if "mcp_servers" not in namespace:
        namespace["mcp_servers"] = _proxies.ServerMap(catalog)
    configured = set()
    for entry in catalog.servers:
        key = f"mcp_{entry.get('alias')}"
        configured.add(key)
        if key not in namespace or isinstance(namespace[key], ServerProxy):
            namespace[key] = catalog.proxy(entry["name"])
    # A server the bridge no longer serves (its configuration was refreshed) goes, as it never was.
    for key in [k for k, v in namespace.items() if isinstance(v, ServerProxy) and k.startswith("mcp_")]:
        if key not in configured:
            del namespace[key]


def _rebound(namespace: dict[str, Any]) -> None:
    _proxies.install_finder()
    _state.bound = True
    _bind_names(namespace)


def _configure(context: dict[str, Any], namespace: dict[str, Any]) -> list[str]:
    """Apply what the bridge sent with a call: the servers, their catalog versions, saved tools to define."""
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
    return notes + (__getattr__("_load_saved")(namespace, saved) if isinstance(saved, list) and saved else [])
