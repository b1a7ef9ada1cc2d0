"""Real MCP clients against a real ``mcp-codemode serve``: stdio parameters, HTTP servers on loopback.

Each helper starts what it needs and takes it down again, so a test leaves no server (and therefore no
sandbox) behind. Settings reach the server only through its environment: the SDK's stdio client hands
the child process nothing but HOME, LOGNAME, PATH, SHELL, TERM and USER plus what we pass here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.session import ElicitationFnT, ListRootsFnT, SamplingFnT
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from mcp_codemode.sandbox import cgroups
from mcp_codemode.sandbox.select import make_backend

from .backends import require_usable, sandbox_settings
from .patience import patient
from .processes import sandbox_processes, wait_until_gone
from .zygote import bridge_pid, bridge_pids, serve_command

LEGACY_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
MODES = {"legacy": LEGACY_VERSION, "auto": MODERN_VERSION}
# Bound on any one test's client work: a hang fails the test instead of the run. Minutes, because a process start
# on a starved machine has taken over 60 s here (CPU steal); pytest-timeout's 30 minutes is the last backstop.
CALL_DEADLINE = patient(300.0)
HTTP_START_DEADLINE = 180.0  # a hang guard: a server that is slow to start on a loaded machine is not broken
LISTING_LIMIT = 925  # characters of the whole tools/list answer in either era: the reference bridge's (issue 38)


def require_bubblewrap() -> None:
    """The servers under test run code with bubblewrap; under CI=true a missing one fails, never skips."""
    require_usable(make_backend("bubblewrap", sandbox_settings()))


def server_env(**settings: str) -> dict[str, str]:
    """The ``MCP_BRIDGE_*`` settings a test server gets: pinned to bubblewrap and the test state directory, with
    the upstream handshake guard the in-process bridges of the suite have (a Node server's handshake has taken
    over the product's 30 s on a starved machine)."""
    defaults = sandbox_settings()
    env = {
        "MCP_BRIDGE_RUNTIME": "bubblewrap",
        "MCP_BRIDGE_STATE_DIR": str(defaults.state_dir),
        "MCP_BRIDGE_CONNECT_TIMEOUT": f"{defaults.connect_timeout:g}",
    }
    env.update(settings)
    return env


def clean_environ(**settings: str) -> dict[str, str]:
    """This process's environment without the developer's own bridge settings, plus ``settings``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("MCP_BRIDGE_") and key != "MCP_CODEMODE_SETTINGS"
    }
    env.update(server_env(**settings))
    return env


@dataclasses.dataclass(frozen=True)
class ClientCallbacks:
    """What an SDK client in a test answers of the server's requests; each one given declares its capability."""

    elicitation: ElicitationFnT | None = None
    sampling: SamplingFnT | None = None
    roots: ListRootsFnT | None = None

    def of(self) -> dict[str, Any]:
        return {"elicitation_callback": self.elicitation, "sampling_callback": self.sampling,
                "list_roots_callback": self.roots}  # fmt: skip


NO_CALLBACKS = ClientCallbacks()


def stdio_params(*args: str, **settings: str) -> StdioServerParameters:
    command, *rest = serve_command()
    return StdioServerParameters(command=command, args=[*rest, *args], env=server_env(**settings))


@contextlib.asynccontextmanager
async def stdio_client_for(
    log: Path,
    mode: str = "legacy",
    *args: str,
    sent: list[dict[str, Any]] | None = None,
    deadline: float | None = CALL_DEADLINE,
    callbacks: ClientCallbacks | None = None,
    **settings: str,
) -> AsyncIterator[Client]:
    """A connected SDK ``Client`` on a fresh ``mcp-codemode serve`` over stdio; its stderr goes to ``log``.

    ``sent`` collects every message the client writes; ``deadline`` bounds the whole connection (``None``
    for one shared by several tests, whose requests are still bounded by the read timeout).
    """
    with log.open("a", encoding="utf-8") as errlog, anyio.fail_after(deadline):
        transport: Any = stdio_client(stdio_params(*args, **settings), errlog=errlog)
        if sent is not None:
            transport = recording(transport, sent)
        client_of = Client(transport, mode=mode, read_timeout_seconds=CALL_DEADLINE, **(callbacks or NO_CALLBACKS).of())
        async with client_of as client:
            remember_stdio_servers()
            yield client


class RecordingWriter:
    """Wraps a transport's write stream and keeps every JSON-RPC message the client sends."""

    def __init__(self, inner: Any, sent: list[dict[str, Any]]) -> None:
        self.inner = inner
        self.sent = sent

    async def send(self, item: SessionMessage, /) -> None:
        self.sent.append(item.message.model_dump(by_alias=True, mode="json", exclude_none=True))
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> RecordingWriter:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def recording(transport: Any, sent: list[dict[str, Any]]) -> AsyncIterator[tuple[Any, RecordingWriter]]:
    """A transport that behaves like ``transport`` and records what the client writes to it."""
    async with transport as (read_stream, write_stream):
        yield read_stream, RecordingWriter(write_stream, sent)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class HttpServer:
    """``mcp-codemode serve --transport http`` on a free 127.0.0.1 port, as a subprocess."""

    def __init__(self, log: Path, *args: str, serve: Sequence[str] | None = None, **settings: str) -> None:
        """``settings``: MCP_BRIDGE_* variables; ``{port}`` in a value becomes the port the server listens on, and
        ``{peer_port}`` another free port (the replicas' own: MCP_BRIDGE_PEER_PORT). ``serve``: the command that
        starts the server (the real one, say, for a test about the process itself)."""
        self.serve = serve
        self.log = log
        self.args = args
        self.settings = settings
        self.port = 0
        self.peer_port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> HttpServer:
        for _attempt in range(3):  # a free port can be taken between probing and binding; try another
            self.port = free_port()
            if any("{peer_port}" in value for value in self.settings.values()):
                self.peer_port = next(port for port in iter(free_port, None) if port != self.port)
            serve = self.serve or serve_command()
            command = [*serve, "--transport", "http", "--host", "127.0.0.1", "--port", str(self.port), *self.args]
            env = {name: value.replace("{port}", str(self.port)).replace("{peer_port}", str(self.peer_port))
                   for name, value in self.settings.items()}  # fmt: skip
            with self.log.open("ab") as errlog:
                self.process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=errlog,
                    stderr=subprocess.STDOUT,
                    env=clean_environ(**env),
                )
            STARTED_SERVERS.add(self.pid)
            if self._wait_for_port():
                return self
            self.stop()
        raise AssertionError(f"the HTTP server did not start; its log:\n{self.log_text()}")

    def _wait_for_port(self) -> bool:
        assert self.process is not None
        deadline = time.monotonic() + patient(HTTP_START_DEADLINE)
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
            time.sleep(0.05)
        return False

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        """Stop the server (SIGTERM, then SIGKILL after 15 s); returns its exit status."""
        process, self.process = self.process, None
        if process is None:
            return None
        if process.poll() is None:
            if sig == signal.SIGKILL and bridge_pid(process.pid) != process.pid:
                os.kill(bridge_pid(process.pid), sig)  # a launcher cannot pass it on: the bridge dies at once
            process.send_signal(sig)
            try:
                return process.wait(timeout=patient(15))
            except subprocess.TimeoutExpired:
                process.kill()
        return process.wait(timeout=15)

    @property
    def pid(self) -> int:
        """The process started (the launcher when the fork server starts the bridge: signals reach the bridge)."""
        assert self.process is not None
        return self.process.pid

    @property
    def bridge_pid(self) -> int:
        """The bridge's own pid, which names its sandboxes' cgroups."""
        return bridge_pid(self.pid)

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@contextlib.asynccontextmanager
async def http_client_for(
    url: str,
    mode: str = "legacy",
    headers: dict[str, str] | None = None,
    deadline: float | None = CALL_DEADLINE,
    callbacks: ClientCallbacks | None = None,
) -> AsyncIterator[Client]:
    """A connected SDK ``Client`` over Streamable HTTP; ``headers`` (e.g. a bearer token) go on every request;
    ``callbacks`` answer the server's requests (the client then declares those capabilities)."""
    timeout = httpx2.Timeout(30.0, read=300.0)
    with anyio.fail_after(deadline):
        async with httpx2.AsyncClient(headers=headers or {}, timeout=timeout) as http:
            transport = streamable_http_client(url, http_client=http)
            options = (callbacks or NO_CALLBACKS).of()
            connecting = Client(transport, mode=mode, read_timeout_seconds=CALL_DEADLINE, **options)
            async with connecting as client:
                yield client


