"""Pure logic of the MCP proxy layer: host-side argument checks, tool docs and search, saved tools,
the guest's typed proxies and natural results, and the guest's request/reply plumbing. No sandbox."""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import threading
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import types

from mcp_codemode.guest.mcp import _proxies, _rpc, runtime
from mcp_codemode.runs import saved_tools
from mcp_codemode.runs.saved_tools import SavedToolProblem, SavedToolStore
from mcp_codemode.upstream.tools import catalog
from mcp_codemode.upstream.tools.validate import ArgumentProblem, check_arguments, describe_parameters

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16

READ_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "The file to read"},
        "count": {"type": "integer"},
        "items": {"type": "array", "items": {"type": "integer"}},
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "note": {"type": ["string", "null"]},
    },
    "required": ["path"],
}
READ_TAKES = "It takes: path (string, required), count (integer), items (array), mode (string), note (string/null)."


def problem(schema: dict[str, Any], arguments: dict[str, Any]) -> str:
    with pytest.raises(ArgumentProblem) as caught:
        check_arguments("read", schema, arguments)
    return str(caught.value)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# ------------------------------------------------------------------------- upstream/tools/validate.py


def test_valid_arguments_pass_the_check():
    check_arguments("read", READ_SCHEMA, {"path": "a", "count": 3, "items": [1, 2], "mode": "fast", "note": None})


def test_a_misspelt_argument_is_refused_with_the_closest_name_and_the_parameter_list():
    assert (
        problem(READ_SCHEMA, {"pth": "a"}) == f"read() got an unknown argument 'pth'; did you mean 'path'? {READ_TAKES}"
    )


def test_an_unknown_argument_without_a_close_name_gets_no_suggestion():
    assert problem(READ_SCHEMA, {"path": "a", "zzz": 1}) == f"read() got an unknown argument 'zzz'. {READ_TAKES}"


@pytest.mark.parametrize("extra", [True, {}, {"type": "integer"}])
def test_an_unknown_argument_is_allowed_when_the_schema_allows_extra_properties(extra):
    check_arguments("read", {**READ_SCHEMA, "additionalProperties": extra}, {"path": "a", "other": 1})


def test_an_extra_argument_is_still_checked_against_an_additional_properties_schema():
    schema = {**READ_SCHEMA, "additionalProperties": {"type": "integer"}}
    assert problem(schema, {"path": "a", "other": "x"}) == "read(): argument other must be an integer, not str ('x')."


def test_a_missing_required_argument_is_named_with_its_description():
    message = problem(READ_SCHEMA, {"count": 1})
    assert message == f"read() is missing the required argument 'path': The file to read. {READ_TAKES}"


def test_a_missing_required_argument_without_description_is_named_alone():
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert problem(schema, {}) == "read() is missing the required argument 'n'. It takes: n (integer, required)."


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"path": "a", "count": "3"}, "read(): argument count must be an integer, not str ('3')."),
        ({"path": "a", "count": True}, "read(): argument count must be an integer, not bool (True)."),
        ({"path": 7}, "read(): argument path must be a string, not int (7)."),
        ({"path": "a", "note": 3}, "read(): argument note must be a string or None, not int (3)."),
        ({"path": "a", "items": [1, "b"]}, "read(): argument items[1] must be an integer, not str ('b')."),
        ({"path": "a", "items": "1,2"}, "read(): argument items must be a list, not str ('1,2')."),
    ],
)
def test_a_wrong_type_says_what_was_expected_and_what_was_sent(arguments, message):
    assert problem(READ_SCHEMA, arguments) == message


def test_a_long_wrong_value_is_shortened_in_the_message():
    message = problem(READ_SCHEMA, {"path": "a", "count": "x" * 100})
    assert message.startswith("read(): argument count must be an integer, not str ('xxxx")
    assert message.endswith("…).")
    assert len(message) < 130


def test_an_enum_violation_quotes_the_allowed_values():
    assert problem(READ_SCHEMA, {"path": "a", "mode": "medium"}) == (
        f"read(): argument mode is not valid: 'medium' is not one of ['fast', 'slow']. {READ_TAKES}"
    )


def test_a_broken_schema_does_not_block_valid_calls_but_own_checks_still_apply():
    broken = {"type": "object", "properties": {"n": {"type": "integer", "minimum": "zero"}}, "required": ["n"]}
    check_arguments("read", broken, {"n": 1})
    check_arguments("read", broken, {"n": "not checked: the schema cannot be used"})
    assert problem(broken, {"m": 1}) == "read() got an unknown argument 'm'. It takes: n (integer, required)."
    assert problem(broken, {}).startswith("read() is missing the required argument 'n'")


def test_describe_parameters_lists_types_and_required_flags():
    assert describe_parameters(READ_SCHEMA) == (
        "path (string, required), count (integer), items (array), mode (string), note (string/null)"
    )
    assert describe_parameters({"type": "object"}) == "no arguments"
    assert describe_parameters({"properties": {}}) == "no arguments"
    assert describe_parameters({"properties": {"a": {}, "b": "junk"}}) == "a (any), b (any)"


# ------------------------------------------------------------------------- upstream/tools/catalog.py


def tool(name: str, description: str | None = None, **changes: Any) -> types.Tool:
    schema = changes.pop("input_schema", {"type": "object"})
    return types.Tool(name=name, description=description, input_schema=schema, **changes)


@pytest.mark.parametrize(
    ("name", "alias"),
    [
        ("get-tiny-image", "get_tiny_image"),
        ("files.read.text", "files_read_text"),
        ("123abc", "t_123abc"),
        ("class", "class_"),
        ("None", "None_"),
        ("", "tool"),
        ("---", "tool"),
        ("__init__", "init"),
        ("read file", "read_file"),
        ("already_fine", "already_fine"),
    ],
)
def test_identifier_turns_a_tool_name_into_a_python_name(name, alias):
    assert catalog.identifier(name) == alias
    assert alias.isidentifier()


