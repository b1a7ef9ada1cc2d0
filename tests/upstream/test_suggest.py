"""The host's one "did you mean": each caller's wording, byte for byte as users read it before it was shared."""

from __future__ import annotations

import pytest

from mcp_codemode.upstream.errors import UnknownServer
from mcp_codemode.upstream.suggest import close_matches, did_you_mean
from mcp_codemode.upstream.tools.validate import ArgumentProblem, check_arguments


def test_unknown_server_joins_its_matches_with_or() -> None:
    message = str(UnknownServer("tme", ["time", "timer", "github"]))
    assert (
        message
        == "no upstream MCP server named 'tme'; did you mean 'time' or 'timer'? (configured: github, time, timer)"
    )


def test_unknown_server_without_a_match_offers_the_listing_only() -> None:
    assert str(UnknownServer("zzz", [])) == "no upstream MCP server named 'zzz' (configured: none)"


def test_unknown_argument_without_a_match_ends_the_sentence() -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    with pytest.raises(ArgumentProblem) as caught:
        check_arguments("read", schema, {"qqqqq": 1})
    assert str(caught.value).startswith("read() got an unknown argument 'qqqqq'. ")


def test_the_relay_wording_lists_matches_with_commas() -> None:
    close = close_matches("read_fil", ["read_file", "read-file", "write"])
    assert close == ["read_file", "read-file"]
    assert did_you_mean(close) == " Did you mean 'read_file', 'read-file'?"
    assert did_you_mean([]) == ""
