"""A stdio bridge's console: on a loopback port of its own once it is turned on, with a one-time sign-in link in its
log and a private state file that `mcp-codemode console` reads to get a fresh link; the file goes when it stops.

One real bridge over stdio, started by the SDK's client as Claude Desktop or Cursor would, in a state directory of
its own (so `mcp-codemode console` finds this bridge, not another test's).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import anyio
import httpx2
import pytest

from tests.support.cells import private_state_dir
from tests.support.cli_here import cli_here
from tests.support.clients import clean_environ, require_bubblewrap, stdio_client_for, text_of
from tests.support.patience import patient

pytestmark = [pytest.mark.anyio, pytest.mark.backend]
LINK = re.compile(r"sign in \(once, within 10 minutes\) at (http://127\.0\.0\.1:\d+/console/sign-in\?code=\S+),")
PRINTED = re.compile(r"(http://127\.0\.0\.1:\d+/console/sign-in\?code=\S+)")


def _signed_in(answer: httpx2.Response) -> bool:
    cookie = answer.headers.get("set-cookie", "")
    flags = {part.strip() for part in cookie.split(";")}
    return answer.status_code == 303 and {"HttpOnly", "SameSite=Strict", "Path=/console"} <= flags


async def test_the_log_link_signs_in_once_and_the_console_command_gets_fresh_ones(tmp_path: Path) -> None:
    require_bubblewrap()
    log = tmp_path / "bridge.log"
    with private_state_dir() as state:
        settings = {"MCP_BRIDGE_CONSOLE": "on", "MCP_BRIDGE_STATE_DIR": str(state), "MCP_BRIDGE_DISCOVER": "false",
                    "MCP_BRIDGE_AUDIT_LOG": str(tmp_path / "audit.jsonl")}  # fmt: skip
        async with stdio_client_for(
            log, "legacy", MCP_BRIDGE_CONSOLE="on", MCP_BRIDGE_STATE_DIR=str(state), MCP_BRIDGE_DISCOVER="false",
            MCP_BRIDGE_AUDIT_LOG=str(tmp_path / "audit.jsonl"), MCP_BRIDGE_HIBERNATE="on",
            MCP_BRIDGE_SESSION_IDLE_TIMEOUT="1",  # the session idles out within seconds, and sleeps on disk
        ) as client:  # fmt: skip
            answer = await client.call_tool("run_python", {"code": "print('from stdio')"})
            assert "from stdio" in text_of(answer)
            found = LINK.search(log.read_text(encoding="utf-8"))
            assert found is not None, log.read_text(encoding="utf-8")
            link = found.group(1)
            (state_file,) = (state / "console").glob("*.json")
            assert stat.S_IMODE(state_file.stat().st_mode) == 0o600
            assert stat.S_IMODE((state / "console").stat().st_mode) == 0o700
            with httpx2.Client() as http:
                first = http.get(link)
                again = http.get(link)
                assert _signed_in(first) and again.status_code == 403  # the link works once
                sessions_page = link.split("/sign-in")[0] + "/sessions"
                on_disk = re.compile(
                    r'class="memory">\d+(\.\d [KM]i)? ?B on disk<'
                )  # its snapshot's size, once written
                with anyio.fail_after(patient(120)):  # listed still, as hibernated, once it idled out
                    while not on_disk.search(sessions := http.get(sessions_page).text):
                        assert ">default<" in sessions  # live, being hibernated or hibernated: never dropped out
                        await anyio.sleep(0.2)
                assert ">default<" in sessions and "hibernated" in sessions
                env = clean_environ(**settings)
                printed = [cli_here(env, "console", "--no-browser") for _ in range(2)]
                links = [PRINTED.search(done.stdout) for done in printed]
                assert all(printed_ok.returncode == 0 for printed_ok in printed) and all(links), printed
                fresh = [found.group(1) for found in links if found is not None]
                assert fresh[0] != fresh[1] and link not in fresh
                assert all(_signed_in(http.get(each)) for each in fresh)
        assert not state_file.exists()  # the bridge stopped: `mcp-codemode console` finds nothing stale
        missing = cli_here(clean_environ(**settings), "console", "--no-browser")
        assert missing.returncode != 0 and "MCP_BRIDGE_CONSOLE=on" in missing.stderr
        assert os.listdir(state / "console") == []
