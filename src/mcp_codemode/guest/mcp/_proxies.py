"""Typed proxies for upstream MCP tools, and the natural values their results become.

Standard library only. ``mcp_<alias>`` objects are ``ServerProxy`` instances; their attributes are real
``async`` functions built from each tool's ``inputSchema``, so ``inspect.signature``, ``help()`` and
tab-completion show parameters, types, defaults and descriptions. The tool list of a server is fetched
from the bridge the first time one of its tools is touched, and cached for the session until the bridge
says the server's catalog changed.

Arguments are bound against the signature here (an unknown name gets a suggestion at once, without a
round trip) and then validated by the bridge against the full schema: the host is the authority.

The bridge's policy hides the servers and tools it refuses, so they are not here either. A name that is
not found is asked about once before ``ToolNotFound``/``ServerNotFound`` is raised: when the bridge knows
it as refused, the ``PolicyError`` that names the rule is more useful than "no such tool".
"""

from __future__ import annotations

import base64
import difflib
import json
import keyword
import sys
import types

from . import _rpc
from ._rpc import ArgumentError, MCPError, PolicyError, ServerNotFound, ToolError, ToolNotFound

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


# --------------------------------------------------------------------------------------------- results


class Media:
    """Binary content of a tool result (audio, or an image of a type we cannot show): bytes and MIME type."""

    def __init__(self, data: bytes, mime: str) -> None:
        self.data = data
        self.mime = mime

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.mime}, {len(self.data)} bytes>"


class Audio(Media):
    """Audio content of a tool result."""


def natural(raw: dict[str, Any], server: str, tool: str, wrapped: bool = False) -> Any:
    """The value a tool result means: structured content, parsed JSON text, text, images; isError raises."""
    if raw.get("isError"):
        raise ToolError(_error_text(raw) or f"{tool} on {server} failed without a message", server=server, tool=tool)
    structured = raw.get("structuredContent")
    if structured is not None:
        if wrapped and isinstance(structured, dict) and set(structured) == {"result"}:
            return structured["result"]
        return structured
    items = [_content(item) for item in raw.get("content") or [] if isinstance(item, dict)]
    if not items:
        return None
    return items[0] if len(items) == 1 else items


def _error_text(raw: dict[str, Any]) -> str:
    parts = [item.get("text", "") for item in raw.get("content") or [] if isinstance(item, dict)]
    return "\n".join(part for part in parts if isinstance(part, str) and part).strip()


def parse_text(text: str) -> Any:
    """JSON text becomes the value it encodes; anything else stays text."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
        try:
            return json.loads(stripped)
        except ValueError:
            return text
    return text


def _content(item: dict[str, Any]) -> Any:
    kind = item.get("type")
    if kind == "text":
        return parse_text(str(item.get("text", "")))
    if kind in ("image", "audio"):
        try:
            data = base64.b64decode(str(item.get("data", "")), validate=False)
        except ValueError:
            return item
        mime = str(item.get("mimeType", "application/octet-stream"))
        if kind == "image":
            from . import runtime  # imported here, not per call: most results hold no image

            if runtime.sniff(data) is not None:
                return runtime.Image(data)
            return Media(data, mime)
        return Audio(data, mime)
    if kind == "resource":
        return resource_value(item.get("resource") or {})
    return item  # resource_link and anything newer: the raw item, which says what it is


def resource_value(contents: dict[str, Any]) -> Any:
    """One resource's contents: text (parsed if JSON), or bytes for a blob."""
    if "text" in contents:
        return parse_text(str(contents.get("text", "")))
    if "blob" in contents:
        try:
            return base64.b64decode(str(contents["blob"]), validate=False)
        except ValueError:
            return contents
    return contents


# ---------------------------------------------------------------------------------------- signatures

_JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
    "null": type(None),
}


def annotation(schema: Any) -> Any:
    """A Python annotation for a JSON schema: str, int | None, list[str], Literal['a', 'b'], ..."""
    import typing

    if not isinstance(schema, dict):
        return typing.Any
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        try:
            return typing.Literal[tuple(schema["enum"])]
        except TypeError:
            return typing.Any
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list) and options:
        return _union([annotation(option) for option in options])
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union([annotation({**schema, "type": item}) for item in kind])
    base = _JSON_TYPES.get(kind) if isinstance(kind, str) else None
    if base is None:
        return typing.Any
    if base is list and isinstance(schema.get("items"), dict):
        return list[annotation(schema["items"])]  # type: ignore[misc]
    if base is dict:
        return dict[str, typing.Any]
    return base


def _union(parts: list[Any]) -> Any:
    import functools
    import operator
    import typing

    unique: list[Any] = []
    for part in parts:
        if part not in unique:
            unique.append(part)
    if typing.Any in unique:
        return typing.Any
    try:
        return functools.reduce(operator.or_, unique)
    except TypeError:
        return typing.Any


