"""``await runtime.find_servers(...)`` end to end: the SDK client calls run_python on a real ``mcp-codemode serve``
(bubblewrap), whose sandboxed code asks the bridge, which asks a stand-in registry serving recorded real entries,
reads a local catalog file, and reads the user's other clients' config files (a Cursor file under a HOME of the
test's own), while a real upstream server (mcp-server-time) is what the bridge already serves.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import upstreams
from tests.support.cells import private_state_dir
from tests.support.clients import require_bubblewrap, stdio_client_for, text_of
from tests.support.registry_stand_in import StandInRegistry, recorded_servers

pytestmark = [pytest.mark.backend, pytest.mark.anyio]

SECRET = "lin_api_5e3b0c7d9a1f4e2b8c6d"
TIME_ENTRY = {
    "name": "io.github.modelcontextprotocol/time",
    "description": "Time and timezone conversion capabilities.",
    "version": "2026.1.26",
    "packages": [{"registryType": "pypi", "identifier": "mcp-server-time", "version": "2026.1.26",
                  "transport": {"type": "stdio"}}],
}  # fmt: skip
WIKI = {"name": "com.example.internal/wiki", "description": "Search the company wiki's pages.", "version": "2.0.0",
        "remotes": [{"type": "streamable-http", "url": "https://wiki.internal.example/mcp",
                     "headers": [{"name": "Authorization", "isSecret": True, "isRequired": True}]}]}  # fmt: skip
CODE = """
found = await runtime.find_servers("current time and timezones", limit=3)
wiki = await runtime.find_servers("search wiki pages", limit=1)
elsewhere = runtime.find_servers_sync("linear issues", limit=1)
import json
print(json.dumps({"time": found[0], "wiki": wiki[0], "elsewhere": elsewhere[0], "notices": found.notices}))
print(repr(wiki))
"""


async def test_find_servers_from_sandboxed_code_names_registry_catalog_and_other_clients_servers(
    tmp_path: Path,
) -> None:
    require_bubblewrap()
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    cursor = home / ".cursor" / "mcp.json"
    linear = {"url": "https://mcp.linear.app/mcp", "headers": {"Authorization": f"Bearer {SECRET}"}}
    cursor.write_text(json.dumps({"mcpServers": {"linear": linear}}))
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps([WIKI]))
    config = upstreams.write_config(tmp_path / "servers.json", upstreams.time())
    with StandInRegistry([*recorded_servers(), TIME_ENTRY]) as registry, private_state_dir() as state:
        async with stdio_client_for(
            tmp_path / "serve.log", "legacy", "--config", str(config), "--no-discover",
            MCP_BRIDGE_REGISTRIES=registry.url, MCP_BRIDGE_REGISTRY_CATALOG=str(catalog), HOME=str(home),
            MCP_BRIDGE_STATE_DIR=str(state),
        ) as client:  # fmt: skip
            result = await client.call_tool("run_python", {"code": CODE})
        asked = list(registry.asked())
    text = text_of(result)
    assert not result.is_error, text
    assert SECRET not in text
    answer, printed = text.split("\n", 1)
    seen = json.loads(answer)
    assert seen["time"]["name"] == "io.github.modelcontextprotocol/time"
    assert seen["time"]["available"] == "mcp_time"  # the bridge already runs mcp-server-time
    assert seen["time"]["runs"] == [{"package": "mcp-server-time", "registry": "pypi", "version": "2026.1.26",
                                     "transport": "stdio"}]  # fmt: skip
    assert seen["wiki"]["found_in"] == f"catalog {catalog}"
    assert seen["wiki"]["needs"] == {"headers": ["Authorization"], "secrets": ["Authorization"],
                                     "sign_in": "a token in a header (see headers)"}  # fmt: skip
    assert seen["elsewhere"]["name"] == "linear" and seen["elsewhere"]["found_in"] == f"configured in {cursor}"
    assert seen["elsewhere"]["needs"] == {"headers": ["Authorization"]}
    assert seen["notices"] == []
    assert printed.startswith("1 server for 'search wiki pages':\n- com.example.internal/wiki 2.0.0")
    assert [query["version"] for query, status in asked] == ["latest"] and asked[0][1] == 200  # one page, one walk
