"""``runtime.add_server`` end to end: a real ``mcp-codemode serve`` over HTTP on bubblewrap, the real SDK client
answering the consent question by elicitation, and real servers installed from npm and PyPI and started by the hub.

One bridge and one add of each kind serve the module (an install costs tens of seconds): Alice adds
server-everything from npm and mcp-server-time from PyPI, pinned to the versions the suite installs for its other
tests, and calls a tool of each in the same cell; Bob, another token holder, neither sees nor reaches them, and his
"no" adds nothing. server-everything is given a secret, which its ``get-env`` tool would print: the cell never sees it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest

from tests.support.cells import private_state_dir
from tests.support.clients import ClientCallbacks, HttpServer, bearer, http_client_for, require_bubblewrap, text_of

pytestmark = pytest.mark.backend  # a bridge, a sandbox, and servers installed from the registries

ROOT = Path(__file__).resolve().parents[2]
# The versions the suite already installs (tests/node/package.json, scripts/setup-upstreams.sh).
EVERYTHING_VERSION = json.loads((ROOT / "tests/node/package.json").read_text())["devDependencies"][
    "@modelcontextprotocol/server-everything"
]
TIME_VERSION = re.search(r"mcp-server-time==([0-9.]+)", (ROOT / "scripts/setup-upstreams.sh").read_text())[1]  # type: ignore[index]
SECRET = "everything-SECRET-4f1c2b9e"
ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789"
CATALOG = [
    {"name": "io.github.modelcontextprotocol/server-everything", "description": "Every MCP feature.",
     "version": EVERYTHING_VERSION,
     "packages": [{"registryType": "npm", "identifier": "@modelcontextprotocol/server-everything",
                   "version": EVERYTHING_VERSION, "runtimeHint": "npx", "transport": {"type": "stdio"},
                   "packageArguments": [{"type": "positional", "value": "stdio"}],
                   "environmentVariables": [{"name": "EVERYTHING_TOKEN", "isSecret": True, "isRequired": True}]}]},
    {"name": "io.github.modelcontextprotocol/time", "description": "Time and timezones.", "version": TIME_VERSION,
     "packages": [{"registryType": "pypi", "identifier": "mcp-server-time", "version": TIME_VERSION,
                   "runtimeHint": "uvx", "transport": {"type": "stdio"},
                   "packageArguments": [{"type": "named", "name": "--local-timezone", "value": "UTC"}]}]},
]  # fmt: skip

ADD_BOTH = """
import json
everything = await runtime.add_server("io.github.modelcontextprotocol/server-everything")
time = await runtime.add_server("io.github.modelcontextprotocol/time")
print(json.dumps({
    "added": [everything["name"], time["name"]],
    "echo": await mcp_server_everything.echo(message="hi"),
    "time": await mcp_time.get_current_time(timezone="UTC"),
    "env": str(await mcp_server_everything.get_env()),
    "listed": await runtime.list_servers(),
}, default=str))
"""

BOB_TRIES = """
import json
rows = {"listed": await runtime.list_servers(), "mine": await runtime.added_servers()}
for name in ("server-everything@{alice}", "server_everything", "time@{alice}"):
    try:
        rows[name] = str(await runtime.call_tool(name, "echo", {"message": "x"}))
    except runtime.MCPError as exc:
        rows[name] = [type(exc).__name__, str(exc)]
try:
    await runtime.add_server("io.github.modelcontextprotocol/time")
    rows["add"] = "added"
except runtime.ApprovalDenied as exc:
    rows["add"] = ["ApprovalDenied", str(exc)]