def test_identifier_uses_the_fallback_for_a_name_without_word_characters():
    assert catalog.identifier("...", fallback="server") == "server"


def test_tool_aliases_number_collisions_in_listing_order():
    tools = [tool("a-b"), tool("a_b"), tool("a.b"), tool("c"), tool("a_b_2")]
    assert catalog.tool_aliases(tools) == {"a-b": "a_b", "a_b": "a_b_2", "a.b": "a_b_3", "c": "c", "a_b_2": "a_b_2_2"}


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("Read a file. Then more.\nSecond line.", "Read a file."),
        ("  First line\nsecond line", "First line"),
        ("Why? Because.", "Why?"),
        ("Version 1.2 is out", "Version 1.2 is out"),
        (None, ""),
        ("   \n ", ""),
    ],
)
def test_first_line_is_the_first_sentence_of_the_first_line(text, line):
    assert catalog.first_line(text) == line


def test_first_line_is_cut_to_the_limit_with_an_ellipsis():
    cut = catalog.first_line("word " * 100, limit=20)
    assert cut == "word word word word…"
    assert len(catalog.first_line("x" * 500)) == 240


SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "Where to look"}, "depth": {"type": "integer"}},
    "required": ["path"],
}


def test_tool_doc_at_name_detail_is_only_the_names():
    doc = catalog.tool_doc("fs", tool("read-file", "Read a file. Fully."), "read_file", "name")
    assert doc == {"server": "fs", "tool": "read-file", "alias": "read_file"}


def test_tool_doc_at_summary_detail_has_the_first_sentence_and_the_required_parameters():
    doc = catalog.tool_doc(
        "fs", tool("find", "Find files. Slowly.\nMore", input_schema=SEARCH_SCHEMA), "find", "summary"
    )
    assert doc == {"server": "fs", "tool": "find", "alias": "find", "description": "Find files.", "required": ["path"]}


def test_tool_doc_at_full_detail_has_schemas_title_and_annotations():
    output = {"type": "object", "properties": {"hits": {"type": "array"}}}
    full_tool = tool(
        "find",
        "Find files. Slowly.\nMore",
        title="Finder",
        input_schema=SEARCH_SCHEMA,
        output_schema=output,
        annotations=types.ToolAnnotations(read_only_hint=True),
    )
    assert catalog.tool_doc("fs", full_tool, "find", "full") == {
        "server": "fs",
        "tool": "find",
        "alias": "find",
        "title": "Finder",
        "description": "Find files. Slowly.\nMore",
        "inputSchema": SEARCH_SCHEMA,
        "outputSchema": output,
        "annotations": {"readOnlyHint": True},
    }


def test_tool_doc_at_full_detail_leaves_out_what_the_tool_does_not_have():
    doc = catalog.tool_doc("fs", tool("ping", input_schema={}), "ping", "full")
    assert doc == {"server": "fs", "tool": "ping", "alias": "ping", "inputSchema": {"type": "object"}}


def test_proxy_info_carries_names_and_both_schemas():
    info = catalog.proxy_info(tool("find", "Find.", input_schema=SEARCH_SCHEMA, output_schema={"type": "object"}), "f")
    assert info == {
        "name": "find",
        "alias": "f",
        "description": "Find.",
        "inputSchema": SEARCH_SCHEMA,
        "outputSchema": {"type": "object"},
    }


# ---------------------------------------------------------------------------------------- saved_tools.py


def test_a_saved_tool_loads_back_and_can_be_deleted(tmp_path: Path):
    store = SavedToolStore(tmp_path)
    saved = store.save("alice", "summarize", "def summarize():\n    return 1\n", "Sums up.")
    assert (saved.name, saved.source, saved.description) == (
        "summarize",
        "def summarize():\n    return 1\n",
        "Sums up.",
    )
    tools, problems = store.load("alice")
    assert tools == [saved]
    assert problems == []
    assert store.delete("alice", "summarize") is True
    assert store.delete("alice", "summarize") is False
    assert store.load("alice") == ([], [])


def test_saved_tools_are_kept_per_owner(tmp_path: Path):
    store = SavedToolStore(tmp_path)
    store.save("alice", "mine", "def mine(): pass")
    assert store.load("bob") == ([], [])
    assert store.delete("bob", "mine") is False
    assert [t.name for t in store.load("alice")[0]] == ["mine"]


def test_saving_again_overwrites(tmp_path: Path):
    store = SavedToolStore(tmp_path)
    store.save("alice", "f", "def f(): return 1", "old")
    store.save("alice", "f", "def f(): return 2", 42)  # a non-text description is dropped
    tools, _ = store.load("alice")
    assert [(t.source, t.description) for t in tools] == [("def f(): return 2", "")]


def test_a_long_description_is_cut(tmp_path: Path):
    saved = SavedToolStore(tmp_path).save("alice", "f", "def f(): pass", "d" * 5000)
    assert saved.description == "d" * saved_tools.MAX_DESCRIPTION_CHARS


@pytest.mark.parametrize("name", ["class", "_hidden", "two words", "9lives", "a-b", "x" * 65, "", None, 3])
def test_a_bad_tool_name_is_refused_with_advice(tmp_path: Path, name):
    store = SavedToolStore(tmp_path)
    with pytest.raises(SavedToolProblem, match="is not a usable tool name: use a Python identifier of up to 64"):
        store.save("alice", name, "def f(): pass")
    with pytest.raises(SavedToolProblem, match="is not a usable tool name"):
        store.delete("alice", name)
    assert list(tmp_path.iterdir()) == []


def test_a_name_of_exactly_the_maximum_length_is_accepted(tmp_path: Path):
    assert SavedToolStore(tmp_path).save("alice", "x" * 64, "def f(): pass").name == "x" * 64


@pytest.mark.parametrize("source", ["", "   \n", None, b"def f(): pass"])
def test_a_save_without_source_text_is_refused(tmp_path: Path, source):
    with pytest.raises(SavedToolProblem, match=r"save_tool\(\) needs the function's source text"):
        SavedToolStore(tmp_path).save("alice", "f", source)


