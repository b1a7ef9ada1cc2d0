"""find_servers()'s host side against a stand-in registry serving recorded real entries: paging, the cache on disk,
conditional and incremental updates, an unreachable registry, local catalogs, and the adder's exact-name source.

Pure logic over real HTTP on 127.0.0.1: no sandbox, no MCP client (the end-to-end path is test_registry_find_e2e.py).
"""

from __future__ import annotations

import copy
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_codemode.settings import Settings
from mcp_codemode.upstream.model import ServerConfig
from mcp_codemode.upstream.registry import index
from mcp_codemode.upstream.registry.finder import Configured, Finder
from mcp_codemode.upstream.registry.source import ServerNotFound
from tests.support.backends import sandbox_settings
from tests.support.registry_stand_in import StandInRegistry, recorded_servers

pytestmark = [pytest.mark.anyio, pytest.mark.backend]  # real HTTP on 127.0.0.1 (no sandbox)

AIRTABLE = "io.github.domdomegg/airtable-mcp-server"


def filler(count: int) -> list[dict[str, Any]]:
    """Entries enough to need several pages (the registry's are named for what they do, and so are these)."""
    return [
        {"name": f"io.example.fill/tool-{i:03d}", "description": f"Filler server number {i} for paging.",
         "version": "1.0.0", "packages": [{"registryType": "npm", "identifier": f"fill-{i}", "version": "1.0.0",
                                           "transport": {"type": "stdio"}}]}
        for i in range(count)
    ]  # fmt: skip


@pytest.fixture
def registry() -> Iterator[StandInRegistry]:
    with StandInRegistry([*recorded_servers(), *filler(230)]) as stand_in:
        yield stand_in


def settings_for(tmp_path: Path, *registries: str, **changes: Any) -> Settings:
    return sandbox_settings(state_dir=tmp_path / "state", registries=registries, **changes)


async def test_a_first_find_walks_every_page_of_the_latest_versions_and_ranks_by_meaning(
    registry: StandInRegistry, tmp_path: Path
) -> None:
    finder = Finder(settings_for(tmp_path, registry.url))
    found = await finder.find("read airtable records", 5, Configured())
    best = found.candidates[0]
    assert best["name"] == AIRTABLE and best["version"] == "1.7.3"  # the latest only
    assert best["runs"][0] == {"package": "airtable-mcp-server", "registry": "npm", "version": "1.7.3",
                               "transport": "stdio"}  # fmt: skip
    assert best["needs"]["secrets"] == ["AIRTABLE_API_KEY"] and best["needs"]["required_env"] == ["AIRTABLE_API_KEY"]
    assert best["found_in"] == f"registry {registry.url}" and best["available"] is None
    assert found.notices == []
    pages = list(registry.asked())
    # 236 latest entries, 100 a page: three pages, each after the cursor the one before gave.
    assert [query.get("version") for query, _ in pages] == ["latest"] * 3
    assert "cursor" not in pages[0][0] and all("cursor" in query for query, _ in pages[1:])
    remote = (await finder.find("identity audit trail for agents", 3, Configured())).candidates[0]
    assert remote["runs"] == [{"url": "https://mcp.cyphrex.io/mcp", "transport": "streamable-http"}]
    assert remote["needs"]["sign_in"].startswith("maybe")


async def test_within_its_lifetime_the_cache_answers_and_after_it_a_conditional_request_gets_304(
    registry: StandInRegistry, tmp_path: Path
) -> None:
    await Finder(settings_for(tmp_path, registry.url)).find("time", 3, Configured())
    walked = len(registry.requests)
    # A new bridge (a restart) reads the index from disk: nothing is asked while it is fresh.
    again = await Finder(settings_for(tmp_path, registry.url)).find("current time", 3, Configured())
    assert len(registry.requests) == walked and again.candidates[0]["name"].startswith("io.github.domdomegg/time")
    stale = Finder(settings_for(tmp_path, registry.url, registry_ttl=0))
    await stale.find("time", 3, Configured())
    await stale.find("time", 3, Configured())
    updates = [(query, status) for query, status in registry.asked()][walked:]
    assert [status for _, status in updates] == [200, 304]  # the first learns the ETag, the second is answered 304
    assert updates[0][0]["updated_since"] == updates[1][0]["updated_since"]  # the same URL while nothing changes
    cache = next((tmp_path / "state" / "registry-cache").iterdir())
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache.parent.stat().st_mode) == 0o700


