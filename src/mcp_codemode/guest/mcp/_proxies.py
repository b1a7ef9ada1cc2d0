"""The server proxies: ``mcp_<alias>``, ``mcp_servers`` and ``from mcp.servers.<alias> import <tool>``.

Standard library only. ``mcp_<alias>`` objects are ``ServerProxy`` instances; their attributes are real
``async`` functions built from each tool's ``inputSchema``, so ``inspect.signature``, ``help()`` and
tab-completion show parameters, types, defaults and descriptions. The tool list of a server is fetched
from the bridge the first time one of its tools is touched, and cached for the session until the bridge
says the server's catalog changed.

The tool functions themselves are built in ``_signatures`` and their results converted in ``_results``.

The bridge's policy hides the servers and tools it refuses, so they are not here either. A name that is
not found is asked about once before ``ToolNotFound``/``ServerNotFound`` is raised: when the bridge knows
it as refused, the ``PolicyError`` that names the rule is more useful than "no such tool".
"""

from __future__ import annotations

import sys

from . import _rpc
from ._results import Audio, Media, natural, parse_text, resource_value
from ._rpc import MCPError, PolicyError, ServerNotFound, ToolNotFound
from ._signatures import ToolSpec, annotation, close_names, did_you_mean, make_tool, type_label

# Kept reachable here for the host's stubs (``upstream/tools/stubs.py`` imports ``ToolSpec`` and ``annotation``)
# and the tests that reach the result and signature helpers through this module.
__all__ = [
    "Audio",
    "Media",
    "ToolSpec",
    "annotation",
    "make_tool",
    "natural",
    "parse_text",
    "resource_value",
    "type_label",
]

TYPE_CHECKING = False
if TYPE_CHECKING:
    import types
    from collections.abc import Callable
    from typing import Any
# ------------------------------------------------------------------------------------------ servers


class ServerRegistry:
    """The servers this session may use (sent by the bridge with each call) and the tools fetched so far."""

    def __init__(self) -> None:
        self.servers: list[dict[str, Any]] = []
        self.versions: dict[str, int] = {}
        self._tools: dict[str, tuple[int, dict[str, Any]]] = {}  # server -> (version, {alias: function})
        self._proxies: dict[str, ServerProxy] = {}
        # Binds the proxies into the cells' namespace again (set by ``runtime``): a server added mid-cell is usable
        # in the same cell.
        self.rebind: Callable[[], None] = lambda: None

    def configure(self, servers: list[dict[str, Any]], versions: dict[str, int]) -> None:
        self.servers = [s for s in servers if isinstance(s, dict) and isinstance(s.get("name"), str)]
        self.versions = {k: v for k, v in versions.items() if isinstance(v, int)}
        # A proxy of a server that went, or whose alias changed, is made afresh when asked for.
        aliases = {s["name"]: str(s.get("alias")) for s in self.servers}
        self._proxies = {n: p for n, p in self._proxies.items() if aliases.get(n) == p._alias}

    def names(self) -> list[str]:
        return [s["name"] for s in self.servers]

    def resolve(self, name: str) -> dict[str, Any]:
        """A server by name or alias, or ServerNotFound with the closest names."""
        for server in self.servers:
            if name in (server["name"], server.get("alias")):
                return server
        _ask_about_missing("describe", server=name)
        names = self.names()
        close = close_names(name, names)
        hint = did_you_mean(close)
        listed = ", ".join(names) if names else "none are configured"
        raise ServerNotFound(
            f"no MCP server named {name!r}.{hint} Configured servers: {listed}.",
            server=name,
            details={"suggestions": close},
        )

    def proxy(self, name: str) -> ServerProxy:
        server = self.resolve(name)
        proxy = self._proxies.get(server["name"])
        if proxy is None:
            proxy = self._proxies[server["name"]] = ServerProxy(self, server["name"], str(server.get("alias")))
        return proxy

    def tools(self, server: str, alias: str) -> dict[str, Any]:
        version = self.versions.get(server, 0)
        cached = self._tools.get(server)
        if cached is not None and cached[0] == version:
            return cached[1]
        infos = _rpc.rpc.request("tools", server=server)
        functions: dict[str, Any] = {}
        for info in infos if isinstance(infos, list) else []:
            if isinstance(info, dict) and isinstance(info.get("name"), str):
                spec = ToolSpec(server, alias, info)
                functions[spec.alias] = make_tool(alias, spec)
        self._tools[server] = (version, functions)
        return functions


