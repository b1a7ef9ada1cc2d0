"""A sandbox the host refuses to launch (no file descriptor, process or memory left) fails with the cause and its fix.

Pure logic: the host-side ``Worker`` over a backend whose launch raises what the host raised. Before issue 35 the
bare ``OSError`` reached the client as the SDK's "Internal server error".
"""

from __future__ import annotations

import errno
from typing import Any

import pytest

from mcp_codemode.errors import SandboxStartError
from mcp_codemode.sandbox.base import Availability, Backend, EnforcedLimit, Launch
from mcp_codemode.sandbox.worker import Worker
from tests.support.backends import sandbox_settings

pytestmark = pytest.mark.anyio


class RefusedBackend(Backend):
    name = "scripted"

    def __init__(self, error: OSError) -> None:
        self.error = error

    def availability(self) -> Availability:
        return Availability(True, "scripted")

    def enforced_limits(self) -> list[EnforcedLimit]:
        return []

    async def launch(self, worker_id: str, guest_config: dict[str, Any]) -> Launch:
        raise self.error


@pytest.mark.parametrize(
    ("code", "said"),
    [
        (errno.EMFILE, "ulimit -n"),
        (errno.ENFILE, "fs.file-max"),
        (errno.EAGAIN, "MCP_BRIDGE_MAX_SESSIONS"),
    ],
)
async def test_a_launch_the_host_refused_names_the_limit_and_the_fix(code: int, said: str) -> None:
    worker = Worker(RefusedBackend(OSError(code, "refused by the host")), sandbox_settings(), "refused")
    with pytest.raises(SandboxStartError) as raised:
        await worker.start()
    assert "the scripted worker could not be started: refused by the host" in str(raised.value)
    assert said in str(raised.value)
    assert not worker.alive


async def test_another_os_error_is_not_dressed_up_as_a_host_limit() -> None:
    worker = Worker(RefusedBackend(FileNotFoundError(errno.ENOENT, "no such program")), sandbox_settings(), "x")
    with pytest.raises(FileNotFoundError):
        await worker.start()
