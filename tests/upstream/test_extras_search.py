"""Prompts, resources and resource templates found by search: ranking, the policy, the cache, how they print.

Pure logic over real ``mcp`` types (the end-to-end tests with server-everything are in
tests/runs/test_resources_prompts.py and tests/upstream/test_search_e2e.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from mcp import types

from mcp_codemode.guest.mcp import runtime
from mcp_codemode.policy.rules import Policy
from mcp_codemode.upstream.model import ServerConfig
from mcp_codemode.upstream.tools.extras import MAX_PER_KIND, ExtrasIndex, limited
from mcp_codemode.upstream.tools.listing import ExtraHit, Extras
from mcp_codemode.upstream.tools.listing_cache import ListingCache

WEATHER = types.Prompt(
    name="forecast",
    description="Ask for the weather forecast of a city",
    arguments=[
        types.PromptArgument(name="state", description="The state or region"),
        types.PromptArgument(name="city", description="The city to forecast", required=True),
    ],
)
REVIEW = types.Prompt(name="code-review", description="Review a change for bugs")
HANDBOOK = types.Resource(
    name="handbook.md",
    uri="docs://team/handbook.md",
    description="The team's onboarding handbook",
    mime_type="text/markdown",
)
SECRET = types.Resource(name="salaries.csv", uri="docs://hr/salaries.csv", description="Salaries of the team")
TICKETS = types.ResourceTemplate(name="Ticket", uri_template="tracker://tickets/{id}", description="One ticket by id")
EXTRAS = Extras(prompts=(WEATHER, REVIEW), resources=(HANDBOOK, SECRET), templates=(TICKETS,))


def index(policy: Policy | None = None) -> ExtrasIndex:
    return ExtrasIndex([("docs", "docs", "Team documents", EXTRAS)], policy or Policy())


def test_a_prompt_is_found_by_its_description_and_arguments_with_the_call_that_uses_it() -> None:
    (hit, *_) = index().best("weather forecast for a city")
    assert (hit.kind, hit.server, hit.name, hit.arguments) == ("prompt", "docs", "forecast", ("city", "state"))
    # Required arguments first: the call shown is the one to write.
    assert hit.use() == "await runtime.get_prompt('docs', 'forecast', {'city': ..., 'state': ...})"
    assert index().best("review code")[0].use() == "await runtime.get_prompt('docs', 'code-review')"


def test_a_resource_is_found_by_its_uri_and_a_template_by_its_description() -> None:
    (hit, *_) = index().best("onboarding handbook")
    assert (hit.kind, hit.name, hit.uri) == ("resource", "handbook.md", "docs://team/handbook.md")
    assert hit.use() == "await runtime.read_resource('docs', 'docs://team/handbook.md')"
    assert index().best("salaries")[0].uri == "docs://hr/salaries.csv"  # the file name in the URI is searchable
    (ticket, *_) = index().best("ticket by id")
    assert (ticket.kind, ticket.uri) == ("template", "tracker://tickets/{id}")
    assert "tracker://tickets/{id}" in ticket.use()


def test_what_the_policy_refuses_is_never_a_hit() -> None:
    policy = Policy(deny_resources=("docs/docs://hr/*",), allow_prompts=("*/code-*",))
    assert index().best("salaries")[0].name == "salaries.csv"  # found without the policy...
    assert "salaries.csv" not in [hit.name for hit in index(policy).best("salaries")]  # ...and not with it
    assert index().best("weather forecast")[0].name == "forecast"
    assert "forecast" not in [hit.name for hit in index(policy).best("weather forecast")]
    assert index(policy).best("review code")[0].name == "code-review"


def test_at_most_three_hits_are_named_and_nothing_matches_nonsense() -> None:
    many = Extras(resources=tuple(types.Resource(name=f"note-{n}", uri=f"notes://{n}") for n in range(10)))
    found = ExtrasIndex([("notes", "notes", "", many)], Policy()).best("note")
    assert len(found) == 3
    assert index().best("xylophone quartet") == ()
    assert ExtrasIndex([], Policy()).best("anything") == ()


def test_a_server_is_searched_by_its_first_thousand_of_each_kind() -> None:
    assert len(limited(types.Resource(name=f"r{n}", uri=f"x://{n}") for n in range(MAX_PER_KIND + 5))) == MAX_PER_KIND


def test_the_reply_carries_what_code_needs() -> None:
    hit = ExtraHit(1.23456, "docs", "prompt", "forecast", "Ask for the weather", None, ("city",))
    assert hit.reply() == {
        "kind": "prompt",
        "server": "docs",
        "name": "forecast",
        "arguments": ["city"],
        "description": "Ask for the weather",
        "score": 1.235,
        "use": "await runtime.get_prompt('docs', 'forecast', {'city': ...})",
    }


def test_the_cache_keeps_the_extras_and_reads_a_file_without_them(tmp_path: Path) -> None:
    cache = ListingCache(tmp_path / "state", ttl=86400.0)
    config = ServerConfig(name="docs", alias="docs", transport="stdio", source="test", command="docs-server")
    tool = types.Tool(name="search", description="Search the docs", input_schema={"type": "object"})
    path = cache.store(config, [tool], extras=EXTRAS)
    loaded = cache.load(config)
    assert loaded is not None and loaded.extras == EXTRAS and loaded.tools == (tool,)
    # A file written before extras were kept (or for a server with none) has no such keys: no extras.
    document = json.loads(path.read_text())
    for key in ("prompts", "resources", "resource_templates"):
        del document[key]
    path.write_text(json.dumps(document))
    plain = cache.load(config)
    assert plain is not None and plain.extras == Extras() and not plain.extras
    # A damaged list is a damaged file: ignored whole, never half trusted.
    path.write_text(json.dumps({**document, "prompts": {"not": "a list"}}))
    assert cache.load(config) is None


def test_search_results_print_the_extras_after_the_tools() -> None:
    reply = {
        "query": "weather",
        "total": 0,
        "offset": 0,
        "results": [],
        "also": [ExtraHit(2.5, "docs", "prompt", "forecast", "Ask for the weather", None, ("city",)).reply()],
    }
    found = runtime.SearchResults.from_reply(reply, {"query": "weather", "offset": 0, "detail": "summary"})
    assert found.also[0]["name"] == "forecast"
    assert repr(found).splitlines() == [
        "No tools match 'weather'.",
        "also (prompts and resources):",
        "  2.50  prompt docs/forecast — Ask for the weather",
        "        await runtime.get_prompt('docs', 'forecast', {'city': ...})",
    ]
    assert runtime.SearchResults.from_reply({**reply, "also": None}, {"query": "w", "offset": 0,
                                            "detail": "summary"}).also == []  # fmt: skip
