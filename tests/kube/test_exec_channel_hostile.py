"""The exec channel against scripted (hostile or lying) loopback exec stand-in servers: every way the sandbox side
can break the pods/exec protocol ends the channel with a reason, never crashes the bridge, and a guest that floods
while the host does not read costs bounded memory. No Kubernetes is involved."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web

from mcp_codemode.errors import SandboxStartError, SandboxUnavailable
from mcp_codemode.guest.protocol import PROTOCOL_VERSION, READY
from mcp_codemode.sandbox.base import Availability, Backend, EnforcedLimit, Launch
from mcp_codemode.sandbox.frames import encode_frame
from mcp_codemode.sandbox.kube.exec_channel import (
    MAX_MESSAGE_BYTES,
    NO_STATUS,
    READER_LIMIT,
    ExecChannel,
    open_exec_channel,
)
from mcp_codemode.sandbox.kube.exec_protocol import SUBPROTOCOLS, V4, V5, exec_url
from mcp_codemode.sandbox.worker import Worker
from tests.support.backends import sandbox_settings
from tests.support.exec_endpoint import status_json

pytestmark = [pytest.mark.anyio, pytest.mark.backend]
Script = Callable[[web.WebSocketResponse], Awaitable[None]]


@contextlib.asynccontextmanager
async def scripted(script: Script, protocols: tuple[str, ...] = SUBPROTOCOLS) -> AsyncIterator[str]:
    """A loopback exec stand-in that plays ``script`` on each connection; yields the exec URL."""

    async def handle(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(protocols=protocols)
        await ws.prepare(request)
        with contextlib.suppress(ConnectionError):
            await script(ws)
        await ws.close()
        return ws

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{namespace}/pods/{pod}/exec", handle)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield exec_url(f"http://127.0.0.1:{port}", "ns", "pod", "guest", ["boot"])
    finally:
        await runner.cleanup()


async def ended(script: Script, protocols: tuple[str, ...] = SUBPROTOCOLS) -> ExecChannel:
    async with scripted(script, protocols) as url:
        channel = await open_exec_channel(url, ssl_context=False)
        await asyncio.wait_for(channel.wait(), 10)
        await channel.close()
        return channel


async def test_loopback_exec_stand_in_success_status_is_exit_zero_and_output_arrives() -> None:
    async def script(ws: web.WebSocketResponse) -> None:
        await ws.send_bytes(b"\x01out")
        await ws.send_bytes(b"\x02err")
        await ws.send_bytes(b"\x03" + status_json(0))

    channel = await ended(script)
    assert (channel.returncode, channel.cause) == (0, None)
    assert await channel.stdout.read() == b"out" and await channel.stderr.read() == b"err"


@pytest.mark.parametrize("protocols", [(V5,), (V4,)], ids=["v5", "v4"])
async def test_loopback_exec_stand_in_picks_the_servers_subprotocol_and_carries_exit_137(protocols) -> None:
    async def script(ws: web.WebSocketResponse) -> None:
        await ws.send_bytes(b"\x03" + status_json(137))

    async with scripted(script, protocols) as url:
        channel = await open_exec_channel(url, ssl_context=False)
        assert channel.protocol == protocols[0]
        assert await asyncio.wait_for(channel.wait(), 10) == 137
        await channel.close()


@pytest.mark.parametrize(
    ("messages", "reason"),
    [
        ([], NO_STATUS),
        ([b"\x01partial"], NO_STATUS),
        (["a text frame"], "text message"),
        ([b"\x09junk"], "channel 9"),
        ([b"\x00stdin?"], "channel 0"),
        ([b"\x03not json"], "not JSON"),
        ([b"\x03" + b" " * (70 * 1024)], "limit"),
        ([b"\x03" + status_json(0), b"\x01more after the end"], "after its exit status"),
        ([b"\x03" + json.dumps({"status": "Failure", "reason": "NonZeroExitCode"}).encode()], "exit code"),
        ([b"\xff\x01", b"\x01after close"], "after closing it"),
        ([b"\x01" + b"x" * (MAX_MESSAGE_BYTES + 1)], "exec stream failed"),
    ],
    ids=["silence", "no-status", "text", "unknown-channel", "stdin-channel", "status-not-json", "status-oversized",
         "status-then-data", "status-no-code", "write-after-close", "oversized-message"],
)  # fmt: skip
async def test_loopback_exec_stand_in_hostile_peer_ends_the_channel_with_a_reason(messages, reason) -> None:
    async def script(ws: web.WebSocketResponse) -> None:
        for message in messages:
            if isinstance(message, str):
                await ws.send_str(message)
            else:
                await ws.send_bytes(message)

    channel = await ended(script)
    assert channel.cause is not None and reason in channel.cause
    assert channel.returncode is not None
    with pytest.raises(ConnectionError):
        await channel.drain()
    channel.write(b"dropped, not raised")


async def test_loopback_exec_stand_in_flood_pauses_reading_and_memory_stays_bounded() -> None:
    """The host stops reading stdout; the channel's buffer stays under its bound, then every byte still arrives."""
    total = 48 << 20
    sent = 0

    async def script(ws: web.WebSocketResponse) -> None:
        nonlocal sent
        chunk = b"\x01" + b"y" * (256 << 10)
        while sent < total:
            await ws.send_bytes(chunk)
            sent += len(chunk) - 1
        await ws.send_bytes(b"\x03" + status_json(0))

    async with scripted(script) as url:
        channel = await open_exec_channel(url, ssl_context=False)
        paused = channel._gates[0].open  # the reader's backpressure hook, read by the test only
        for _ in range(200):
            if not paused.is_set():
                break
            await asyncio.sleep(0.05)
        assert not paused.is_set(), "the channel never paused reading"
        await asyncio.sleep(0.3)
        held = len(channel.stdout._buffer)  # type: ignore[attr-defined]  # asyncio's buffer: what the bridge holds for the guest
        assert held <= 2 * READER_LIMIT + MAX_MESSAGE_BYTES, held
        assert sent < total, "the stand-in sent everything although nobody read"
        received = 0
        while data := await channel.stdout.read(1 << 20):
            received += len(data)
        assert received == total
        assert await asyncio.wait_for(channel.wait(), 10) == 0
        await channel.close()


