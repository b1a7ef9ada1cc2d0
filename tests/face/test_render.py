"""Pure logic of the MCP face: argument checking, session keys, result rendering. No sandbox, no server."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import mcp_types as types
import pytest
import toon_format
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_codemode import __version__
from mcp_codemode.face.listing import run_python_tool
from mcp_codemode.face.placement import connection_key, place
from mcp_codemode.face.principals import PRINCIPAL_STATE_KEY
from mcp_codemode.face.render import NO_OUTPUT, cut_middle, error_result, fit_fields, render_result
from mcp_codemode.face.tool import MAX_CODE_CHARS, InvalidArguments, parse_arguments
from mcp_codemode.runs.bridge import RunRequest
from mcp_codemode.runs.summary import capability_summary
from mcp_codemode.sandbox.results import ExecutionResult, GuestError, OutputImage
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.settings import Settings
from mcp_codemode.settings_fields import OUTPUT_MODES, OutputMode
from tests.support.clients import LISTING_LIMIT

SETTINGS = Settings()
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def failure(message: str = "bad value", traceback: str = "") -> GuestError:
    return GuestError(
        "ValueError", message, traceback or f"Traceback (most recent call last):\nValueError: {message}\n"
    )


# --- parse_arguments ---------------------------------------------------------------------------------


def test_every_argument_is_read_into_the_request() -> None:
    request = parse_arguments(
        {"code": "print(1)", "servers": ["git", "time", "git"], "timeout": 45, "session": "a-1.b@c", "reset": True},
        SETTINGS,
    )
    assert request == RunRequest(code="print(1)", timeout=45, session="a-1.b@c", reset=True, servers=("git", "time"))


def test_only_code_is_required_and_the_rest_defaults() -> None:
    assert parse_arguments({"code": "1"}, SETTINGS) == RunRequest(code="1")


def test_a_whole_float_timeout_is_accepted_as_an_int() -> None:
    request = parse_arguments({"code": "1", "timeout": 3.0}, SETTINGS)
    assert request.timeout == 3 and isinstance(request.timeout, int)


def test_the_timeout_ceiling_follows_the_settings() -> None:
    roomy = Settings(max_timeout=600)
    assert parse_arguments({"code": "1", "timeout": 600}, roomy).timeout == 600
    with pytest.raises(InvalidArguments, match="from 1 to 600"):
        parse_arguments({"code": "1", "timeout": 601}, roomy)


def test_the_empty_values_a_strict_schema_client_must_send_mean_not_given() -> None:
    # OpenAI's strict mode makes every property required, so a client sends the optional ones "empty".
    sent: dict[str, Any] = {"code": "1", "session": "", "servers": [], "timeout": None, "reset": None}
    assert parse_arguments(sent, SETTINGS) == RunRequest(code="1")


def test_a_64_character_session_name_is_the_longest_allowed() -> None:
    assert parse_arguments({"code": "1", "session": "s" * 64}, SETTINGS).session == "s" * 64


BAD_ARGUMENTS = [
    pytest.param(None, "`code` is missing", id="no arguments"),
    pytest.param({}, "`code` is missing", id="empty mapping"),
    pytest.param({"code": ""}, "`code` is empty", id="empty code"),
    pytest.param({"code": "\n\t "}, "`code` is empty", id="blank code"),
    pytest.param({"code": 1}, "`code` is a number", id="code number"),
    pytest.param({"code": ["print(1)"]}, "`code` is a list", id="code list"),
    pytest.param({"code": "1", "servers": "git"}, "`servers` must be a list", id="servers string"),
    pytest.param({"code": "1", "servers": [1]}, "`servers` must be a list", id="servers of numbers"),
    pytest.param({"code": "1", "servers": [""]}, "`servers` must be a list", id="servers empty name"),
    pytest.param({"code": "1", "timeout": "abc"}, "`timeout`", id="timeout word"),
    pytest.param({"code": "1", "timeout": "30"}, "`timeout`", id="timeout string digits"),
    pytest.param({"code": "1", "timeout": 2.5}, "`timeout`", id="timeout fraction"),
    pytest.param({"code": "1", "timeout": 0}, "`timeout`", id="timeout zero"),
    pytest.param({"code": "1", "timeout": -5}, "`timeout`", id="timeout negative"),
    pytest.param({"code": "1", "timeout": 121}, "`timeout`", id="timeout above ceiling"),
    pytest.param({"code": "1", "timeout": True}, "`timeout`", id="timeout boolean"),
    pytest.param({"code": "1", "timeout": float("nan")}, "`timeout`", id="timeout nan"),
    pytest.param({"code": "1", "timeout": float("inf")}, "`timeout`", id="timeout infinity"),
    pytest.param({"code": "1", "session": "../x"}, "`session`", id="session path"),
    pytest.param({"code": "1", "session": " "}, "`session`", id="session blank"),
    pytest.param({"code": "1", "session": []}, "`session`", id="session empty list"),
    pytest.param({"code": "1", "servers": {}}, "`servers` must be a list", id="servers empty object"),
    pytest.param({"code": "1", "timeout": ""}, "`timeout`", id="timeout empty string"),
    pytest.param({"code": "1", "reset": ""}, "`reset`", id="reset empty string"),
    pytest.param({"code": "1", "session": "s" * 65}, "`session`", id="session 65 chars"),
    pytest.param({"code": "1", "session": "-leading-dash"}, "`session`", id="session leading dash"),
    pytest.param({"code": "1", "session": "a/b"}, "`session`", id="session slash"),
    pytest.param({"code": "1", "session": "caf\u00e9"}, "`session`", id="session non-ascii"),
    pytest.param({"code": "1", "session": "ok\n"}, "`session`", id="session trailing newline"),
    pytest.param({"code": "1", "session": 7}, "`session`", id="session number"),
    pytest.param({"code": "1", "reset": "yes"}, "`reset`", id="reset string"),
    pytest.param({"code": "1", "reset": 1}, "`reset`", id="reset number"),
    pytest.param({"code": "1", "bogus": 1}, "no argument 'bogus'", id="unknown argument"),
    pytest.param({"code": "1", "Code": "2"}, "no argument 'Code'", id="argument in wrong case"),
]


@pytest.mark.parametrize(("arguments", "names"), BAD_ARGUMENTS)
def test_a_bad_argument_is_refused_with_a_message_naming_it_and_an_example(
    arguments: dict[str, Any] | None, names: str
) -> None:
    with pytest.raises(InvalidArguments) as caught:
        parse_arguments(arguments, SETTINGS)
    message = str(caught.value)
    assert names in message
    assert "for example" in message or "it takes code (required)" in message


def test_code_over_the_size_limit_is_refused_saying_the_limit() -> None:
    with pytest.raises(InvalidArguments, match="the limit is 1,000,000"):
        parse_arguments({"code": "#" * (MAX_CODE_CHARS + 1)}, SETTINGS)


@given(st.dictionaries(st.text(max_size=8), st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=70))))
def test_any_argument_mapping_is_accepted_or_refused_with_invalid_arguments(arguments: dict[str, Any]) -> None:
    outcome: RunRequest | InvalidArguments
    try:
        outcome = parse_arguments(arguments, SETTINGS)
    except InvalidArguments as exc:
        outcome = exc
    if isinstance(outcome, InvalidArguments):
        assert str(outcome)
    else:
        assert outcome.code.strip()


# --- the listing ---------------------------------------------------------------------------------------


# What the SDK wraps the tool in on a 2026-07-28 answer, the larger of the two eras (the answers themselves are measured
# through the real client in test_server_stdio.py and test_server_http.py).
MODERN_ENVELOPE = json.dumps(
    {"_meta": {"io.modelcontextprotocol/serverInfo": {"name": "mcp-codemode", "version": __version__}}, "ttlMs": 0,
     "cacheScope": "private", "tools": [], "resultType": "complete"},
    separators=(",", ":"),
)  # fmt: skip


@pytest.mark.parametrize(("ceiling", "shared"), [(1, False), (120, False), (86_400, True)])
def test_the_listing_fits_in_the_reference_bridges_925_characters_whatever_the_settings(
    ceiling: int, shared: bool
) -> None:
    """The largest listing: the longest timeouts, and replicas that share sessions (the session header's name)."""
    token, url = ("t" * 32, "http://10.0.0.1:8765") if shared else ("", "")
    tool = run_python_tool(Settings(timeout=ceiling, max_timeout=ceiling, peer_token=token, peer_url=url))
    assert ("x-mcp-header" in tool.input_schema["properties"]["session"]) is shared
    dumped = json.dumps(tool.model_dump(by_alias=True, mode="json", exclude_none=True), separators=(",", ":"))
    assert len(MODERN_ENVELOPE) + len(dumped) <= LISTING_LIMIT, dumped
    assert tool.input_schema["required"] == ["code"]
    assert tool.input_schema["additionalProperties"] is False
    assert tool.input_schema["properties"]["timeout"]["maximum"] == ceiling


def test_the_listing_still_says_what_a_model_needs_to_start() -> None:
    """State per session and how to reset it, how to find and call tools, the timeout, and where the rest is."""
    tool = run_python_tool(Settings(timeout=30, max_timeout=120))
    description, properties = tool.description or "", tool.input_schema["properties"]
    for needed in ("persist", "session", "`reset`", "runtime.search_tool_docs(", "mcp_<server>.<tool>(",
                   "runtime.capability_summary()"):  # fmt: skip
        assert needed in description, (needed, description)
    assert properties["timeout"] == {"type": "integer", "maximum": 120, "default": 30, "description": "seconds"}
    assert set(properties) == {"code", "servers", "timeout", "session", "reset"}


def test_the_docs_show_the_listing_as_it_is() -> None:
    """docs/sandbox.md's "What the model sees" quotes the tool with the default settings: it must not drift."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "sandbox.md").read_text(encoding="utf-8")
    section = page.split("## What the model sees", 1)[1]
    quoted = json.loads(section.split("```json\n", 1)[1].split("```", 1)[0])
    tool = run_python_tool(Settings(timeout=30, max_timeout=120))
    assert quoted == tool.model_dump(by_alias=True, mode="json", exclude_none=True)


def test_what_left_the_listing_is_in_the_capability_summary() -> None:
    text = capability_summary(Settings(), "bubblewrap", {"time": "time"})
    for moved in (
        "No network", "Host files", "value of a last bare expression", "the middle is cut", "print only what you need",
        "Top-level await works", "Images:", "search_tool_docs", "mcp_<alias>",
    ):  # fmt: skip
        assert moved in text, (moved, text)


# --- session keys --------------------------------------------------------------------------------------


def fake_context(
    principal: str | None = None, session_id: str | None = None, headers: list[tuple[bytes, bytes]] | None = None
) -> Any:
    """Just the attributes ``place`` reads: the HTTP scope (state, headers) and the SDK connection's session id."""
    state = {PRINCIPAL_STATE_KEY: principal} if principal else {}
    request = SimpleNamespace(scope={"state": state, "headers": headers or []})
    connection = SimpleNamespace(session_id=session_id)
    return SimpleNamespace(request=request, session=SimpleNamespace(_connection=connection))


def named_by_header(name: str) -> list[tuple[bytes, bytes]]:
    return [(b"accept", b"application/json"), (b"mcp-codemode-session", name.encode())]


@pytest.mark.parametrize(
    ("transport", "principal", "session_id", "named", "header", "key", "label"),
    [
        ("stdio", None, None, None, None, "stdio:default", "default"),
        ("stdio", None, None, "work", None, "stdio:work", "work"),
        ("http", None, "abc123", None, None, str(connection_key("abc123")), "default"),
        ("http", "token1", "abc123", None, None, str(connection_key("abc123")), "default"),
        ("http", "token2", None, None, None, "p:token2:default", "default"),
        ("http", None, None, None, None, "p:local:default", "default"),
        ("http", None, "abc123", "work", None, "p:local:work", "work"),
        ("http", "token1", None, "work", None, "p:token1:work", "work"),
        ("http", "token2", "abc123", "work", None, "p:token2:work", "work"),
        ("http", None, None, None, "mine", "p:local:mine", "mine"),
        ("http", "token1", None, None, "mine", "p:token1:mine", "mine"),
        ("http", None, "abc123", None, "mine", "p:local:mine", "mine"),
        ("http", None, None, "work", "mine", "p:local:work", "work"),
        ("http", None, None, None, "", "p:local:default", "default"),
    ],
)
def test_sessions_are_placed_by_the_documented_rules(
    transport: Any,
    principal: str | None,
    session_id: str | None,
    named: str | None,
    header: str | None,
    key: str,
    label: str,
) -> None:
    headers = named_by_header(header) if header is not None else None
    where = place(fake_context(principal, session_id, headers), transport, named)
    assert (str(where.key), where.label, where.owner) == (key, label, principal or "local")  # the audit's form
    assert where.key == SessionKey.parse(key)
    assert where.per_connection is (where.key.kind == "connection")


def test_the_session_header_is_ignored_over_stdio() -> None:
    assert place(fake_context(headers=named_by_header("mine")), "stdio", None).key == SessionKey.stdio("default")


def test_two_principals_never_share_a_named_session() -> None:
    first = place(fake_context("token1"), "http", "shared").key
    second = place(fake_context("token2"), "http", "shared").key
    local = place(fake_context(None), "http", "shared").key
    by_header = place(fake_context("token2", headers=named_by_header("shared")), "http", None).key
    assert len({first, second, local}) == 3
    assert by_header == second


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        pytest.param(named_by_header("../etc"), "header '../etc' is not a valid session name", id="path"),
        pytest.param(named_by_header("a:b"), "header 'a:b' is not a valid session name", id="colon"),
        pytest.param(named_by_header("x" * 5000), "is not a valid session name", id="long"),
        pytest.param(
            [(b"mcp-codemode-session", b"one"), (b"Mcp-Codemode-Session", b"two")], "2 different", id="two values"
        ),
        pytest.param(
            [(b"mcp-codemode-session", str(n).encode() * 3000) for n in range(9)], "9 different", id="many long values"
        ),
    ],
)
def test_a_bad_session_header_is_refused_naming_the_header(headers: list[tuple[bytes, bytes]], says: str) -> None:
    with pytest.raises(InvalidArguments) as caught:
        place(fake_context(headers=headers), "http", None)
    message = str(caught.value)
    assert says in message and "Mcp-Codemode-Session" in message
    assert len(message) < 600