def test_an_oversize_source_is_refused(tmp_path: Path):
    store = SavedToolStore(tmp_path)
    store.save("alice", "f", "x" * saved_tools.MAX_SOURCE_CHARS)
    with pytest.raises(SavedToolProblem, match="the source is 100,001 characters; at most 100,000 are kept"):
        store.save("alice", "g", "x" * (saved_tools.MAX_SOURCE_CHARS + 1))
    assert [t.name for t in store.load("alice")[0]] == ["f"]


def test_the_per_owner_cap_refuses_new_tools_but_allows_overwrites(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(saved_tools, "MAX_TOOLS_PER_OWNER", 2)
    store = SavedToolStore(tmp_path)
    store.save("alice", "a", "def a(): pass")
    store.save("alice", "b", "def b(): pass")
    with pytest.raises(SavedToolProblem, match=r"2 tools are saved already; delete some"):
        store.save("alice", "c", "def c(): pass")
    store.save("alice", "a", "def a(): return 2")
    store.save("bob", "c", "def c(): pass")  # another owner has a cap of their own
    assert [t.name for t in store.load("alice")[0]] == ["a", "b"]
    store.delete("alice", "b")
    store.save("alice", "c", "def c(): pass")
    assert [t.name for t in store.load("alice")[0]] == ["a", "c"]


@pytest.mark.parametrize("content", ["{not json", '["a list"]', '{"source": "no name"}', "\xff"])
def test_an_unreadable_saved_tool_is_reported_while_the_others_load(tmp_path: Path, content):
    store = SavedToolStore(tmp_path)
    store.save("alice", "good", "def good(): pass")
    folder = next(tmp_path.iterdir())
    (folder / "broken.json").write_text(content, encoding="utf-8")
    tools, problems = store.load("alice")
    assert [t.name for t in tools] == ["good"]
    assert len(problems) == 1
    assert problems[0].startswith("saved tool 'broken' could not be read (")
    assert "runtime.delete_saved_tool('broken')" in problems[0]


def test_saving_leaves_only_the_final_file_behind(tmp_path: Path):
    store = SavedToolStore(tmp_path)
    store.save("alice", "f", "def f(): pass")
    store.save("alice", "f", "def f(): return 2")
    (folder,) = tmp_path.iterdir()
    assert [p.name for p in folder.iterdir()] == ["f.json"]
    assert json.loads((folder / "f.json").read_text())["source"] == "def f(): return 2"
    assert folder.stat().st_mode & 0o777 == 0o700


def test_a_failed_write_removes_its_temporary_file(tmp_path: Path, monkeypatch):
    store = SavedToolStore(tmp_path)
    store.save("alice", "f", "def f(): pass")

    def refuse(source: Any, target: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("mcp_codemode.state_files.os.replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        store.save("alice", "f", "def f(): return 2")
    (folder,) = tmp_path.iterdir()
    assert [p.name for p in folder.iterdir()] == ["f.json"]
    assert store.load("alice")[0][0].source == "def f(): pass"


# --------------------------------------------------------------------------- guest/mcp/_proxies.py


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, str),
        ({"type": "integer"}, int),
        ({"type": "number"}, float),
        ({"type": "boolean"}, bool),
        ({"type": "null"}, type(None)),
        ({"type": "object"}, dict[str, Any]),
        ({"type": "array"}, list),
        ({"type": "array", "items": {"type": "string"}}, list[str]),
        ({"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}, list[list[int]]),
        ({"enum": ["a", "b"]}, typing.Literal["a", "b"]),
        ({"type": "string", "enum": []}, str),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, str | int),
        ({"oneOf": [{"type": "string"}, {"type": "null"}]}, str | None),
        ({"anyOf": [{"type": "string"}, {"type": "string"}]}, str),
        ({"anyOf": [{"type": "string"}, {}]}, Any),
        ({"type": ["integer", "null"]}, int | None),
        ({"type": ["array", "null"], "items": {"type": "number"}}, list[float] | None),
        ({"type": "date"}, Any),
        ({}, Any),
        ("string", Any),
        (None, Any),
    ],
)
def test_annotation_of_a_json_schema(schema, expected):
    assert _proxies.annotation(schema) == expected


@pytest.mark.parametrize(
    ("schema", "label"),
    [
        ({"type": "string"}, "string"),
        ({"type": ["integer", "null"]}, "integer or null"),
        ({"anyOf": [{"type": "string"}, {"enum": [1, 2]}]}, "string or one of 1, 2"),
        ({"enum": ["a", "b"]}, "one of 'a', 'b'"),
        ({"type": "array", "items": {"type": "integer"}}, "array of integer"),
        ({"type": "array"}, "array"),
        ({}, "any"),
        (None, "any"),
    ],
)
def test_type_label_of_a_json_schema(schema, label):
    assert _proxies.type_label(schema) == label


READ_INFO: dict[str, Any] = {
    "name": "read-file",
    "alias": "read_file",
    "description": "Read a file.\nSecond line.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Where\nthe file is"},
            "encoding": {"type": "string", "default": "utf-8"},
            "limit": {"type": "integer"},
            "mode": {"enum": ["text", "bytes"]},
            "offset": {"type": "integer"},
        },
        "required": ["offset", "path"],
    },
}


