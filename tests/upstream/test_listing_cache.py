"""The catalog cache on disk (``upstream/tools/listing_cache.py``): keys, permissions, atomic writes, distrust, TTL.

Real files in a temporary state directory; the clock is injected so staleness is tested without waiting.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from mcp import types

from mcp_codemode.errors import SettingsError
from mcp_codemode.settings import Settings
from mcp_codemode.upstream.model import ServerConfig
from mcp_codemode.upstream.tools.listing_cache import MAX_FILE_BYTES, SALT_BYTES, ListingCache, listing_fields

DAY = 86400.0


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def config(**changes: Any) -> ServerConfig:
    base = ServerConfig(
        name="notes",
        alias="notes",
        transport="stdio",
        source="/home/me/.cursor/mcp.json",
        command="/usr/bin/notes-mcp",
        args=("--root", "/srv/notes"),
        env={"NOTES_TOKEN": "s3cret-token-value"},
        cwd="/srv",
        description="Personal notes",
    )
    return dataclasses.replace(base, **changes)


def remote(**changes: Any) -> ServerConfig:
    base = ServerConfig(
        name="search",
        alias="search",
        transport="http",
        source="/home/me/.mcp.json",
        url="https://search.example.com/mcp",
        headers={"Authorization": "Bearer abc123"},
    )
    return dataclasses.replace(base, **changes)


def tools() -> list[types.Tool]:
    return [
        types.Tool(
            name="read_note",
            title="Read a note",
            description="Read one note by its path.\n\nReturns the text.",
            input_schema={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
            output_schema={"type": "object", "properties": {"text": {"type": "string"}}},
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
        types.Tool(name="list-notes", input_schema={"type": "object"}),
    ]


def wire(listing: Any) -> list[dict[str, Any]]:
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in listing]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cache(tmp_path: Path, clock: Clock) -> ListingCache:
    return ListingCache(tmp_path / "state", ttl=DAY, clock=clock)


def listing_files(cache: ListingCache) -> list[str]:
    return sorted(path.name for path in cache.root.iterdir() if not path.name.startswith("."))


# -- keys -------------------------------------------------------------------------------------------------------


def test_the_same_configuration_has_the_same_file_and_a_renamed_server_keeps_its_listing(cache: ListingCache) -> None:
    same = cache.path(config())
    assert cache.path(config()) == same
    renamed = config(name="my-notes", alias="my_notes", description="other words", source="/elsewhere.json")
    assert cache.path(renamed) == same
    assert cache.path(config(timeout=5.0)) == same  # a per-call timeout does not change what a server lists
    assert same.parent == cache.root and same.suffix == ".json"
    assert len(same.stem) == 64 and int(same.stem, 16) >= 0  # an HMAC-SHA256 in hex


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param({"args": ("--root", "/srv/other")}, id="args"),
        pytest.param({"env": {"NOTES_TOKEN": "another-token"}}, id="env value"),
        pytest.param({"env": {}}, id="no env"),
        pytest.param({"command": "/usr/local/bin/notes-mcp"}, id="command"),
        pytest.param({"cwd": "/tmp"}, id="cwd"),
        pytest.param({"protocol": "2026-07-28"}, id="protocol"),
    ],
)
def test_what_decides_the_listing_decides_the_file(cache: ListingCache, changed: dict[str, Any]) -> None:
    assert cache.path(config(**changed)) != cache.path(config())


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param({"url": "https://search.example.com/v2/mcp"}, id="url"),
        pytest.param({"headers": {"Authorization": "Bearer other"}}, id="header value"),
        pytest.param({"transport": "sse"}, id="transport"),
    ],
)
def test_remote_servers_are_keyed_by_url_headers_and_transport(cache: ListingCache, changed: dict[str, Any]) -> None:
    assert cache.path(remote(**changed)) != cache.path(remote())
    assert cache.path(remote(name="renamed")) == cache.path(remote())


def test_file_names_are_salted_so_a_guessed_secret_cannot_be_checked_against_them(tmp_path: Path) -> None:
    first = ListingCache(tmp_path / "one", ttl=DAY)
    second = ListingCache(tmp_path / "two", ttl=DAY)
    canonical = json.dumps(listing_fields(config()), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    unsalted = hashlib.sha256(canonical.encode()).hexdigest()
    assert first.key(config()) != second.key(config())  # each state directory has its own salt
    assert unsalted not in (first.key(config()), second.key(config()))
    # The same directory keeps its salt: a new cache object (a later run) finds the same files.
    assert ListingCache(tmp_path / "one", ttl=DAY).key(config()) == first.key(config())


def test_the_catalog_directory_and_salt_are_private_and_made_once(cache: ListingCache) -> None:
    cache.store(config(), tools())
    salt_file = cache.root / ".salt"
    salt = salt_file.read_bytes()
    assert len(salt) == SALT_BYTES
    assert stat.S_IMODE(cache.root.stat().st_mode) == 0o700
    assert stat.S_IMODE(salt_file.stat().st_mode) == 0o600
    cache.store(config(args=("x",)), tools())
    assert ListingCache(cache.state_dir, ttl=DAY).key(config()) == cache.key(config())
    assert salt_file.read_bytes() == salt
    assert sorted(path.name for path in cache.root.iterdir() if path.name.startswith(".")) == [".salt"]


def test_a_damaged_salt_is_replaced_and_the_old_listings_are_no_longer_found(
    cache: ListingCache, caplog: pytest.LogCaptureFixture
) -> None:
    cache.store(config(), tools())
    (cache.root / ".salt").write_bytes(b"short")
    later = ListingCache(cache.state_dir, ttl=DAY)
    assert later.load(config()) is None  # a salt of the wrong size is never used to read
    with caplog.at_level(logging.WARNING):
        later.store(config(), tools()[:1])
    assert "is damaged" in caplog.text
    assert len((cache.root / ".salt").read_bytes()) == SALT_BYTES
    loaded = later.load(config())
    assert loaded is not None and [tool.name for tool in loaded.tools] == ["read_note"]


def test_reading_an_empty_state_directory_creates_nothing(tmp_path: Path) -> None:
    cache = ListingCache(tmp_path / "state", ttl=DAY)
    assert cache.load(config()) is None
    assert cache.forget(config()) is False
    assert not (tmp_path / "state").exists()


# -- writing and reading ----------------------------------------------------------------------------------------


def test_a_stored_listing_reads_back_as_the_same_tools_with_its_time(cache: ListingCache, clock: Clock) -> None:
    path = cache.store(config(), tools())
    document = json.loads(path.read_text())
    assert document["format"] == 1
    assert document["server"] == "notes"
    assert document["fetched_at"] == clock.now
    assert document["tools"] == wire(tools())
    assert "s3cret-token-value" not in path.read_text()  # the key fields are not written out
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    clock.now += 60
    loaded = cache.load(config(name="renamed"))
    assert loaded is not None
    assert wire(loaded.tools) == wire(tools())
    assert (loaded.fetched_at, loaded.age, loaded.stale) == (clock.now - 60, 60, False)
    assert all(isinstance(tool, types.Tool) for tool in loaded.tools)


def test_writes_replace_the_whole_file_and_leave_no_temporary_files(cache: ListingCache) -> None:
    cache.store(config(), tools())
    cache.store(config(), tools()[1:])
    loaded = cache.load(config())
    assert loaded is not None and [tool.name for tool in loaded.tools] == ["list-notes"]
    assert len(listing_files(cache)) == 1
    assert not [path for path in cache.root.iterdir() if path.name.endswith(".tmp")]


def test_a_write_that_fails_half_way_keeps_the_old_listing(
    cache: ListingCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache.store(config(), tools())

    def broken_dump(document: Any, stream: Any, **options: Any) -> None:
        stream.write('{"format": 1, "tools": [')
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(json, "dump", broken_dump)  # the module writes with json.dump
    with pytest.raises(OSError, match="No space left"):
        cache.store(config(), tools()[:1])
    monkeypatch.undo()
    loaded = cache.load(config())
    assert loaded is not None and [tool.name for tool in loaded.tools] == ["read_note", "list-notes"]
    assert not [path for path in cache.root.iterdir() if path.name.endswith(".tmp")]


def test_forget_removes_one_configuration_s_listing(cache: ListingCache) -> None:
    cache.store(config(), tools())
    cache.store(config(args=()), tools())
    assert cache.forget(config()) is True
    assert cache.forget(config()) is False
    assert cache.load(config()) is None
    assert cache.load(config(args=())) is not None


# -- files that cannot be trusted -------------------------------------------------------------------------------


BAD_FILES = [
    pytest.param(b"\x00\x01 not json", "Expecting value", id="garbage"),
    pytest.param(b"\xff\xfe\xfa", "codec can't decode", id="not utf-8"),
    pytest.param(b"[1, 2, 3]", "not a JSON object", id="a list"),
    pytest.param(json.dumps({"format": 2, "fetched_at": 1, "tools": []}).encode(), "format 2", id="other format"),
    pytest.param(json.dumps({"fetched_at": 1, "tools": []}).encode(), "format None", id="no format"),
    pytest.param(json.dumps({"format": 1, "fetched_at": "yesterday", "tools": []}).encode(), "fetched_at", id="time"),
    pytest.param(json.dumps({"format": 1, "fetched_at": True, "tools": []}).encode(), "fetched_at", id="bool time"),
    pytest.param(b'{"format": 1, "fetched_at": NaN, "tools": []}', "fetched_at", id="nan time"),
    pytest.param(json.dumps({"format": 1, "fetched_at": 1, "tools": {}}).encode(), "tools is not a list", id="tools"),
    pytest.param(
        json.dumps({"format": 1, "fetched_at": 1, "tools": [{"description": "no name"}]}).encode(),
        "validation error",
        id="invalid tool",
    ),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, "", id="deeply nested"),
]


@pytest.mark.parametrize(("content", "reason"), BAD_FILES)
def test_a_file_that_cannot_be_trusted_is_ignored_with_a_log_line(
    cache: ListingCache, caplog: pytest.LogCaptureFixture, content: bytes, reason: str
) -> None:
    path = cache.store(config(), tools())
    path.write_bytes(content)
    with caplog.at_level(logging.WARNING):
        assert cache.load(config()) is None
    assert f"catalog cache: ignoring {path} (server 'notes')" in caplog.text
    assert reason in caplog.text


def test_an_oversized_file_is_not_read(cache: ListingCache, caplog: pytest.LogCaptureFixture) -> None:
    path = cache.store(config(), tools())
    with path.open("r+b") as stream:
        stream.truncate(MAX_FILE_BYTES + 1)  # sparse: costs no disk
    with caplog.at_level(logging.WARNING):
        assert cache.load(config()) is None
    assert f"more than the {MAX_FILE_BYTES} a listing may take" in caplog.text


def test_an_unreadable_file_is_ignored(cache: ListingCache, caplog: pytest.LogCaptureFixture) -> None:
    path = cache.store(config(), tools())
    path.unlink()
    path.mkdir()  # reading a directory fails with IsADirectoryError, an OSError like EACCES would be
    with caplog.at_level(logging.WARNING):
        assert cache.load(config()) is None
    assert "catalog cache: cannot read" in caplog.text


# -- staleness --------------------------------------------------------------------------------------------------


def test_a_listing_goes_stale_after_the_ttl(cache: ListingCache, clock: Clock) -> None:
    cache.store(config(), tools())
    clock.now += DAY
    fresh = cache.load(config())
    assert fresh is not None and not fresh.stale and fresh.age == DAY
    clock.now += 1
    stale = cache.load(config())
    assert stale is not None and stale.stale and stale.age == DAY + 1
    assert [tool.name for tool in stale.tools] == ["read_note", "list-notes"]  # stale is still served


def test_a_ttl_of_zero_makes_every_listing_stale_and_a_future_time_is_not_trusted(tmp_path: Path, clock: Clock) -> None:
    always = ListingCache(tmp_path / "state", ttl=0, clock=clock)
    always.store(config(), tools())
    loaded = always.load(config())
    assert loaded is not None and loaded.age == 0 and loaded.stale
    daily = ListingCache(tmp_path / "state", ttl=DAY, clock=clock)
    daily.store(config(), tools(), fetched_at=clock.now + 3600)  # written by a clock that was ahead
    ahead = daily.load(config())
    assert ahead is not None and ahead.stale


def test_the_ttl_and_the_search_wait_are_settings() -> None:
    defaults = Settings.load(env={})
    assert (defaults.catalog_ttl, defaults.search_wait) == (86400.0, 3.0)
    tuned = Settings.load(env={"MCP_BRIDGE_CATALOG_TTL": "0", "MCP_BRIDGE_SEARCH_WAIT": "0.5"})
    assert (tuned.catalog_ttl, tuned.search_wait) == (0.0, 0.5)
    for variable, value in (("MCP_BRIDGE_CATALOG_TTL", "-1"), ("MCP_BRIDGE_SEARCH_WAIT", "601"),
                            ("MCP_BRIDGE_SEARCH_WAIT", "soon")):  # fmt: skip
        with pytest.raises(SettingsError, match=f"{variable}='{value}' is not valid"):
            Settings.load(env={variable: value})


def test_the_state_directory_it_makes_can_be_passed_through_by_the_sandbox_uid(tmp_path: Path) -> None:
    cache = ListingCache(tmp_path / "fresh" / "state", ttl=DAY)
    cache.store(config(), tools())
    assert stat.S_IMODE(os.stat(tmp_path / "fresh" / "state").st_mode) == 0o711
