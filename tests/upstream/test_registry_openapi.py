"""The recorded registry data and the stand-in's answers, checked against the registry's own OpenAPI schemas.

The stand-in is only an honest stand-in if what it serves is what the MCP Registry's API document says it serves:
every recorded entry is a valid ``ServerDetail``, every page a valid ``ServerList`` and every one-server answer a
valid ``ServerResponse`` (tests/data/registry/openapi-schemas.json: the components of the registry's openapi.yaml).
The entries the schema refuses (recorded from the same repository) prove the check can fail.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from mcp_codemode.upstream.registry.entries import RegistryDataError, parse_server_json
from tests.support.registry_stand_in import DATA, StandInRegistry, recorded_servers

SCHEMAS = Path(__file__).resolve().parent.parent / "data" / "registry" / "openapi-schemas.json"


def validator(component: str) -> jsonschema.protocols.Validator:
    document: dict[str, Any] = json.loads(SCHEMAS.read_text())
    schema = {"$ref": f"#/components/schemas/{component}", "components": document["components"]}
    cls = jsonschema.validators.validator_for({"$schema": document["jsonSchemaDialect"]})
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def test_every_recorded_entry_is_a_server_detail_and_is_read_as_one() -> None:
    check = validator("ServerDetail")
    for server in recorded_servers():
        check.validate(server)
        entry = parse_server_json(server, "recorded")
        assert (entry.name, entry.version) == (server["name"], server["version"])


def test_the_recorded_entries_the_schema_refuses_are_refused_by_it() -> None:
    check = validator("ServerDetail")
    refused = json.loads(DATA.read_text())["refused_by_schema"]
    assert len(refused) == 3
    for case in refused:
        assert not check.is_valid(case["recorded"]), case["why"]
    with pytest.raises(RegistryDataError, match="malformed name"):  # the reader refuses the first too
        parse_server_json(refused[0]["recorded"], "recorded")


@pytest.mark.backend  # real HTTP on 127.0.0.1
def test_the_stand_ins_pages_and_single_answers_are_what_the_api_document_says() -> None:
    pages, single = validator("ServerList"), validator("ServerResponse")
    with StandInRegistry() as registry:
        registry.set_status("io.github.domdomegg/time-mcp-nuget", "deprecated")

        def get(path: str, **query: str) -> Any:
            url = registry.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
            with urllib.request.urlopen(url) as response:
                return json.load(response)

        cursor, walked = "", 0
        while True:
            page = get("/v0.1/servers", limit="2", **({"cursor": cursor} if cursor else {}))
            pages.validate(page)
            walked += len(page["servers"])
            cursor = page["metadata"].get("nextCursor", "")
            if not cursor:
                break
        assert walked == len(recorded_servers())
        for query in ({"version": "latest"}, {"search": "time"}, {"updated_since": "2025-10-01T00:03:00Z"}):
            pages.validate(get("/v0.1/servers", **query))
        name = urllib.parse.quote("io.github.domdomegg/airtable-mcp-server", safe="")
        for version in ("latest", "1.7.2"):
            single.validate(get(f"/v0.1/servers/{name}/versions/{version}"))
        answer = get(f"/v0.1/servers/{name}/versions/latest")
    # The checks bite: an item without its server, and registry metadata the API document does not define.
    assert not pages.is_valid({"servers": [{"_meta": {}}]})
    answer["_meta"]["io.modelcontextprotocol.registry/official"]["verified"] = True
    assert not single.is_valid(answer)