async def test_a_new_version_a_deprecation_and_a_deletion_arrive_through_updated_since(
    registry: StandInRegistry, tmp_path: Path
) -> None:
    finder = Finder(settings_for(tmp_path, registry.url, registry_ttl=0))
    await finder.find("airtable", 3, Configured())
    newer = copy.deepcopy(next(s for s in recorded_servers() if s["version"] == "1.7.3"))
    newer["version"] = newer["packages"][0]["version"] = "1.8.0"
    registry.publish(newer)
    registry.set_status("io.github.drQedwards/pmll-memory-mcp", "deleted")
    registry.set_status("io.github.domdomegg/time-mcp-nuget", "deprecated")
    walked = len(registry.requests)
    found = await finder.find("airtable", 3, Configured())
    assert found.candidates[0]["version"] == "1.8.0"
    assert len(registry.requests) == walked + 1  # one page of changes, not a new walk
    memory = (await finder.find("kv context memory deduplication", 5, Configured())).candidates
    assert "io.github.drQedwards/pmll-memory-mcp" not in {c["name"] for c in memory}
    deprecated = (await finder.find("utc time nuget", 5, Configured())).candidates
    assert {c["name"]: c.get("status") for c in deprecated}["io.github.domdomegg/time-mcp-nuget"] == "deprecated"


async def test_an_unreachable_registry_is_answered_from_its_cache_with_a_notice_saying_since_when(
    tmp_path: Path,
) -> None:
    with StandInRegistry() as registry:
        url = registry.url
        await Finder(settings_for(tmp_path, url)).find("airtable", 3, Configured())
    # The stand-in is gone: its port refuses. A second registry never answered and has nothing cached.
    with StandInRegistry() as other:
        never = other.url
    finder = Finder(settings_for(tmp_path, url, never, registry_ttl=0))
    found = await finder.find("airtable", 3, Configured())
    assert found.candidates[0]["name"] == AIRTABLE
    first, second = found.notices
    assert first.startswith(f"the registry {url} could not be reached (ConnectError") and "failing since 20" in first
    assert "answered from its cache of" in first and "(5 servers)" in first
    assert second.startswith(f"the registry {never} could not be reached") and "no cache yet" in second


async def test_a_failing_registry_is_not_asked_again_at_once(registry: StandInRegistry, tmp_path: Path) -> None:
    from tests.support.registry_stand_in import Reply

    registry.misbehave = lambda path, query: Reply(status=503, body=b"{}")
    finder = Finder(settings_for(tmp_path, registry.url))
    first = await finder.find("airtable", 3, Configured())
    again = await finder.find("airtable", 3, Configured())  # a model's loop: answered at once from what is known
    assert len(registry.requests) == 1
    assert again.notices == first.notices and "answered HTTP 503" in first.notices[0]


async def test_a_first_walk_the_deadline_cuts_short_still_finds_what_the_query_names(
    registry: StandInRegistry, tmp_path: Path
) -> None:
    from tests.support.registry_stand_in import Reply

    def slow_after_the_first_page(path: str, query: dict[str, str]) -> Reply | None:
        if "cursor" not in query:
            return None
        status, body = registry.answer(path, query)
        return Reply(status=status, body=json.dumps(body).encode(), drip=0.05)  # ~40 s a page

    registry.misbehave = slow_after_the_first_page
    finder = Finder(settings_for(tmp_path, registry.url, registry_timeout=3.0))
    found = await finder.find("read airtable records", 3, Configured())
    assert found.candidates[0]["name"] == AIRTABLE  # not on page one: the registry's name search found it
    assert [query["search"] for query, _ in registry.asked() if "search" in query] == ["airtable", "records", "read"]
    assert found.notices == [f"the registry {registry.url} has been read in part (101 servers so far); the next call "
                             "reads on"]  # fmt: skip


async def test_a_walk_cut_short_says_so_and_the_next_call_reads_on_from_its_cursor(
    registry: StandInRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index, "RETRY_AFTER", 0.0)
    from tests.support.registry_stand_in import Reply

    failed: list[str] = []

    def fail_page_two(path: str, query: dict[str, str]) -> Reply | None:
        if "cursor" in query and not failed:
            failed.append(query["cursor"])
            return Reply(status=503, body=b'{"error": "busy"}')
        return None

    registry.misbehave = fail_page_two
    finder = Finder(settings_for(tmp_path, registry.url))
    first = await finder.find("filler server number 5", 3, Configured())
    assert first.candidates[0]["name"] == "io.example.fill/tool-005"  # page one was kept
    assert any("answered HTTP 503" in notice for notice in first.notices)
    second = await finder.find("airtable", 3, Configured())
    assert second.notices == [] and second.candidates[0]["name"] == AIRTABLE
    resumed = next(query for query, status in registry.asked() if status == 200 and "cursor" in query)
    assert resumed["cursor"] == failed[0]


