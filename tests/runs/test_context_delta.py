"""The servers, versions, policy and summary go to a sandbox when they change, not with every cell.

The guest keeps what it was sent; the names it binds (``runtime``, ``mcp_servers``, ``mcp_<alias>``) are bound
again before every cell, so code that deleted one gets it back, as it did when everything came with each cell.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from mcp_codemode.runs.bridge import Bridge
from mcp_codemode.sandbox.worker import Worker
from mcp_codemode.upstream.model import Discovery
from tests.support import upstreams
from tests.support.backends import sandbox_settings
from tests.support.cells import private_state_dir, reported, run
from tests.support.clients import require_bubblewrap

pytestmark = pytest.mark.backend


@pytest.mark.anyio
async def test_the_context_is_sent_on_change_and_the_names_come_back(monkeypatch: pytest.MonkeyPatch) -> None:
    require_bubblewrap()
    executes: list[dict[str, Any]] = []
    send = Worker._send

    def recording(self: Worker, message: dict[str, Any]) -> None:
        if message.get("type") == "execute":
            executes.append(message)
        send(self, message)

    monkeypatch.setattr(Worker, "_send", recording)
    with private_state_dir() as state:
        settings = sandbox_settings(runtime="bubblewrap", state_dir=state, warm_pool=0)
        async with Bridge(settings, Discovery(servers=(upstreams.everything(),))) as bridge:
            cells = [
                "report(str(await mcp_everything.echo(message='one')))",
                "del mcp_everything, mcp_servers, runtime\nreport('deleted')",
                "report([str(await mcp_everything.echo(message='two')), sorted(mcp_servers), runtime.__name__])",
                "mcp_everything = 5\nreport('rebound')",
                "report(mcp_everything)",
            ]
            results = [reported(await run(bridge, cell, "delta")) for cell in cells]
    assert "Echo: one" in results[0]
    assert "Echo: two" in results[2][0] and results[2][1] == ["everything"] and results[2][2] == "mcp.runtime"
    assert results[4] == 5, "a name the code rebound is its own"
    assert len(executes) == len(cells)
    first, *later = executes
    assert {"servers", "versions", "policy"} <= set(first["context"]), first
    assert [s["name"] for s in first["context"]["servers"]] == ["everything"]
    for message in later:
        changed = message.get("context", {})
        assert "servers" not in changed and "policy" not in changed, message
    summaries = [message.get("summary") for message in executes]
    assert summaries[0], "the first cell carries the summary"
    sent = [s for s in summaries if s is not None]
    assert all(a != b for a, b in itertools.pairwise(sent)), "a summary is sent again only when it changed"