def listing_json(result: types.ListToolsResult) -> str:
    """The whole tools/list result as the compact JSON a client receives (and a model pays for)."""
    return json.dumps(result.model_dump(by_alias=True, mode="json", exclude_none=True), separators=(",", ":"))


def text_of(result: types.CallToolResult) -> str:
    """The result's text blocks, joined (the server sends one)."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def images_of(result: types.CallToolResult) -> list[types.ImageContent]:
    return [block for block in result.content if isinstance(block, types.ImageContent)]


@dataclasses.dataclass
class RawExchange:
    """What a ``serve`` process wrote during a hand-made stdio exchange."""

    lines: list[str]  # standard output, line by line
    stderr: str
    status: int
    pid: int


def raw_stdio_exchange(
    messages: list[dict[str, Any]],
    until_ids: set[int],
    stderr_log: Path,
    *args: str,
    stop: Literal["close", "sigterm"] = "close",
    serve: Sequence[str] | None = None,
    **settings: str,
) -> RawExchange:
    """Speak JSON-RPC to ``serve`` over stdio by hand.

    Writes ``messages`` one per line, waits until responses for ``until_ids`` came back, then ends the
    server (``close``: its stdin, the normal end of a stdio server; ``sigterm``: as a service manager
    would) and collects everything the process wrote. Standard error goes to a file, so a chatty server
    cannot block on a full pipe we are not reading. ``serve``: the command that starts the server.
    """
    with stderr_log.open("wb") as errlog:
        process = subprocess.Popen(
            [*(serve or serve_command()), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,
            env=clean_environ(**settings),
        )
    STARTED_SERVERS.add(process.pid)
    assert process.stdin is not None and process.stdout is not None
    lines: list[str] = []
    answered: set[int] = set()
    try:
        for message in messages:
            process.stdin.write((json.dumps(message) + "\n").encode())
        process.stdin.flush()
        deadline = time.monotonic() + CALL_DEADLINE
        os.set_blocking(process.stdout.fileno(), False)
        buffer = b""
        while not until_ids <= answered:
            if time.monotonic() > deadline:
                raise AssertionError(f"no answer for ids {sorted(until_ids - answered)}; stdout so far: {lines}")
            chunk = process.stdout.read()
            if chunk is None or chunk == b"":
                if process.poll() is not None:
                    raise AssertionError(f"the server exited early: {stderr_log.read_text(errors='replace')}")
                time.sleep(0.02)
                continue
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            for raw in complete:
                lines.append(raw.decode())
                with contextlib.suppress(ValueError, AttributeError):
                    answered.add(json.loads(raw).get("id"))
        if stop == "sigterm":
            process.send_signal(signal.SIGTERM)
        else:
            process.stdin.close()
        status = process.wait(timeout=patient(30))
        os.set_blocking(process.stdout.fileno(), True)
        rest = buffer + process.stdout.read()
        lines.extend(raw.decode() for raw in rest.split(b"\n") if raw)
        text = stderr_log.read_text(encoding="utf-8", errors="replace")
        return RawExchange(lines, text, status, bridge_pid(process.pid))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=15)
        for stream in (process.stdin, process.stdout):
            with contextlib.suppress(OSError, ValueError):
                stream.close()


STARTED_SERVERS: set[int] = set()
_CGROUP_OWNER = re.compile(r"/w-(\d+)-")


def remember_stdio_servers() -> None:
    """Note the pids of the ``serve`` processes this test process spawned (the SDK does not expose them)."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        launched = b"mcp_codemode" in command or any(word.endswith(b"bridge_launcher.py") for word in command)
        if ppid == me and launched and b"serve" in command:
            STARTED_SERVERS.add(int(entry.name))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _server_of(pid: int) -> int | None:
    """The server of ours a sandbox process belongs to: named by its per-worker cgroup, or an ancestor."""
    servers = bridge_pids(STARTED_SERVERS)  # a launcher's bridge is the fork server's child, not the launcher's
    with contextlib.suppress(OSError):
        owners = {int(found) for found in _CGROUP_OWNER.findall(Path(f"/proc/{pid}/cgroup").read_text())}
        for owner in owners & servers:
            return owner
    current = pid
    for _depth in range(64):
        current = _parent(current)
        if current in servers:
            return current
        if current <= 1:
            break
    return None


def orphans() -> list[str]:
    """Live sandbox processes whose server (one these tests started) is gone.

    Without cgroups an orphan reparented to init cannot be traced to its server, so there every sandbox
    process not under a live server of ours counts (a busy shared machine may then need a quiet moment).
    """
    traceable = bool(cgroups.probe().parents)
    found = []
    for row in sandbox_processes():
        server = _server_of(int(row.split()[0]))
        if server is None:
            if not traceable:
                found.append(row)
        elif not _alive(server):
            found.append(row)
    return found


def assert_no_orphans() -> None:
    left = wait_until_gone(orphans)
    assert left == [], f"sandbox processes outlived the server that started them: {left}"