class ServerProxy:
    """``mcp_<alias>``: the tools of one upstream server as attributes (``await mcp_fs.read_file(path=...)``).

    ``dir()`` lists the tools; ``proxy["tool-name"]`` reaches tools by their original name too. Nothing
    public is defined on the class, so no tool name can be shadowed by a method.
    """

    def __init__(self, registry: ServerRegistry, name: str, alias: str) -> None:
        self._registry = registry
        self._name = name
        self._alias = alias

    def _functions(self) -> dict[str, Any]:
        return self._registry.tools(self._name, self._alias)

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__") and attribute.endswith("__"):
            raise AttributeError(attribute)
        return self[attribute]

    def __getitem__(self, tool: str) -> Any:
        functions = self._functions()
        if tool in functions:
            return functions[tool]
        for function in functions.values():
            if function.spec.name == tool:
                return function
        if not tool.startswith("_"):  # private names are probes (display hooks), never tools worth a round trip
            _ask_about_missing("docs", server=self._name, tool=tool, detail="name")
        names = list(functions)
        candidates = dict.fromkeys(names + [f.spec.name for f in functions.values()])
        close = close_names(tool, list(candidates))
        hint = did_you_mean(close)
        raise ToolNotFound(
            f"the {self._name!r} server has no tool {tool!r}.{hint} Its tools: {', '.join(names) or 'none'}.",
            server=self._name,
            tool=tool,
            details={"suggestions": close},
        )

    def __dir__(self) -> list[str]:
        return sorted(self._functions())

    def __iter__(self) -> Any:
        return iter(self._functions().values())

    def __repr__(self) -> str:
        return f"<MCP server {self._name!r} (mcp_{self._alias}); dir() lists its tools, help() on one shows its docs>"


def _ask_about_missing(op: str, **params: Any) -> None:
    """Raise the bridge's PolicyError for a name it refuses; any other answer leaves the caller to say "not found"."""
    if _rpc.rpc._send is None or not isinstance(params.get("server"), str):
        return
    try:
        _rpc.rpc.request(op, **params)
    except PolicyError:
        raise
    except MCPError:
        return


class ServerMap:
    """``mcp_servers``: every configured server by name (or alias), ``mcp_servers["filesystem"]``."""

    def __init__(self, registry: ServerRegistry) -> None:
        self._registry = registry

    def __getitem__(self, name: str) -> ServerProxy:
        return self._registry.proxy(name)

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except MCPError:
            return default

    def __contains__(self, name: object) -> bool:
        return any(name in (s["name"], s.get("alias")) for s in self._registry.servers)

    def __iter__(self) -> Any:
        return iter(self._registry.names())

    def __len__(self) -> int:
        return len(self._registry.servers)

    def keys(self) -> list[str]:
        return self._registry.names()

    def items(self) -> list[tuple[str, ServerProxy]]:
        return [(name, self[name]) for name in self._registry.names()]

    def __repr__(self) -> str:
        return f"<MCP servers: {', '.join(self._registry.names()) or 'none configured'}>"


catalog = ServerRegistry()


class ServerModuleFinder:
    """Makes ``from mcp.servers.<alias> import <tool>`` work: each server is a module whose attributes are tools."""

    PREFIX = "mcp.servers."

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith(self.PREFIX) or "." in fullname[len(self.PREFIX) :]:
            return None
        import importlib.machinery

        try:
            catalog.resolve(fullname[len(self.PREFIX) :])
        except ServerNotFound:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)  # type: ignore[arg-type]

    def create_module(self, spec: Any) -> types.ModuleType:
        alias = spec.name[len(self.PREFIX) :]
        proxy = catalog.proxy(alias)
        module = type(sys)(spec.name, f"The tools of the {proxy._name!r} MCP server.")

        def module_getattr(name: str) -> Any:
            if name == "__all__":
                return sorted(proxy._functions())
            if name.startswith("__"):
                raise AttributeError(name)
            return proxy[name]

        module.__getattr__ = module_getattr  # type: ignore[method-assign]
        module.__dir__ = lambda: sorted(proxy._functions())  # type: ignore[method-assign]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def install_finder() -> None:
    if not any(isinstance(finder, ServerModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, ServerModuleFinder())