def test_a_tool_signature_has_required_parameters_first_and_optional_ones_keyword_only():
    spec = _proxies.ToolSpec("fs", "fs", READ_INFO)
    assert str(spec.signature) == (
        "(offset: int, path: str, *, encoding: str = 'utf-8', limit: int | None = None, "
        "mode: Optional[Literal['text', 'bytes']] = None)"
    )
    parameters = spec.signature.parameters
    assert parameters["offset"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert parameters["encoding"].kind is inspect.Parameter.KEYWORD_ONLY
    assert spec.extra is False
    assert spec.required == ["offset", "path"]
    assert spec.qualname == "mcp_fs.read_file"


def test_non_identifier_and_keyword_properties_travel_through_keyword_arguments():
    info = {
        "name": "req",
        "inputSchema": {
            "properties": {"url": {"type": "string"}, "content-type": {"type": "string"}, "class": {}},
            "required": ["url", "content-type"],
        },
    }
    spec = _proxies.ToolSpec("web", "web", info)
    assert str(spec.signature) == "(url: str, **arguments)"
    assert spec.param_to_property == {"url": "url"}
    assert spec.bind(("http://x",), {"content-type": "json", "class": 1}) == {
        "url": "http://x",
        "content-type": "json",
        "class": 1,
    }


def test_a_tool_without_properties_takes_any_keyword_arguments():
    spec = _proxies.ToolSpec("s", "s", {"name": "ping", "inputSchema": {"type": "object"}})
    assert str(spec.signature) == "(**arguments)"
    assert spec.bind((), {"anything": 1}) == {"anything": 1}
    assert spec.parameter_list() == "no arguments"


def test_enums_of_unhashable_values_do_not_break_the_signature():
    info = {
        "name": "t",
        "inputSchema": {"properties": {"a": {"enum": [[1, 2]]}, "b": {"enum": [{"k": 1}]}}, "required": ["a"]},
    }
    spec = _proxies.ToolSpec("s", "s", info)
    assert list(spec.signature.parameters) == ["a", "b"]
    assert spec.bind(([1, 2],), {"b": {"k": 1}}) == {"a": [1, 2], "b": {"k": 1}}


def test_required_names_that_are_not_properties_are_ignored():
    info = {"name": "t", "inputSchema": {"properties": {"a": {"type": "string"}}, "required": ["a", "ghost"]}}
    assert _proxies.ToolSpec("s", "s", info).required == ["a"]


def test_an_output_schema_becomes_the_return_annotation_unless_it_is_a_wrapped_result():
    plain = _proxies.ToolSpec("s", "s", {"name": "t", "outputSchema": {"type": "object"}})
    assert plain.signature.return_annotation == dict[str, Any]
    assert plain.wrapped is False
    wrapped_info = {"name": "t", "outputSchema": {"type": "object", "x-fastmcp-wrap-result": True}}
    wrapped = _proxies.ToolSpec("s", "s", wrapped_info)
    assert wrapped.wrapped is True
    assert wrapped.signature.return_annotation is inspect.Signature.empty


def test_bind_maps_positional_and_keyword_arguments_to_properties():
    spec = _proxies.ToolSpec("fs", "fs", READ_INFO)
    assert spec.bind((3, "a.txt"), {"limit": 9}) == {"offset": 3, "path": "a.txt", "limit": 9}
    assert spec.bind((), {"path": "a.txt", "offset": 0}) == {"offset": 0, "path": "a.txt"}


_BIND_INFO: dict[str, Any] = {
    "name": "mixed",
    "inputSchema": {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "maybe": {"type": ["string", "null"]},
            "limit": {"type": "integer"},
            "class": {"type": "string"},  # a keyword: it travels through **arguments
            "two words": {"type": "string"},
            "arguments": {"type": "object"},
        },
        "required": ["path", "maybe"],
    },
}


_BIND_VALUES = st.none() | st.integers() | st.text(max_size=3)


@given(
    named=st.fixed_dictionaries({}, optional=dict.fromkeys(["path", "maybe", "limit", "arguments"], _BIND_VALUES)),
    odd=st.sampled_from([None, "class", "two words", "more_arguments", "pathh"]),
    positional=st.just([]) | st.lists(st.none() | st.integers(), max_size=3),
)
def test_binds_fast_path_agrees_with_the_signature(
    named: dict[str, Any], odd: str | None, positional: list[Any]
) -> None:
    """The usual keyword call skips Signature.bind; whatever the call, both ways give the same arguments or
    the same error (None for an optional, non-nullable parameter still means "not given")."""
    spec = _proxies.ToolSpec("s", "s", _BIND_INFO)
    kwargs = {**named, odd: "x"} if odd is not None else named
    outcomes: list[tuple[str, Any]] = []
    for bind in (spec.bind, spec.bind_by_signature):
        try:
            outcomes.append(("ok", bind(tuple(positional), dict(kwargs))))
        except _rpc.ArgumentError as exc:
            outcomes.append(("error", str(exc)))
    assert outcomes[0] == outcomes[1]
    if outcomes[0][0] == "ok":
        assert list(outcomes[0][1]) == list(outcomes[1][1])  # the same order, so the same JSON


def test_bind_names_a_misspelt_argument_with_a_suggestion():
    spec = _proxies.ToolSpec("fs", "fs", READ_INFO)
    with pytest.raises(_rpc.ArgumentError) as caught:
        spec.bind((0,), {"pathh": "a.txt"})
    assert str(caught.value) == (
        "read-file() got an unknown argument 'pathh'; did you mean 'path'? It takes: path (string, required), "
        "encoding (string), limit (integer), mode (one of 'text', 'bytes'), offset (integer, required)."
    )
    assert (caught.value.server, caught.value.tool) == ("fs", "read-file")
    assert isinstance(caught.value, TypeError)


@pytest.mark.parametrize(
    ("args", "kwargs", "problem"),
    [
        ((), {"offset": 0}, "read-file(): missing a required argument: 'path'."),
        ((0, "a", "b"), {}, "read-file(): too many positional arguments."),
        ((0, "a"), {"path": "b"}, "read-file(): multiple values for argument 'path'."),
    ],
)
def test_bind_explains_other_argument_mistakes(args, kwargs, problem):
    with pytest.raises(_rpc.ArgumentError) as caught:
        _proxies.ToolSpec("fs", "fs", READ_INFO).bind(args, kwargs)
    assert str(caught.value).startswith(problem + " It takes: path (string, required),")


