"""Pure pieces of find_servers(): plain text, identity and likeness, catalog files, and the guest's printed answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_codemode.guest.mcp import _rpc
from mcp_codemode.guest.mcp._finding import FoundServers, _params
from mcp_codemode.upstream.model import ServerConfig
from mcp_codemode.upstream.registry.candidates import available_as, plain, public_url, resembles
from mcp_codemode.upstream.registry.catalog import read_catalog
from mcp_codemode.upstream.registry.entries import parse_server_json
from mcp_codemode.upstream.suggest import close_matches
from tests.support.registry_stand_in import recorded_servers


def test_plain_text_is_one_visible_line_clipped_with_an_ellipsis() -> None:
    assert plain("a\x1b[1mb\r\n\n\tc\u2066d\u2069\ufeff e", 100) == "a[1mb cd e"
    assert plain("x" * 10, 5) == "xxxx…"
    assert public_url("https://u:p@Host.example:8443/mcp/?k=v#f") == "https://host.example:8443/mcp/"


def test_available_means_the_same_package_or_url_and_resembling_is_said_apart() -> None:
    airtable = parse_server_json(recorded_servers()[1], "r")
    installed = ServerConfig(name="tables", alias="tables", transport="stdio", source="x", command="node",
                             args=("/opt/lib/node_modules/airtable-mcp-server/dist/index.js",))  # fmt: skip
    other = ServerConfig(name="airtable-mcp-server", alias="airtable_mcp_server", transport="stdio", source="x",
                         command="npx", args=("-y", "airtable-mcp-server-fork"))  # fmt: skip
    assert available_as(airtable, [other, installed]) == "mcp_tables"
    assert available_as(airtable, [other]) is None
    assert resembles(airtable.name, [other.name, "tables", airtable.name]) == ["airtable-mcp-server"]


def test_a_catalog_reads_a_saved_registry_page_and_marks_the_last_version_latest(tmp_path: Path) -> None:
    servers = recorded_servers()
    saved = tmp_path / "page.json"
    saved.write_text(json.dumps({"servers": [{"server": servers[0]}, {"server": servers[1]}], "metadata": {}}))
    read = read_catalog(saved)
    assert read.problems == ()
    assert [(entry.version, entry.is_latest) for entry in read.entries] == [("1.7.2", False), ("1.7.3", True)]
    not_array = tmp_path / "object.json"
    not_array.write_text('{"name": "x"}')
    assert read_catalog(not_array).problems == (f"the catalog {not_array} is a JSON dict, not an array; write "
                                                 "[{...server.json...}, ...]",)  # fmt: skip


def test_the_guest_checks_its_arguments_and_prints_an_answer_a_model_can_read() -> None:
    with pytest.raises(_rpc.ArgumentError, match="needs a query"):
        _params("  ", 10)
    with pytest.raises(_rpc.ArgumentError, match="limit must be an int from 1 to 50"):
        _params("x", True)
    found = FoundServers(
        [{"name": "io.github.x/time", "version": "1.0", "description": "Time.", "available": "mcp_time",
          "runs": [{"package": "mcp-server-time", "registry": "pypi", "version": "1.0", "transport": "stdio"}],
          "needs": {"env": ["TZ"]}, "found_in": "registry https://r.example", "resembles": ["time"]}, "junk"],
        query="time", notices=["the registry https://o.example could not be reached"],
    )  # fmt: skip
    assert len(found) == 1
    assert repr(found) == "\n".join([
        "1 server for 'time':",
        "- io.github.x/time 1.0",
        "  already available as mcp_time",
        "  Time.",
        "  runs: pypi mcp-server-time@1.0 (stdio)",
        "  needs: TZ",
        "  from registry https://r.example",
        "  resembles (not the same): time",
        "note: the registry https://o.example could not be reached",
    ])  # fmt: skip


def test_resembling_is_difflibs_close_match_of_the_whole_name_or_of_its_last_part() -> None:
    """``resembles`` reuses one matcher per name for speed; what it finds must stay ``close_matches``'s answer."""
    names = ["io.github.acme/fs", "io.github.acrne/fs", "filesystem", "io.example/filesystem", "io.github.acme/fss",
             "io.github.acme/weather", "io.github.acme/weathr", "com.example/weather-mcp", "a/b", "a/c",
             "io.github.domdomegg/airtable-mcp-server", "io.github.domdomeg/airtable-mcp-server",
             "io.github.felores/airtable-mcp", "io.github.x/mcp-server-kubernetes",
             "io.github.y/kubernetes-mcp-server"]  # fmt: skip
    for name in names:
        short = name.rsplit("/", 1)[-1].lower()
        expected = [
            other for other in names
            if other != name and (other.rsplit("/", 1)[-1].lower() == short
                                  or close_matches(name.lower(), [other.lower()], n=1, cutoff=0.9)
                                  or (len(short) > 3 and close_matches(short, [other.rsplit("/", 1)[-1].lower()],
                                                                       n=1, cutoff=0.85)))
        ]  # fmt: skip
        assert resembles(name, names) == expected, name
    assert resembles("io.github.acme/weather", names) == ["io.github.acme/weathr"]
