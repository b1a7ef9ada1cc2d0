"""Arguments checked against a tool's input schema on the host, before the upstream server sees them.

The model writes the call, so the error is for the model: it names the argument, says what was expected,
and suggests the right name when one was misspelt. An argument the schema does not declare is refused
unless the schema explicitly allows extra properties: in practice an undeclared name is a typo, and a
server would otherwise silently ignore it.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError

from ...errors import CodemodeError
from ..suggest import close_matches, did_you_mean

_NAMES = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
          "array": "a list", "object": "a dict", "null": "None"}  # fmt: skip
_PYTHON_NAMES = {str: "str", int: "int", float: "float", bool: "bool", list: "list", dict: "dict", type(None): "None"}


class ArgumentProblem(CodemodeError, ValueError):
    """The arguments do not fit the schema; the message is meant for the model."""


def describe_parameters(schema: dict[str, Any]) -> str:
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        return "no arguments"
    required = set(schema.get("required") or [])
    parts = []
    for name, prop in properties.items():
        kind = prop.get("type") if isinstance(prop, dict) else None
        label = "/".join(kind) if isinstance(kind, list) else (kind or "any")
        parts.append(f"{name} ({label}{', required' if name in required else ''})")
    return ", ".join(parts)


@functools.lru_cache(maxsize=2048)
def _validator(schema_text: str) -> Any:
    schema = json.loads(schema_text)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError:
        return None  # a server's broken schema is not the model's fault: only our own checks apply then
    return cls(schema)


_BY_IDENTITY: dict[int, tuple[dict[str, Any], Any]] = {}  # schema object -> its validator (the hub keeps listings)


def _validator_for(schema: dict[str, Any]) -> Any:
    """The validator of a schema object, found by identity first: serialising the schema per call costs more."""
    cached = _BY_IDENTITY.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    validator = _validator(json.dumps(schema, sort_keys=True, default=str))
    if len(_BY_IDENTITY) > 4096:
        _BY_IDENTITY.clear()
    _BY_IDENTITY[id(schema)] = (schema, validator)
    return validator


def check_arguments(tool: str, schema: dict[str, Any], arguments: dict[str, Any]) -> None:
    """Raise ``ArgumentProblem`` naming the first thing wrong with ``arguments``; return when they fit."""
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    assert isinstance(properties, dict)
    extra_allowed = schema.get("additionalProperties") not in (None, False) or "patternProperties" in schema
    if properties and not extra_allowed:
        for name in arguments:
            if name not in properties:
                close = close_matches(name, properties, n=1)
                hint = did_you_mean(close, lead="; did you mean ", otherwise=".")
                raise ArgumentProblem(f"{tool}() got an unknown argument {name!r}{hint} {_takes(schema)}")
    for name in schema.get("required") or []:
        if name not in arguments:
            prop = properties.get(name) if isinstance(properties.get(name), dict) else {}
            text = str(prop.get("description") or "").strip() if isinstance(prop, dict) else ""
            about = f": {text[:200].rstrip('.')}" if text else ""
            raise ArgumentProblem(f"{tool}() is missing the required argument {name!r}{about}. {_takes(schema)}")
    validator = _validator_for(schema)
    if validator is None or validator.is_valid(arguments):
        return
    error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    if error is None:
        return
    where = "".join(f"[{part!r}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path)
    subject = f"argument {where.lstrip('.')}" if where else "the arguments"
    if error.validator == "type":
        expected = error.validator_value
        wanted = " or ".join(_NAMES.get(str(t), str(t)) for t in expected) if isinstance(expected, list) else \
            _NAMES.get(str(expected), str(expected))  # fmt: skip
        got = _PYTHON_NAMES.get(type(error.instance), type(error.instance).__name__)
        raise ArgumentProblem(f"{tool}(): {subject} must be {wanted}, not {got} ({_short(error.instance)}).")
    verb = "is" if where else "are"
    raise ArgumentProblem(f"{tool}(): {subject} {verb} not valid: {_short(error.message, 300)}. {_takes(schema)}")


def _takes(schema: dict[str, Any]) -> str:
    """Built only when an error message needs it, not on every call."""
    return f"It takes: {describe_parameters(schema)}."


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) and limit > 60 else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
