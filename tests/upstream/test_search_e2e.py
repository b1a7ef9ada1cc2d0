"""Tool search over every configured server, and the catalog cache that makes it cheap, end to end.

Real parts only: the ``Bridge`` on bubblewrap with sandboxed code sending the ``search`` request exactly as the
guest runtime does (through its RPC channel, so hostile requests can be forged too), real ``mcp-codemode``
processes for the command line, and real MCP servers: the reference servers of tests/support/upstreams.py and a tiny
SDK server (``NAMED``) whose tools are named in a file, which also counts its starts in a marker file.

Each test has its own state directory, so no cache leaks from one test into another.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from mcp_codemode.runs.bridge import Bridge
from mcp_codemode.upstream.model import Discovery, ServerConfig
from mcp_codemode.upstream.tools.directory import ToolDirectory
from mcp_codemode.upstream.tools.listing_cache import ListingCache
from tests.support import upstreams
from tests.support.backends import sandbox_settings
from tests.support.cells import explain, poll, private_state_dir, reported, run
from tests.support.cli_here import cli_here
from tests.support.clients import clean_environ, require_bubblewrap
from tests.support.inspector import BRIDGE
from tests.support.patience import patient
from tests.support.upstreams import GROWER

pytestmark = pytest.mark.backend

T = TypeVar("T")
DEADLINE = patient(60.0)  # bound on polling for a background listing: a hang fails the test instead of the run
CLI_DEADLINE = patient(120.0)

# A server whose tools are named by the words of a file (so its listing can change while its configuration
# stays the same) and which appends a line to a marker file on every start.
NAMED = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from mcp.server.mcpserver import MCPServer

    marker, words = Path(sys.argv[1]), Path(sys.argv[2])
    with marker.open("a") as log:
        log.write("started\\n")
    server = MCPServer("named")

    def make(word):
        def tool() -> str:
            return word
        return tool

    for word in words.read_text().split():
        server.add_tool(make(word), name=f"{word}_tool", description=f"Returns the word {word}, spelt out.")
    server.run()
    """
)


