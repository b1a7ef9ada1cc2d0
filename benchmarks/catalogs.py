"""Tool catalogs the benchmarks share: the real reference servers' tools, and synthetic distractors.

``real_catalog()``
    The 52 tools of the seven reference MCP servers, exactly as they listed them (benchmarks/corpus/tools, captured
    by benchmarks/corpus/capture.py), as ``(server, Tool)`` pairs in listing order.
``synthetic_catalog(n, seed=0)``
    ``n`` made-up tools spread over about fifty plausible servers (GitHub, Jira, Slack, Postgres, S3, Kubernetes,
    Stripe, a shell, a browser...). Names come in the styles real servers use (snake_case, camelCase, kebab-case,
    dotted, server-prefixed), descriptions run one to three sentences, input schemas have zero to six typed
    parameters with descriptions, some required, some enums or defaults, and some tools declare an output schema.
    They are distractors: they share the real tools' vocabulary (list, get, create, delete, search, read, write,
    file, folder, branch, commit, diff, time, entity, page, url...), so finding a real tool among them is a hard
    test. The same ``n`` and ``seed`` always give the same catalog.
    Their vocabulary (servers, resources, bespoke tools) is data, ``benchmarks/corpus/synthetic_servers.json``;
    this module only turns it into tools.
``mixed_catalog(n, seed=0)``
    The real tools plus synthetic ones, ``n`` in all, each server's tools together and the servers in a
    seeded order, so the real servers do not all sit at the front of the listing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
from pathlib import Path
from typing import Any

from mcp import types

CORPUS = Path(__file__).resolve().parent / "corpus"
TOOLS_DIR = CORPUS / "tools"
QUERIES_FILE = CORPUS / "queries.json"
REAL_SERVERS = ("everything", "filesystem", "memory", "sequential-thinking", "time", "git", "fetch")

Catalog = list[tuple[str, types.Tool]]


def real_catalog() -> Catalog:
    """The reference servers' tools as captured, ``(server, Tool)`` in each server's listing order."""
    catalog: Catalog = []
    for server in REAL_SERVERS:
        path = TOOLS_DIR / f"{server}.json"
        listed = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(listed, list):
            raise ValueError(f"{path}: expected a JSON list of tools")
        catalog.extend((server, types.Tool.model_validate(item)) for item in listed)
    return catalog


def tool_id(server: str, tool: types.Tool) -> str:
    """How queries.json names a tool: ``server/tool``."""
    return f"{server}/{tool.name}"


@dataclasses.dataclass(frozen=True)
class Query:
    text: str
    relevant: tuple[str, ...]
    split: str
    typo: bool

    @property
    def half(self) -> str:
        """``tuning`` or ``held_out``: the halving of issue 37 item 5, by the low bit of the query text's SHA-256.

        The older splits (dev/test/fresh/holdout) had all been read while the ranker was tuned; this halving is
        fixed by the text alone, so a tuner can look at one half only and the other stays unseen. Only
        ``tuning`` may be read while changing the ranker; a target counts as met when ``held_out`` meets it.
        """
        return "tuning" if hashlib.sha256(self.text.encode("utf-8")).digest()[0] % 2 == 0 else "held_out"


def load_queries() -> list[Query]:
    """The labelled queries of benchmarks/corpus/queries.json."""
    document = json.loads(QUERIES_FILE.read_text(encoding="utf-8"))
    return [
        Query(
            text=item["query"],
            relevant=tuple(item["relevant"]),
            split=item["split"],
            typo=bool(item.get("typo", False)),
        )
        for item in document["queries"]
    ]


# -- the synthetic catalog's vocabulary ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class F:
    """One parameter (or output property); ``name`` in snake_case, restyled per server."""

    name: str
    type: str
    description: str
    enum: tuple[str, ...] = ()
    default: Any = None
    items: str = "string"  # element type of an array


@dataclasses.dataclass(frozen=True)
class R:
    """A resource a server manages, and which of list/get/create/update/delete/search it offers (``verbs``)."""

    singular: str
    plural: str
    key: F | None
    fields: tuple[F, ...]
    verbs: str = "lgcud"
    required: int = 1  # how many leading fields ``create`` requires
    filters: tuple[str, ...] = ()  # fields that ``list`` accepts as filters
    detail: str = ""  # what a full record includes, for ``get``
    context: tuple[F, ...] | None = None  # None: the server's own context parameters


@dataclasses.dataclass(frozen=True)
class B:
    """A tool that does not fit the list/get/create/update/delete/search mould."""

    words: tuple[str, ...]
    description: str
    params: tuple[F, ...] = ()
    required: tuple[str, ...] = ()
    output: tuple[F, ...] = ()
    context: bool = True


@dataclasses.dataclass(frozen=True)
class S:
    name: str
    product: str
    style: str  # snake | camel | kebab | dotted | prefixed
    where: str  # where its resources live, e.g. "in a GitHub repository"
    context: tuple[F, ...]
    resources: tuple[R, ...]
    bespoke: tuple[B, ...] = ()
    verbs: tuple[tuple[str, str], ...] = ()  # overrides of the verb words, e.g. ("d", "remove")
    page: str = "cursor"  # cursor | page | page_token | offset
    prefix: str = ""


def s(name: str, description: str = "", **kw: Any) -> F:
    return F(name, "string", description, **kw)


def i(name: str, description: str = "", **kw: Any) -> F:
    return F(name, "integer", description, **kw)


def b(name: str, description: str = "", **kw: Any) -> F:
    return F(name, "boolean", description, **kw)


SERVERS_FILE = CORPUS / "synthetic_servers.json"


def _field(item: dict[str, Any]) -> F:
    return F(
        item["name"],
        item["type"],
        item.get("description", ""),
        enum=tuple(item.get("enum", ())),
        default=item.get("default"),
        items=item.get("items", "string"),
    )


def _fields(items: list[dict[str, Any]]) -> tuple[F, ...]:
    return tuple(_field(item) for item in items)


def _resource(item: dict[str, Any]) -> R:
    context = item.get("context")
    return R(
        item["singular"],
        item["plural"],
        _field(item["key"]) if item["key"] else None,
        _fields(item["fields"]),
        verbs=item.get("verbs", "lgcud"),
        required=item.get("required", 1),
        filters=tuple(item.get("filters", ())),
        detail=item.get("detail", ""),
        context=None if context is None else _fields(context),
    )


def _bespoke(item: dict[str, Any]) -> B:
    return B(
        tuple(item["words"]),
        item["description"],
        _fields(item.get("params", [])),
        tuple(item.get("required", ())),
        _fields(item.get("output", [])),
        context=item.get("context", True),
    )


def _server(item: dict[str, Any]) -> S:
    return S(
        item["name"],
        item["product"],
        item["style"],
        item["where"],
        _fields(item["context"]),
        tuple(_resource(resource) for resource in item["resources"]),
        tuple(_bespoke(spec) for spec in item.get("bespoke", [])),
        tuple(item.get("verbs", {}).items()),
        item.get("page", "cursor"),
        item.get("prefix", ""),
    )


def load_servers() -> tuple[S, ...]:
    """The vocabulary, from benchmarks/corpus/synthetic_servers.json: data kept as data, read once per process."""
    document = json.loads(SERVERS_FILE.read_text(encoding="utf-8"))
    return tuple(_server(item) for item in document["servers"])


SERVERS = load_servers()


# -- turning the vocabulary into tools -------------------------------------------------------------------------

VERB_WORDS = {"l": "list", "g": "get", "c": "create", "u": "update", "d": "delete", "s": "search"}
DESCRIPTIONS = {
    "l": (
        "List {plural}{where}.",
        "Returns the {plural}{where}, most recently updated first.",
        "List the {plural} the authenticated user can see{where}.",
        "Get a page of {plural}{where}, optionally filtered.",
    ),
    "g": (
        "Get {a_singular} by its ID.",
        "Retrieve one {singular}{where}, including {detail}.",
        "Fetch the details of a single {singular}.",
        "Returns {a_singular} with {detail}.",
    ),
    "c": (
        "Create a new {singular}{where}.",
        "Creates {a_singular} and returns it with its new ID.",
        "Add {a_singular}{where}.",
    ),
    "u": (
        "Update an existing {singular}. Only the fields you pass are changed.",
        "Modify the fields of {a_singular}{where}.",
        "Edit {a_singular}: change any of its fields.",
    ),
    "d": (
        "Delete {a_singular}{where}.",
        "Permanently remove {a_singular}.",
        "Deletes the given {singular}{where}.",
    ),
    "s": (
        "Search {plural}{where} by keyword.",
        "Find {plural} matching a text query{where}.",
        "Full-text search over {plural}, best matches first.",
    ),
}
SECOND_SENTENCES = {
    "l": (
        "Results are paginated; pass the returned cursor for the next page.",
        "Use the filters to narrow the results.",
        "Archived ones are left out unless asked for.",
        "",
        "",
    ),
    "g": ("Fails with a not-found error if it does not exist.", "", ""),
    "c": ("Returns the created {singular}.", "Requires write access.", "", ""),
    "u": ("Returns the updated {singular}.", "", ""),
    "d": ("This cannot be undone.", "Requires admin rights.", "", ""),
    "s": ("Supports quoted phrases and field:value filters.", "", ""),
}
PAGING = {
    "cursor": (s("cursor", "Cursor from the previous page's next_cursor"), "limit"),
    "page": (i("page", "Page number, starting at 1", default=1), "per_page"),
    "page_token": (s("page_token", "Token of the page to return, from next_page_token"), "page_size"),
    "offset": (i("start_at", "Index of the first result to return", default=0), "max_results"),
}
MAX_PARAMS = 6


def _cap(word: str) -> str:
    return word[:1].upper() + word[1:]


def _camel(words: list[str]) -> str:
    return words[0] + "".join(_cap(word) for word in words[1:])


def _words(phrase: str) -> list[str]:
    return phrase.replace("-", " ").split()


def _tool_name(server: S, verb: str, noun: list[str], dotted_noun: list[str]) -> str:
    if server.style == "dotted":
        return f"{_camel(dotted_noun)}.{verb}"
    words = [verb, *noun]
    if server.style == "camel":
        return _camel(words)
    if server.style == "kebab":
        return "-".join(words)
    if server.style == "prefixed":
        return "_".join([server.prefix or server.name, *words])
    return "_".join(words)


def _bespoke_name(server: S, words: tuple[str, ...]) -> str:
    if server.style == "dotted":
        return words[0] + ("." + _camel(list(words[1:])) if len(words) > 1 else "")
    if server.style == "camel":
        return _camel(list(words))
    if server.style == "kebab":
        return "-".join(words)
    if server.style == "prefixed":
        return "_".join([server.prefix or server.name, *words])
    return "_".join(words)


def _param_name(server: S, name: str) -> str:
    return _camel(name.split("_")) if server.style in ("camel", "dotted") else name


def _property(field: F) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": field.type}
    if field.description:
        schema["description"] = field.description
    if field.type == "array":
        schema["items"] = {"type": field.items}
    if field.enum:
        schema["enum"] = list(field.enum)
    if field.default is not None:
        schema["default"] = field.default
    return schema


def _object_schema(server: S, fields: list[F], required: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {_param_name(server, field.name): _property(field) for field in fields},
    }
    names = [_param_name(server, name) for name in required]
    if names:
        schema["required"] = names
    return schema


def _dedupe(fields: list[F]) -> list[F]:
    seen: set[str] = set()
    kept: list[F] = []
    for field in fields:
        if field.name not in seen:
            seen.add(field.name)
            kept.append(field)
    return kept


def _article(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def _resource_tool(server: S, resource: R, verb: str, rng: random.Random) -> types.Tool:
    context = list(server.context if resource.context is None else resource.context)
    words = dict(server.verbs)
    verb_word = words.get(verb, VERB_WORDS[verb])
    plural_words = _words(resource.plural)
    noun = plural_words if verb in "ls" else _words(resource.singular)
    name = _tool_name(server, verb_word, noun, plural_words)
    where = f" {server.where}" if server.where else f" in {server.product}"
    values = {
        "singular": resource.singular,
        "plural": resource.plural,
        "a_singular": _article(resource.singular),
        "where": where,
        "detail": resource.detail or "all of its fields",
    }
    sentences = [rng.choice(DESCRIPTIONS[verb]).format(**values)]
    second = rng.choice(SECOND_SENTENCES[verb]).format(**values)
    if second:
        sentences.append(second)
    description = " ".join(sentences)
    if rng.random() < 0.25:
        description = f"{server.product[:1].upper()}{server.product[1:]}: {description}"

    page_param, limit_name = PAGING[server.page]
    by_name = {field.name: field for field in resource.fields}
    required: list[str] = [field.name for field in context if field.default is None]
    if verb == "l":
        limit = i(limit_name, f"Maximum number of {resource.plural} to return", default=rng.choice((20, 25, 50, 100)))
        filters = [by_name[f] for f in resource.filters]
        room = MAX_PARAMS - len(context) - 2
        params = [*context, *filters[: max(room, 0)], limit, page_param]
    elif verb == "g":
        assert resource.key is not None
        params = [*context, resource.key]
        required.append(resource.key.name)
    elif verb == "c":
        fields = [
            field
            for field in resource.fields
            if field.name not in resource.filters
            or field.name in [f.name for f in resource.fields[: resource.required]]
        ]
        params = [*context, *fields][:MAX_PARAMS]
        required += [field.name for field in resource.fields[: resource.required]]
    elif verb == "u":
        assert resource.key is not None
        params = [*context, resource.key, *resource.fields][:MAX_PARAMS]
        required.append(resource.key.name)
    elif verb == "d":
        assert resource.key is not None
        params = [*context, resource.key]
        required.append(resource.key.name)
        if rng.random() < 0.2:
            params.append(b("force", "Delete even if other items still refer to it", default=False))
    else:
        query = s("query", f"Text to search for in {resource.plural}")
        limit = i(limit_name, "Maximum number of results", default=rng.choice((10, 20, 50)))
        params = [*context, query, limit]
        required.append("query")
    params = _dedupe(params)
    kept = {field.name for field in params}
    input_schema = _object_schema(server, params, [name for name in dict.fromkeys(required) if name in kept])

    output_schema: dict[str, Any] | None = None
    if verb in "gcu" and resource.key is not None and rng.random() < 0.3:
        record = _dedupe([resource.key, *resource.fields])
        output_schema = _object_schema(server, record, [resource.key.name])
    elif verb in "ls" and rng.random() < 0.2:
        output_schema = {
            "type": "object",
            "properties": {
                resource.plural.replace(" ", "_"): {"type": "array", "items": {"type": "object"}},
                "next_cursor": {"type": ["string", "null"], "description": "Cursor of the next page, null at the end"},
            },
            "required": [resource.plural.replace(" ", "_")],
        }
    return types.Tool(name=name, description=description, input_schema=input_schema, output_schema=output_schema)


def _bespoke_tool(server: S, spec: B) -> types.Tool:
    context = list(server.context) if spec.context else []
    params = _dedupe([*context, *spec.params])
    required = [field.name for field in context if field.default is None] + list(spec.required)
    input_schema = _object_schema(server, params, list(dict.fromkeys(required)))
    output_schema = _object_schema(server, list(spec.output), []) if spec.output else None
    return types.Tool(
        name=_bespoke_name(server, spec.words),
        description=spec.description,
        input_schema=input_schema,
        output_schema=output_schema,
    )


def _server_tools(server: S, seed: int) -> list[types.Tool]:
    tools: list[types.Tool] = []
    for resource in server.resources:
        for verb in resource.verbs:
            rng = random.Random(f"{seed}/{server.name}/{resource.plural}/{verb}")
            tools.append(_resource_tool(server, resource, verb, rng))
    tools.extend(_bespoke_tool(server, spec) for spec in server.bespoke)
    names = [tool.name for tool in tools]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"synthetic server {server.name!r} defines {duplicates} twice")
    return tools


# Servers configured twice under different names, as users do (a second database, an enterprise instance).
INSTANCES = (
    ("github", "github-enterprise", "in a GitHub Enterprise repository"),
    ("postgres", "postgres-analytics", "in the analytics warehouse (PostgreSQL)"),
    ("redis", "redis-cache", "in the Redis cache"),
    ("s3", "s3-backups", "in the backups bucket"),
)


def all_servers() -> list[S]:
    """``SERVERS`` and their second instances."""
    by_name = {server.name: server for server in SERVERS}
    extra = [dataclasses.replace(by_name[base], name=name, where=where) for base, name, where in INSTANCES]
    return [*SERVERS, *extra]


def synthetic_pool(seed: int = 0) -> Catalog:
    """Every synthetic tool there is, each server's together, in the order of ``all_servers()``."""
    return [(server.name, tool) for server in all_servers() for tool in _server_tools(server, seed)]


