"""Python stubs of MCP tools: what sandboxed code's proxies accept and return, as source text a model reads.

The parameters come from the guest's own ``ToolSpec`` (``mcp_codemode.guest.mcp._proxies``), the class that
builds the proxies' signatures, so a stub and the function it describes cannot disagree on names, order, kinds,
defaults or types. The return type comes from the tool's ``outputSchema``: an object with properties becomes a
``TypedDict`` named after the tool (``get_current_time`` → ``GetCurrentTimeResult``), a FastMCP wrapped result
(``x-fastmcp-wrap-result``) becomes the type of its ``result`` property, and no schema means ``Any``.

Every text here is valid Python: a server's module runs with nothing but its own import line, and one tool's
stub runs after that line (``IMPORTS``). Descriptions keep their whole first paragraph (up to
``FIRST_PARAGRAPH_CHARS``) and at most ``REST_CHARS`` of the rest; a parameter's description is one line of at
most ``ARG_CHARS``. A cut ends in "…", and ``detail="full"`` has the whole text.
"""

from __future__ import annotations

import keyword
import math
import re
import types as pytypes
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from mcp import types

from mcp_codemode.guest.mcp._proxies import ToolSpec, annotation

from .tool_wire import proxy_info

IMPORTS = "from typing import Any, Literal, NotRequired, TypedDict"
FIRST_PARAGRAPH_CHARS = 2_000
REST_CHARS = 300
ARG_CHARS = 200
SERVER_DESCRIPTION_CHARS = 500
_REF_DEPTH = 8  # how many $ref hops an output schema may take before its type is left as Any
# Names the annotations of a stub use: a tool whose alias is one of them would shadow it for the tools after it.
_TYPE_NAMES = frozenset({"Any", "Literal", "NotRequired", "TypedDict", "str", "int", "float", "bool", "list", "dict"})
_PARAGRAPH = re.compile(r"\n[ \t]*\n")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff]")  # and lone surrogates, which no source holds
_CUT = "…"


# ---------------------------------------------------------------------------------------------- public


def tool_stub(server: str, tool: types.Tool, alias: str) -> str:
    """One tool's stub: its result ``TypedDict`` (when it has one) and ``async def <alias>(...)``.

    It uses the names of ``IMPORTS`` and nothing else; the call convention is in the server's module docstring.
    """
    rendered = _Tool(server, tool, alias, {alias})
    return "\n\n".join([*rendered.classes, rendered.function]) + "\n"


def server_stub(
    server: str, server_alias: str, description: str, tools: Sequence[types.Tool], aliases: Mapping[str, str]
) -> str:
    """One Python module for a whole server: a docstring that says how to call and what comes back, the typing
    import, and every tool's stub in listing order (identical result shapes are defined once, then aliased)."""
    taken = set(aliases.values())
    rendered = [_Tool(server, tool, aliases.get(tool.name, tool.name), taken) for tool in tools]
    # A tool named like a type (`async def list(...)`) would shadow it for everything after it: then the result
    # classes all come first, and the functions' annotations are left unevaluated.
    shadowing = any(item.alias in _TYPE_NAMES for item in rendered)
    shapes: dict[str, str] = {}  # a TypedDict's body -> the class that has it
    classes: list[str] = []
    blocks: list[str] = []
    for item in rendered:
        for name, body, text in item.shapes:
            if body not in shapes:
                shapes[body] = name
            (classes if shadowing else blocks).append(text if shapes[body] == name else f"{name} = {shapes[body]}")
        blocks.append(item.function)
    head = [_module_docstring(server, server_alias, description, rendered)]
    if shadowing:
        head.append("from __future__ import annotations")
    head.append(IMPORTS)
    return "\n\n".join(["\n".join(head), *classes, *blocks]) + "\n"


def annotation_source(hint: Any) -> str:
    """An annotation object as source text: ``Literal['a', 'b'] | None``, ``dict[str, Any]``, ``list[int]``."""
    if hint is Any:
        return "Any"
    if hint is None or hint is type(None):
        return "None"
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Literal:
        return "Literal[" + ", ".join(_literal(value) for value in args) + "]"
    if origin is typing.Union or isinstance(hint, pytypes.UnionType):
        return " | ".join(annotation_source(arg) for arg in args)
    if origin in (list, dict) and args:
        return f"{origin.__name__}[{', '.join(annotation_source(arg) for arg in args)}]"
    if hint in (str, int, float, bool, list, dict):
        return str(hint.__name__)
    return "Any"


# -------------------------------------------------------------------------------------------- one tool


