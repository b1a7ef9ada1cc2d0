"""Tool docs at every detail level: Python stubs of real servers' tools, the guest's query and search helpers.

The stub tests run over the real tool listings of the seven reference servers, as captured in
benchmarks/corpus/tools (``benchmarks/corpus/capture.py``): every stub parses, runs with nothing but its import
line, and its functions have exactly the parameters of the proxies the guest builds from the same listing. The
edge cases use small made-up tools. The last tests run sandboxed code through a real bridge.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import typing
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import types

from mcp_codemode.guest.mcp import _docs, _proxies, _rpc, runtime
from mcp_codemode.runs.bridge import Bridge
from mcp_codemode.upstream.tools import catalog, stubs
from tests.support.backends import fail_unless
from tests.support.cells import reported, run, time_and_everything
from tests.support.parsing import parse

CORPUS = Path(__file__).resolve().parents[2] / "benchmarks" / "corpus" / "tools"
SERVERS = ("everything", "fetch", "filesystem", "git", "memory", "sequential-thinking", "time")


def listing(server: str) -> list[types.Tool]:
    path = CORPUS / f"{server}.json"
    fail_unless(path.is_file(), f"{path} is missing; run benchmarks/corpus/capture.py")
    return [types.Tool.model_validate(tool) for tool in json.loads(path.read_text())]


def module_of(server: str, tools: list[types.Tool], description: str = "") -> tuple[str, dict[str, Any]]:
    """A server's stub module and the namespace it leaves after running on its own."""
    text = stubs.server_stub(server, catalog.identifier(server), description, tools, catalog.tool_aliases(tools))
    parse(text)
    namespace: dict[str, Any] = {}
    exec(compile(text, f"<stub of {server}>", "exec", dont_inherit=True), namespace)
    return text, namespace


def tool_namespace(tool: types.Tool, alias: str | None = None) -> tuple[str, dict[str, Any]]:
    """One tool's stub, run after the import line (all it may rely on)."""
    text = catalog.tool_doc("s", tool, alias or catalog.identifier(tool.name), "stub")["stub"]
    namespace: dict[str, Any] = {}
    exec(compile(stubs.IMPORTS + "\n" + text, "<tool stub>", "exec", dont_inherit=True), namespace)
    return text, namespace


def spec_of(tool: types.Tool, alias: str) -> _proxies.ToolSpec:
    """The guest's proxy spec, built from exactly what the relay sends it for this tool."""
    return _proxies.ToolSpec("s", "s", catalog.proxy_info(tool, alias))


def shape(signature: inspect.Signature) -> list[tuple[str, Any, Any, Any]]:
    """Name, kind, default and annotation of each parameter (``**arguments`` carries no annotation in a proxy)."""
    return [
        (p.name, p.kind, p.default, inspect.Parameter.empty if p.kind is p.VAR_KEYWORD else p.annotation)
        for p in signature.parameters.values()
    ]


def tool(name: str, properties: dict[str, Any] | None = None, required: list[str] | None = None,
         description: str | None = None, output: dict[str, Any] | None = None) -> types.Tool:  # fmt: skip
    schema: dict[str, Any] = {"type": "object"}
    if properties is not None:
        schema["properties"] = properties
    if required is not None:
        schema["required"] = required
    return types.Tool(name=name, description=description, input_schema=schema, output_schema=output)


# ------------------------------------------------------------------------------ stubs of the real servers

TIME_MODULE = '''"""MCP server 'time' (mcp_time): 2 tools.

Call a tool as `await mcp_time.get_current_time(...)`, or `mcp_time.get_current_time.sync(...)` to block.
Required parameters may be positional; the others are keyword-only. A failing tool raises runtime.ToolError.
A tool with a declared result type returns its structuredContent, as typed.
"""
from typing import Any, Literal, NotRequired, TypedDict

class GetCurrentTimeResult(TypedDict):
    timezone: str
    datetime: str
    day_of_week: str
    is_dst: bool

async def get_current_time(timezone: str) -> GetCurrentTimeResult:
    """Get current time in a specific timezone

    Args:
        timezone: IANA timezone name (e.g., 'America/New_York', 'Europe/London'). Use 'UTC' as local timezone if no timezone provided by the user.
    """
    ...

class ConvertTimeResult(TypedDict):
    source: dict[str, Any]
    target: dict[str, Any]
    time_difference: str

async def convert_time(source_timezone: str, time: str, target_timezone: str) -> ConvertTimeResult:
    """Convert time between timezones

    Args:
        source_timezone: Source IANA timezone name (e.g., 'America/New_York', 'Europe/London'). Use 'UTC' as local timezone if no source timezone provided by the user.
        time: Time to convert in 24-hour format (HH:MM)
        target_timezone: Target IANA timezone name (e.g., 'Asia/Tokyo', 'America/San_Francisco'). Use 'UTC' as local timezone if no target timezone provided by the user.
    """
    ...
'''  # noqa: E501 - a stub keeps each parameter's description on one line

