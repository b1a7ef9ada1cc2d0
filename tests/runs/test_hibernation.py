"""Sessions that hibernate, end to end on a real sandbox: idle-out, eviction and a stopping bridge write them to disk,
the next call (on this bridge or another sharing the store, as a replica would) brings them back with what they held
and says what could not come; a snapshot changed on disk is refused; no other principal and no sandboxed code reaches
the store; reset and ``runtime.hibernation(False)`` drop it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcp_codemode.runs.bridge import Bridge, RunRequest
from mcp_codemode.runs.hibernation import Hibernation
from mcp_codemode.sandbox.results import ExecutionResult
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.upstream.model import Discovery
from tests.support.backends import ONE_BACKEND, sandbox_settings
from tests.support.cells import RUN_TIMEOUT, guest, poll, private_state_dir, reported

# The exchange is the same frames on every backend: one real sandbox proves it (ONE_BACKEND).
pytestmark = [pytest.mark.backend, pytest.mark.usefixtures("no_orphans"), ONE_BACKEND]

ALICE = SessionKey.principal("alice", "work")
BUILD = """
import json
LIMIT = 4
class Point:
    def __init__(self, x):
        self.x = x
def double(v):
    return v * 2
origin = Point(LIMIT)
rows = [{"n": i, "text": "x" * 100} for i in range(2000)]
with open("/workspace/notes.txt", "w") as out:
    out.write("kept on disk")
gen = (i for i in range(3))
fh = open("/workspace/notes.txt")
"""
CHECK = """
report({"double": double(LIMIT), "point": type(origin).__name__, "x": origin.x, "rows": len(rows),
        "json": json.dumps([1]), "file": open("/workspace/notes.txt").read(), "gen": "gen" in globals()})