class _Tool:
    """The stub parts of one tool: its result classes (name, body, text) and its function's text."""

    def __init__(self, server: str, tool: types.Tool, alias: str, taken: set[str]) -> None:
        self.alias = alias
        self.spec = ToolSpec(server, server, proxy_info(tool, alias))
        self.shapes: list[tuple[str, str, str]] = []
        self.cut = False
        self.returns = self._returns(tool.output_schema, taken)
        self.typed = bool(self.shapes) or self.returns != "Any"
        self.function = self._function()

    @property
    def classes(self) -> list[str]:
        return [text for _, _, text in self.shapes]

    def _returns(self, output: dict[str, Any] | None, taken: set[str]) -> str:
        if not isinstance(output, dict):
            return "Any"
        schema = _deref(output, output, _REF_DEPTH)
        properties = schema.get("properties")
        if self.spec.wrapped and isinstance(properties, dict) and set(properties) == {"result"}:
            schema = _deref(properties["result"], output, _REF_DEPTH)
            properties = schema.get("properties")
        if not (isinstance(properties, dict) and properties and _is_object(schema)):
            return annotation_source(annotation(schema))
        name = _class_name(self.alias, taken)
        taken.add(name)
        required = schema.get("required") if isinstance(schema.get("required"), list) else []
        fields = []
        for field, prop in properties.items():
            hint = annotation_source(annotation(_deref(prop, output, _REF_DEPTH)))
            fields.append((str(field), hint if field in required else f"NotRequired[{hint}]"))
        body = repr(fields)
        if all(_plain_name(field) for field, _ in fields):
            text = f"class {name}(TypedDict):\n" + "\n".join(f"    {field}: {hint}" for field, hint in fields)
        else:  # a field that is not an identifier (or would be mangled) needs the functional form
            entries = ", ".join(f"{_literal(field)}: {hint}" for field, hint in fields)
            text = f"{name} = TypedDict({name!r}, {{{entries}}})"
        self.shapes.append((name, body, text))
        return name

    def _function(self) -> str:
        parameters = []
        keyword_only = False
        for parameter in self.spec.signature.parameters.values():
            if parameter.kind is parameter.VAR_KEYWORD:
                parameters.append(f"**{parameter.name}: Any")
                continue
            text = f"{parameter.name}: {annotation_source(parameter.annotation)}"
            if parameter.kind is parameter.KEYWORD_ONLY:
                if not keyword_only:
                    parameters.append("*")
                    keyword_only = True
                text += f" = {_literal(parameter.default)}"
            parameters.append(text)
        lines = [f"async def {self.alias}({', '.join(parameters)}) -> {self.returns}:"]
        doc = self._docstring()
        if doc:
            lines.append(doc)
        lines.append("    ...")
        return "\n".join(lines)

    def _docstring(self) -> str:
        parts = []
        description = self._description()
        if description:
            parts.append(description)
        args = self._args()
        if args:
            parts.append("Args:\n" + "\n".join(f"    {line}" for line in args))
        if not parts:
            return ""
        prefix, text = _quoted("\n\n".join(parts))
        first, *others = text.split("\n")
        if not others:
            return f'    {prefix}"""{first}"""'
        return "\n".join([f'    {prefix}"""{first}', *(f"    {line}" if line else "" for line in others), '    """'])

    def _description(self) -> str:
        text = self.spec.description.replace("\r\n", "\n").replace("\r", "\n").strip()
        text = "\n".join(line.rstrip() for line in text.split("\n"))
        first, *rest = _PARAGRAPH.split(text, maxsplit=1)
        first = self._clip(first, FIRST_PARAGRAPH_CHARS)
        more = rest[0].strip() if rest else ""
        return f"{first}\n\n{self._clip(more, REST_CHARS)}" if more else first

    def _clip(self, text: str, limit: int) -> str:
        if len(text) <= limit:
            return text
        self.cut = True
        cut = text[:limit]
        for boundary in ("\n", " "):  # end at a line, else a word, if one ends in the last third
            at = cut.rfind(boundary)
            if at > limit * 2 // 3:
                cut = cut[:at]
                break
        return cut.rstrip() + _CUT

    def _args(self) -> list[str]:
        lines = []
        spec = self.spec
        # In the signature's order (required first), then the properties that travel through **arguments.
        names = [*spec.param_to_property, *(name for name in spec.properties if name not in spec.param_to_property)]
        for name in names:
            prop = spec.properties[name] if isinstance(spec.properties[name], dict) else {}
            described = " ".join(str(prop.get("description") or "").split())
            if len(described) > ARG_CHARS:
                self.cut = True
                described = described[: ARG_CHARS - 1].rstrip() + _CUT
            if name in spec.param_to_property:
                if described:
                    lines.append(f"{name}: {described}")
                continue
            # Not a parameter (not an identifier, or a keyword): say how to pass it, and its type.
            hint = annotation_source(annotation(prop))
            flag = "required" if name in spec.required else "optional"
            line = f"{_literal(name)} ({hint}, {flag}, pass in **{spec.extra_name})"
            lines.append(f"{line}: {described}" if described else line)
        return lines


