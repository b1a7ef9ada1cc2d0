"""The ranker on its own: word splitting, stems, and what each kind of query finds in the real catalog.

The catalog is the committed tools/list of the seven reference servers (benchmarks/corpus/tools), so these
tests read the same names and descriptions an agent would search. benchmarks/search.py measures quality on a
labelled query set; these cases pin one behaviour each, so a regression names what broke.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import types

from mcp_codemode.upstream.tools.ranking import Document, Entry, Ranker
from mcp_codemode.upstream.tools.words import query_terms, split_words, stem, terms

CORPUS = Path(__file__).resolve().parents[2] / "benchmarks" / "corpus" / "tools"


def _real_entries() -> list[Entry]:
    entries = []
    for path in sorted(CORPUS.glob("*.json")):
        for tool in json.loads(path.read_text()):
            entries.append(Entry(path.stem, types.Tool.model_validate(tool)))
    return entries


ENTRIES = _real_entries()
RANKER = Ranker(ENTRIES)


def top(query: str, n: int = 1) -> list[str]:
    return [f"{ENTRIES[index].server}/{ENTRIES[index].tool.name}" for _, index in RANKER.search(query)[:n]]


def test_the_corpus_is_the_seven_reference_servers() -> None:
    servers = {entry.server for entry in ENTRIES}
    assert servers == {"everything", "filesystem", "memory", "sequential-thinking", "time", "git", "fetch"}
    assert len(ENTRIES) >= 50


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("list_directory_with_sizes", ["list", "directory", "with", "sizes"]),
        ("getTinyImage", ["get", "tiny", "image"]),
        ("HTTPServerError", ["http", "server", "error"]),
        ("get-resource-links", ["get", "resource", "links"]),
        ("git.log", ["git", "log"]),
        ("mcp__github__create_issue", ["mcp", "github", "create", "issue"]),
        ("", []),
    ],
)
def test_split_words(text: str, words: list[str]) -> None:
    assert split_words(text) == words


@pytest.mark.parametrize(
    ("word", "stemmed"),
    [
        ("files", "file"),
        ("directories", "directory"),
        ("branches", "branch"),
        ("boxes", "box"),
        ("status", "status"),
        ("address", "address"),
        ("analysis", "analysis"),
        ("ls", "ls"),
        ("entities", "entity"),
    ],
)
def test_stem_only_undoes_plurals(word: str, stemmed: str) -> None:
    assert stem(word) == stemmed


def test_stop_words_and_urls() -> None:
    assert terms("what is the time in Tokyo") == ["time", "tokyo"]
    assert query_terms("read https://example.com/a/b?c=d please") == ["read", "url"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("read_file", "filesystem/read_file"),  # the exact name
        ("listDirectory", "filesystem/list_directory"),  # camelCase of a snake_case name
        ("list-directory", "filesystem/list_directory"),  # kebab-case
        ("filesystem.move_file", "filesystem/move_file"),  # server.tool
        ("mkdir", "filesystem/create_directory"),  # a shell command for a phrase
        ("rename a file", "filesystem/move_file"),  # a synonym the description uses
        ("serach files", "filesystem/search_files"),  # a transposition
        ("git log", "git/git_log"),  # the server's name and a tool's
        ("sequential thinking", "sequential-thinking/sequentialthinking"),  # a run-together name
        ("read several files", "filesystem/read_multiple_files"),  # a plural, and a synonym of "multiple"
        ("print the value of DATABASE_URL", "everything/get-env"),  # a variable's name: the environment
        ("scrape a web page", "fetch/fetch"),  # general words for what tools call fetch, zip, tree, simulated
        ("shrink a file", "everything/gzip-file-as-resource"),
        ("outline of the folders", "filesystem/directory_tree"),
        ("fake logging", "everything/toggle-simulated-logging"),
        ("Asia/Tokyo to Europe/Paris at 9:00", "time/convert_time"),  # two zones: a conversion
    ],
)
def test_each_kind_of_query_finds_its_tool_first(query: str, expected: str) -> None:
    assert top(query) == [expected], f"{query!r} ranked {top(query, 5)}"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("3pm in New York", ["time", "newyork", "timezone"]),  # a place stays one word and adds "timezone"
        ("noon in sao paulo and Lima", ["noon", "saopaulo", "timezone", "lima", "timezone", "convert"]),
        ("lima beans", ["lima", "bean"]),  # a short name is a place only when written as one
        ("plan the Christmas party", ["plan", "christma", "party"]),  # the database's ordinary words are not
        ("read src/paris/app.py", ["read", "file"]),  # a path is a file, whatever its folders are called
        ("is OPENAI_API_KEY set", ["environment", "variable", "set"]),
        ("echo $HOME and ${PATH}", ["echo", "environment", "variable", "environment", "variable"]),
        ("list HTTP headers", ["list", "http", "header"]),  # capitals without an underscore are a word
        ("noon in Lisbon, what is it in Denver", ["noon", "lisbon", "timezone", "denver", "timezone", "convert"]),
        ("Asia/Tokyo to Europe/Paris", ["timezone", "timezone", "convert"]),  # two places or zones: a conversion
        ("the timezone of Tokyo", ["timezone", "tokyo", "timezone"]),  # the word itself is no second place
        ("diff HEAD~3..HEAD", ["diff", "commit"]),  # git's names of commits: HEAD, ancestors, ranges, hashes
        ("show 3f2a9c1e", ["show", "commit"]),
        ("send a HEAD request", ["send", "head", "request"]),  # HEAD alone is a word (HTTP's HEAD)
        ("uuid 550e8400-e29b", ["uuid", "550e8400", "e29b"]),  # hex in another shape is not a commit
        ("color #ff00aa1", ["color", "ff00aa1"]),
    ],
)
def test_places_variable_names_and_commits_in_a_query_are_data(query: str, expected: list[str]) -> None:
    assert query_terms(query) == expected


@pytest.mark.parametrize("query", ["when is lunch in Nairobi", "Chicago to Paris, 3pm"])
def test_a_place_in_the_query_points_at_the_time_tools(query: str) -> None:
    assert top(query)[0] in ("time/get_current_time", "time/convert_time"), top(query, 3)


def test_a_url_in_the_query_points_at_a_url_tool() -> None:
    assert "fetch/fetch" in top("get https://example.com/page.html", 2)


def test_hits_are_ranked_and_cut_at_a_floor() -> None:
    hits = RANKER.search("remove a relation")
    scores = [score for score, _ in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(score >= scores[0] * 0.1 for score in scores)
    assert top("remove a relation") == ["memory/delete_relations"]
    assert len({index for _, index in hits}) == len(hits)


def test_queries_without_content_find_nothing() -> None:
    assert RANKER.search("") == []
    assert RANKER.search("the of and what is") == []
    assert RANKER.search("zzqxv") == []
    assert Ranker([]).search("read a file") == []


def test_the_same_catalog_ranks_the_same_way_every_time() -> None:
    again = Ranker(_real_entries())
    for query in ("list files", "time", "create", "memory graph"):
        assert again.search(query) == RANKER.search(query)


def test_ties_keep_listing_order() -> None:
    tool = {"inputSchema": {"type": "object"}, "description": "Does a thing."}
    entries = [Entry("s", types.Tool.model_validate({**tool, "name": name})) for name in ("thing_two", "thing_one")]
    hits = Ranker(entries).search("thing")
    assert [index for _, index in hits] == [0, 1] and hits[0][0] == hits[1][0]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_a_query(query: str) -> None:
    hits = RANKER.search(query)
    assert all(0 <= index < len(ENTRIES) and score > 0 for score, index in hits)
    assert [score for score, _ in hits] == sorted((score for score, _ in hits), reverse=True)


def _tool(name: str, description: str = "", properties: dict[str, Any] | None = None) -> types.Tool:
    schema = {"type": "object", "properties": properties or {}}
    return types.Tool.model_validate({"name": name, "description": description, "inputSchema": schema})


def test_parameter_names_and_descriptions_are_searched() -> None:
    entries = [
        Entry("fs", _tool("find", "Look for paths.", {"max_depth": {"type": "integer", "description": "How deep"}})),
        Entry("fs", _tool("other", "Something else.")),
    ]
    ranker = Ranker(entries)
    assert [index for _, index in ranker.search("depth")] == [0]
    assert [index for _, index in ranker.search("how deep")] == [0]


def test_a_server_description_places_its_tools_but_a_tool_match_weighs_more() -> None:
    entries = [
        Entry("notes", _tool("append", "Add a line."), "Personal github notes"),
        Entry("github", _tool("create_issue", "Open an issue.")),
    ]
    assert [index for _, index in Ranker(entries).search("github")] == [1, 0]  # the server's name, then its notes
    assert [index for _, index in Ranker(entries).search("github issue")] == [1]  # a tool's own words decide


def test_a_word_finds_the_longer_names_it_begins() -> None:
    entries = [Entry("ui", _tool("screenshot", "Capture the display.")), Entry("ui", _tool("click", "Press."))]
    assert [index for _, index in Ranker(entries).search("screen")] == [0]


def test_a_named_server_prefix_wins_over_an_equal_tool_elsewhere() -> None:
    entries = [
        Entry("jira", _tool("create_issue", "Open an issue.")),
        Entry("github", _tool("create_issue", "Open an issue.")),
    ]
    assert [index for _, index in Ranker(entries).search("github: create an issue")][:1] == [1]


def test_documents_other_than_tools_rank_the_same_way() -> None:
    """What a registry's servers will be: a name, a description, what they need (parameters) and a namespace."""
    documents = [
        Document("io.example/postgres", "Query and manage a PostgreSQL database.",
                 parameters=(("DATABASE_URL", "Connection string"),), group="io.example"),
        Document("io.example/slack", "Read and send Slack messages.",
                 parameters=(("SLACK_TOKEN", "Bot token"),), group="io.example"),
        Document("org.other/postgres-lite", "A read-only SQL client.", group="org.other"),
    ]  # fmt: skip
    ranker = Ranker(documents)
    assert [index for _, index in ranker.search("postgres database")][:1] == [0]
    assert [index for _, index in ranker.search("send a chat mesage")][:1] == [1]  # a synonym and a typo
    assert [index for _, index in ranker.search("bot token")] == [1]  # what it needs is searched too
    assert [index for _, index in ranker.search("org.other: postgres")][:1] == [2]  # the named group wins
    assert ranker.search("postgres") == Ranker([*documents]).search("postgres")