def type_label(schema: Any) -> str:
    """A short name of a schema's type for docs and errors: 'string', 'integer or null', "one of 'a', 'b'"."""
    if not isinstance(schema, dict):
        return "any"
    if isinstance(schema.get("enum"), list):
        return "one of " + ", ".join(repr(value) for value in schema["enum"][:12])
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list) and options:
        return " or ".join(type_label(option) for option in options)
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(str(item) for item in kind)
    if kind == "array" and isinstance(schema.get("items"), dict):
        return f"array of {type_label(schema['items'])}"
    return str(kind) if kind else "any"


def _allows_null(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return True
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    options = schema.get("anyOf") or schema.get("oneOf")
    return isinstance(options, list) and any(_allows_null(option) for option in options if isinstance(option, dict))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class ToolSpec:
    """What the guest knows of one tool: its names, docs, and the signature its schema implies."""

    def __init__(self, server: str, server_alias: str, info: dict[str, Any]) -> None:
        import inspect

        self.server = server
        self.name = str(info.get("name", ""))
        self.alias = str(info.get("alias", self.name))
        self.description = str(info.get("description") or "")
        schema = _dict(info.get("inputSchema"))
        self.schema = schema
        output = info.get("outputSchema")
        self.wrapped = isinstance(output, dict) and bool(output.get("x-fastmcp-wrap-result"))
        properties = _dict(schema.get("properties"))
        required = [name for name in schema.get("required") or [] if name in properties]
        self.properties = properties
        self.required = required
        # Parameter names must be identifiers and not keywords; other properties travel through **arguments.
        self.param_to_property: dict[str, str] = {}
        parameters: list[inspect.Parameter] = []
        optional = [name for name in properties if name not in required]
        for name in [*required, *optional]:
            if not name.isidentifier() or keyword.iskeyword(name) or name in self.param_to_property:
                continue
            prop = properties[name] if isinstance(properties[name], dict) else {}
            default = inspect.Parameter.empty if name in required else prop.get("default", None)
            kind = inspect.Parameter.POSITIONAL_OR_KEYWORD if name in required else inspect.Parameter.KEYWORD_ONLY
            hint = annotation(prop)
            if default is None:
                hint = _union([hint, type(None)])
            parameters.append(inspect.Parameter(name, kind, default=default, annotation=hint))
            self.param_to_property[name] = name
        self.extra = any(name not in self.param_to_property for name in properties) or not properties
        self.extra_name = ""
        if self.extra:
            self.extra_name = next(n for n in ("arguments", "more_arguments", "extra_arguments", "kwargs_") if n not in
                                   self.param_to_property)  # fmt: skip
            parameters.append(inspect.Parameter(self.extra_name, inspect.Parameter.VAR_KEYWORD))
        returns = annotation(output) if isinstance(output, dict) and not self.wrapped else inspect.Signature.empty
        self.signature = inspect.Signature(parameters, return_annotation=returns)
        # For bind's fast path: the named parameters in signature order, each with whether None passed for it
        # is sent (a nullable or required one) or means "not given", and those it must be given.
        self._sends_none = {
            parameter.name: parameter.name in required or _allows_null(properties.get(parameter.name))
            for parameter in parameters
            if parameter.name in self.param_to_property
        }
        self._must_give = [name for name in required if name in self.param_to_property]
        self.qualname = f"mcp_{server_alias}.{self.alias}"

    def doc(self) -> str:
        lines = [self.description.strip() or f"The {self.name!r} tool of the {self.server!r} MCP server."]
        if self.properties:
            lines += ["", "Args:"]
            for name, prop in self.properties.items():
                prop = prop if isinstance(prop, dict) else {}
                flags = "required" if name in self.required else f"default {prop['default']!r}" if "default" in prop \
                    else "optional"  # fmt: skip
                text = str(prop.get("description") or "").strip().replace("\n", " ")
                lines.append(f"    {name} ({type_label(prop)}, {flags}){': ' + text if text else ''}")
        lines += ["", f"Server {self.server!r}, tool {self.name!r}. Raises runtime.ToolError when the tool fails."]
        return "\n".join(lines)

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments as the tool's properties, or an ArgumentError that names the problem.

        The usual call passes keywords only, each one a named parameter, the required ones included: that binds
        to what ``Signature.bind`` would give, in a tenth of its time (it took 10-25 us of every proxied call).
        Anything else, and every mistake, goes through the signature.
        """
        sends_none = self._sends_none
        if not args and all(name in sends_none for name in kwargs) and all(name in kwargs for name in self._must_give):
            return {
                name: kwargs[name]
                for name in sends_none
                if name in kwargs and (kwargs[name] is not None or sends_none[name])
            }
        return self.bind_by_signature(args, kwargs)

    def bind_by_signature(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """``bind`` for every call: through ``Signature.bind``, which names each mistake."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise ArgumentError(self._explain(str(exc), kwargs), server=self.server, tool=self.name) from None
        arguments: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            if self.extra and name == self.extra_name:
                arguments.update(value)
            elif value is None and name not in self.required and not _allows_null(self.properties.get(name)):
                continue  # the signature offers None as "not given": the server's own default applies
            else:
                arguments[self.param_to_property.get(name, name)] = value
        return arguments

    def _explain(self, problem: str, kwargs: dict[str, Any]) -> str:
        known = list(self.properties)
        unknown = [name for name in kwargs if name not in known]
        if unknown:
            name = unknown[0]
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else "."
            return f"{self.name}() got an unknown argument {name!r}{hint} It takes: {self.parameter_list()}."
        return f"{self.name}(): {problem}. It takes: {self.parameter_list()}."

    def parameter_list(self) -> str:
        if not self.properties:
            return "no arguments"
        parts = []
        for name, prop in self.properties.items():
            flag = ", required" if name in self.required else ""
            parts.append(f"{name} ({type_label(prop)}{flag})")
        return ", ".join(parts)


def make_tool(server_alias: str, spec: ToolSpec) -> Any:
    """A function for one tool, with its signature and docstring, plus ``.sync`` and ``.raw`` twins.

    Arguments are bound when the function is called, not when its coroutine is awaited, so a wrong
    argument raises at the line that wrote it, even if the result is never awaited.
    """

    async def _call(arguments: dict[str, Any]) -> Any:
        raw = await _rpc.rpc.arequest("call", server=spec.server, tool=spec.name, arguments=arguments)
        return natural(raw, spec.server, spec.name, spec.wrapped)

    async def _call_raw(arguments: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await _rpc.rpc.arequest(
            "call", server=spec.server, tool=spec.name, arguments=arguments
        )
        return result

    def tool(*args: Any, **kwargs: Any) -> Any:
        return _call(spec.bind(args, kwargs))

    def sync(*args: Any, **kwargs: Any) -> Any:
        raw = _rpc.rpc.request("call", server=spec.server, tool=spec.name, arguments=spec.bind(args, kwargs))
        return natural(raw, spec.server, spec.name, spec.wrapped)

    def raw(*args: Any, **kwargs: Any) -> Any:
        return _call_raw(spec.bind(args, kwargs))

    for function, suffix, note in (
        (tool, "", "Awaitable: `value = await {q}(...)`; `{q}.sync(...)` blocks instead.\n\n"),
        (sync, ".sync", "Blocking twin of {q}: returns the value directly, no await.\n\n"),
        (raw, ".raw", "Awaitable; returns the raw MCP CallToolResult as a dict (content, structuredContent).\n\n"),
    ):
        function.__name__ = spec.alias
        function.__qualname__ = spec.qualname + suffix
        function.__module__ = f"mcp.servers.{server_alias}"
        function.__doc__ = note.format(q=spec.qualname) + spec.doc()
        setattr(function, "__signature__", spec.signature)  # noqa: B010 - mypy does not know the attribute
    tool.sync = sync  # type: ignore[attr-defined]
    tool.raw = raw  # type: ignore[attr-defined]
    tool.spec = spec  # type: ignore[attr-defined]
    return tool


# ------------------------------------------------------------------------------------------ servers


class Catalog:
    """The servers this session may use (sent by the bridge with each call) and the tools fetched so far."""

    def __init__(self) -> None:
        self.servers: list[dict[str, Any]] = []
        self.versions: dict[str, int] = {}
        self._tools: dict[str, tuple[int, dict[str, Any]]] = {}  # server -> (version, {alias: function})
        self._proxies: dict[str, ServerProxy] = {}

    def configure(self, servers: list[dict[str, Any]], versions: dict[str, int]) -> None:
        self.servers = [s for s in servers if isinstance(s, dict) and isinstance(s.get("name"), str)]
        self.versions = {k: v for k, v in versions.items() if isinstance(v, int)}

    def names(self) -> list[str]:
        return [s["name"] for s in self.servers]

    def resolve(self, name: str) -> dict[str, Any]:
        """A server by name or alias, or ServerNotFound with the closest names."""
        for server in self.servers:
            if name in (server["name"], server.get("alias")):
                return server
        _ask_about_missing("describe", server=name)
        names = self.names()
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
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

    def __init__(self, catalog: Catalog, name: str, alias: str) -> None:
        self._catalog = catalog
        self._name = name
        self._alias = alias

    def _functions(self) -> dict[str, Any]:
        return self._catalog.tools(self._name, self._alias)

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
        close = difflib.get_close_matches(tool, list(candidates), n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
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

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def __getitem__(self, name: str) -> ServerProxy:
        return self._catalog.proxy(name)

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except MCPError:
            return default

    def __contains__(self, name: object) -> bool:
        return any(name in (s["name"], s.get("alias")) for s in self._catalog.servers)

    def __iter__(self) -> Any:
        return iter(self._catalog.names())

    def __len__(self) -> int:
        return len(self._catalog.servers)

    def keys(self) -> list[str]:
        return self._catalog.names()

    def items(self) -> list[tuple[str, ServerProxy]]:
        return [(name, self[name]) for name in self._catalog.names()]

    def __repr__(self) -> str:
        return f"<MCP servers: {', '.join(self._catalog.names()) or 'none configured'}>"


catalog = Catalog()


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
        module = types.ModuleType(spec.name, f"The tools of the {proxy._name!r} MCP server.")

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