def test_the_same_session_header_sent_twice_is_one_name() -> None:
    twice = [(b"mcp-codemode-session", b"one"), (b"mcp-codemode-session", b"one")]
    assert place(fake_context(headers=twice), "http", None).key == SessionKey.principal("local", "one")


# --- cutting -------------------------------------------------------------------------------------------


def test_cut_middle_keeps_head_and_tail_and_says_how_much_went() -> None:
    cut = cut_middle("a" * 500 + "z" * 500, 100)
    head, marker, tail = cut.split("\n")
    assert head == "a" * 50 and tail == "z" * 50
    assert marker == "[... 900 characters cut ...]"


def test_cut_middle_leaves_short_text_alone() -> None:
    assert cut_middle("short", 5) == "short"


def test_fit_fields_cuts_the_flood_and_keeps_a_short_error_whole() -> None:
    fields = {"stdout": "x" * 10_000, "error": "ValueError: the real problem"}
    fitted, cut = fit_fields(fields, 1000)
    assert fitted["error"] == fields["error"]
    assert "characters cut" in fitted["stdout"]
    assert sum(len(value) for value in fitted.values()) <= 1000
    assert fitted["stdout"].count("x") == 10_000 - cut


def test_fit_fields_changes_nothing_under_budget() -> None:
    fields = {"stdout": "out", "stderr": "err"}
    assert fit_fields(fields, 100) == (fields, 0)