STRUCTURED_TOOL = '''class GetStructuredContentResult(TypedDict):
    temperature: float
    conditions: str
    humidity: float

async def get_structured_content(location: Literal['New York', 'Chicago', 'Los Angeles']) -> GetStructuredContentResult:
    """Returns structured content along with an output schema for client data validation

    Args:
        location: Choose city
    """
    ...
'''


@pytest.mark.parametrize("server", SERVERS)
def test_every_real_tool_stub_runs_and_has_exactly_the_proxy_s_parameters(server: str) -> None:
    tools = listing(server)
    aliases = catalog.tool_aliases(tools)
    text, namespace = module_of(server, tools)
    assert text.count("\nasync def ") == len(tools)
    assert stubs.IMPORTS in text
    for item in tools:
        alias = aliases[item.name]
        function = namespace[alias]
        assert inspect.iscoroutinefunction(function)
        expected = spec_of(item, alias).signature
        assert shape(inspect.signature(function)) == shape(expected), item.name
        single, alone = tool_namespace(item, alias)  # the same tool's own stub agrees with the module
        assert shape(inspect.signature(alone[alias])) == shape(expected)
        assert f"async def {alias}(" in single


@pytest.mark.parametrize("server", SERVERS)
def test_a_real_tool_with_an_output_schema_returns_a_typed_dict_of_its_properties(server: str) -> None:
    tools = listing(server)
    aliases = catalog.tool_aliases(tools)
    _, namespace = module_of(server, tools)
    for item in tools:
        returns = inspect.signature(namespace[aliases[item.name]]).return_annotation
        if not item.output_schema:
            assert returns is Any
            continue
        assert typing.is_typeddict(returns), item.name
        properties = item.output_schema["properties"]
        assert set(typing.get_type_hints(returns)) == set(properties)
        assert returns.__required_keys__ == frozenset(item.output_schema.get("required", []))


def test_the_tools_with_an_output_schema_are_the_ones_the_servers_declare() -> None:
    declared = {
        server: sorted(item.name for item in listing(server) if item.output_schema) for server in ("everything", "time")
    }
    assert declared == {"everything": ["get-structured-content"], "time": ["convert_time", "get_current_time"]}


def test_the_time_server_module_reads_as_python() -> None:
    text, _ = module_of("time", listing("time"))
    assert text == TIME_MODULE


def test_one_everything_tool_stub_carries_its_result_class_and_says_nothing_of_the_call_convention() -> None:
    structured = next(item for item in listing("everything") if item.name == "get-structured-content")
    text, namespace = tool_namespace(structured, "get_structured_content")
    assert text == STRUCTURED_TOOL
    assert typing.get_type_hints(namespace["GetStructuredContentResult"]) == {
        "conditions": str,
        "humidity": float,
        "temperature": float,
    }


def test_identical_result_shapes_are_defined_once_and_aliased() -> None:
    text, namespace = module_of("filesystem", listing("filesystem"))
    assert text.count("(TypedDict):\n    content: str\n") == 1
    assert "\nListDirectoryResult = ReadFileResult\n" in text
    assert namespace["ListDirectoryResult"] is namespace["ReadFileResult"]


def test_a_long_description_keeps_its_first_paragraph_and_a_capped_rest() -> None:
    thinking = listing("sequential-thinking")[0]
    text, namespace = module_of("sequential-thinking", [thinking])
    doc = inspect.getdoc(namespace["sequentialthinking"]) or ""
    first, rest = (thinking.description or "").split("\n\n", 1)
    assert doc.startswith(first + "\n\n")
    kept = doc[len(first) + 2 : doc.index("\n\nArgs:")]
    assert kept.endswith("…") and len(kept) <= stubs.REST_CHARS + 1
    assert rest.startswith(kept[:-1])
    assert 'detail="full") has it all' in text  # the module says where the whole text is


def test_stubs_are_much_smaller_than_the_full_docs() -> None:
    sizes = {}
    for server in SERVERS:
        tools = listing(server)
        aliases = catalog.tool_aliases(tools)
        full = json.dumps([catalog.tool_doc(server, item, aliases[item.name], "full") for item in tools])
        text, _ = module_of(server, tools)
        sizes[server] = (len(text), len(full))
        if len(tools) > 1:  # with one tool, the module's fixed docstring can outweigh what the stub saves
            assert len(text) < len(full), server
    assert sum(stub for stub, _ in sizes.values()) * 2 < sum(full for _, full in sizes.values())


