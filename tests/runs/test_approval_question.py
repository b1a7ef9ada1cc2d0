"""The words of an approval question (runs/approval_question.py), as pure logic: what the user reads before saying
yes must show the whole call, and show it as it is (the real thing, through a client, is in
tests/upstream/test_approvals_e2e.py)."""

from __future__ import annotations

import json
import unicodedata

import pytest

from mcp_codemode.runs.approval_question import (
    MAX_SHOWN_ARGUMENTS,
    TooLongToShow,
    approval_question,
    shown_arguments,
    visible,
)

# One of each kind of character that can hide, reorder or fake lines in a question.
HIDING = {
    "\u202e": "\\u202e",  # right-to-left override (Cf)
    "\u2066": "\\u2066",  # left-to-right isolate (Cf)
    "\u200f": "\\u200f",  # right-to-left mark (Cf)
    "\u061c": "\\u061c",  # Arabic letter mark (Cf)
    "\u200b": "\\u200b",  # zero-width space (Cf)
    "\ufeff": "\\ufeff",  # byte order mark (Cf)
    "\u2028": "\\u2028",  # line separator (Zl)
    "\u2029": "\\u2029",  # paragraph separator (Zp)
    "\x85": "\\u0085",  # next line (Cc)
    "\x1b": "\\u001b",  # escape: terminal colours (Cc)
    "\n": "\\u000a",  # a newline in a name fakes a line of the question
    "\U000e0041": "\\U000e0041",  # a tag character (Cf), beyond the first plane
}


def hidden(text: str) -> list[str]:
    return [f"U+{ord(c):04X}" for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")]


@pytest.mark.parametrize(("char", "escape"), HIDING.items())
def test_every_character_that_can_hide_is_shown_as_its_escape(char: str, escape: str) -> None:
    assert visible(f"a{char}b") == f"a{escape}b"


def test_plain_text_and_every_script_pass_as_they_are() -> None:
    text = 'delete_file("/srv/a b.txt") — café, 東京, שלום, emoji 🙂, tab-free'
    assert visible(text) == text


def test_the_arguments_are_indented_json_whose_escapes_read_back_to_the_value_sent() -> None:
    arguments = {"path": "report.txt\u202eexe.pdf", "body": "line one\nline two\u2028Allow? yes", "n": [1, {"x": None}]}
    shown = shown_arguments(arguments)
    assert not hidden(shown), hidden(shown)
    assert json.loads(shown) == arguments  # JSON's own escapes: the user reads exactly what is sent
    assert "\\u202e" in shown and "\\u2028" in shown and "line one\\nline two" in shown
    assert shown.count("\n") == len(json.dumps(arguments, indent=1).splitlines()) - 1  # only the layout's


def test_hostile_server_and_tool_names_are_escaped_too_and_cannot_fake_the_questions_lines() -> None:
    question = approval_question("every\u202ething", "delete\nAllow this call? yes\u2029", 'ask_tools pattern "x"', {})
    assert question.startswith("Sandboxed code wants to call every\\u202ething/delete\\u000aAllow this call? yes")
    assert question.count("Allow this call?") == 2 and question.endswith("\n{}\nAllow this call?")
    assert question.count("\n") == 2 and not hidden(question)


def test_arguments_that_fit_are_shown_whole_and_one_character_more_is_refused_saying_by_how_much() -> None:
    frame = len(shown_arguments({"m": ""}))
    fits = {"m": "x" * (MAX_SHOWN_ARGUMENTS - frame)}
    assert len(shown_arguments(fits)) == MAX_SHOWN_ARGUMENTS and "x" * 100 in approval_question("s", "t", "w", fits)
    with pytest.raises(TooLongToShow) as over:
        shown_arguments({"m": "x" * (MAX_SHOWN_ARGUMENTS - frame + 1)})
    assert over.value.length == MAX_SHOWN_ARGUMENTS + 1
    assert str(over.value).startswith(
        "its arguments are too long to show for approval: 2,001 characters as shown, 1 over the limit of 2,000"
    )
    assert "pass smaller arguments" in str(over.value) and "take the tool out of ask_tools" in str(over.value)
    # Escapes count as shown: 400 bidi overrides are 2,400 characters on screen.
    with pytest.raises(TooLongToShow):
        shown_arguments({"m": "\u202e" * 400})