def test_the_tool_doc_lists_each_argument_with_type_flag_and_description():
    assert _proxies.ToolSpec("fs", "fs", READ_INFO).doc() == "\n".join(
        [
            "Read a file.",
            "Second line.",
            "",
            "Args:",
            "    path (string, required): Where the file is",
            "    encoding (string, default 'utf-8')",
            "    limit (integer, optional)",
            "    mode (one of 'text', 'bytes', optional)",
            "    offset (integer, required)",
            "",
            "Server 'fs', tool 'read-file'. Raises runtime.ToolError when the tool fails.",
        ]
    )


def test_the_doc_of_a_tool_without_description_or_arguments_says_where_it_comes_from():
    assert _proxies.ToolSpec("fs", "fs", {"name": "ping"}).doc() == (
        "The 'ping' tool of the 'fs' MCP server.\n\n"
        "Server 'fs', tool 'ping'. Raises runtime.ToolError when the tool fails."
    )


def test_natural_prefers_structured_content():
    raw = {"content": [{"type": "text", "text": "ignored"}], "structuredContent": {"a": 1}}
    assert _proxies.natural(raw, "s", "t") == {"a": 1}


def test_natural_unwraps_a_wrapped_result_only_when_asked():
    raw = {"structuredContent": {"result": [1, 2]}}
    assert _proxies.natural(raw, "s", "t", wrapped=True) == [1, 2]
    assert _proxies.natural(raw, "s", "t") == {"result": [1, 2]}
    assert _proxies.natural({"structuredContent": {"result": 1, "x": 2}}, "s", "t", wrapped=True) == {
        "result": 1,
        "x": 2,
    }


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": [1, 2]}', {"a": [1, 2]}),
        (" [1, 2]\n", [1, 2]),
        ("plain words", "plain words"),
        ("[not json]", "[not json]"),
        ("42", "42"),
        ("", ""),
    ],
)
def test_natural_parses_json_text_and_keeps_other_text(text, value):
    assert _proxies.natural({"content": [{"type": "text", "text": text}]}, "s", "t") == value


def test_natural_of_several_items_is_a_list_and_of_none_is_none():
    raw = {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "[1]"}, "junk"]}
    assert _proxies.natural(raw, "s", "t") == ["a", [1]]
    assert _proxies.natural({"content": []}, "s", "t") is None
    assert _proxies.natural({}, "s", "t") is None


def test_natural_turns_png_image_content_into_an_image():
    value = _proxies.natural({"content": [{"type": "image", "data": b64(PNG), "mimeType": "image/png"}]}, "s", "t")
    assert isinstance(value, runtime.Image)
    assert (value.data, value.mime) == (PNG, "image/png")


def test_natural_keeps_image_content_that_is_not_a_known_image_as_media():
    value = _proxies.natural({"content": [{"type": "image", "data": b64(b"BMxx"), "mimeType": "image/bmp"}]}, "s", "t")
    assert type(value) is _proxies.Media
    assert (value.data, value.mime) == (b"BMxx", "image/bmp")
    assert repr(value) == "<Media image/bmp, 4 bytes>"


def test_natural_turns_audio_content_into_audio():
    value = _proxies.natural(
        {"content": [{"type": "audio", "data": b64(b"RIFFwav"), "mimeType": "audio/wav"}]}, "s", "t"
    )
    assert isinstance(value, _proxies.Audio)
    assert (value.data, value.mime) == (b"RIFFwav", "audio/wav")


def test_natural_reads_embedded_resources_and_passes_other_items_through():
    text = {"type": "resource", "resource": {"uri": "file:///a", "text": '{"k": true}'}}
    blob = {"type": "resource", "resource": {"uri": "file:///b", "blob": b64(b"\x00\x01")}}
    link = {"type": "resource_link", "uri": "file:///c", "name": "c"}
    values = _proxies.natural({"content": [text, blob, link]}, "s", "t")
    assert values == [{"k": True}, b"\x00\x01", link]  # contents are what they were, a link the dict it was...
    # ...and embedded contents know which resource they are, and can read it again.
    assert isinstance(values[0], runtime.EmbeddedDict) and isinstance(values[1], runtime.EmbeddedBytes)
    assert [(v.uri, v.mime_type, v.server) for v in values[:2]] == [("file:///a", None, "s"), ("file:///b", None, "s")]
    assert (repr(values[0]), repr(values[1])) == ("{'k': True}", "b'\\x00\\x01'")  # shown as the contents are
    plain = {"type": "resource", "resource": {"uri": "file:///e", "text": "hi", "mimeType": "text/markdown"}}
    listed = {"type": "resource", "resource": {"uri": "file:///f", "text": "[1, 2]"}}
    hi, numbers = _proxies.natural({"content": [plain, listed]}, "s", "t")
    assert (hi, type(hi), hi.mime_type, numbers, type(numbers)) == (
        "hi", runtime.EmbeddedText, "text/markdown", [1, 2], runtime.EmbeddedList
    )  # fmt: skip
    assert json.dumps([hi, numbers]) == '["hi", [1, 2]]'
    nameless = _proxies.natural({"content": [{"type": "resource", "resource": {"text": "x"}}]}, "s", "t")
    assert type(nameless) is str  # without a URI there is nothing to add
    assert isinstance(values[2], runtime.ResourceLink) and (values[2].uri, values[2].server) == ("file:///c", "s")
    assert repr(values[2]) == "ResourceLink('file:///c', server='s')"  # ...that knows where to read itself
    newer = {"type": "something_newer", "uri": "x:y"}
    passed = _proxies.natural({"content": [newer]}, "s", "t")
    assert passed == newer and type(passed) is dict
    assert _proxies.resource_value({"uri": "file:///d"}) == {"uri": "file:///d"}


def test_natural_raises_a_tool_error_with_the_servers_text():
    raw = {"isError": True, "content": [{"type": "text", "text": "no such file"}, {"type": "text", "text": "sorry"}]}
    with pytest.raises(_rpc.ToolError) as caught:
        _proxies.natural(raw, "fs", "read", wrapped=True)
    assert str(caught.value) == "no such file\nsorry"
    assert (caught.value.server, caught.value.tool) == ("fs", "read")


