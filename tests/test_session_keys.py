"""A session key's string form is what the bridge always wrote, and reads back as the same key; what is no key's
form, or a key whose parts could not be told apart again, is refused. Pure logic."""

from __future__ import annotations

import pytest

from mcp_codemode.cluster.naming import ClaimKey
from mcp_codemode.session_keys import BadSessionKey, SessionKey

FORMS = [
    (SessionKey.stdio("default"), "stdio:default"),
    (SessionKey.principal("t-0123456789ab", "analysis-1"), "p:t-0123456789ab:analysis-1"),
    (SessionKey.principal("local", "x.y@z-1_2"), "p:local:x.y@z-1_2"),
    (SessionKey.connection("s-0123456789abcdef"), "h:s-0123456789abcdef"),
    (SessionKey.cli("default"), "cli:default"),
    (SessionKey.cli("a:b"), "cli:a:b"),  # `run --session a:b` always worked: only an owner is delimited
    (SessionKey.principal("local", "a:b"), "p:local:a:b"),
]


@pytest.mark.parametrize(("key", "form"), FORMS, ids=[form for _, form in FORMS])
def test_the_string_form_is_the_one_audit_lines_and_forwarded_calls_carry_and_reads_back(
    key: SessionKey, form: str
) -> None:
    assert str(key) == form
    assert SessionKey.parse(form) == key
    assert hash(SessionKey.parse(form)) == hash(key)


def test_keys_of_different_kinds_or_owners_never_meet() -> None:
    keys = {
        SessionKey.stdio("work"),
        SessionKey.cli("work"),
        SessionKey.principal("local", "work"),
        SessionKey.principal("t-1", "work"),
        SessionKey.connection("work"),
    }
    assert len(keys) == 5
    assert len({str(key) for key in keys}) == 5


@pytest.mark.parametrize(
    "text",
    [
        "",
        "default",  # a bare name: no kind
        ":default",
        "x:default",  # no such kind
        "P:local:a",  # kinds are exact
        "stdio",
        "stdio:",
        "h:",
        "p:",
        "p:local",  # no name
        "p:local:",
        "p::name",  # no owner
    ],
)
def test_what_is_no_keys_form_is_refused(text: str) -> None:
    with pytest.raises(BadSessionKey):
        SessionKey.parse(text)


@pytest.mark.parametrize(
    "build",
    [
        lambda: SessionKey.principal("a:b", "c"),  # "p:a:b:c" would read back as owner "a", name "b:c"
        lambda: SessionKey.principal("", "c"),
        lambda: SessionKey.principal("local", ""),
        lambda: SessionKey.stdio(""),
        lambda: SessionKey("stdio", "a", owner="local"),  # only a principal's key has an owner
        lambda: SessionKey("other", "a"),  # type: ignore[arg-type]
    ],
)
def test_a_key_whose_parts_could_not_be_told_apart_again_is_refused(build: object) -> None:
    with pytest.raises(BadSessionKey):
        build()  # type: ignore[operator]


def test_a_bad_key_is_a_deliberate_error_with_the_form_it_wanted() -> None:
    with pytest.raises(BadSessionKey, match="p:OWNER:NAME"):
        SessionKey.parse("p:local")
    assert issubclass(BadSessionKey, ValueError)


def test_the_cluster_names_a_shared_session_by_its_owner_and_name_only() -> None:
    key = SessionKey.principal("t-0123456789ab", "analysis")
    assert ClaimKey.of(key) == ClaimKey("t-0123456789ab", "analysis")
    with pytest.raises(BadSessionKey, match="only a principal's session"):
        ClaimKey.of(SessionKey.connection("s-0123456789abcdef"))  # never shared: its MCP session lives on one replica