# --------------------------------------------------------------------------------------------- helpers


def _module_docstring(server: str, server_alias: str, description: str, tools: Sequence[_Tool]) -> str:
    proxy = f"mcp_{server_alias}"
    about = " ".join(_PARAGRAPH.split(description.strip(), maxsplit=1)[0].split())
    if len(about) > SERVER_DESCRIPTION_CHARS:
        about = about[: SERVER_DESCRIPTION_CHARS - 1].rstrip() + _CUT
    lines = [f"MCP server {server!r} ({proxy}): {len(tools)} tool{'s' if len(tools) != 1 else ''}." +
             (f" {about}" if about else "")]  # fmt: skip
    if tools:
        example = tools[0].alias
        lines += [
            "",
            f"Call a tool as `await {proxy}.{example}(...)`, or `{proxy}.{example}.sync(...)` to block.",
            "Required parameters may be positional; the others are keyword-only. A failing tool raises "
            "runtime.ToolError.",
        ]
        if any(tool.typed for tool in tools):
            unwrapped = " (FastMCP's {'result': ...} unwrapped)" if any(tool.spec.wrapped for tool in tools) else ""
            lines.append(f"A tool with a declared result type returns its structuredContent{unwrapped}, as typed.")
        if not all(tool.typed for tool in tools):
            lines.append(
                "`-> Any`: the structuredContent if the tool sends one, else parsed JSON when the text is a JSON "
                "object or array, else the text (str); a runtime.Image for an image; a list for several items."
            )
        if any(tool.cut for tool in tools):
            lines.append(f'Text cut short ends in "{_CUT}"; query_tool_docs(server, tool, detail="full") has it all.')
    prefix, text = _quoted("\n".join(lines))
    return f'{prefix}"""{text}\n"""'


def _quoted(text: str) -> tuple[str, str]:
    """A string prefix and the text to put between triple quotes so that the literal means ``text``.

    Text with backslashes stays as it is in a raw string when it can (a regular expression reads better so);
    otherwise backslashes, triple quotes, a final quote and control characters are escaped.
    """
    raw_safe = '"""' not in text and not text.endswith(("\\", '"')) and not _CONTROL.search(text)
    if "\\" in text and raw_safe:
        return "r", text
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    text = _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}" if found.group() < "\x80" else
                        f"\\u{ord(found.group()):04x}", text)  # fmt: skip
    return "", (text[:-1] + '\\"' if text.endswith('"') else text)


def _literal(value: Any) -> str:
    """Source text that evaluates to a JSON value (``float('inf')`` and ``float('nan')`` included)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(key)}: {_literal(item)}" for key, item in value.items()) + "}"
    return repr(value)


def _plain_name(name: str) -> bool:
    """Whether a TypedDict field can be written in class syntax (an identifier the class body will not mangle)."""
    return name.isidentifier() and not keyword.iskeyword(name) and not (name.startswith("__") and not
                                                                           name.endswith("__"))  # fmt: skip


def _class_name(alias: str, taken: set[str]) -> str:
    """``get_current_time`` → ``GetCurrentTimeResult``, numbered when that name is already used."""
    base = "".join(part[:1].upper() + part[1:] for part in alias.split("_") if part) or "Tool"
    if not base[0].isalpha():
        base = "T" + base
    name, number = f"{base}Result", 2
    while name in taken or keyword.iskeyword(name):
        name, number = f"{base}Result{number}", number + 1
    return name


def _is_object(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "object" or kind is None or (isinstance(kind, list) and kind == ["object"])


def _deref(schema: Any, root: dict[str, Any], depth: int) -> Any:
    """The schema with local ``$ref`` pointers (``#/$defs/...``, ``#/definitions/...``) replaced by their target.

    Deep enough for annotations (items, unions); a cycle or a pointer it cannot follow becomes ``{}`` (Any).
    """
    if isinstance(schema, list):
        return [_deref(item, root, depth) for item in schema]
    if not isinstance(schema, dict):
        return schema
    reference = schema.get("$ref")
    if isinstance(reference, str):
        target = _pointer(root, reference) if depth > 0 else None
        if not isinstance(target, dict):
            return {}
        merged = {**target, **{key: value for key, value in schema.items() if key != "$ref"}}
        return _deref(merged, root, depth - 1)
    resolved = dict(schema)
    for key in ("items", "anyOf", "oneOf"):
        if key in resolved and depth > 0:
            resolved[key] = _deref(resolved[key], root, depth - 1)
    return resolved


def _pointer(root: dict[str, Any], reference: str) -> Any:
    if not reference.startswith("#/"):
        return None
    node: Any = root
    for part in reference[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node