# --- rendering -----------------------------------------------------------------------------------------


def test_compact_text_reads_output_value_stderr_error_then_notice() -> None:
    result = ExecutionResult(
        "error",
        stdout="printed\n",
        value="'value'",
        stderr="warned\n",
        error=failure(),
        notice="Timed out after 1 s.",
    )
    rendered = render_result(result, "compact", 20_000, "default")
    assert text(rendered) == (
        "printed\n'value'\nstderr:\nwarned\nerror:\nTraceback (most recent call last):\nValueError: bad value\n"
        "[Timed out after 1 s.]"
    )
    assert rendered.is_error


def test_nothing_to_say_reads_no_output() -> None:
    rendered = render_result(ExecutionResult("ok"), "compact", 20_000, "default")
    assert text(rendered) == NO_OUTPUT
    assert rendered.is_error is False


@pytest.mark.parametrize(("status", "is_error"), [("ok", False), ("error", True), ("timeout", True), ("crashed", True)])
def test_is_error_is_set_for_every_status_but_ok(status: Any, is_error: bool) -> None:
    assert render_result(ExecutionResult(status), "compact", 20_000, "s").is_error is is_error


def test_toon_and_json_render_the_same_fields_as_documents() -> None:
    result = ExecutionResult("ok", stdout="hi\n", value="42")
    toon = text(render_result(result, "toon", 20_000, "s"))
    as_json = json.loads(text(render_result(result, "json", 20_000, "s")))
    assert toon.splitlines()[0] == "status: ok"
    assert as_json == {"status": "ok", "stdout": "hi\n", "value": "42"}