def test_natural_raises_a_tool_error_even_without_a_message():
    with pytest.raises(_rpc.ToolError, match=r"^read on fs failed without a message$"):
        _proxies.natural({"isError": True, "structuredContent": {"a": 1}}, "fs", "read")


def make_catalog() -> _proxies.ServerRegistry:
    cat = _proxies.ServerRegistry()
    servers: list[Any] = [
        {"name": "filesystem", "alias": "fs"},
        {"name": "github", "alias": "github"},
        {"alias": "x"},
        "junk",
    ]
    versions: dict[str, Any] = {"filesystem": 1, "github": "x"}
    cat.configure(servers, versions)
    return cat


def test_a_catalog_keeps_only_well_formed_servers_and_versions():
    cat = make_catalog()
    assert cat.names() == ["filesystem", "github"]
    assert cat.versions == {"filesystem": 1}


def test_resolve_finds_a_server_by_name_or_alias_and_suggests_close_names():
    cat = make_catalog()
    assert cat.resolve("fs")["name"] == "filesystem"
    assert cat.resolve("github")["name"] == "github"
    with pytest.raises(_rpc.ServerNotFound) as caught:
        cat.resolve("filesytem")
    assert str(caught.value) == (
        "no MCP server named 'filesytem'. Did you mean 'filesystem'? Configured servers: filesystem, github."
    )
    assert caught.value.details == {"suggestions": ["filesystem"]}
    assert caught.value.server == "filesytem"
    assert isinstance(caught.value, LookupError)


def test_resolve_without_servers_says_none_are_configured():
    with pytest.raises(
        _rpc.ServerNotFound, match=r"^no MCP server named 'x'\. Configured servers: none are configured\.$"
    ):
        _proxies.ServerRegistry().resolve("x")


def test_server_map_knows_names_and_aliases():
    servers = _proxies.ServerMap(make_catalog())
    assert "filesystem" in servers
    assert "fs" in servers
    assert "gitlab" not in servers
    assert servers.keys() == ["filesystem", "github"]
    assert list(servers) == ["filesystem", "github"]
    assert len(servers) == 2
    assert servers.get("gitlab", "default") == "default"
    assert servers["fs"] is servers["filesystem"]
    assert repr(servers) == "<MCP servers: filesystem, github>"
    assert repr(_proxies.ServerMap(_proxies.ServerRegistry())) == "<MCP servers: none configured>"


def test_server_proxy_repr_names_server_and_alias():
    proxy = make_catalog().proxy("fs")
    assert repr(proxy) == "<MCP server 'filesystem' (mcp_fs); dir() lists its tools, help() on one shows its docs>"


class FakeBridge:
    """An Rpc whose replies are computed synchronously from each request frame."""

    def __init__(self, answer: typing.Callable[[dict[str, Any]], Any]) -> None:
        self.rpc = _rpc.Rpc()
        self.frames: list[dict[str, Any]] = []
        self.answer = answer
        self.rpc.bind(self.send)
        self.rpc.open()  # as the worker does when a cell starts

    def send(self, frame: dict[str, Any]) -> None:
        self.frames.append(frame)
        self.rpc.deliver({"type": "reply", "id": frame["id"], "ok": True, "value": self.answer(frame)})


def test_server_proxy_lists_and_calls_tools_through_the_bridge(monkeypatch):
    infos = [READ_INFO, {"name": "list-dir", "alias": "list_dir", "inputSchema": {"properties": {}}}]

    def answer(frame: dict[str, Any]) -> Any:
        if frame["op"] in ("tools", "docs"):  # docs: a missing name is asked about (is it refused by policy?)
            return infos
        return {"content": [{"type": "text", "text": json.dumps(frame["arguments"])}]}

    bridge = FakeBridge(answer)
    monkeypatch.setattr(_rpc, "rpc", bridge.rpc)
    proxy = make_catalog().proxy("fs")
    assert dir(proxy) == ["list_dir", "read_file"]
    assert proxy["read-file"] is proxy.read_file
    assert inspect.signature(proxy.read_file) == _proxies.ToolSpec("filesystem", "fs", READ_INFO).signature
    assert proxy.read_file.__qualname__ == "mcp_fs.read_file"
    assert proxy.read_file.sync(1, "a.txt") == {"offset": 1, "path": "a.txt"}
    assert bridge.frames[-1] == {
        "type": "call",
        "id": 2,
        "op": "call",
        "server": "filesystem",
        "tool": "read-file",
        "arguments": {"offset": 1, "path": "a.txt"},
    }
    assert [f["op"] for f in bridge.frames] == ["tools", "call"]  # the tool list is fetched once

    with pytest.raises(_rpc.ToolNotFound) as caught:
        proxy.read_fil  # noqa: B018
    assert str(caught.value) == (
        "the 'filesystem' server has no tool 'read_fil'. Did you mean 'read_file', 'read-file'? "
        "Its tools: read_file, list_dir."
    )
    assert isinstance(caught.value, AttributeError)
    assert caught.value.details == {"suggestions": ["read_file", "read-file"]}


def test_a_bad_argument_raises_when_the_tool_is_called_not_when_awaited(monkeypatch):
    bridge = FakeBridge(lambda frame: [READ_INFO])
    monkeypatch.setattr(_rpc, "rpc", bridge.rpc)
    proxy = make_catalog().proxy("fs")
    with pytest.raises(_rpc.ArgumentError, match="did you mean 'path'"):
        proxy.read_file(0, pth="a")
    assert [f["op"] for f in bridge.frames] == ["tools"]


# ------------------------------------------------------------------------------ guest/mcp/_rpc.py


