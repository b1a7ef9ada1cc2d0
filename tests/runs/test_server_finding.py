"""The relay's find_servers request: its parameters checked, and the user's other clients' servers shown to the
local user alone (a principal of the HTTP face is someone else), never one the policy refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from mcp_codemode.policy.rules import Policy
from mcp_codemode.runs.relay_params import Refusal
from mcp_codemode.runs.server_finding import ServerFinding
from mcp_codemode.upstream.model import Discovery, ServerConfig, SkippedServer
from mcp_codemode.upstream.tools.directory import ToolDirectory
from tests.support import upstreams
from tests.support.backends import sandbox_settings

pytestmark = pytest.mark.anyio


def disabled(name: str) -> SkippedServer:
    config = ServerConfig(name=name, alias=name, transport="stdio", source="/home/u/.cursor/mcp.json", command="npx",
                          args=("-y", f"{name}-mcp"), description=f"The {name} tracker's issues")  # fmt: skip
    return SkippedServer(config, "disabled in /home/u/.cursor/mcp.json")


@pytest.fixture
def finding(tmp_path: Path) -> ServerFinding:
    settings = sandbox_settings(state_dir=tmp_path, policy=Policy(deny_servers=("hidden",)))
    found = ServerFinding(ToolDirectory([upstreams.time()], settings), settings)
    found.discovery = lambda: Discovery(servers=(upstreams.time(),), skipped=(disabled("linear"), disabled("hidden")))
    return found


def ask(**params: Any) -> Any:
    return cast(Any, {"type": "call", "id": 1, "op": "find_servers", **params})


async def test_other_clients_servers_are_the_local_users_alone(finding: ServerFinding) -> None:
    local = await finding.answer("local", ask(query="tracker issues"))
    assert [found["name"] for found in local["servers"]] == ["linear"]  # never "hidden", which the policy refuses
    assert local["servers"][0]["not_started"] == "disabled in /home/u/.cursor/mcp.json"
    remote = await finding.answer("t-0123456789ab", ask(query="tracker issues"))
    assert remote["servers"] == []


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"query": "x", "limits": 3}, "find_servers() got unknown parameter(s) 'limits'; it takes query and limit"),
        ({"query": "   "}, "query is empty; give a query"),
        ({"query": "x", "limit": 51}, "limit must be a whole number from 1 to 50"),
        ({"query": ["x"]}, "query must be a string"),
    ],
)
async def test_a_wrong_parameter_is_refused_in_words(finding: ServerFinding, params: dict[str, Any], said: str) -> None:
    with pytest.raises(Refusal) as refused:
        await finding.answer("local", ask(**params))
    assert str(refused.value).startswith(said)
