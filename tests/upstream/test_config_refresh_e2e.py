"""The configuration refresh end to end: a running bridge (real bubblewrap sandboxes, real server-everything
processes) whose config files and secrets change on disk, laid out as the kubelet lays out ConfigMap and Secret
volumes, with ``MCP_BRIDGE_CONFIG_REFRESH`` short so a change lands within a poll.

Each behaviour has a bridge of its own; waits are polls on what the bridge reports (its hub's servers, the
refresh's problems), bounded by the machine's patience, never a timed assertion.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcp_codemode.runs.bridge import Bridge, RunRequest
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.upstream.config.discovery import ConfigSources
from mcp_codemode.upstream.model import ServerConfig
from tests.support import upstreams
from tests.support.backends import sandbox_settings
from tests.support.cells import READY_DEADLINE, explain, guest, poll, private_state_dir, reported, run
from tests.support.clients import require_bubblewrap, stdio_client_for, text_of
from tests.support.patience import patient
from tests.support.volumes import kubelet_volume

pytestmark = [pytest.mark.backend, pytest.mark.anyio]


def entries(*servers: ServerConfig) -> dict[str, Any]:
    return {"mcpServers": {s.name: {"command": s.command, "args": list(s.args), "env": dict(s.env)} for s in servers}}


@contextlib.asynccontextmanager
async def refreshing_bridge(config: Path, secrets: Path | None = None) -> AsyncIterator[Bridge]:
    """A bridge on bubblewrap that reads ``config`` (a file or a folder) and ``secrets`` again every 0.1 s."""
    require_bubblewrap()
    with private_state_dir() as state:
        settings = sandbox_settings(runtime="bubblewrap", state_dir=state, config_refresh=0.1, secrets_dir=secrets)
        sources = ConfigSources(home=config.parent, cwd=config.parent, env={}, explicit=(config,),
                                use_defaults=False, secrets_dir=secrets)  # fmt: skip
        async with Bridge(settings, sources.discover(), sources=sources) as bridge:
            assert bridge.backend_name == "bubblewrap", bridge.backend_error
            yield bridge


def alive(pid: int | None) -> bool:
    """Whether process ``pid`` runs (a zombie waiting to be reaped has stopped running)."""
    try:
        return pid is not None and Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


async def test_a_configmap_update_adds_removes_and_restarts_only_the_servers_it_changes(tmp_path: Path) -> None:
    keep, gone = upstreams.everything("keep"), upstreams.everything("gone")
    edit = upstreams.everything("edit", env={"MARK": "one"})
    servers = kubelet_volume(tmp_path / "servers", {"team.json": entries(keep, gone, edit)}, "..2026_11_30_10_00_00.1")
    async with refreshing_bridge(servers) as bridge:
        first = reported(await run(bridge, """
            report({"keep": await mcp_keep.echo(message="k"), "gone": await mcp_gone.echo(message="g"),
                    "edit": (await mcp_edit.get_env())["MARK"]})
        """, "team"))  # fmt: skip
        assert first == {"keep": "Echo: k", "gone": "Echo: g", "edit": "one"}
        pids = {name: bridge.hub.state(name).pid for name in ("keep", "gone", "edit")}
        assert all(alive(pid) for pid in pids.values()), pids

        changed = upstreams.everything("edit", env={"MARK": "two"})
        update = entries(keep, changed, upstreams.everything("new"))
        kubelet_volume(servers, {"team.json": update}, "..2026_11_30_10_05_00.2")
        assert await poll(lambda: bridge.hub.names() == ("keep", "edit", "new"), patient(READY_DEADLINE))
        assert await poll(lambda: not alive(pids["gone"]) and not alive(pids["edit"]), patient(READY_DEADLINE))

        second = reported(await run(bridge, """
            report({"keep": await mcp_keep.echo(message="k"), "edit": (await mcp_edit.get_env())["MARK"],
                    "new": await mcp_new.echo(message="n"), "servers": runtime.discovered_servers(),
                    "gone bound": "mcp_gone" in globals(), "gone in mcp_servers": "gone" in mcp_servers})
        """, "team"))  # fmt: skip
        assert second == {"keep": "Echo: k", "edit": "two", "new": "Echo: n", "servers": ["keep", "edit", "new"],
                          "gone bound": False, "gone in mcp_servers": False}  # fmt: skip
        kept = bridge.hub.state("keep")
        assert kept.pid == pids["keep"] and kept.restarts == 0 and alive(kept.pid)  # untouched
        assert bridge.hub.state("edit").pid not in (None, pids["edit"])
        assert "new" in bridge.summary and "gone" not in bridge.summary
        assert bridge.refresh is not None and bridge.refresh.applied == 1


async def test_an_edit_that_breaks_the_file_keeps_every_running_server_until_it_is_fixed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = tmp_path / "team.json"
    config.write_text(json.dumps(entries(upstreams.everything("a"))))
    async with refreshing_bridge(config) as bridge:
        assert reported(await run(bridge, "report(await mcp_a.echo(message='1'))", "s")) == "Echo: 1"
        pid = bridge.hub.state("a").pid
        assert bridge.refresh is not None
        with caplog.at_level(logging.WARNING, logger="mcp_codemode"):
            config.write_text('{"mcpServers": {"a": {"command": ')  # saved half-way
            assert await poll(lambda: bool(bridge.refresh and bridge.refresh.problems), patient(READY_DEADLINE))
        (problem,) = bridge.refresh.problems
        assert problem.source == str(config) and "is not valid JSON" in problem.reason
        assert "The servers keep running as configured before" in caplog.text
        assert reported(await run(bridge, "report(await mcp_a.echo(message='2'))", "s")) == "Echo: 2"
        assert bridge.hub.names() == ("a",) and bridge.hub.state("a").pid == pid

        config.write_text(json.dumps(entries(upstreams.everything("a"), upstreams.everything("b"))))
        assert await poll(lambda: bridge.hub.names() == ("a", "b"), patient(READY_DEADLINE))
        assert bridge.refresh.problems == ()
        both = "report([await mcp_a.echo(message='3'), await mcp_b.echo(message='4')])"
        assert reported(await run(bridge, both, "s")) == ["Echo: 3", "Echo: 4"]
        assert bridge.hub.state("a").pid == pid


async def test_a_rotated_secret_restarts_its_server_with_the_new_value_and_no_log_shows_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old, new = "rotated-out-4d1c9e7a", "rotated-in-8b2f6a0d"
    secrets = kubelet_volume(tmp_path / "secrets", {"token": old + "\n"}, "..2026_11_30_10_00_00.1")
    server = upstreams.everything("api", env={"API_TOKEN": "${secret:token}"})
    config = tmp_path / "team.json"
    config.write_text(json.dumps(entries(server)))
    code = "report((await mcp_api.get_env())['API_TOKEN'])"
    with caplog.at_level(logging.DEBUG, logger="mcp_codemode"):
        async with refreshing_bridge(config, secrets) as bridge:
            assert reported(await run(bridge, code, "s")) == old
            pid = bridge.hub.state("api").pid
            kubelet_volume(secrets, {"token": new}, "..2026_11_30_11_00_00.2")  # the kubelet's rotation
            assert await poll(lambda: bridge.hub.config("api").env["API_TOKEN"] == new, patient(READY_DEADLINE))
            assert reported(await run(bridge, code, "s")) == new
            assert bridge.hub.state("api").pid not in (None, pid)
    assert "MCP server config changed: restarted 'api'" in caplog.text
    assert old not in caplog.text and new not in caplog.text


async def test_a_call_in_flight_on_a_removed_server_fails_at_once_saying_so(tmp_path: Path) -> None:
    config = tmp_path / "team.json"
    config.write_text(json.dumps(entries(upstreams.everything("slow"), upstreams.everything("other"))))
    async with refreshing_bridge(config) as bridge:
        code = """
            try:
                await mcp_slow.trigger_long_running_operation(duration=600, steps=1)
                report("finished")
            except runtime.MCPError as exc:
                report([type(exc).__name__, str(exc)])
        """
        call = asyncio.create_task(bridge.run(RunRequest(guest(code), timeout=900), SessionKey.cli("s")))

        def in_flight() -> bool:  # the tool call holds its link on the connection while the server works on it
            return bool(bridge.hub._connection("slow").links._links)  # the only outside view of a call in flight

        assert await poll(in_flight, patient(READY_DEADLINE)), "the long call never reached the server"
        config.write_text(json.dumps(entries(upstreams.everything("other"))))
        result = await asyncio.wait_for(call, patient(READY_DEADLINE))
        name, message = reported(result)
        assert name == "ServerUnavailable", explain(result)
        assert "'slow' is unavailable: it was removed from the bridge's configuration" in message
        assert bridge.hub.names() == ("other",)
        assert os.environ.get("MCP_BRIDGE_CONFIG_REFRESH") is None  # the settings came from the test alone


async def test_serve_over_stdio_picks_up_a_server_added_to_its_config_folder(tmp_path: Path) -> None:
    """The whole path a client sees: `mcp-codemode serve --config DIR` with the refresh on, the real SDK client, a
    file added to the folder; the new server is callable in the same session, the bridge never restarted."""
    require_bubblewrap()
    folder = tmp_path / "servers.d"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(entries(upstreams.everything("a"))))
    log = tmp_path / "serve.log"
    arguments = ("--config", str(folder), "--no-discover")
    async with stdio_client_for(log, "legacy", *arguments, MCP_BRIDGE_CONFIG_REFRESH="0.2") as client:
        names = "import mcp.runtime as runtime\nprint(sorted(runtime.discovered_servers()))"
        assert text_of(await client.call_tool("run_python", {"code": names})) == "['a']"
        (folder / "b.json").write_text(json.dumps(entries(upstreams.everything("b"))))
        deadline = time.monotonic() + patient(READY_DEADLINE)
        while text_of(await client.call_tool("run_python", {"code": names})) != "['a', 'b']":
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            await asyncio.sleep(0.1)
        echoed = await client.call_tool("run_python", {"code": "await mcp_b.echo(message='new')"})
        assert (echoed.is_error, text_of(echoed)) == (False, "'Echo: new'")
    assert "MCP server config changed: added 'b'" in log.read_text()