# --------------------------------------------------------------------------------------- edge cases


def test_names_that_are_not_identifiers_or_are_keywords_travel_through_arguments_and_are_documented() -> None:
    odd = tool(
        "fetch-url",
        {"url": {"type": "string"}, "content-type": {"type": "string", "description": "The MIME type"},
         "class": {"type": "integer"}},
        ["url", "content-type"],
        "Fetch a URL.",
    )  # fmt: skip
    text, namespace = tool_namespace(odd)
    assert "async def fetch_url(url: str, **arguments: Any) -> Any:" in text
    assert "'content-type' (str, required, pass in **arguments): The MIME type" in namespace["fetch_url"].__doc__
    assert "'class' (int, optional, pass in **arguments)" in namespace["fetch_url"].__doc__
    assert shape(inspect.signature(namespace["fetch_url"])) == shape(spec_of(odd, "fetch_url").signature)


def test_enums_nullables_arrays_and_defaults_become_python_types() -> None:
    rich = tool(
        "rich",
        {
            "mode": {"enum": ["fast", "slow"]},
            "zone": {"type": "string", "enum": ["utc", "local"], "default": "utc"},
            "note": {"type": ["string", "null"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "grid": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
            "meta": {"type": "object"},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "ratio": {"type": "number", "default": 0.5},
            "flags": {"type": "array", "default": ["a"]},
        },
        ["mode", "note"],
    )
    text, namespace = tool_namespace(rich)
    assert (
        "async def rich(mode: Literal['fast', 'slow'], note: str | None, *, zone: Literal['utc', 'local'] = 'utc', "
        "tags: list[str] | None = None, grid: list[list[int]] | None = None, meta: dict[str, Any] | None = None, "
        "either: str | int | None = None, ratio: float = 0.5, flags: list = ['a']) -> Any:"
    ) in text
    assert shape(inspect.signature(namespace["rich"])) == shape(spec_of(rich, "rich").signature)


def test_a_tool_without_properties_or_description_is_a_bare_function() -> None:
    text, namespace = tool_namespace(tool("ping"))
    assert text == "async def ping(**arguments: Any) -> Any:\n    ...\n"
    assert namespace["ping"].__doc__ is None


@pytest.mark.parametrize(
    "description",
    [
        'Says """hello""" and ends with a quote"',
        "A regex: \\d+\\.\\w* and a path C:\\Users\\",
        "Control \x00 and \x1b characters and a lone surrogate \ud800.",
        "Line one\r\nline two\rline three",
    ],
)
def test_any_description_becomes_a_docstring_that_means_the_same_text(description: str) -> None:
    item = tool("odd", {"x": {"type": "string", "description": description}}, description=description)
    _, namespace = module_of("odd", [item], description=description)
    expected = "\n".join(description.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    assert (inspect.getdoc(namespace["odd"]) or "").startswith(expected + "\n\nArgs:\n    x: ")
    assert namespace["__doc__"].startswith("MCP server 'odd' (mcp_odd): 1 tool. " + " ".join(description.split()))


def test_a_regular_expression_stays_readable_in_a_raw_docstring() -> None:
    text, namespace = tool_namespace(tool("grep", description="Match lines like \\d+-\\w+."))
    assert 'r"""Match lines like \\d+-\\w+."""' in text
    assert namespace["grep"].__doc__ == "Match lines like \\d+-\\w+."


def test_a_huge_description_is_cut_and_the_module_says_so() -> None:
    huge = ("word " * 1000).strip() + "\n\n" + "more " * 1000
    text, namespace = module_of("big", [tool("big", description=huge)])
    doc = inspect.getdoc(namespace["big"]) or ""
    first, rest = doc.split("\n\n", 1)
    assert first.endswith("…") and len(first) <= stubs.FIRST_PARAGRAPH_CHARS + 1
    assert rest.endswith("…") and len(rest) <= stubs.REST_CHARS + 1
    assert "…" in namespace["__doc__"] and 'detail="full"' in namespace["__doc__"]
    assert len(text) < 3_000


def test_a_long_parameter_description_is_one_capped_line() -> None:
    long = "Explained " * 100 + "\nover lines"
    _, namespace = tool_namespace(tool("t", {"x": {"type": "string", "description": long}}, ["x"]))
    line = namespace["t"].__doc__.split("Args:\n", 1)[1].strip()
    assert "\n" not in line and line.startswith("x: Explained Explained") and line.endswith("…")
    assert len(line) == len("x: ") + stubs.ARG_CHARS


def test_results_become_typed_dicts_with_optional_and_odd_fields_and_resolved_references() -> None:
    output = {
        "type": "object",
        "properties": {
            "when": {"$ref": "#/$defs/Moment"},
            "items": {"type": "array", "items": {"$ref": "#/$defs/Moment"}},
            "count": {"type": "integer"},
            "from": {"type": "string"},
            "next-page": {"type": ["string", "null"]},
        },
        "required": ["when", "from"],
        "$defs": {"Moment": {"type": "object", "properties": {"at": {"type": "string"}}}},
    }
    text, namespace = tool_namespace(tool("list-events", output=output), "list_events")
    assert (
        "ListEventsResult = TypedDict('ListEventsResult', {'when': dict[str, Any], "
        "'items': NotRequired[list[dict[str, Any]]], 'count': NotRequired[int], 'from': str, "
        "'next-page': NotRequired[str | None]})"
    ) in text
    result = namespace["ListEventsResult"]
    assert result.__required_keys__ == frozenset({"when", "from"})
    assert typing.get_type_hints(result) == {
        "when": dict[str, Any],
        "items": list[dict[str, Any]],
        "count": int,
        "from": str,
        "next-page": str | None,
    }
    assert inspect.signature(namespace["list_events"]).return_annotation is result


@pytest.mark.parametrize(
    ("result", "annotation"),
    [
        ({"type": "array", "items": {"type": "string"}}, list[str]),
        ({"type": "integer"}, int),
        ({"anyOf": [{"type": "number"}, {"type": "null"}]}, float | None),
    ],
)
def test_a_wrapped_result_returns_the_type_of_its_result_property(result: dict[str, Any], annotation: Any) -> None:
    output = {"type": "object", "properties": {"result": result}, "required": ["result"], "x-fastmcp-wrap-result": True}
    _, namespace = tool_namespace(tool("f", output=output))
    assert inspect.signature(namespace["f"]).return_annotation == annotation


def test_a_wrapped_object_result_becomes_a_typed_dict_and_an_object_without_properties_a_dict() -> None:
    wrapped = {
        "type": "object",
        "properties": {"result": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
        "x-fastmcp-wrap-result": True,
    }
    _, namespace = tool_namespace(tool("make", output=wrapped))
    assert typing.get_type_hints(namespace["MakeResult"]) == {"id": int}
    _, namespace = tool_namespace(tool("loose", output={"type": "object"}))
    assert inspect.signature(namespace["loose"]).return_annotation == dict[str, Any]


def test_tools_named_like_the_types_their_neighbours_use_do_not_break_the_module() -> None:
    tools = [
        tool("list", {"x": {"type": "string"}}, ["x"], output={"type": "object", "properties": {"a": {}}}),
        tool("Any", {"y": {"type": "array", "items": {"type": "integer"}}}),
        tool("str", {"z": {"type": "boolean"}}),
        tool("ListResult", {"w": {"type": "string"}}, output={"type": "object", "properties": {"b": {}}}),
    ]
    text, namespace = module_of("odd", tools)
    assert text.splitlines()[text.splitlines().index('"""') + 1] == "from __future__ import annotations"
    classes = [name for name, value in namespace.items() if typing.is_typeddict(value)]
    assert classes == ["ListResult2", "ListResultResult"]  # named apart from the tool called ListResult
    assert text.index("class ListResultResult") < text.index("async def list(")  # classes before any shadowing
    for item in tools:
        alias = catalog.identifier(item.name)
        names = [(p.name, p.kind, p.default) for p in inspect.signature(namespace[alias]).parameters.values()]
        assert names == [(p.name, p.kind, p.default) for p in spec_of(item, alias).signature.parameters.values()]


def test_defaults_that_repr_cannot_write_still_run() -> None:
    odd = tool("odd", {"a": {"type": "number", "default": math.inf}, "b": {"type": "array", "default": [-math.inf]}})
    _, namespace = tool_namespace(odd)
    parameters = inspect.signature(namespace["odd"]).parameters
    assert parameters["a"].default == math.inf and parameters["b"].default == [-math.inf]


def test_a_server_description_and_an_empty_server_make_valid_modules() -> None:
    text, namespace = module_of("notes", [], description="Keeps notes.\n\nSecond paragraph.")
    assert namespace["__doc__"] == "MCP server 'notes' (mcp_notes): 0 tools. Keeps notes.\n"
    assert "async def" not in text


@pytest.mark.parametrize(
    ("hint", "source"),
    [
        (typing.Any, "Any"),
        (str, "str"),
        (type(None), "None"),
        (list, "list"),
        (dict[str, typing.Any], "dict[str, Any]"),
        (list[list[int]], "list[list[int]]"),
        (typing.Literal["a", 1, True, None], "Literal['a', 1, True, None]"),
        (typing.Optional[typing.Literal["utc", "local"]], "Literal['utc', 'local'] | None"),  # noqa: UP045
        (str | int | None, "str | int | None"),
        (inspect.Parameter.empty, "Any"),
    ],
)
def test_annotations_render_as_source(hint: Any, source: str) -> None:
    assert stubs.annotation_source(hint) == source


# ------------------------------------------------------------------------------------- tool_doc levels


def test_each_detail_level_of_a_tool_doc() -> None:
    now = next(item for item in listing("time") if item.name == "get_current_time")
    base = {"server": "time", "tool": "get_current_time", "alias": "get_current_time"}
    assert catalog.DETAILS == ("name", "summary", "full", "stub")
    assert catalog.tool_doc("time", now, "get_current_time", "name") == base
    assert catalog.tool_doc("time", now, "get_current_time", "summary") == {
        **base,
        "description": "Get current time in a specific timezone",
        "required": ["timezone"],
    }
    full = catalog.tool_doc("time", now, "get_current_time", "full")
    assert full["inputSchema"] == now.input_schema and full["outputSchema"] == now.output_schema
    assert full["annotations"] == {
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
        "readOnlyHint": True,
    }
    stub = catalog.tool_doc("time", now, "get_current_time", "stub")
    assert set(stub) == {*base, "stub"}
    assert stub["stub"].startswith("class GetCurrentTimeResult(TypedDict):\n")
    assert catalog.server_stub("time", "time", "", [now], {"get_current_time": "get_current_time"}) == (
        stubs.server_stub("time", "time", "", [now], {"get_current_time": "get_current_time"})
    )


def test_importing_the_guest_proxies_on_the_host_changes_nothing_outside_them() -> None:
    import sys

    assert not any(isinstance(finder, _proxies.ServerModuleFinder) for finder in sys.meta_path)
    assert _rpc.rpc._send is None


# ------------------------------------------------------------------------------------- guest: search


SERVERS_SEEN = [{"name": "filesystem", "alias": "fs"}, {"name": "my-git", "alias": "my_git"}]


def summary_doc(tool_name: str, description: str, required: list[str], score: float) -> dict[str, Any]:
    return {"server": "filesystem", "tool": tool_name, "alias": tool_name, "description": description,
            "required": required, "score": score}  # fmt: skip


LISTING = "Get a detailed listing of all files and directories in a specified path, with [FILE] and [DIR] prefixes."
REPLY: dict[str, Any] = {
    "query": "ls a folder",
    "total": 37,
    "offset": 0,
    "results": [
        summary_doc("list_directory", LISTING, ["path"], 0.934),
        summary_doc("directory_tree", "Get a recursive tree view.", ["path"], 0.71),
        summary_doc("list_allowed_directories", "", [], 0.5),
    ],
    "pending": ["my-git"],
    "unavailable": [{"server": "notes", "reason": "it exited with status 3 during startup"}],
}
PARAMS = {"query": "ls a folder", "limit": 3, "offset": 0, "detail": "summary"}


@pytest.fixture
def servers_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_proxies.catalog, "servers", SERVERS_SEEN)


def test_search_results_are_the_list_of_docs_with_what_the_search_knew(servers_seen: None) -> None:
    found = runtime.SearchResults.from_reply(REPLY, PARAMS)
    assert isinstance(found, list)
    assert found == REPLY["results"]
    assert found[0]["tool"] == "list_directory" and [doc["score"] for doc in found] == [0.934, 0.71, 0.5]
    assert (found.query, found.total, found.offset, found.detail) == ("ls a folder", 37, 0, "summary")
    assert found.pending == ["my-git"]
    assert found.unavailable == [{"server": "notes", "reason": "it exited with status 3 during startup"}]
    assert json.loads(json.dumps(found)) == REPLY["results"]
    assert runtime.SearchResults is runtime.__dict__["SearchResults"] and "SearchResults" in runtime.__all__


def test_printed_search_results_are_a_short_listing_that_says_what_is_left(servers_seen: None) -> None:
    found = runtime.SearchResults.from_reply(REPLY, PARAMS)
    assert (
        repr(found)
        == str(found)
        == "\n".join(
            [
                "3 of 37 matches for 'ls a folder':",
                "  0.93  mcp_fs.list_directory(path) — Get a detailed listing of all files and directories in a "
                "specified path, with [FILE] and [DIR] pref…",
                "  0.71  mcp_fs.directory_tree(path) — Get a recursive tree view.",
                "  0.50  mcp_fs.list_allowed_directories()",
                "still connecting (search again in a moment): my-git",
                "unavailable: notes (it exited with status 3 during startup)",
                "more: offset=3",
            ]
        )
    )


def test_a_later_page_an_empty_search_and_a_malformed_reply(servers_seen: None) -> None:
    page = runtime.SearchResults.from_reply({**REPLY, "offset": 3, "pending": [], "unavailable": []}, PARAMS)
    assert repr(page).splitlines()[0] == "matches 4-6 of 37 for 'ls a folder':"
    assert repr(page).splitlines()[-1] == "more: offset=6"
    last = runtime.SearchResults.from_reply({**REPLY, "total": 3, "pending": [], "unavailable": []}, PARAMS)
    assert "more:" not in repr(last)
    nothing = runtime.SearchResults.from_reply({"query": "zzz", "total": 0, "offset": 0, "results": []}, PARAMS)
    assert repr(nothing) == "No tools match 'zzz'."
    past = runtime.SearchResults.from_reply({"query": "q", "total": 4, "offset": 9, "results": []}, PARAMS)
    assert repr(past) == "No matches from offset 9: 'q' has 4 in all."
    one = runtime.SearchResults.from_reply({**REPLY, "offset": 36, "results": REPLY["results"][:1]}, PARAMS)
    assert repr(one).splitlines()[0] == "match 37 of 37 for 'ls a folder':"
    only = runtime.SearchResults.from_reply({**REPLY, "total": 2, "results": REPLY["results"][:2]},
                                            {**PARAMS, "server": "filesystem"})  # fmt: skip
    assert repr(only).splitlines()[0] == "2 of 2 matches for 'ls a folder' in filesystem:"
    with pytest.raises(runtime.MCPError, match="not a dict"):
        runtime.SearchResults.from_reply(REPLY["results"][:2], PARAMS)


def test_scores_of_any_size_line_up(servers_seen: None) -> None:
    docs = [{"server": "filesystem", "tool": name, "alias": name, "score": score}
            for name, score in (("a", 12.456), ("b", 8.8), ("c", None))]  # fmt: skip
    found = runtime.SearchResults.from_reply({"query": "q", "total": 3, "results": docs}, {**PARAMS, "detail": "name"})
    assert repr(found).splitlines()[1:] == ["  12.46  mcp_fs.a", "   8.80  mcp_fs.b", "      -  mcp_fs.c"]


def test_printed_search_results_at_the_other_detail_levels(servers_seen: None) -> None:
    named = [{"server": "my-git", "tool": "git_log", "alias": "git_log", "score": 1.0}]
    found = runtime.SearchResults.from_reply(
        {"query": "log", "total": 1, "results": named}, {**PARAMS, "detail": "name"}
    )
    assert repr(found) == "1 of 1 match for 'log':\n  1.00  mcp_my_git.git_log"
    full_doc = {**named[0], "description": "Shows the commit logs.\nOne per line.", "inputSchema": {"type": "object"}}
    found = runtime.SearchResults.from_reply({"query": "log", "total": 1, "results": [full_doc]},
                                             {**PARAMS, "detail": "full"})  # fmt: skip
    assert repr(found).splitlines()[1:] == [
        "  1.00  mcp_my_git.git_log()",
        "      Shows the commit logs.",
        "      One per line.",
        '      inputSchema: {"type": "object"}',
    ]
    stub = {**named[0], "stub": "async def git_log(repo_path: str) -> Any:\n    ...\n"}
    found = runtime.SearchResults.from_reply({"query": "log", "total": 1, "results": [stub]},
                                             {**PARAMS, "detail": "stub"})  # fmt: skip
    assert repr(found) == (
        "1 of 1 match for 'log':\n# 1.00  mcp_my_git.git_log\nasync def git_log(repo_path: str) -> Any:\n    ..."
    )


class Recorder:
    """Stands in for the guest's bridge connection: records each request and answers it."""

    def __init__(self, answer: Callable[[str, dict[str, Any]], Any]) -> None:
        self.answer = answer
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def request(self, op: str, **params: Any) -> Any:
        self.requests.append((op, params))
        return self.answer(op, params)

    async def arequest(self, op: str, **params: Any) -> Any:
        return self.request(op, **params)


@contextlib.contextmanager
def bridge(monkeypatch: pytest.MonkeyPatch, answer: Callable[[str, dict[str, Any]], Any]) -> Iterator[Recorder]:
    recorder = Recorder(answer)
    monkeypatch.setattr(runtime, "rpc", recorder)
    monkeypatch.setattr(_docs, "rpc", recorder)  # the docs helpers moved to their own module
    yield recorder


def test_search_sends_offset_detail_and_server_and_returns_search_results(
    monkeypatch: pytest.MonkeyPatch, servers_seen: None
) -> None:
    with bridge(monkeypatch, lambda op, params: REPLY) as recorder:
        found = runtime.search_tool_docs_sync("ls a folder", 3, offset=0, server="fs")
        again = asyncio_run(runtime.search_tool_docs("ls a folder", limit=2, detail="name", offset=4))
    assert recorder.requests == [
        ("search", {"query": "ls a folder", "limit": 3, "offset": 0, "detail": "summary", "server": "fs"}),
        ("search", {"query": "ls a folder", "limit": 2, "offset": 4, "detail": "name"}),
    ]
    assert isinstance(found, runtime.SearchResults) and found.total == 37 and found.server == "fs"
    assert again.detail == "name" and again.offset == 0  # the bridge's offset is the one that counts


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"query": ""}, "query must be a non-empty string saying what you need, not ''"),
        ({"query": 3}, "query must be a non-empty string saying what you need, not 3"),
        ({"limit": 0}, "limit must be a whole number from 1 to 200, not 0"),
        ({"limit": 201}, "limit must be a whole number from 1 to 200, not 201"),
        ({"limit": True}, "limit must be a whole number from 1 to 200, not True"),
        ({"offset": -1}, "offset must be a whole number from 0 (the first result) up, not -1"),
        ({"offset": 1.5}, "offset must be a whole number from 0 (the first result) up, not 1.5"),
        ({"detail": "stubs"}, "detail must be one of name, summary, full, stub, not 'stubs'"),
        ({"server": ["fs"]}, "server must be a server's name or alias (a str) or None, not list"),
    ],
)
def test_search_arguments_are_checked_before_anything_is_sent(
    monkeypatch: pytest.MonkeyPatch, arguments: dict[str, Any], message: str
) -> None:
    with bridge(monkeypatch, lambda op, params: REPLY) as recorder:
        with pytest.raises(runtime.ArgumentError) as caught:
            runtime.search_tool_docs_sync(**{"query": "q", **arguments})
        with pytest.raises(runtime.ArgumentError):
            asyncio_run(runtime.search_tool_docs(**{"query": "q", **arguments}))
    assert str(caught.value) == message
    assert isinstance(caught.value, TypeError)
    assert recorder.requests == []


