"""Reading registry entries (``server.json``): real shapes from the registry's seed data, and hostile ones."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from mcp_codemode.errors import CodemodeError
from mcp_codemode.upstream.registry.entries import MAX_ITEMS, MAX_TEXT, RegistryDataError, parse_server_json
from mcp_codemode.upstream.registry.source import ServerNotFound, StaticSource

# Shapes as the registry's data/seed.json publishes them (schema 2025-12-11), trimmed to the fields read here.
AIRTABLE: dict[str, Any] = {
    "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
    "name": "io.github.domdomegg/airtable-mcp-server",
    "description": "Read and write access to Airtable database schemas, tables, and records.",
    "repository": {"url": "https://github.com/domdomegg/airtable-mcp-server.git", "source": "github"},
    "version": "1.7.2",
    "packages": [
        {
            "registryType": "npm",
            "identifier": "airtable-mcp-server",
            "version": "1.7.2",
            "runtimeHint": "npx",
            "transport": {"type": "stdio"},
            "environmentVariables": [
                {"description": "Airtable token", "isRequired": True, "isSecret": True, "name": "AIRTABLE_API_KEY"}
            ],
        },
        {"registryType": "oci", "identifier": "docker.io/domdomegg/airtable-mcp-server:1.7.2", "version": "1.7.2",
         "transport": {"type": "stdio"}},
    ],
}  # fmt: skip
REMOTE = {
    "name": "io.github.getcyphrex/cyphrex-mcp",
    "title": "Cyphrex",
    "description": "Blockchain SSN for AI agents.",
    "version": "0.1.0",
    "remotes": [{"type": "streamable-http", "url": "https://mcp.cyphrex.io/mcp",
                 "headers": [{"name": "Authorization", "isSecret": True, "isRequired": True, "value": "Bearer {t}"}]}],
}  # fmt: skip


def test_a_package_entry_says_how_it_runs_and_which_secrets_it_needs() -> None:
    entry = parse_server_json(AIRTABLE, "https://registry.example")
    assert (entry.name, entry.version, entry.source) == (AIRTABLE["name"], "1.7.2", "https://registry.example")
    assert entry.repository_url.endswith("airtable-mcp-server.git")
    npm, oci = entry.packages
    assert (npm.registry_type, npm.identifier, npm.version, npm.transport) == (
        "npm",
        "airtable-mcp-server",
        "1.7.2",
        "stdio",
    )
    assert (oci.registry_type, oci.environment) == ("oci", ())
    assert entry.secrets == ("AIRTABLE_API_KEY",)
    assert npm.environment[0].required and npm.environment[0].default is None


def test_a_registry_list_item_carries_its_status_and_a_remote_never_keeps_a_secret_value() -> None:
    item = {
        "server": REMOTE,
        "_meta": {"io.modelcontextprotocol.registry/official": {"status": "deprecated", "isLatest": False}},
    }
    entry = parse_server_json(item, "https://registry.example")
    assert (entry.status, entry.is_latest, entry.title) == ("deprecated", False, "Cyphrex")
    (remote,) = entry.remotes
    assert (remote.transport, remote.url) == ("streamable-http", "https://mcp.cyphrex.io/mcp")
    assert (
        remote.headers[0].secret and remote.headers[0].default is None
    )  # a secret's value never comes from the registry
    assert entry.secrets == ("Authorization",)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda e: e.pop("name"), "'name' is missing"),
        (lambda e: e.update(name="no-slash"), "malformed name"),
        (lambda e: e.update(version=3), "'version' is not a non-empty string"),
        (lambda e: e["packages"][0].update(version="^1.7.0"), "not one release"),
        (lambda e: e["packages"][0].update(version="latest"), "not one release"),
        (lambda e: e.update(packages={"a": 1}), "'packages' is not a list"),
        (lambda e: e["packages"].append("npx evil"), "packages[2] is not an object"),
        (lambda e: e.update(remotes=[{"type": "websocket", "url": "wss://x"}]), "transport 'websocket'"),
        (lambda e: e.update(remotes=[{"type": "sse", "url": "file:///etc/passwd"}]), "not http(s)"),
        (lambda e: e["packages"][0].update(packageArguments=[{"type": "shell", "value": "x"}]), "of type 'shell'"),
    ],
)
def test_an_unusable_entry_is_refused_naming_the_entry_and_the_field(change: Any, named: str) -> None:
    entry = copy.deepcopy(AIRTABLE)
    change(entry)
    with pytest.raises(RegistryDataError, match="registry entry") as raised:
        parse_server_json(entry, "https://registry.example")
    assert named in str(raised.value) and raised.value.fix
    assert isinstance(raised.value, CodemodeError)


def test_a_hostile_entry_cannot_flood_what_the_model_reads() -> None:
    entry = copy.deepcopy(AIRTABLE)
    entry["description"] = "x" * (MAX_TEXT * 50)
    entry["packages"] = [copy.deepcopy(AIRTABLE["packages"][0]) for _ in range(MAX_ITEMS * 10)]
    read = parse_server_json(entry, "https://registry.example")
    assert len(read.description) == MAX_TEXT and len(read.packages) == MAX_ITEMS


def test_not_an_object_is_refused() -> None:
    with pytest.raises(RegistryDataError, match="not a JSON object"):
        parse_server_json(["io.github.x/y"], "catalog.json")


@pytest.mark.anyio
async def test_a_static_source_hands_over_only_the_exact_name_and_version() -> None:
    older = parse_server_json({**AIRTABLE, "version": "1.7.1", "packages": []}, "catalog.json")
    latest = parse_server_json(AIRTABLE, "catalog.json")
    source = StaticSource([older, latest], where="the catalog")
    assert await source.entry(AIRTABLE["name"]) is latest
    assert await source.entry(AIRTABLE["name"], "1.7.1") is older
    with pytest.raises(ServerNotFound, match=re.escape("Did you mean 'io.github.domdomegg/airtable-mcp-server'")):
        await source.entry("io.github.domdomeg/airtable-mcp-server")  # one letter off: never taken for it
    with pytest.raises(ServerNotFound, match=re.escape("only in versions 1.7.1, 1.7.2")):
        await source.entry(AIRTABLE["name"], "9.9.9")
