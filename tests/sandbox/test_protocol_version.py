"""The host refuses a guest that speaks another version of the frame protocol, before it runs a single cell.

On bubblewrap and podman the guest is staged from the bridge's own package, so the two sides are one release; on a
remote backend the guest is baked into an image and can be older or newer. These tests drive the host-side
``Worker`` through a scripted ``WorkerChannel`` (pure logic: what the host does with a ready frame); that the real
guest sends the right version is proven by every test that starts a real worker, since start() fails otherwise.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_codemode.errors import SandboxStartError
from mcp_codemode.guest.protocol import PROTOCOL_VERSION, READY
from mcp_codemode.sandbox.base import Availability, Backend, EnforcedLimit, Launch
from mcp_codemode.sandbox.frames import encode_frame
from mcp_codemode.sandbox.worker import Worker
from tests.support.backends import sandbox_settings


class ScriptedChannel:
    """A worker channel whose guest says ``frames`` and then waits until it is killed."""

    def __init__(self, frames: list[dict[str, Any]]) -> None:
        self.stdout = asyncio.StreamReader()
        self.stderr = asyncio.StreamReader()
        self.returncode: int | None = None
        self.written = bytearray()
        self._ended = asyncio.Event()
        for frame in frames:
            self.stdout.feed_data(encode_frame(frame))

    def write(self, data: bytes) -> None:
        self.written += data

    def unsent(self) -> int:
        return 0

    async def drain(self) -> None:
        return None

    async def wait(self) -> int:
        await self._ended.wait()
        assert self.returncode is not None
        return self.returncode

    def end(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            self.stdout.feed_eof()
            self.stderr.feed_eof()
            self._ended.set()


class ScriptedBackend(Backend):
    name = "scripted"

    def __init__(self, frames: list[dict[str, Any]]) -> None:
        self.frames = frames
        self.killed = 0
        self.channel: ScriptedChannel | None = None

    def availability(self) -> Availability:
        return Availability(True, "scripted")

    def enforced_limits(self) -> list[EnforcedLimit]:
        return []

    async def launch(self, worker_id: str, guest_config: dict[str, Any]) -> Launch:
        channel = self.channel = ScriptedChannel(self.frames)

        async def kill() -> None:
            self.killed += 1
            channel.end(-9)

        async def cleanup() -> None:
            channel.end(-9)

        return Launch(channel, kill, cleanup, lambda: None)


def ready(**fields: Any) -> dict[str, Any]:
    return {"type": READY, "python": "3.11.2", "pid": 7, **fields}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("frame", "said"),
    [
        (ready(protocol=PROTOCOL_VERSION + 1), f"version {PROTOCOL_VERSION + 1}"),
        (ready(), "no protocol version"),
        (ready(protocol=str(PROTOCOL_VERSION)), "no protocol version"),
        (ready(protocol=True), "no protocol version"),  # True == 1 in Python: a bool is not a version
    ],
)
async def test_a_guest_of_another_protocol_version_is_refused_with_the_fix(frame: dict[str, Any], said: str) -> None:
    backend = ScriptedBackend([frame])
    worker = Worker(backend, sandbox_settings(startup_timeout=10), "versioned")
    with pytest.raises(SandboxStartError) as raised:
        await worker.start()
    message = str(raised.value)
    assert f"its guest speaks {said}" in message
    assert f"this bridge speaks version {PROTOCOL_VERSION}" in message
    assert "mcp-codemode image build" in message
    assert backend.killed >= 1
    assert not worker.alive


@pytest.mark.anyio
async def test_a_guest_of_this_protocol_version_is_accepted_and_a_second_ready_frame_is_ignored() -> None:
    backend = ScriptedBackend([ready(protocol=PROTOCOL_VERSION), ready(protocol=PROTOCOL_VERSION + 1)])
    worker = Worker(backend, sandbox_settings(startup_timeout=10), "versioned")
    await worker.start()
    try:
        assert backend.channel is not None
        for _ in range(1000):  # let the pump read the stray second frame (no timing: it only needs turns)
            if not backend.channel.stdout._buffer:  # type: ignore[attr-defined]
                break
            await asyncio.sleep(0)
        assert not backend.channel.stdout._buffer, "the pump never read the second ready frame"  # type: ignore[attr-defined]
        assert worker.alive
        assert worker.python_version == "3.11.2"
        assert backend.killed == 0
    finally:
        await worker.close()