# ---------------------------------------------------------------------------------- guest: query docs


def test_query_tool_docs_returns_stub_text_that_shows_as_code(monkeypatch: pytest.MonkeyPatch) -> None:
    module = stubs.server_stub("time", "time", "", listing("time"), catalog.tool_aliases(listing("time")))
    one = catalog.tool_doc("time", listing("time")[0], "get_current_time", "stub")

    def answer(op: str, params: dict[str, Any]) -> Any:
        if params["detail"] != "stub":
            return [{"server": "time", "tool": "get_current_time", "alias": "get_current_time"}]
        return module if params["tool"] is None else one

    with bridge(monkeypatch, answer) as recorder:
        whole = runtime.query_tool_docs_sync("time", detail="stub")
        single = asyncio_run(runtime.query_tool_docs("time", "get_current_time", detail="stub"))
        names = runtime.query_tool_docs_sync("time", detail="name")
        with pytest.raises(runtime.ArgumentError, match=r"^detail must be one of name, summary, full, stub, not 'x'$"):
            runtime.query_tool_docs_sync("time", detail="x")
    assert isinstance(whole, runtime.Stub) and isinstance(whole, str) and whole == module
    assert repr(whole) == module  # a cell's last value shows the code, not a quoted one-liner
    assert single == one["stub"]
    # The reference bridge's key for the alias comes right after ours, with the same value.
    assert names == [
        {"server": "time", "tool": "get_current_time", "alias": "get_current_time", "toolAlias": "get_current_time"}
    ]
    assert [params["detail"] for _, params in recorder.requests] == ["stub", "stub", "name"]
    exec(compile(whole, "<time>", "exec", dont_inherit=True), {})


