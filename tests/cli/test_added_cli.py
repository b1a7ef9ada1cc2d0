"""``mcp-codemode added``: the person lists and removes the servers code added with their consent, without the model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_codemode.cli.added import with_added
from mcp_codemode.cli.login import remote_server
from mcp_codemode.cli.main import main
from mcp_codemode.settings import Settings
from mcp_codemode.upstream.model import Discovery
from mcp_codemode.upstream.registry.added import AddedServer, AddedStore
from mcp_codemode.upstream.registry.entries import parse_server_json
from mcp_codemode.upstream.registry.plans import plan_for

TIME = {"name": "io.github.modelcontextprotocol/time", "description": "", "version": "2026.10.19",
        "packages": [{"registryType": "pypi", "identifier": "mcp-server-time", "version": "2026.10.19"}]}  # fmt: skip


def test_the_person_lists_each_principals_added_servers_and_removes_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MCP_BRIDGE_STATE_DIR", str(tmp_path))
    plan = plan_for(parse_server_json(TIME, "catalog"), ["pypi"])
    store = AddedStore(tmp_path / "added-servers")
    for owner in ("local", "t-0123456789ab"):
        store.save(owner, [AddedServer("time", "time", owner, plan, plan.digest(), "/x/bin/mcp-server-time", "now")])
    assert main(["added", "list"]) == 0
    listed = capsys.readouterr().out
    assert "time@local (mcp_time): io.github.modelcontextprotocol/time 2026.10.19" in listed
    assert "time@t-0123456789ab" in listed and "mcp-server-time==2026.10.19" in listed
    assert main(["added", "remove", "time"]) == 0
    assert store.load("local") == [] and len(store.load("t-0123456789ab")) == 1
    assert main(["added", "list", "--json"]) == 0
    assert [s["name"] for s in json.loads(capsys.readouterr().out.split("\n", 1)[1])] == ["time@t-0123456789ab"]
    assert main(["added", "remove", "time"]) != 0  # none left of local's: said, not silently ignored


def test_an_added_remote_server_is_one_login_can_sign_in_to(tmp_path: Path) -> None:
    remote = {"name": "com.example/weather", "description": "", "version": "1.0.0",
              "remotes": [{"type": "streamable-http", "url": "https://weather.example.com/mcp",
                           "headers": [{"name": "Authorization", "isSecret": True}]}]}  # fmt: skip
    plan = plan_for(parse_server_json(remote, "catalog"), [])
    AddedStore(tmp_path / "added-servers").save("local", [AddedServer("weather", "weather", "local", plan,
                                                                      plan.digest())])  # fmt: skip
    found = remote_server(with_added(Settings(state_dir=tmp_path), Discovery()), "weather@local")
    assert (found.transport, found.url) == ("http", "https://weather.example.com/mcp")