rows["after"] = await runtime.added_servers()
print(json.dumps(rows, default=str))
"""


def principal(token: str) -> str:
    return "t-" + hashlib.sha256(token.encode()).hexdigest()[:12]


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HttpServer, Path]]:
    require_bubblewrap()
    folder = tmp_path_factory.mktemp("add-server")
    catalog = folder / "catalog.json"
    catalog.write_text(json.dumps(CATALOG), encoding="utf-8")
    secrets = folder / "secrets"
    (secrets / principal(ALICE)).mkdir(parents=True)  # a token principal's added servers read only their own
    (secrets / principal(ALICE) / "EVERYTHING_TOKEN").write_text(SECRET + "\n", encoding="utf-8")
    audit = folder / "audit.jsonl"
    with private_state_dir() as state, HttpServer(
        folder / "serve.log", "--no-discover", MCP_BRIDGE_STATE_DIR=str(state), MCP_BRIDGE_AUDIT_LOG=str(audit),
        MCP_BRIDGE_HTTP_TOKEN=f"{ALICE},{BOB}", MCP_BRIDGE_REGISTRY_CATALOG=str(catalog),
        MCP_BRIDGE_SECRETS_DIR=str(secrets), MCP_BRIDGE_MAX_TIMEOUT="900", MCP_BRIDGE_REGISTRIES="off",
        MCP_BRIDGE_ADD_SERVERS="ask-all", MCP_BRIDGE_CONSOLE="on",
    ) as server:  # fmt: skip
        yield server, audit


def person(answer: str, asked: list[str]) -> ClientCallbacks:
    async def answer_it(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action=answer)  # type: ignore[arg-type]

    return ClientCallbacks(elicitation=answer_it)


async def run_cell(server: HttpServer, token: str, code: str, callbacks: ClientCallbacks) -> dict[str, Any]:
    async with http_client_for(server.url, headers=bearer(token), deadline=None, callbacks=callbacks) as client:
        result = await client.call_tool("run_python", {"code": code, "timeout": 900})
    text = text_of(result)
    assert not result.is_error, text
    rows: dict[str, Any] = json.loads(text.strip().splitlines()[0])
    return rows


@pytest.fixture(scope="module")
async def alice_added(bridge: tuple[HttpServer, Path]) -> tuple[dict[str, Any], list[str]]:
    asked: list[str] = []
    rows = await run_cell(bridge[0], ALICE, ADD_BOTH, person("accept", asked))
    return rows, asked


@pytest.mark.anyio
async def test_a_person_adds_an_npm_and_a_pypi_server_and_the_same_cell_calls_both(
    bridge: tuple[HttpServer, Path], alice_added: tuple[dict[str, Any], list[str]]
) -> None:
    rows, asked = alice_added
    alice = principal(ALICE)
    assert rows["added"] == [f"server-everything@{alice}", f"time@{alice}"]
    assert "hi" in str(rows["echo"]) and "UTC" in str(rows["time"]), rows
    assert SECRET not in json.dumps(rows) and "EVERYTHING_TOKEN" in rows["env"], rows["env"][:300]
    assert set(rows["added"]) <= set(rows["listed"])
    everything, time = asked
    assert f"@modelcontextprotocol/server-everything@{EVERYTHING_VERSION}" in everything
    assert "Secret environment variable EVERYTHING_TOKEN" in everything and SECRET not in everything
    assert f"mcp-server-time=={TIME_VERSION}" in time and "--local-timezone UTC" in time
    lines = [json.loads(line) for line in bridge[1].read_text().splitlines()]
    consents = [line for line in lines if line.get("kind") == "add_server"]
    assert [(c["owner"], c["outcome"], c["shown"]) for c in consents] == [
        (alice, "ok", everything), (alice, "ok", time)]  # fmt: skip


@pytest.mark.anyio
async def test_another_token_holder_neither_sees_nor_reaches_them_and_a_no_adds_nothing(
    bridge: tuple[HttpServer, Path], alice_added: tuple[dict[str, Any], list[str]]
) -> None:
    alice = principal(ALICE)
    asked: list[str] = []
    rows = await run_cell(bridge[0], BOB, BOB_TRIES.replace("{alice}", alice), person("decline", asked))
    assert not any("@" in name for name in rows["listed"]) and rows["mine"] == [] and rows["after"] == []
    for name in (f"server-everything@{alice}", "server_everything", f"time@{alice}"):
        assert rows[name][0] == "ServerNotFound", rows[name]
        assert alice not in rows[name][1].replace(repr(name), ""), rows[name]  # only the name Bob asked for
    assert rows["add"][0] == "ApprovalDenied" and "declined" in rows["add"][1]
    assert len(asked) == 1 and "mcp-server-time" in asked[0]


async def console_pages(server: HttpServer, token: str) -> tuple[str, str]:
    """The console's Servers page and its Search page for ``time``, as ``token``'s holder sees them."""
    origin = server.url.rsplit("/", 1)[0]
    async with httpx2.AsyncClient(base_url=origin) as browser:
        signed = await browser.post("/console/sign-in", data={"token": token}, headers={"Origin": origin})
        assert signed.status_code == 303, signed.text
        servers = await browser.get("/console/servers")
        search = await browser.get("/console/search", params={"q": "current time in a timezone"})
    assert servers.status_code == search.status_code == 200
    return servers.text, search.text


@pytest.mark.anyio
async def test_the_console_shows_a_token_holder_only_the_servers_he_added(
    bridge: tuple[HttpServer, Path], alice_added: tuple[dict[str, Any], list[str]]
) -> None:
    alice = principal(ALICE)
    servers, search = await console_pages(bridge[0], ALICE)
    assert f"time@{alice}" in servers and f"time@{alice}" in search and "get_current_time" in search
    servers, search = await console_pages(bridge[0], BOB)  # another principal's servers are neither named nor searched
    assert alice not in servers and alice not in search and "get_current_time" not in search