def test_structured_content_carries_status_session_and_counts() -> None:
    image = OutputImage("image/png", PNG)
    result = ExecutionResult(
        "crashed", stdout="o" * 50_000, duration=0.25, state_lost=True, notice="n", images=(image, image)
    )
    structured = render_result(result, "compact", 2000, "work").structured_content
    assert structured is not None
    assert structured["status"] == "crashed"
    assert structured["session"] == "work"
    assert structured["duration_ms"] == 250.0
    assert structured["state_lost"] is True
    assert structured["images"] == 2
    assert structured["characters_cut"] > 40_000
    assert structured["notice"] == "n"


TRACE = (
    'Traceback (most recent call last):\n  File "<cell 3>", line 1, in <module>\nZeroDivisionError: division by zero\n'
)


@pytest.mark.parametrize("mode", OUTPUT_MODES)
def test_structured_content_says_all_the_text_says_traceback_included(mode: OutputMode) -> None:
    result = ExecutionResult(
        "error",
        stdout="p" * 9_000 + "END-OF-STDOUT\n",
        stderr="warned\n",
        error=GuestError("ZeroDivisionError", "division by zero", TRACE),
        notice="Note: something the bridge says.",
        state_lost=True,
    )
    rendered = render_result(result, mode, 5_000, "work")
    structured = rendered.structured_content
    assert structured is not None
    fields = {name: structured[name] for name in ("stdout", "stderr", "notice")}
    fields["error"] = structured["error"]["traceback"]
    assert structured["error"]["type"] == "ZeroDivisionError"
    assert structured["error"]["message"] == "division by zero"
    assert structured["state_lost"] is True
    assert fields["error"] == TRACE.rstrip("\n")
    assert fields["stdout"].endswith("END-OF-STDOUT\n")  # the same middle cut as the text, not a shorter one
    assert sum(len(value) for value in fields.values()) <= 5_000
    if mode == "compact":
        parts = [fields["stdout"].rstrip("\n"), f"stderr:\n{fields['stderr'].rstrip()}", f"error:\n{fields['error']}"]
        assert text(rendered) == "\n".join([*parts, f"[{fields['notice']}]"])
    else:  # toon and json: the text is a document of exactly these fields
        decode = json.loads if mode == "json" else toon_format.decode
        assert decode(text(rendered)) == {"status": "error", **fields}