def synthetic_catalog(n: int, seed: int = 0) -> Catalog:
    """``n`` synthetic tools drawn from the pool by ``seed``, kept in pool order (each server's tools together)."""
    pool = synthetic_pool(seed)
    if not 0 <= n <= len(pool):
        raise ValueError(f"the synthetic pool has {len(pool)} tools; cannot draw {n}")
    chosen = sorted(random.Random(f"draw/{seed}").sample(range(len(pool)), n))
    return [pool[index] for index in chosen]


def mixed_catalog(n: int, seed: int = 0) -> Catalog:
    """The real tools plus ``n - 52`` synthetic ones; each server's tools together, servers in a seeded order."""
    real = real_catalog()
    if n < len(real):
        raise ValueError(f"a mixed catalog holds at least the {len(real)} real tools; asked for {n}")
    combined = real + synthetic_catalog(n - len(real), seed)
    servers = list(dict.fromkeys(server for server, _ in combined))
    random.Random(f"order/{seed}").shuffle(servers)
    rank = {server: position for position, server in enumerate(servers)}
    return sorted(combined, key=lambda pair: rank[pair[0]])  # stable: each server keeps its listing order


def search_text(tool: types.Tool) -> str:
    """Name, description, and every parameter's name and description: what the BM25 baseline indexes."""
    parts = [tool.name, tool.description or ""]
    properties = tool.input_schema.get("properties")
    if isinstance(properties, dict):
        for name, schema in properties.items():
            parts.append(str(name))
            if isinstance(schema, dict) and isinstance(schema.get("description"), str):
                parts.append(schema["description"])
    return " ".join(parts)


_TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    """Lowercase alphanumeric runs: the BM25 baseline's tokenizer (no stemming, no splitting of camelCase)."""
    return _TOKEN.findall(text.lower())
