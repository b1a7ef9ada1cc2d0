"""Running guest code through a real ``Bridge`` and reading back what it reported, for the end-to-end tests.

Apart because the proxy, policy, audit, redaction, search and security tests all run cells the same way: guest
code with a ``report(value)`` prelude, in a state directory the sandbox uid can reach, read back as one JSON line.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import shutil
import socket
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_codemode.runs.bridge import Bridge, RunRequest
from mcp_codemode.sandbox.results import ExecutionResult
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.upstream.model import Discovery

from . import upstreams
from .backends import sandbox_settings
from .clients import require_bubblewrap

if TYPE_CHECKING:
    from mcp_codemode.guest.protocol import CallFrame, CellContext
    from mcp_codemode.reply_encoding import GuestRequestHandler, Reply

# Per cell: generous, a server's first start happens inside the cell, and a starved machine (CPU steal) has taken
# minutes for what takes a second; sandbox_settings' max_timeout allows it.
RUN_TIMEOUT = 300.0
READY_DEADLINE = 180.0  # polling bound for a server to come up in the background


@contextlib.contextmanager
def private_state_dir() -> Iterator[Path]:
    """A state directory of the test's own (saved tools, server logs, the staged guest), removed afterwards.

    Not under pytest's tmp_path: that lives in a mode-700 directory of root's, which the sandbox uid (65534)
    cannot pass through to reach the staged guest files, and bubblewrap then refuses to start.
    """
    base = Path(tempfile.mkdtemp(prefix="mcp-codemode-test-"))
    try:
        base.chmod(0o711)
        yield base / "state"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def guest(code: str) -> str:
    """Guest code, dedented, with ``report(value)`` printing one JSON line for the host to read."""
    prelude = "import json as _json\ndef report(value):\n    print(_json.dumps(value, default=repr))\n"
    return prelude + textwrap.dedent(code)


def explain(result: ExecutionResult) -> str:
    error = result.error.traceback if result.error is not None else ""
    return f"status={result.status}\nstdout={result.stdout}\nstderr={result.stderr}\nerror={error}\n{result.notice}"


def reported(result: ExecutionResult) -> Any:
    """The value the guest passed to ``report`` (its last line of output); the cell must have succeeded."""
    assert result.status == "ok", explain(result)
    lines = result.stdout.strip().splitlines()
    assert lines, explain(result)
    return json.loads(lines[-1])


async def run(bridge: Bridge, code: str, session: str, *, owner: str = "local", **request: Any) -> ExecutionResult:
    """Run ``code`` (see ``guest``) in the session ``session`` names, as the command line's ``run`` would."""
    request.setdefault("timeout", RUN_TIMEOUT)
    return await bridge.run(RunRequest(guest(code), **request), SessionKey.cli(session), owner=owner)


async def poll(condition: Callable[[], bool], seconds: float = READY_DEADLINE) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def closed_port() -> int:
    """A loopback port nothing listens on (it was free a moment ago, and nothing here binds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def time_and_everything() -> AsyncIterator[Bridge]:
    """A bridge of its own (nothing started yet) on bubblewrap with the time and everything servers."""
    require_bubblewrap()
    with private_state_dir() as state:
        settings = sandbox_settings(runtime="bubblewrap", state_dir=state)
        async with Bridge(settings, Discovery(servers=(upstreams.time(), upstreams.everything()))) as bridge:
            assert bridge.backend_name == "bubblewrap", bridge.backend_error
            yield bridge


@dataclasses.dataclass
class GuestServicesStub:
    """Test logic in the relay's place, for tests of the sessions alone: what the guest is given, who answers it.

    ``context_of(fresh)`` is the guest's context; ``handler`` answers the requests of every call (the owner and
    session are not looked at: such a test has one of each).
    """

    context_of: Callable[[bool], CellContext]
    handler: GuestRequestHandler | None = None

    async def context(self, owner: str, fresh: bool) -> CellContext:
        return self.context_of(fresh)

    def for_run(self, owner: str, session: str, caller: Any = None) -> GuestRequestHandler:
        return self.handler or _unexpected_request


async def _unexpected_request(message: CallFrame) -> Reply:
    raise AssertionError(f"this test's code was not expected to call the host: {message!r}")