def test_structured_content_holds_what_the_text_holds_not_less() -> None:
    result = ExecutionResult("ok", stdout="s" * 10_000, value="v" * 3_000, stderr="e" * 6_000)  # 19,000: fits
    structured = render_result(result, "compact", 20_000, "default").structured_content
    assert structured is not None
    assert (structured["stdout"], structured["value"], structured["stderr"]) == (
        result.stdout,
        result.value,
        result.stderr,
    )
    assert "characters_cut" not in structured


def test_a_huge_error_message_is_bounded_in_structured_content() -> None:
    message = "m" * 100_000
    result = ExecutionResult("error", error=GuestError("ValueError", message, f"ValueError: {message}\n"))
    structured = render_result(result, "compact", 2_000, "s").structured_content
    assert structured is not None
    assert len(json.dumps(structured)) < 2 * 2_000 + 500
    assert "characters cut" in structured["error"]["message"]
    assert "characters cut" in structured["error"]["traceback"]


def test_images_follow_the_text_as_base64_image_content() -> None:
    result = ExecutionResult(
        "ok", images=(OutputImage("image/png", PNG), OutputImage("image/jpeg", b"\xff\xd8\xff\xe0"))
    )
    content = render_result(result, "compact", 20_000, "s").content
    assert isinstance(content[0], types.TextContent)
    images = [block for block in content[1:] if isinstance(block, types.ImageContent)]
    assert [image.mime_type for image in images] == ["image/png", "image/jpeg"]
    assert base64.b64decode(images[0].data) == PNG