class Recorder:
    """A fake ``send``: records frames and lets a test thread wait until some have arrived."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        self.condition = threading.Condition()

    def __call__(self, frame: dict[str, Any]) -> None:
        json.dumps(frame)  # like the real channel: only JSON values can be sent
        with self.condition:
            self.frames.append(frame)
            self.condition.notify_all()

    def wait_for(self, count: int) -> list[dict[str, Any]]:
        with self.condition:
            assert self.condition.wait_for(lambda: len(self.frames) >= count, timeout=5), "no request was sent"
            return list(self.frames)


def answer_later(
    rpc: _rpc.Rpc, recorder: Recorder, count: int, reply: typing.Callable[[dict[str, Any]], dict[str, Any]]
):
    """Deliver replies to the first ``count`` requests, newest first, from another thread."""

    def run() -> None:
        for frame in reversed(recorder.wait_for(count)):
            rpc.deliver({"type": "reply", "id": frame["id"], **reply(frame)})

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def bound_rpc() -> tuple[_rpc.Rpc, Recorder]:
    rpc = _rpc.Rpc()
    recorder = Recorder()
    rpc.bind(recorder)
    rpc.open()
    return rpc, recorder


def test_request_blocks_until_its_reply_is_delivered_from_another_thread():
    rpc, recorder = bound_rpc()
    thread = answer_later(rpc, recorder, 1, lambda frame: {"ok": True, "value": frame["x"] * 2})
    assert rpc.request("echo", x=21) == 42
    thread.join(5)
    assert recorder.frames == [{"type": "call", "id": 1, "op": "echo", "x": 21}]
    assert rpc._pending == {}


def test_arequest_resolves_through_the_event_loop():
    rpc, recorder = bound_rpc()

    async def main() -> Any:
        answer_later(rpc, recorder, 1, lambda frame: {"ok": True, "value": [frame["op"], frame["x"]]})
        return await asyncio.wait_for(rpc.arequest("echo", x="hi"), timeout=5)

    assert asyncio.run(main()) == ["echo", "hi"]
    assert rpc._pending == {}


def test_a_hundred_gathered_requests_are_all_in_flight_and_each_gets_its_own_reply():
    rpc, recorder = bound_rpc()

    async def main() -> list[Any]:
        thread = answer_later(rpc, recorder, 100, lambda frame: {"ok": True, "value": frame["n"] * 10})
        values = await asyncio.wait_for(asyncio.gather(*(rpc.arequest("n", n=n) for n in range(100))), timeout=5)
        thread.join(5)
        return values

    assert asyncio.run(main()) == [n * 10 for n in range(100)]
    assert rpc._pending == {}


@pytest.mark.parametrize(
    ("kind", "cls", "also"),
    [
        ("ToolNotFound", _rpc.ToolNotFound, AttributeError),
        ("ArgumentError", _rpc.ArgumentError, TypeError),
        ("ToolTimeout", _rpc.ToolTimeout, TimeoutError),
        ("ServerNotFound", _rpc.ServerNotFound, LookupError),
        ("ToolError", _rpc.ToolError, _rpc.MCPError),
        ("PolicyError", _rpc.PolicyError, _rpc.MCPError),
        ("ServerUnavailable", _rpc.ServerUnavailable, _rpc.MCPError),
    ],
)
def test_an_error_reply_raises_the_class_it_names(kind, cls, also):
    rpc, recorder = bound_rpc()
    error = {"kind": kind, "message": "went wrong", "server": "fs", "tool": "read", "details": {"suggestions": ["x"]}}
    answer_later(rpc, recorder, 1, lambda frame: {"ok": False, "error": error})
    with pytest.raises(cls) as caught:
        rpc.request("call", server="fs", tool="read")
    assert type(caught.value) is cls
    assert isinstance(caught.value, also)
    assert isinstance(caught.value, _rpc.MCPError)
    assert str(caught.value) == "went wrong"
    assert (caught.value.server, caught.value.tool, caught.value.details) == ("fs", "read", {"suggestions": ["x"]})


def test_an_error_reply_of_an_unknown_kind_raises_mcp_error_with_sanitised_fields():
    rpc, recorder = bound_rpc()
    error = {"kind": "os.system", "message": "odd", "server": 3, "details": ["not", "a", "dict"]}
    answer_later(rpc, recorder, 1, lambda frame: {"ok": False, "error": error})
    with pytest.raises(_rpc.MCPError) as caught:
        rpc.request("call")
    assert type(caught.value) is _rpc.MCPError
    assert (str(caught.value), caught.value.server, caught.value.tool, caught.value.details) == ("odd", None, None, {})


def test_a_malformed_error_reply_raises_mcp_error():
    rpc, recorder = bound_rpc()
    answer_later(rpc, recorder, 1, lambda frame: {"ok": False, "error": "boom"})
    with pytest.raises(_rpc.MCPError, match=r"^the bridge sent a malformed error$"):
        rpc.request("call")


def test_replies_to_unknown_ids_are_ignored():
    rpc, recorder = bound_rpc()

    def run() -> None:
        (frame,) = recorder.wait_for(1)
        rpc.deliver({"id": frame["id"] + 1000, "ok": True, "value": "stray"})
        rpc.deliver({"id": str(frame["id"]), "ok": True, "value": "not an int id"})
        rpc.deliver({"ok": True, "value": "no id"})
        rpc.deliver({"id": frame["id"], "ok": True, "value": "mine"})
        rpc.deliver({"id": frame["id"], "ok": True, "value": "late duplicate"})

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert rpc.request("x") == "mine"
    thread.join(5)
    assert rpc._pending == {}


def test_a_value_that_cannot_be_sent_becomes_an_argument_error():
    rpc, _ = bound_rpc()
    with pytest.raises(_rpc.ArgumentError) as caught:
        rpc.request("call", server="fs", tool="write", arguments={"data": object()})
    assert str(caught.value).startswith("a value cannot be sent to the bridge (Object of type object is not JSON")
    assert str(caught.value).endswith("pass JSON values: str, int, float, bool, None, and lists or dicts of them")
    assert (caught.value.server, caught.value.tool) == ("fs", "write")
    assert rpc._pending == {}


def test_other_send_failures_propagate_and_leave_nothing_pending():
    rpc = _rpc.Rpc()
    rpc.open()

    def broken(frame: dict[str, Any]) -> None:
        raise BrokenPipeError("channel closed")

    rpc.bind(broken)
    with pytest.raises(BrokenPipeError):
        rpc.request("call")
    assert rpc._pending == {}


def test_calling_without_a_bound_channel_says_where_calls_work():
    message = "^calls to the bridge work only inside a run_python call of mcp-codemode$"
    with pytest.raises(_rpc.MCPError, match=message):
        _rpc.Rpc().request("call")
    with pytest.raises(_rpc.MCPError, match=message):
        asyncio.run(_rpc.Rpc().arequest("call"))


def test_closing_wakes_every_waiter_with_an_error_refuses_new_calls_and_ignores_late_replies():
    rpc, recorder = bound_rpc()
    answered: list[Any] = []

    def wait_in_a_thread() -> None:
        try:
            answered.append(rpc.request("slow-sync"))
        except _rpc.MCPError as exc:
            answered.append(exc)

    async def main() -> None:
        task = asyncio.ensure_future(rpc.arequest("slow"))
        thread = threading.Thread(target=wait_in_a_thread)
        thread.start()
        while len(rpc._pending) < 2:
            await asyncio.sleep(0.001)
        rpc.close()
        with pytest.raises(_rpc.MCPError, match="the cell returned before the bridge answered"):
            await task
        thread.join(10)
        assert isinstance(answered[0], _rpc.MCPError) and "only while a run_python call" in str(answered[0])
        rpc.deliver({"id": recorder.frames[0]["id"], "ok": True, "value": 1})  # too late: nobody waits
        assert rpc._pending == {}
        with pytest.raises(_rpc.MCPError, match="came from code its cell left running"):
            await rpc.arequest("after")
        assert len(recorder.frames) == 2, "a call after close must not be sent"
        rpc.open()
        assert len(rpc._pending) == 0

    asyncio.run(main())


# ------------------------------------------------------------------ bugs found by these tests, fixed


def test_a_property_named_arguments_next_to_a_non_identifier_property_still_gets_a_signature():
    info = {"name": "t", "inputSchema": {"properties": {"arguments": {"type": "object"}, "content-type": {}}}}
    spec = _proxies.ToolSpec("s", "s", info)
    assert spec.bind((), {"arguments": {"a": 1}}) == {"arguments": {"a": 1}}


def test_an_unknown_argument_without_a_close_name_reads_as_a_sentence_in_the_guest():
    spec = _proxies.ToolSpec("fs", "fs", {"name": "t", "inputSchema": {"properties": {"path": {"type": "string"}}}})
    with pytest.raises(_rpc.ArgumentError) as caught:
        spec.bind((), {"zzzz": 1})
    assert str(caught.value) == "t() got an unknown argument 'zzzz'. It takes: path (string)."


def test_a_missing_argument_whose_description_ends_a_sentence_has_one_full_stop():
    schema = {"type": "object", "properties": {"n": {"type": "integer", "description": "A count."}}, "required": ["n"]}
    assert (
        problem(schema, {}) == "read() is missing the required argument 'n': A count. It takes: n (integer, required)."
    )


def test_a_top_level_schema_error_does_not_say_argument_the_arguments():
    schema = {
        "type": "object",
        "properties": {"a": {}},
        "patternProperties": {"^p_": {}},
        "additionalProperties": False,
    }
    assert "argument the arguments" not in problem(schema, {"q": 1})


# ------------------------------------------------------------------------------- images inside a last value


class _Looks:
    """Has ``_repr_png_`` on its class: shown as an image wherever it sits in a value."""

    def _repr_png_(self) -> bytes:
        return PNG


class _Proxy:
    """Answers every attribute (as a server proxy does): it must not be asked while a value is searched."""

    asked: typing.ClassVar[list[str]] = []

    def __getattr__(self, name: str) -> Any:
        self.asked.append(name)
        return lambda: PNG


def test_the_images_inside_a_value_are_found_in_reading_order_each_once() -> None:
    first, second, third = runtime.Image(PNG), runtime.Image(PNG), _Looks()
    looping: list[Any] = [first]
    looping.append(looping)
    value = {"a": ["text", first, (second, {"deep": [third]})], "b": first, "c": looping, "d": _Proxy(), "e": None}
    assert runtime._images_in(value) == [first, second, third]
    assert _Proxy.asked == []  # judged by its type: a proxy's __getattr__ is never woken
    assert runtime._images_in(first) == []  # the value itself is judged by is_image_like, not here
    assert runtime._images_in("no images") == [] and runtime._images_in(b"\x89PNG") == []


def test_the_search_for_images_in_a_value_is_bounded_in_depth_and_items() -> None:
    image = runtime.Image(PNG)
    nested: Any = image
    for _ in range(runtime.SCAN_DEPTH + 1):
        nested = [nested]
    assert runtime._images_in(nested) == []  # one container too many
    assert runtime._images_in(nested[0]) == [image]  # SCAN_DEPTH containers deep
    assert runtime._images_in([0] * runtime.SCAN_ITEMS + [image]) == []
    assert runtime._images_in([0] * (runtime.SCAN_ITEMS - 1) + [image]) == [image]


def test_a_value_s_images_are_shown_within_the_caps_with_one_note_for_the_rest() -> None:
    display = runtime.Display(image_limit=1 << 20, max_images=2)
    display.add(runtime.Image(PNG), strict=True)  # runtime.show() in the cell: one of the two places is taken
    images = [runtime.Image(PNG) for _ in range(4)]
    display.add_found_in(["text", *images, {"again": images[0]}])
    assert display.images[1:] == images[:1]
    assert display.notes == ["3 images in the value were not shown: at most 2 images can be shown per call"]
    small = runtime.Display(image_limit=8, max_images=5)
    small.add_found_in((runtime.Image(PNG),))
    assert small.images == [] and small.notes[0].startswith("an image was not shown: the image is 24 bytes, over")
    whole = runtime.Display(image_limit=1 << 20, max_images=5)
    whole.add_found_in(images[0])
    assert whole.images == [images[0]] and whole.notes == []