async def test_loopback_exec_stand_in_unsent_counts_what_the_peer_has_not_taken_and_drain_waits() -> None:
    release = asyncio.Event()
    received = 0

    async def script(ws: web.WebSocketResponse) -> None:
        nonlocal received
        await release.wait()
        async for message in ws:
            received += len(message.data) - 1
            if received >= 32 << 20:
                break
        await ws.send_bytes(b"\x03" + status_json(0))

    async with scripted(script) as url:
        channel = await open_exec_channel(url, ssl_context=False)
        for _ in range(128):
            channel.write(b"z" * (256 << 10))
        await asyncio.sleep(0.2)
        assert channel.unsent() > 16 << 20  # the socket's buffers hold a few MiB at most; the rest is queued
        release.set()
        await asyncio.wait_for(channel.drain(), 30)
        assert channel.unsent() <= 64 * 1024
        assert await asyncio.wait_for(channel.wait(), 30) == 0
        assert received >= 32 << 20
        await channel.close()


class _ScriptedBackend(Backend):
    name = "loopback-exec-scripted"

    def __init__(self, url: str) -> None:
        self.url = url

    def availability(self) -> Availability:
        return Availability(True, "scripted")

    def enforced_limits(self) -> list[EnforcedLimit]:
        return []

    async def launch(self, worker_id: str, guest_config: dict[str, object]) -> Launch:
        channel = await open_exec_channel(self.url, ssl_context=False)
        return Launch(channel, channel.close, channel.close, lambda: channel.cause)


async def test_loopback_exec_stand_in_guest_of_another_protocol_version_is_refused() -> None:
    async def script(ws: web.WebSocketResponse) -> None:
        await ws.send_bytes(b"\x01" + encode_frame({"type": READY, "protocol": PROTOCOL_VERSION + 1, "python": "3"}))
        await ws.receive()  # until the bridge hangs up

    async with scripted(script) as url:
        worker = Worker(_ScriptedBackend(url), sandbox_settings(startup_timeout=10), "w1")
        with pytest.raises(SandboxStartError, match=f"version {PROTOCOL_VERSION + 1}.*speaks version"):
            await worker.start()


async def test_loopback_exec_stand_in_stream_closing_without_status_is_the_workers_death_reason() -> None:
    async def script(ws: web.WebSocketResponse) -> None:
        await ws.send_bytes(b"\x01" + encode_frame({"type": READY, "protocol": PROTOCOL_VERSION, "python": "3"}))
        await ws.receive()  # the execute frame; then hang up without a status

    async with scripted(script) as url:
        worker = Worker(_ScriptedBackend(url), sandbox_settings(startup_timeout=10), "w1")
        await worker.start()
        result = await worker.execute("1", timeout=10)
        await worker.close()
    assert result.status == "crashed" and result.state_lost
    assert NO_STATUS in result.notice


async def test_loopback_exec_stand_in_that_chooses_no_subprotocol_is_refused_with_a_fix() -> None:
    async def script(ws: web.WebSocketResponse) -> None:
        await ws.send_bytes(b"\x03" + status_json(0))

    async with scripted(script, protocols=()) as url:
        with pytest.raises(SandboxUnavailable, match=r"chose no subprotocol of v5\.channel\.k8s\.io.*apiserver"):
            await open_exec_channel(url, ssl_context=False)