async def test_a_catalog_serves_an_air_gapped_site_and_names_each_bad_entry_by_file_and_index(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.json"
    servers = recorded_servers()
    catalog.write_text(json.dumps([servers[3], {"server": servers[4], "_meta": {}}, {"name": "no-slash"}, 7]))
    broken = tmp_path / "broken.json"
    broken.write_text('[{"name": ')
    finder = Finder(settings_for(tmp_path, registry_catalog=(catalog, broken, tmp_path / "missing.json")))
    found = await finder.find("utc time", 3, Configured())
    assert found.candidates[0]["name"] == "io.github.domdomegg/time-mcp-pypi"
    assert found.candidates[0]["found_in"] == f"catalog {catalog}"
    bad_name, not_object, not_json, missing = found.notices
    assert bad_name.startswith(f"the catalog {catalog}, entry [2]:") and "malformed name" in bad_name
    assert not_object.startswith(f"the catalog {catalog}, entry [3]:")
    assert not_json == f"the catalog {broken} is not valid JSON at line 1, column 11; fix it (a JSON array of " \
        "server.json objects)"  # fmt: skip
    assert missing.startswith(f"the catalog {tmp_path / 'missing.json'} does not exist")
    source = finder.source()
    assert (await source.entry("io.github.getcyphrex/cyphrex-mcp")).remotes[0].url == "https://mcp.cyphrex.io/mcp"


async def test_servers_other_clients_configure_are_candidates_without_their_secrets(tmp_path: Path) -> None:
    secret = "sk-live-0123456789abcdef"
    elsewhere = ServerConfig(name="airtable-desktop", alias="airtable_desktop", transport="stdio",
                             source="/home/u/.config/Claude/claude_desktop_config.json", command="npx",
                             args=("-y", "airtable-mcp-server"), env={"AIRTABLE_API_KEY": secret},
                             description="Airtable records")  # fmt: skip
    remote = ServerConfig(name="linear", alias="linear", transport="http", source="/home/u/.cursor/mcp.json",
                          url="https://mcp.linear.app/mcp?token=" + secret,
                          headers={"Authorization": secret})  # fmt: skip
    configured = Configured(elsewhere=((elsewhere, "disabled in ..."), (remote, "configured for another")))
    found = await Finder(settings_for(tmp_path)).find("airtable linear", 5, configured)
    shown = json.dumps(found.candidates)
    assert secret not in shown
    by_name = {c["name"]: c for c in found.candidates}
    assert by_name["airtable-desktop"]["needs"] == {"env": ["AIRTABLE_API_KEY"]}
    assert by_name["airtable-desktop"]["found_in"].endswith("claude_desktop_config.json")
    assert by_name["linear"]["runs"] == [{"url": "https://mcp.linear.app/mcp", "transport": "http"}]
    assert by_name["linear"]["needs"] == {"headers": ["Authorization"]}


async def test_a_served_server_is_already_available_by_package_url_or_name_never_by_likeness(
    registry: StandInRegistry, tmp_path: Path
) -> None:
    served = (
        ServerConfig(name="airtable", alias="airtable", transport="stdio", source="x", command="npx",
                     args=("-y", "airtable-mcp-server@1.7.3")),
        ServerConfig(name="cyphrex", alias="cyphrex", transport="http", source="x", url="https://mcp.cyphrex.io/mcp/"),
        ServerConfig(name="time-mcp-pypi", alias="time_mcp_pypi", transport="stdio", source="x", command="other"),
    )  # fmt: skip
    finder = Finder(settings_for(tmp_path, registry.url))
    answer = await finder.find("airtable cyphrex time", 10, Configured(served=served))
    found = {c["name"]: c for c in answer.candidates}
    assert found[AIRTABLE]["available"] == "mcp_airtable"
    assert found["io.github.getcyphrex/cyphrex-mcp"]["available"] == "mcp_cyphrex"
    pypi = found["io.github.domdomegg/time-mcp-pypi"]
    assert pypi["available"] is None and "time-mcp-pypi" in pypi["resembles"]


async def test_the_adders_source_takes_the_exact_name_from_the_registry_then_the_catalog(
    registry: StandInRegistry, tmp_path: Path
) -> None:
    catalog = tmp_path / "catalog.json"
    own = {"name": "com.example.internal/wiki", "description": "Our wiki", "version": "2.0.0",
           "remotes": [{"type": "streamable-http", "url": "https://wiki.internal/mcp"}]}  # fmt: skip
    catalog.write_text(json.dumps([own]))
    source = Finder(settings_for(tmp_path, registry.url, registry_catalog=(catalog,))).source()
    latest = await source.entry(AIRTABLE)
    assert latest.version == "1.7.3" and latest.source == registry.url
    assert (await source.entry(AIRTABLE, "1.7.2")).version == "1.7.2"
    again = await source.entry(AIRTABLE)
    one = [status for _, status in registry.asked("/v0.1/servers/" + AIRTABLE.replace("/", "%2F") + "/versions/latest")]
    assert one == [200, 304] and again == latest
    assert (await source.entry("com.example.internal/wiki")).source == f"catalog {catalog}"
    with pytest.raises(ServerNotFound) as refused:
        await source.entry("io.github.domdomegg/airtable-mcp-servers")
    assert f"the registry {registry.url} has no server named" in str(refused.value)
    assert f"Did you mean '{AIRTABLE}'" in str(refused.value)


def test_no_test_asks_the_official_registry() -> None:
    assert sandbox_settings().registries == ()
    assert Settings.load(env={}).registries == ("https://registry.modelcontextprotocol.io",)
    assert os.environ.get("MCP_BRIDGE_REGISTRIES") is None