def test_tool_docs_carry_tool_alias_at_every_level_and_list_tools_too(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = {"server": "fs", "tool": "read-file", "alias": "read_file", "description": "Read.", "required": []}

    def answer(op: str, params: dict[str, Any]) -> Any:
        return dict(doc) if params["tool"] is not None else [dict(doc), {"server": "fs", "note": "no alias"}]

    with bridge(monkeypatch, answer):
        one = asyncio_run(runtime.query_tool_docs("fs", tool="read_file", detail="full"))
        every = runtime.query_tool_docs_sync("fs")
        listed = [runtime.list_tools_sync("fs"), asyncio_run(runtime.list_tools("fs"))]
    assert list(one) == ["server", "tool", "alias", "toolAlias", "description", "required"]
    assert one["toolAlias"] == "read_file"
    assert every == listed[0] == listed[1] == [{**one}, {"server": "fs", "note": "no alias"}]


def test_list_servers_gives_names_as_a_tuple_or_the_bridge_s_details(monkeypatch: pytest.MonkeyPatch) -> None:
    entries = [
        {"name": "time", "alias": "time", "transport": "stdio", "state": "ready", "tools": 2, "listing": "live"},
        {"name": "my-git", "alias": "my_git", "transport": "stdio", "state": "idle", "tools": None},
    ]
    described = {"name": "time", "alias": "time", "tools": [{"name": "t", "alias": "t", "input_schema": {}}]}

    def answer(op: str, params: dict[str, Any]) -> Any:
        return {"servers": entries, "loaded": [described, "not a dict"]}[op]

    with bridge(monkeypatch, answer) as recorder:
        names = [runtime.list_servers_sync(), asyncio_run(runtime.list_servers())]
        detailed = [runtime.list_servers_sync(detailed=True), asyncio_run(runtime.list_servers(detailed=True))]
        loaded = runtime.list_loaded_server_metadata()
    assert names == [("time", "my-git")] * 2 and "my-git" in names[0]
    assert detailed == [entries] * 2
    assert loaded == (described,)
    assert [op for op, _ in recorder.requests] == ["servers"] * 4 + ["loaded"]


def asyncio_run(coroutine: Any) -> Any:
    import asyncio

    return asyncio.run(coroutine)


# ------------------------------------------------------------------------------- through a real bridge


@pytest.fixture(scope="module")
async def docs_bridge() -> AsyncIterator[Bridge]:
    """A bridge on bubblewrap with the time and everything servers, shared by the module."""
    async with time_and_everything() as bridge:
        yield bridge


@pytest.mark.backend
@pytest.mark.anyio
async def test_sandboxed_code_reads_a_server_as_a_stub_module_that_runs(docs_bridge: Bridge) -> None:
    result = await run(
        docs_bridge,
        """
        import inspect
        module = await runtime.query_tool_docs("time", detail="stub")
        one = runtime.query_tool_docs_sync("everything", "get-structured-content", detail="stub")
        namespace = {}
        exec(module, namespace)
        alone = {}
        exec("from typing import Any, Literal, NotRequired, TypedDict\\n" + one, alone)
        report({
            "types": [type(module).__name__, type(one).__name__],
            "module": module,
            "repr_is_text": repr(module) == module,
            "same_parameters": str(inspect.signature(namespace["get_current_time"]).replace(
                return_annotation=inspect.Signature.empty)) == str(inspect.signature(mcp_time.get_current_time)
                .replace(return_annotation=inspect.Signature.empty)),
            "result_fields": sorted(namespace["GetCurrentTimeResult"].__annotations__),
            "one": one,
            "structured_fields": sorted(alone["GetStructuredContentResult"].__annotations__),
        })
        """,
        "stub-module",
    )
    seen = reported(result)
    assert seen["types"] == ["Stub", "Stub"]
    assert seen["module"].startswith('"""MCP server \'time\' (mcp_time): 2 tools.')
    convert = "async def convert_time(source_timezone: str, time: str, target_timezone: str) -> ConvertTimeResult:"
    assert convert in seen["module"]
    assert seen["repr_is_text"] and seen["same_parameters"]
    assert seen["result_fields"] == ["datetime", "day_of_week", "is_dst", "timezone"]
    assert seen["one"].startswith("class GetStructuredContentResult(TypedDict):")
    assert seen["structured_fields"] == ["conditions", "humidity", "temperature"]


@pytest.mark.backend
@pytest.mark.anyio
async def test_sandboxed_code_searches_with_stubs_and_pages(docs_bridge: Bridge) -> None:
    result = await run(
        docs_bridge,
        """
        found = await runtime.search_tool_docs("current time in a time zone", limit=1, detail="stub")
        page = runtime.search_tool_docs_sync("current time in a time zone", limit=1, offset=1, server="time")
        exec("from typing import Any, Literal, NotRequired, TypedDict\\n" + found[0]["stub"], {})
        report({
            "first": [found[0]["server"], found[0]["tool"], found[0]["stub"].splitlines()[0]],
            "total": found.total,
            "printed": repr(found),
            "page": [page.offset, len(page), page[0]["tool"] if page else None, page.total],
            "is_list": isinstance(found, list),
        })
        """,
        "stub-search",
    )
    seen = reported(result)
    assert seen["first"] == ["time", "get_current_time", "class GetCurrentTimeResult(TypedDict):"]
    assert seen["total"] >= 2 and seen["is_list"]
    assert seen["printed"].startswith(f"1 of {seen['total']} matches for 'current time in a time zone':\n# ")
    assert "\nasync def get_current_time(timezone: str) -> GetCurrentTimeResult:\n" in seen["printed"]
    assert seen["page"][:3] == [1, 1, "convert_time"]
