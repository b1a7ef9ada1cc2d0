"""The byte streams between the bridge and one started worker, whatever carries them.

The host side of a worker (``worker.py``) needs exactly what a pipe to a child process gives: the guest's stdout
(frames) and stderr (a diagnostic tail), a way to write frames to its stdin that never blocks but says how much is
still unsent (the reply backlog and the kill past it are measured on that), and the exit status once it has ended.
A local backend gets that from an asyncio subprocess; a remote one (a Kubernetes ``pods/exec`` stream) from a
network stream with the same three channels. ``WorkerChannel`` is that contract, so the frame loop, the limits and
every hostile-input check in ``worker.py`` (and the modules it hands frames to: ``calls.py``, ``file_requests.py``,
``results.py``) are written once and hold for every backend.

``PipeChannel`` is the local kind: a thin view of an ``asyncio.subprocess.Process`` that adds nothing on the hot
path (``benchmarks/channel.py`` measures it against the raw pipes in the same run).
"""

from __future__ import annotations

import asyncio
from typing import Protocol


class WorkerChannel(Protocol):
    """The guest's three streams and its exit status, as the host-side worker uses them.

    Every method may be called after the worker died: ``write`` then drops the bytes, ``drain`` returns or raises
    ``ConnectionError``, and the readers return end-of-file.
    """

    @property
    def stdout(self) -> asyncio.StreamReader:
        """The guest's frames; end-of-file once the worker's output is closed."""

    @property
    def stderr(self) -> asyncio.StreamReader:
        """Whatever the sandbox runtime or a crashing interpreter printed; the host keeps only a tail."""

    @property
    def returncode(self) -> int | None:
        """The worker's exit status once known (negative: killed by that signal), else None."""

    def write(self, data: bytes) -> None:
        """Queue bytes for the guest's stdin; never blocks (backpressure is ``unsent`` and ``drain``)."""

    def unsent(self) -> int:
        """Bytes written and not yet taken by the guest's side: what a guest that stops reading holds up."""

    async def drain(self) -> None:
        """Wait until ``unsent`` falls under the channel's low-water mark; ``ConnectionError`` once it is closed."""

    async def wait(self) -> int:
        """Wait for the worker to end and return its exit status."""


class PipeChannel:
    """A local worker's pipes: the channel a bubblewrap or container backend's child process already is."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        self.process = process
        self._stdin = process.stdin
        self.stdout = process.stdout
        self.stderr = process.stderr

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def write(self, data: bytes) -> None:
        self._stdin.write(data)

    def unsent(self) -> int:
        return self._stdin.transport.get_write_buffer_size()

    async def drain(self) -> None:
        await self._stdin.drain()

    async def wait(self) -> int:
        return await self.process.wait()