def asyncio_run(body: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(body)


@dataclasses.dataclass
class Named:
    """One NAMED server: its config, the file of its tool names and its start marker."""

    config: ServerConfig
    words: Path
    marker: Path

    def starts(self) -> int:
        return len(self.marker.read_text().splitlines()) if self.marker.exists() else 0


def named(folder: Path, name: str, *words: str, variant: str = "") -> Named:
    script = folder / "named.py"
    if not script.exists():
        script.write_text(NAMED)
    words_file = folder / f"{name}{variant}.words"
    words_file.write_text(" ".join(words))
    marker = folder / f"{name}.starts"
    config = ServerConfig(
        name=name,
        alias=name.replace("-", "_"),
        transport="stdio",
        source="tests/upstream/test_search_e2e.py",
        command=sys.executable,
        args=(str(script), str(marker), str(words_file)),
    )
    return Named(config, words_file, marker)


def broken(secret: str) -> ServerConfig:
    """A server that prints a secret from its env to stderr and exits: it must be reported without the secret."""
    return ServerConfig(
        name="broken",
        alias="broken",
        transport="stdio",
        source="tests/upstream/test_search_e2e.py",
        command="/bin/sh",
        args=("-c", 'echo "cannot start with token $BROKEN_TOKEN" >&2; exit 3'),
        env={"BROKEN_TOKEN": secret},
    )


def search_code(**params: Any) -> str:
    """Guest code sending one raw ``search`` request (as the runtime does) and reporting the reply or the refusal."""
    return f"""
    from mcp._rpc import rpc
    try:
        report(["ok", rpc.request("search", **{params!r})])
    except runtime.MCPError as exc:
        report([type(exc).__name__, exc.message])
    """


async def search(bridge: Bridge, key: str = "search", **params: Any) -> dict[str, Any]:
    kind, value = reported(await run(bridge, search_code(**params), key))
    assert kind == "ok", value
    reply: dict[str, Any] = value
    return reply


def found(reply: dict[str, Any]) -> list[tuple[str, str]]:
    return [(hit["server"], hit["tool"]) for hit in reply["results"]]


def write_config(path: Path, *servers: ServerConfig) -> Path:
    entries: dict[str, dict[str, Any]] = {}
    for server in servers:
        entry: dict[str, Any] = {"command": server.command, "args": list(server.args)}
        if server.env:
            entry["env"] = dict(server.env)
        entries[server.name] = entry
    path.write_text(json.dumps({"mcpServers": entries}, indent=2))
    return path


def cli(
    state: Path, *args: str, expect: int = 0, process: bool = False, **env: str
) -> subprocess.CompletedProcess[str]:
    """``mcp-codemode ARGS`` with ``state`` as its state directory: in this process (tests/support/cli_here.py),
    or with ``process`` in one of its own, as a user starts it."""
    environ = clean_environ(MCP_BRIDGE_STATE_DIR=str(state), **env)
    if process:
        done = subprocess.run(
            [str(BRIDGE), *args], capture_output=True, text=True, timeout=CLI_DEADLINE, env=environ, check=False
        )
    else:
        done = cli_here(environ, *args)
    assert done.returncode == expect, f"status {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done


@pytest.fixture(scope="module", autouse=True)
def _bubblewrap_usable() -> None:
    require_bubblewrap()


# ------------------------------------------------------------------------------------ the first search


def test_a_first_search_without_a_cache_lists_servers_as_pending_and_the_next_one_finds_them() -> None:
    async def body() -> None:
        with private_state_dir() as state:
            servers = (upstreams.time(), upstreams.everything())
            settings = sandbox_settings(runtime="bubblewrap", state_dir=state, search_wait=0)
            async with Bridge(settings, Discovery(servers=servers)) as bridge:
                first = await search(bridge, query="current time in a time zone")
                assert first == {
                    "query": "current time in a time zone",
                    "total": 0,
                    "offset": 0,
                    "results": [],
                    "pending": ["time", "everything"],
                    "unavailable": [],
                    "also": [],
                }
                directory = bridge.directory
                assert await poll(lambda: all(directory.known(name) for name in ("time", "everything")))
                second = await search(bridge, query="current time in a time zone", limit=3)
                assert second["pending"] == [] and second["unavailable"] == []
                assert found(second)[0] == ("time", "get_current_time"), second
                assert second["results"][0]["required"] == ["timezone"]
                assert isinstance(second["results"][0]["score"], float) and second["results"][0]["score"] > 0
                assert second["total"] >= 2
                echo = await search(bridge, query="echo a message back", limit=1)
                assert found(echo) == [("everything", "echo")]
                # The listings were written to the catalog cache as they arrived.
                cache = ListingCache(state, ttl=3600)
                assert await poll(lambda: all(cache.load(server) is not None for server in servers))
                cached = cache.load(servers[0])
                assert cached is not None and sorted(t.name for t in cached.tools) == [
                    "convert_time", "get_current_time"
                ]  # fmt: skip

    asyncio_run(body())


def test_with_a_search_wait_a_first_search_covers_every_configured_server(tmp_path: Path) -> None:
    secret = "token-that-must-not-leak-4711"

    async def body() -> None:
        with private_state_dir() as state:
            notes = named(tmp_path, "notes", "jot", "scribble")
            missing = ServerConfig(
                name="missing",
                alias="missing",
                transport="stdio",
                source="tests/upstream/test_search_e2e.py",
                command="no-such-mcp-server",
                env={"PATH": f"/opt/{secret}/bin"},  # named in the hub's reason, hidden in the search's
            )
            servers = (upstreams.time(), upstreams.everything(), notes.config, broken(secret), missing)
            settings = sandbox_settings(runtime="bubblewrap", state_dir=state, search_wait=DEADLINE)
            async with Bridge(settings, Discovery(servers=servers)) as bridge:
                first = await search(bridge, query="scribble", limit=10)
                # Every listing had arrived, or failed, before the first search answered.
                assert all(bridge.directory.known(name) for name in ("time", "everything", "notes"))
                assert found(first) == [("notes", "scribble_tool")]
                assert first["pending"] == []
                failing, not_found = first["unavailable"]
                assert failing["server"] == "broken"
                assert failing["reason"].startswith("it exited with status 3 during startup"), failing
                assert not_found["server"] == "missing"
                assert "command 'no-such-mcp-server' not found on PATH (<hidden>)" in not_found["reason"], not_found
                missing_state = bridge.hub.state("missing")
                assert secret not in missing_state.error + missing_state.detail  # hidden from the sandbox and the CLI
                assert missing_state.log_file is not None  # the server's log on the host keeps the whole reason
                assert secret in missing_state.log_file.read_text()
                assert secret not in json.dumps(first)
                later = await search(bridge, query="current time", limit=1)
                assert found(later) == [("time", "get_current_time")]
                assert notes.starts() == 1

    asyncio_run(body())


# ------------------------------------------------------------------------------------ the cache in the bridge


def test_docs_come_from_the_cache_and_a_different_live_listing_moves_the_version(tmp_path: Path) -> None:
    """A cached listing answers docs without starting the server; the first call checks the live listing,
    which differs here (the server's file changed, its configuration did not), so sessions rebuild their proxies
    and search sees the new tools."""
    server = named(tmp_path, "words", "alpha")

    async def first_run(state: Path) -> None:
        settings = sandbox_settings(runtime="bubblewrap", state_dir=state, search_wait=DEADLINE)
        async with Bridge(settings, Discovery(servers=(server.config,))) as bridge:
            assert found(await search(bridge, query="alpha")) == [("words", "alpha_tool")]

    async def second_run(state: Path) -> None:
        settings = sandbox_settings(runtime="bubblewrap", state_dir=state, search_wait=DEADLINE)
        async with Bridge(settings, Discovery(servers=(server.config,))) as bridge:
            hub = bridge.hub
            before = reported(
                await run(
                    bridge,
                    """
                    from mcp._rpc import rpc
                    report({"dir": dir(mcp_words), "stub": rpc.request("docs", server="words", tool=None,
                            detail="stub"), "search": rpc.request("search", query="alpha")})
                    """,
                    "cache",
                )
            )
            assert before["dir"] == ["alpha_tool"]
            assert "async def alpha_tool(" in before["stub"]
            assert found(before["search"]) == [("words", "alpha_tool")]
            assert hub.state("words").status == "idle" and server.starts() == 1  # all of it from the cache
            assert bridge.directory.versions["words"] == 0

            called = await run(
                bridge,
                'report(await runtime.call_tool("words", "beta_tool", {}))',  # checked against the live listing
                "cache",
            )
            assert reported(called) == {"result": "beta"}, explain(called)  # an SDK server wraps a str result
            assert server.starts() == 2
            assert bridge.directory.versions["words"] == 1
            after = reported(await run(bridge, "report(dir(mcp_words))", "cache"))
            assert after == ["beta_tool"]
            assert found(await search(bridge, query="beta")) == [("words", "beta_tool")]
            assert found(await search(bridge, query="alpha")) == []

    with private_state_dir() as state:
        asyncio_run(first_run(state))
        server.words.write_text("beta")
        asyncio_run(second_run(state))
        cached = ListingCache(state, ttl=3600).load(server.config)
        assert cached is not None and [tool.name for tool in cached.tools] == ["beta_tool"]


def test_tools_list_changed_updates_the_search_results_and_the_cache(tmp_path: Path) -> None:
    grower_py = tmp_path / "grower.py"
    grower_py.write_text(GROWER)
    grower = ServerConfig(
        name="grower", alias="grower", transport="stdio", source="test", command=sys.executable, args=(str(grower_py),)
    )

    async def body() -> None:
        with private_state_dir() as state:
            settings = sandbox_settings(runtime="bubblewrap", state_dir=state, search_wait=DEADLINE)
            cache = ListingCache(state, ttl=3600)
            async with Bridge(settings, Discovery(servers=(grower,))) as bridge:
                assert found(await search(bridge, query="sprout")) == []
                version = bridge.directory.versions["grower"]
                grown = await run(bridge, 'report(await mcp_grower.grow(name="sprout"))', "grow")
                assert reported(grown) == {"result": "added sprout"}

                def relisted() -> bool:
                    known = bridge.directory.known("grower")
                    return known is not None and "sprout" in {tool.name for tool in known.tools}

                assert await poll(relisted)
                assert bridge.directory.versions["grower"] > version
                assert found(await search(bridge, query="sprout")) == [("grower", "sprout")]
                assert reported(await run(bridge, "report(await mcp_grower.sprout())", "grow")) == {"result": "sprout"}

                def cached() -> bool:
                    listing = cache.load(grower)
                    return listing is not None and {tool.name for tool in listing.tools} == {"grow", "sprout"}

                assert await poll(cached)

    asyncio_run(body())


def test_a_stale_cached_listing_answers_at_once_and_is_refreshed_in_the_background(tmp_path: Path) -> None:
    """The directory without a sandbox (as the command line uses it): with catalog_ttl 0 every cached listing
    is stale, so it is served as it is while the server is started to list again."""
    server = named(tmp_path, "words", "alpha")

    async def body() -> None:
        with private_state_dir() as state:
            settings = sandbox_settings(state_dir=state)
            async with ToolDirectory((server.config,), settings) as directory:
                first = await directory.search("alpha", wait=None)
                assert [hit.tool.name for hit in first.hits] == ["alpha_tool"]
            assert server.starts() == 1
            server.words.write_text("beta")

            async with ToolDirectory((server.config,), settings.replace(catalog_ttl=0)) as directory:
                cached = await directory.search("alpha", wait=0)
                assert [hit.tool.name for hit in cached.hits] == ["alpha_tool"]  # answered from the cache
                assert (cached.pending, cached.unavailable) == ((), ())
                known = directory.known("words")
                assert known is not None and known.origin == "cached" and directory.is_stale(known)

                def refreshed() -> bool:
                    listing = directory.known("words")
                    return listing is not None and listing.origin == "live"

                assert await poll(refreshed)
                assert server.starts() == 2
                assert directory.versions["words"] == 1  # the live listing differs from the cached one
                assert [hit.tool.name for hit in (await directory.search("beta", wait=0)).hits] == ["beta_tool"]
                assert (await directory.search("alpha", wait=0)).total == 0

    asyncio_run(body())


def test_concurrent_first_searches_start_each_server_once(tmp_path: Path) -> None:
    servers = [named(tmp_path, f"s{n}", f"word{n}") for n in range(3)]

    async def body() -> None:
        with private_state_dir() as state:
            async with ToolDirectory([s.config for s in servers], sandbox_settings(state_dir=state)) as directory:
                pages = await asyncio.gather(*(directory.search("word", limit=10, wait=None) for _ in range(8)))
                assert {page.total for page in pages} == {3}
                assert all(page.pending == () for page in pages)
            assert [s.starts() for s in servers] == [1, 1, 1]

    asyncio_run(body())


# ------------------------------------------------------------------------------------ paging and refusals


def test_offset_pages_through_every_match_and_the_total_counts_them(tmp_path: Path) -> None:
    words = ("amber", "beryl", "coral", "ebony", "ivory", "jade", "lilac", "ochre", "pearl", "umber", "wheat")
    server = named(tmp_path, "colour-words", *words)

    async def body() -> None:
        with private_state_dir() as state:
            settings = sandbox_settings(runtime="bubblewrap", state_dir=state, search_wait=DEADLINE)
            async with Bridge(settings, Discovery(servers=(server.config, upstreams.time()))) as bridge:
                whole = await search(bridge, query="returns the word spelt out", limit=50)
                assert whole["total"] == len(words) == len(whole["results"])
                assert {tool for _, tool in found(whole)} == {f"{word}_tool" for word in words}
                pages = []
                for offset in range(0, len(words), 4):
                    page = await search(bridge, query="returns the word spelt out", limit=4, offset=offset)
                    assert (page["total"], page["offset"]) == (len(words), offset)
                    pages += found(page)
                assert pages == found(whole)
                beyond = await search(bridge, query="returns the word spelt out", limit=4, offset=40)
                assert (beyond["total"], beyond["results"]) == (len(words), [])
                one = await search(bridge, query="current time", server="time", detail="name")
                assert one["results"][0] == {
                    "server": "time",
                    "tool": "get_current_time",
                    "alias": "get_current_time",
                    "score": one["results"][0]["score"],
                }
                assert {server for server, _ in found(one)} == {"time"}
                by_alias = await search(bridge, query="word", server="colour_words", limit=1, detail="stub")
                assert found(by_alias) == [("colour-words", "amber_tool")]  # equal scores keep listing order
                assert "async def amber_tool(" in by_alias["results"][0]["stub"]

    asyncio_run(body())


HOSTILE: list[tuple[dict[str, Any], str, str]] = [
    ({"query": 5}, "ArgumentError", "query must be a string, not int"),
    ({"query": ""}, "ArgumentError", "query is empty"),
    ({"query": "   "}, "ArgumentError", "query is empty"),
    ({"query": "x" * 100_000}, "ArgumentError", "query is 100,000 characters long; at most 2,000"),
    ({"query": ["list", "files"]}, "ArgumentError", "query must be a string, not list"),
    ({"query": "time", "limit": 0}, "ArgumentError", "limit must be a whole number from 1 to 200, not 0"),
    ({"query": "time", "limit": 10**9}, "ArgumentError", "limit must be a whole number from 1 to 200, not 1000000000"),
    ({"query": "time", "limit": True}, "ArgumentError", "limit must be a whole number from 1 to 200, not bool"),
    ({"query": "time", "limit": 2.5}, "ArgumentError", "limit must be a whole number from 1 to 200, not float"),
    ({"query": "time", "limit": "5"}, "ArgumentError", "limit must be a whole number from 1 to 200, not str"),
    ({"query": "time", "offset": -1}, "ArgumentError", "offset must be a whole number from 0 to 100,000, not -1"),
    ({"query": "time", "offset": 10**30}, "ArgumentError", "not a number that large"),
    ({"query": "time", "offset": False}, "ArgumentError", "offset must be a whole number from 0 to 100,000, not bool"),
    ({"query": "time", "detail": "everything"}, "ArgumentError", "detail must be one of name, summary, full, stub"),
    ({"query": "time", "server": 7}, "ArgumentError", "server must be a string, not int"),
    ({"query": "time", "server": "tme"}, "ServerNotFound", "no MCP server named 'tme'. Did you mean 'time'?"),
    ({"query": "time", "wait": 600}, "ArgumentError", "search() got unknown parameter(s) 'wait'"),
]


def test_hostile_search_requests_get_clear_refusals_and_the_session_goes_on() -> None:
    async def body() -> None:
        with private_state_dir() as state:
            settings = sandbox_settings(runtime="bubblewrap", state_dir=state, search_wait=DEADLINE)
            async with Bridge(settings, Discovery(servers=(upstreams.time(),))) as bridge:
                for params, kind, message in HOSTILE:
                    seen = reported(await run(bridge, search_code(**params), "hostile"))
                    assert seen[0] == kind, (str(params)[:200], seen)
                    assert message in seen[1], seen
                    assert len(seen[1]) < 400, seen  # a refusal never echoes a huge value
                assert bridge.hub.state("time").status == "idle"  # refused before anything was started
                fine = await search(bridge, "hostile", query="current time", limit=1)
                assert found(fine) == [("time", "get_current_time")]

    asyncio_run(body())


# ------------------------------------------------------------------------------------ the command line


def test_cli_search_lists_what_it_lacks_once_and_the_next_search_starts_no_server(tmp_path: Path) -> None:
    notes = named(tmp_path, "notes", "jot", "scribble")
    config = write_config(tmp_path / "servers.json", notes.config, upstreams.time())
    with private_state_dir() as state:
        args = ("search", "--config", str(config), "--no-discover")
        first = cli(state, *args, "current", "time", "in", "a", "zone", process=True)  # the command as users start it
        lines = first.stdout.splitlines()
        assert re.fullmatch(r"\d+ of \d+ matches for 'current time in a zone'", lines[0]), first.stdout
        assert "time.get_current_time(timezone) — Get current time in a specific timezone" in lines[1]
        assert notes.starts() == 1
        time_starts = (state / "logs" / "time.log").read_text().count(" starting ")
        assert time_starts == 1

        second = cli(state, *args, "--json", "scribble")
        reply = json.loads(second.stdout)
        assert found(reply) == [("notes", "scribble_tool")]
        assert (reply["total"], reply["pending"], reply["unavailable"]) == (1, [], [])
        assert notes.starts() == 1  # served from the cache: neither server was started again
        assert (state / "logs" / "time.log").read_text().count(" starting ") == time_starts

        nothing = cli(state, *args, "xylophone", "quartet", expect=1)
        assert "No tool matches 'xylophone quartet' (searched 4 tools)." in nothing.stdout
        assert "mcp-codemode servers" in nothing.stdout
        assert notes.starts() == 1


def test_cli_search_names_prompts_and_resources_and_the_cache_keeps_them(tmp_path: Path) -> None:
    config = write_config(tmp_path / "servers.json", upstreams.everything())
    with private_state_dir() as state:
        args = ("search", "--config", str(config), "--no-discover")
        first = cli(state, *args, "architecture", "document")
        assert "\nAlso (prompts and resources):\n" in first.stdout, first.stdout
        assert "resource everything/architecture.md — Static document file exposed from /docs" in first.stdout
        assert "await runtime.read_resource('everything', 'demo://resource/static/document/architecture.md')" in (
            first.stdout
        )
        log = state / "logs" / "everything.log"
        starts = log.read_text().count(" starting ")
        second = cli(state, *args, "--json", "prompt", "with", "arguments")
        also = json.loads(second.stdout)["also"]
        assert (also[0]["kind"], also[0]["name"], also[0]["arguments"]) == ("prompt", "args-prompt", ["city", "state"])
        assert log.read_text().count(" starting ") == starts  # from the cache: the server was not started again


def test_a_changed_configuration_is_not_served_the_old_listing(tmp_path: Path) -> None:
    before = named(tmp_path, "notes", "jot")
    after = named(tmp_path, "notes", "scribble", variant="-v2")  # the same name, other arguments
    with private_state_dir() as state:
        old = write_config(tmp_path / "old.json", before.config)
        new = write_config(tmp_path / "new.json", after.config)
        assert "notes.jot_tool()" in cli(state, "search", "--config", str(old), "--no-discover", "jot").stdout
        listed = cli(state, "search", "--config", str(new), "--no-discover", "--json", "jot", "scribble")
        assert found(json.loads(listed.stdout)) == [("notes", "scribble_tool")]
        assert before.starts() == 2  # one marker file: the new configuration had to start the server
        assert "notes.jot_tool()" in cli(state, "search", "--config", str(old), "--no-discover", "jot").stdout
        assert before.starts() == 2  # and the old configuration still has its own listing


def test_servers_uses_fresh_cached_counts_and_refresh_lists_every_server_again(tmp_path: Path) -> None:
    notes = named(tmp_path, "notes", "jot", "scribble")
    config = write_config(tmp_path / "servers.json", notes.config)
    args = ("servers", "--config", str(config), "--no-discover")
    with private_state_dir() as state:
        cache = ListingCache(state, ttl=3600)

        def row(*extra: str) -> dict[str, Any]:
            report = json.loads(cli(state, *args, "--json", *extra).stdout)
            [only] = report["servers"]
            assert isinstance(only, dict)
            return only

        unknown = row("--no-connect")
        assert (unknown["state"], unknown["tools"], unknown["listing"]) == ("not started", None, "unknown")
        live = row()
        assert (live["state"], live["tools"], live["listing"]) == ("ready", 2, "live")
        assert notes.starts() == 1
        first = cache.load(notes.config)
        assert first is not None

        cached = row()
        assert (cached["state"], cached["tools"], cached["listing"], cached["stale"]) == ("not started", 2, "cached",
                                                                                          False)  # fmt: skip
        assert cached["listed_at"] == first.fetched_at and cached["listing_age"] >= 0
        assert notes.starts() == 1
        text = cli(state, *args).stdout
        assert "not started  2      cached " in text and " ago  " in text, text
        assert f"Cached counts come from {state / 'catalog'}" in text

        notes.words.write_text("jot scribble doodle")
        refreshed = row("--refresh")
        assert (refreshed["state"], refreshed["tools"], refreshed["listing"]) == ("ready", 3, "live")
        assert notes.starts() == 2
        second = cache.load(notes.config)
        assert second is not None and second.fetched_at > first.fetched_at
        assert sorted(tool.name for tool in second.tools) == ["doodle_tool", "jot_tool", "scribble_tool"]
        offline = row("--no-connect")
        assert (offline["state"], offline["tools"], offline["listing"]) == ("not started", 3, "cached")
        assert notes.starts() == 2

        stale = json.loads(cli(state, *args, "--json", "--no-connect", MCP_BRIDGE_CATALOG_TTL="0").stdout)["servers"][0]
        assert (stale["listing"], stale["stale"]) == ("cached", True)
