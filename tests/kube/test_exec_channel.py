"""The session suite over the loopback exec stand-in: a REAL bubblewrap worker behind a 127.0.0.1 WebSocket that
speaks the Kubernetes pods/exec subprotocol (v4 and v5), driven by the host's unmodified Worker through the same
ExecChannel the kubernetes backend uses. No Kubernetes is involved (no registry ships a control plane)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import pytest

from mcp_codemode.runs.sessions import SessionManager
from mcp_codemode.sandbox.bubblewrap import BubblewrapBackend
from mcp_codemode.sandbox.kube.exec_protocol import SUBPROTOCOLS, V4, V5
from mcp_codemode.sandbox.worker import Worker
from mcp_codemode.settings import Settings
from tests.support.backends import require_usable, sandbox_settings
from tests.support.cells import private_state_dir
from tests.support.exec_endpoint import ExecEndpoint, LoopbackExecBackend

if TYPE_CHECKING:
    from mcp_codemode.guest.protocol import CallFrame
    from mcp_codemode.reply_encoding import Reply

pytestmark = pytest.mark.backend
Body = Callable[[Worker, ExecEndpoint], Awaitable[Any]]


@pytest.fixture(params=[V5, V4], ids=["v5", "v4"])
def over_exec(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """Run ``body(worker, endpoint)`` on a started worker behind the stand-in that speaks only ``param``; after it,
    every process of every worker the stand-in started must be gone."""
    protocol: str = request.param

    def run(body: Body, **changes: Any) -> Any:
        with private_state_dir() as state:
            settings = sandbox_settings(state_dir=state, **changes)
            require_usable(BubblewrapBackend(settings))

            async def main() -> Any:
                async with ExecEndpoint(settings, protocols=(protocol,)) as endpoint:
                    worker = Worker(LoopbackExecBackend(endpoint, SUBPROTOCOLS), settings, "exec-test")
                    await worker.start()
                    try:
                        return await body(worker, endpoint)
                    finally:
                        await worker.close()
                        assert set(endpoint.chosen) == {protocol}
                        await _assert_all_gone(endpoint)

            return asyncio.run(main())

    return run


async def _assert_all_gone(endpoint: ExecEndpoint) -> None:
    """Every bwrap process and its tree the stand-in started is gone (a bounded wait for the kernel to reap).

    Checked on the exact processes (pid and start time) rather than on every process of the sandbox uid: other
    workers share this machine and run sandboxes of their own."""
    processes = endpoint.every_process()
    assert processes, "the stand-in recorded no worker processes"
    deadline = time.monotonic() + 15
    while any(proc.alive() for proc in processes) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert [proc.command for proc in processes if proc.alive()] == []


def test_loopback_exec_stand_in_keeps_state_across_calls(over_exec) -> None:
    async def body(worker: Worker, endpoint: ExecEndpoint) -> Any:
        first = await worker.execute("import math\nx = 20\ndef double(v):\n    return v * 2", 20)
        worker.keepalive()  # dropped by the guest; the next cell sees the same namespace
        second = await worker.execute("print(double(x) + math.floor(2.5))", 20)
        return first, second

    first, second = over_exec(body)
    assert first.status == "ok"
    assert (second.status, second.stdout) == ("ok", "42\n")


def test_loopback_exec_stand_in_interrupt_on_timeout_keeps_state(over_exec) -> None:
    async def body(worker: Worker, endpoint: ExecEndpoint) -> Any:
        await worker.execute("kept = 'yes'", 20)
        stuck = await worker.execute("import time\nwhile True:\n    time.sleep(0.01)", 0.5)
        after = await worker.execute("kept", 20)
        return stuck, after

    stuck, after = over_exec(body)
    assert stuck.status == "timeout" and not stuck.state_lost
    assert after.value == "'yes'"


def test_loopback_exec_stand_in_timeout_past_the_grace_kills_and_says_state_was_lost(over_exec) -> None:
    code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"

    async def body(worker: Worker, endpoint: ExecEndpoint) -> Any:
        await worker.execute("kept = 'yes'", 20)
        killed = await worker.execute(code, 0.5)
        after = await worker.execute("kept", 20)
        return killed, after, worker.alive

    killed, after, alive = over_exec(body, interrupt_grace=0.5)
    assert killed.status == "timeout" and killed.state_lost and "was lost" in killed.notice
    assert not alive and after.status == "crashed" and after.state_lost


def test_loopback_exec_stand_in_hard_kill_loses_state_and_says_so(over_exec) -> None:
    async def body(worker: Worker, endpoint: ExecEndpoint) -> Any:
        await worker.execute("kept = 'yes'", 20)
        await worker.kill()
        return await worker.execute("kept", 20)

    after = over_exec(body)
    assert after.status == "crashed" and after.state_lost and "not running" in after.notice


def test_loopback_exec_stand_in_guest_exit_reports_the_real_exit_status(over_exec) -> None:
    async def body(worker: Worker, endpoint: ExecEndpoint) -> Any:
        return await worker.execute("import os\nos._exit(3)", 20)

    result = over_exec(body)
    assert result.status == "crashed" and result.state_lost
    assert "exit status 3" in result.notice, result.notice


def test_loopback_exec_stand_in_output_flood_is_capped(over_exec) -> None:
    async def body(worker: Worker, endpoint: ExecEndpoint) -> Any:
        flood = await worker.execute("import sys\nfor _ in range(400):\n    sys.stdout.write('x' * 65536)", 60)
        after = await worker.execute("print('still here')", 20)
        return flood, after

    flood, after = over_exec(body)
    assert flood.status == "ok"
    assert "characters of output dropped" in flood.stdout and len(flood.stdout) < 200_000
    assert after.stdout == "still here\n"


def test_loopback_exec_stand_in_relays_tool_calls_both_ways(over_exec) -> None:
    seen: list[CallFrame] = []

    async def relay(message: CallFrame) -> Reply:
        seen.append(message)
        text = message["arguments"]["text"]
        return {"ok": True, "value": {"content": [{"type": "text", "text": f"echo:{text}"}], "isError": False}}

    code = (
        "from mcp import runtime\n"
        "import asyncio\n"
        "one = runtime.call_tool_sync('echo', 'say', {'text': 'hi'}, raw=True)\n"
        "many = await asyncio.gather(*(runtime.call_tool('echo', 'say', {'text': str(i)}, raw=True) "
        "for i in range(20)))\n"
        "print(one['content'][0]['text'], len(many), many[-1]['content'][0]['text'])"
    )

    async def body(worker: Worker, endpoint: ExecEndpoint) -> Any:
        return await worker.execute(code, 30, relay=relay)

    result = over_exec(body)
    assert result.status == "ok", result
    assert result.stdout == "echo:hi 20 echo:19\n"
    assert len(seen) == 21 and {message["op"] for message in seen} == {"call"}


def test_loopback_exec_stand_in_large_reply_crosses_in_bounded_messages(over_exec) -> None:
    """A 20 MB reply goes down the stream in 256 KiB messages and arrives whole."""

    async def relay(message: CallFrame) -> Reply:
        return {"ok": True, "value": {"content": [{"type": "text", "text": "r" * (20 << 20)}], "isError": False}}

    code = "from mcp import runtime\nlen(runtime.call_tool_sync('big', 'get', {}, raw=True)['content'][0]['text'])"

    async def body(worker: Worker, endpoint: ExecEndpoint) -> Any:
        return await worker.execute(code, 60, relay=relay)

    result = over_exec(body)
    assert result.status == "ok" and result.value == str(20 << 20), result


def test_loopback_exec_stand_in_session_manager_restarts_after_a_kill() -> None:
    """The sessions layer over the stream: a killed worker's session says its state was lost and starts fresh."""
    with private_state_dir() as state:
        settings: Settings = sandbox_settings(state_dir=state)
        require_usable(BubblewrapBackend(settings))

        async def main() -> Any:
            async with ExecEndpoint(settings) as endpoint:
                async with SessionManager(LoopbackExecBackend(endpoint), settings) as sessions:
                    await sessions.execute("kept = 1", session="s")
                    worker = sessions.worker("s")
                    assert worker is not None
                    await worker.kill()
                    after = await sessions.execute("'kept' in dir()", session="s")
                processes = endpoint.every_process()
            return after, processes

        after, processes = asyncio.run(main())
    assert after.status == "ok" and after.value == "False"
    assert "fresh one with an empty namespace" in after.notice and "closed the exec stream" in after.notice
    deadline = time.monotonic() + 15
    while any(proc.alive() for proc in processes) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [proc.command for proc in processes if proc.alive()] == []
