"""The pure half of the configuration refresh: what counts as a change on disk, what a new configuration changes,
and the rule that a configuration with a new problem is never applied (nothing of the running one is lost).

Files in tmp_path laid out as the kubelet lays out a ConfigMap volume; the bridge is a stand-in that records what
it is asked to apply (``tests/upstream/test_config_refresh_e2e.py`` runs the real one).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_codemode.runs.config_refresh import ConfigRefresh
from mcp_codemode.upstream.config.discovery import ConfigSources
from mcp_codemode.upstream.config.refresh import Changes, changes, fingerprint
from mcp_codemode.upstream.model import ConfigProblem, Discovery, ServerConfig
from tests.support.volumes import kubelet_volume


def servers(**entries: Any) -> dict[str, Any]:
    return {"mcpServers": entries}


def stdio(name: str, *args: str) -> ServerConfig:
    return ServerConfig(name=name, alias=name, transport="stdio", source="x", command="server", args=args)


def test_a_configmap_swap_and_a_same_size_rewrite_in_place_are_both_changes(tmp_path: Path) -> None:
    volume = kubelet_volume(tmp_path / "servers", {"team.json": servers(a={"command": "x"})}, "..v1")
    watched = ((volume, True),)
    before = fingerprint(watched)
    assert fingerprint(watched) == before
    kubelet_volume(volume, {"team.json": servers(a={"command": "y"})}, "..v2")  # the same size, another inode
    swapped = fingerprint(watched)
    assert swapped != before
    plain = tmp_path / "plain.json"
    plain.write_text('{"mcpServers": {"a": {"command": "x"}}}')
    first = fingerprint(((plain, False),))
    plain.write_text('{"mcpServers": {"a": {"command": "y"}}}')  # same inode, same size, likely the same tick
    assert fingerprint(((plain, False),)) != first
    plain.unlink()
    assert fingerprint(((plain, False),)) != first  # gone is a change too


def test_changes_name_what_was_added_removed_and_changed_and_nothing_else() -> None:
    running = {"keep": stdio("keep"), "gone": stdio("gone"), "edit": stdio("edit", "--old")}
    found = changes(running, [stdio("keep"), stdio("edit", "--new"), stdio("new")])
    assert found == Changes(added=("new",), removed=("gone",), changed=("edit",))
    assert found.describe() == "added 'new'; removed 'gone'; restarted 'edit'"
    assert not changes(running, list(running.values()))


class Applied:
    """The bridge's side, recorded: every discovery it was asked to run."""

    def __init__(self) -> None:
        self.seen: list[Discovery] = []

    async def __call__(self, discovery: Discovery) -> Changes:
        self.seen.append(discovery)
        return Changes(added=tuple(server.name for server in discovery.servers))


@pytest.mark.anyio
async def test_an_edit_that_breaks_the_config_is_not_applied_until_it_is_fixed(tmp_path: Path) -> None:
    two = servers(a={"command": "x"}, b={"command": "y"})
    volume = kubelet_volume(tmp_path / "servers", {"team.json": two}, "..v1")
    sources = ConfigSources(home=tmp_path, cwd=tmp_path, env={}, explicit=(volume,), use_defaults=False)
    applied = Applied()
    refresh = ConfigRefresh(sources, 1.0, applied)
    assert await refresh.check() is not None  # the first look reads everything again
    assert [s.name for s in applied.seen[-1].servers] == ["a", "b"]
    assert await refresh.check() is None and len(applied.seen) == 1  # nothing changed on disk: nothing read

    (volume / "..data" / "team.json").write_text('{"mcpServers": {"a": {"command": "x"},')  # a broken edit
    assert await refresh.check() is None and len(applied.seen) == 1  # b is not dropped with the broken file
    (problem,) = refresh.problems
    assert problem.source.endswith("team.json") and "is not valid JSON" in problem.reason

    secrets = tmp_path / "secrets"
    secrets.mkdir()
    fixed = servers(a={"command": "x"}, c={"command": "z", "env": {"T": "${secret:token}"}})
    sources = ConfigSources(home=tmp_path, cwd=tmp_path, env={}, explicit=(volume,), use_defaults=False,
                            secrets_dir=secrets)  # fmt: skip
    refresh.sources = sources
    kubelet_volume(volume, {"team.json": fixed}, "..v2")  # an entry whose secret is not mounted yet: still held back
    assert await refresh.check() is None and len(applied.seen) == 1
    assert "does not exist" in refresh.problems[0].reason
    (secrets / "token").write_text("now-mounted")  # the Secret arrives: the whole change goes in at once
    assert await refresh.check() is not None
    assert [s.name for s in applied.seen[-1].servers] == ["a", "c"] and refresh.problems == ()


@pytest.mark.anyio
async def test_problems_the_running_configuration_had_do_not_hold_a_refresh_back(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json")
    team = tmp_path / "team.json"
    team.write_text(json.dumps(servers(a={"command": "x"})))
    sources = ConfigSources(home=tmp_path, cwd=tmp_path, env={}, explicit=(team, broken), use_defaults=False)
    at_start = sources.discover()
    assert [p.source for p in at_start.problems] == [str(broken)]
    applied = Applied()
    refresh = ConfigRefresh(sources, 1.0, applied, accepted=at_start.problems)
    team.write_text(json.dumps(servers(a={"command": "x"}, b={"command": "y"})))
    assert await refresh.check() is not None
    assert [s.name for s in applied.seen[-1].servers] == ["a", "b"]
    assert refresh.problems == ()
    assert isinstance(at_start.problems[0], ConfigProblem)
