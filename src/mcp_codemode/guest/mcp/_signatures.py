"""Tool functions built from a JSON schema: annotations, signatures, docs, and argument binding.

Standard library only, and importable on the host too: the bridge renders its stubs with the same
``ToolSpec`` and ``annotation`` (``upstream/tools/stubs.py``), so a stub and the proxy function cannot disagree.
Arguments are bound against the signature here (an unknown name gets a suggestion at once, without a
round trip) and then validated by the bridge against the full schema: the host is the authority.

One cohesive thing at about 250 lines: the signature, the binding that follows it and the function
carrying both are one model of a tool.
"""

from __future__ import annotations

import keyword

from . import _rpc
from ._results import natural
from ._rpc import ArgumentError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def close_names(name: str, candidates: list[str], n: int = 3) -> list[str]:
    """The guest's one "did you mean": up to ``n`` of ``candidates`` close to a name the code mistyped. ``difflib`` is
    imported here, by the first mistake: it imports ``re``, about 1.2 MiB every idle sandbox would keep."""
    import difflib

    return difflib.get_close_matches(name, candidates, n=n, cutoff=0.5)


def did_you_mean(close: list[str]) -> str:
    """`` Did you mean 'a', 'b'?`` for a sentence's end, or nothing when no name was close."""
    return f" Did you mean {', '.join(map(repr, close))}?" if close else ""


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
            close = close_names(name, known, 1)
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