"""


@contextlib.asynccontextmanager
async def _bridge(state: Path, runtime: str, **changes: Any) -> AsyncIterator[Bridge]:
    settings = sandbox_settings(runtime=runtime, state_dir=state, hibernate=True, **changes)
    async with Bridge(settings, Discovery()) as bridge:
        assert bridge.backend_name == runtime, bridge.backend_error
        yield bridge


async def _run(bridge: Bridge, code: str, key: SessionKey = ALICE, **request: Any) -> ExecutionResult:
    return await bridge.run(RunRequest(guest(code), timeout=RUN_TIMEOUT, **request), key, owner=key.owner or "local")


def _hibernation(bridge: Bridge) -> Hibernation:
    assert bridge.sessions is not None and bridge.sessions.hibernation is not None
    return bridge.sessions.hibernation


def test_an_idle_session_hibernates_and_its_next_call_restores_it(backend_name: str) -> None:
    async def body(state: Path) -> None:
        async with _bridge(state, backend_name, session_idle_timeout=1.0) as bridge:
            built = await _run(bridge, BUILD)
            assert built.status == "ok", built
            hibernation = _hibernation(bridge)
            assert await poll(lambda: hibernation.has(str(ALICE)), 60), "the idle session was not hibernated"
            assert bridge.live_sessions() == []  # its sandbox is closed: only the file is left
            snapshot = hibernation.store.path(str(ALICE))
            assert stat.S_IMODE(snapshot.stat().st_mode) == 0o600
            assert stat.S_IMODE(snapshot.parent.stat().st_mode) == 0o700
            # Another principal's session of the same name gets nothing of it, and its code cannot reach the store.
            bob = SessionKey.principal("bob", "work")
            probe = await _run(bridge, f"""
                import os
                seen = []
                for path in ({str(snapshot.parent)!r}, {str(snapshot)!r}):
                    try:
                        seen.append(os.listdir(path) if path.endswith("hibernated") else open(path, "rb").read(1))
                    except OSError as exc:
                        seen.append(type(exc).__name__)
                report({{"seen": seen, "has_rows": "rows" in globals()}})
                """, bob)  # fmt: skip
            assert reported(probe) == {"seen": ["FileNotFoundError"] * 2, "has_rows": False}, probe
            assert "restored" not in probe.notice
            restored = await _run(bridge, CHECK)
        assert reported(restored) == {"double": 8, "point": "Point", "x": 4, "rows": 2000, "json": "[1]",
                                      "file": "kept on disk", "gen": False}, restored  # fmt: skip
        assert restored.notice.startswith("This session was hibernated (it idled out after 1 s) and restored"), restored
        assert "gen (generator: TypeError: cannot pickle 'generator' object)" in restored.notice
        assert "fh (TextIOWrapper: TypeError: cannot pickle '_io.TextIOWrapper' object)" in restored.notice

    with private_state_dir() as state:
        asyncio.run(body(state))


def test_eviction_and_a_stopping_bridge_hibernate_and_another_bridge_sharing_the_store_restores(
    backend_name: str,
) -> None:
    """Two bridges on one store are two replicas sharing it (MCP_BRIDGE_HIBERNATE_DIR on a shared volume)."""
    other = SessionKey.principal("alice", "other")

    async def body(state: Path) -> None:
        async with _bridge(state, backend_name, max_sessions=1) as first:
            assert (await _run(first, BUILD)).status == "ok"
            evicting = await _run(first, "kept = 'other'", other)  # the cap closes ALICE's session: hibernated
            assert evicting.status == "ok" and _hibernation(first).has(str(ALICE))
            back = await _run(first, CHECK)  # and ALICE's call hibernates the other one in turn
            assert reported(back)["rows"] == 2000 and "closed to make room for another session" in back.notice
        # The first stopped: ALICE's session was hibernated as it closed.
        async with _bridge(state, backend_name, max_sessions=4) as second:
            hibernation = _hibernation(second)
            assert hibernation.has(str(ALICE)) and hibernation.has(str(other))
            again = await _run(second, CHECK)
            assert reported(again)["x"] == 4 and "(the bridge stopped)" in again.notice, again
            reset = await _run(second, "report('kept' in globals())", other, reset=True)
            assert reported(reset) is False and not hibernation.has(str(other))
            opted_out = await _run(second, "import mcp.runtime as runtime\nreport(runtime.hibernation(False))")
            assert reported(opted_out) is False
        async with _bridge(state, backend_name) as third:
            assert not _hibernation(third).has(str(ALICE))  # it opted out: dropped as the second bridge stopped

    with private_state_dir() as state:
        asyncio.run(body(state))


def _tampered(data: bytes, how: str) -> bytes:
    if how == "planted":
        return os.urandom(len(data))
    if how == "edited":
        return data[:100] + bytes([data[100] ^ 1]) + data[101:]
    if how == "truncated":
        return data[: len(data) // 2]
    return data[:100] + b"\0" * (2 << 20) + data[100:]  # oversized: over the 1 MiB bound


def test_a_snapshot_changed_on_disk_is_refused_and_the_session_starts_fresh(backend_name: str) -> None:
    async def body(state: Path) -> None:
        async with _bridge(state, backend_name, hibernate_max_bytes=1 << 20) as bridge:
            assert (await _run(bridge, "secret = 41")).status == "ok"
            assert bridge.sessions is not None
            await bridge.sessions.lose(str(ALICE), "", keep=True)  # hibernated as a stopping replica hands it over
            snapshot = _hibernation(bridge).store.path(str(ALICE))
            sound = snapshot.read_bytes()
            for how in ("planted", "edited", "truncated", "oversized"):
                snapshot.write_bytes(_tampered(sound, how))
                snapshot.chmod(0o600)
                result = await _run(bridge, "report(globals().get('secret'))")
                assert reported(result) is None, (how, result)
                assert result.notice.startswith("A snapshot of this session was found but refused ("), (how, result)
                assert not snapshot.exists()
                await bridge.sessions.lose(str(ALICE), "")  # closed, not hibernated: the next round plants again
            snapshot.write_bytes(sound)
            snapshot.chmod(0o600)
            assert reported(await _run(bridge, "report(secret + 1)")) == 42  # the sound one still comes back

    with private_state_dir() as state:
        asyncio.run(body(state))