@pytest.mark.parametrize("mode", OUTPUT_MODES)
@pytest.mark.parametrize("flood", ["x", '"', "\x00", "\\", "\n", "\u00e9", "\u2028"])
def test_text_never_exceeds_the_limit_even_when_escaping_grows_it(mode: OutputMode, flood: str) -> None:
    result = ExecutionResult(
        "error", stdout=flood * 100_000, stderr=flood * 9_000, error=failure(traceback=flood * 5000), notice="n" * 300
    )
    rendered = text(render_result(result, mode, 500, "s"))
    assert len(rendered) <= 500


@settings(max_examples=200, deadline=None)
@given(
    stdout=st.text(max_size=4000),
    stderr=st.text(max_size=2000),
    value=st.one_of(st.none(), st.text(max_size=2000)),
    notice=st.text(max_size=400),
    limit=st.integers(500, 3000),
    mode=st.sampled_from(OUTPUT_MODES),
)
def test_any_result_fits_its_limit_in_every_mode(
    stdout: str, stderr: str, value: str | None, notice: str, limit: int, mode: OutputMode
) -> None:
    result = ExecutionResult("ok", stdout=stdout, stderr=stderr, value=value, notice=notice)
    rendered = text(render_result(result, mode, limit, "s"))
    assert len(rendered) <= limit
    if len(stdout) + len(stderr) + len(value or "") + len(notice) < limit - 400 and mode == "compact" and stdout:
        assert stdout.rstrip("\n") in rendered


def test_an_error_result_is_a_refusal_the_model_can_read() -> None:
    refused = error_result("`timeout` must be a whole number")
    assert refused.is_error
    assert text(refused) == "`timeout` must be a whole number"
    assert cast(dict[str, Any], refused.structured_content)["status"] == "refused"
