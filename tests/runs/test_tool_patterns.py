"""The one function that matches tool patterns (``Policy.tool_pattern``, policy/rules.py), as pure logic: every name
a tool goes by, for deny_tools, allow_tools and ask_tools alike (the calls themselves, on every path and in both
eras, are in tests/upstream/test_approvals_e2e.py)."""

from __future__ import annotations

import pytest

from mcp_codemode.policy.rules import Policy, ToolNames

# Each way one tool is named: (pattern, the ToolNames field it names the tool by). server-everything's get-env.
GET_ENV = ToolNames("every-thing", "every_thing", "get-env", "get_env", typed="get-env")
BY_EACH_NAME = [
    ("every-thing/get-env", "server name, tool name"),
    ("every_thing/get_env", "server alias, tool alias"),
    ("every-thing/get_env", "server name, tool alias"),
    ("every_thing/get-env", "server alias, tool name"),
    ("*/get_*", "a glob on the alias"),
    ("*/get-*", "a glob on the name"),
    ("every?thing/get[-_]env", "? and [..] globs"),
    ("get_env", "a bare alias: every server"),
    ("get-env", "a bare name: every server"),
]


@pytest.mark.parametrize(("pattern", "how"), BY_EACH_NAME)
def test_one_matching_function_names_a_tool_by_any_of_its_names_for_deny_allow_and_ask_alike(
    pattern: str, how: str
) -> None:
    """ask_tools once compared the real name and the typed name only, so ``*/get_*`` (the alias) never asked before
    ``get-env`` while deny_tools refused it (issue 30). One function, ``tool_pattern``, now serves every list: a
    pattern that names a tool one way names it for deny_tools, allow_tools and ask_tools alike."""
    assert Policy.tool_pattern(("other/*", pattern), GET_ENV) == pattern, how
    assert Policy(ask_tools=(pattern,)).approval_pattern(GET_ENV) == pattern, how
    denied = Policy(deny_tools=(pattern,)).name_refusal(GET_ENV)
    assert denied is not None and denied.rule == "deny_tools", how
    assert Policy(allow_tools=(pattern,)).name_refusal(GET_ENV, deny_only=False) is None, how
    listed = Policy(deny_tools=(pattern,)).tool_refusal("every-thing", "every_thing", "get-env", "get_env", None)
    assert listed is not None and listed.rule == "deny_tools", how


def test_the_typed_name_counts_too_and_a_pattern_naming_none_of_the_names_does_not_match() -> None:
    typed = ToolNames("everything", "everything", "get-env", "get_env", typed="printEnv")  # as typed, say an old name
    assert Policy.tool_pattern(("*/print*",), typed) == "*/print*"
    assert Policy(ask_tools=("*/print*",)).approval_pattern(typed) == "*/print*"
    assert ToolNames.typed_only("everything", "everything", "get_env").tools == ("get_env",)
    for pattern in ("everything/get_sum", "other/get_env", "*/Get_*", "get", "*/env", "everything/get_env/x"):
        assert Policy.tool_pattern((pattern,), GET_ENV) is None, pattern
        assert Policy(ask_tools=(pattern,)).approval_pattern(GET_ENV) is None, pattern
