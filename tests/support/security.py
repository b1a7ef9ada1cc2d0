"""What the adversarial suite's fixtures and attack files share: the canaries on the host, a target bridge per
backend, and the checks every attack makes (tests/security/conftest.py builds the fixtures from these).

Kept apart from the conftest so attack files import plain helpers, never a conftest (issue 21: no test module
imports another); the threat model is written at the top of tests/security/conftest.py.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import ctypes.util
import dataclasses
import json
import os
import secrets as token_source
import selectors
import socket
import struct
import textwrap
import threading
import uuid
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from mcp_codemode.runs.bridge import Bridge, RunRequest
from mcp_codemode.sandbox.container import ContainerBackend
from mcp_codemode.sandbox.results import ExecutionResult
from mcp_codemode.sandbox.select import make_backend
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.settings import Settings
from tests.support.backends import CELL_TIMEOUT, require_usable, sandbox_settings
from tests.support.cells import explain, guest
from tests.support.patience import patient

T = TypeVar("T")
SECURITY_BACKENDS = ("bubblewrap", "podman", "gvisor")  # gvisor = podman + oci_runtime="runsc"
BRIDGE_SECRET_ENV = "MCP_CANARY_BRIDGE_SECRET"
UPSTREAM_SECRET_ENV = "MCP_CANARY_UPSTREAM_TOKEN"
ROOT = Path(__file__).resolve().parents[2]
REPORT_FILE = ROOT / ".cache" / "security-report.json"
# A probe's default time limit: 30 s on an ordinary machine, lengthened on a slow one (a guard, not a limit under
# test: the tests of the time limit pass their own).
PROBE_TIMEOUT = min(patient(30), 300)
_WAIT_MARGIN = 120.0  # beyond a run's own timeout: sandbox start-up (a container), interrupt grace, relay

__all__ = [
    "SECURITY_BACKENDS",
    "Canaries",
    "Target",
    "assert_no_secrets",
    "explain",
    "outcome",
]


# --------------------------------------------------------------------------------------------------- canaries

_IN_ACCESS = 0x001
_IN_OPEN = 0x020
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_EVENT = struct.Struct("iIII")


class Inotify:
    """IN_OPEN|IN_ACCESS watches through ctypes (no dependency); events are read without blocking."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self._paths: dict[int, Path] = {}

    def watch(self, path: Path) -> None:
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), _IN_OPEN | _IN_ACCESS)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {path}")
        self._paths[wd] = path

    def drain(self) -> list[str]:
        events: list[str] = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return events
            offset = 0
            while offset < len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0").decode()
                offset += _EVENT.size + length
                base = self._paths.get(wd)
                where = str(base / name) if base is not None and name else str(base)
                what = "opened" if mask & _IN_OPEN else "read"
                event = f"honey file {what}: {where}"
                if event not in events:
                    events.append(event)

    def close(self) -> None:
        os.close(self.fd)


@dataclasses.dataclass
class Canaries:
    """Things on the host that contained code can never reach; ``touched()`` says what was reached anyway."""

    tcp_port: int  # a TCP listener on 127.0.0.1
    udp_port: int  # a UDP socket on 127.0.0.1
    unix_path: str  # a listening unix socket in the host's /tmp, mode 0777
    abstract_name: str  # a listening abstract unix socket ("\0mcp-canary-…") in the host's network namespace
    honey_files: dict[str, Path]  # label -> a file full of fake credentials (world-readable: only reach protects it)
    secrets: tuple[str, ...]  # every honeytoken value
    tcp_routable: tuple[str, int] | None = None  # a TCP listener on the host's own routable IPv4, if it has one
    udp_routable: tuple[str, int] | None = None  # a UDP socket there
    tcp6_port: int | None = None  # a TCP listener on ::1, if the host has IPv6
    home: Path = Path()  # the fake home the honey files live in
    labels: dict[str, str] = dataclasses.field(default_factory=dict)  # honeytoken value -> what it is
    tokens: dict[str, str] = dataclasses.field(default_factory=dict)  # kind -> honeytoken value
    _events: list[str] = dataclasses.field(default_factory=list, repr=False)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)
    _inotify: Inotify | None = dataclasses.field(default=None, repr=False)

    def record(self, event: str) -> None:
        with self._lock:
            self._events.append(event)

    def touched(self) -> list[str]:
        """Everything reached since the last ``reset``: connections, datagrams, honey files opened or read."""
        files = self._inotify.drain() if self._inotify is not None else []
        with self._lock:
            self._events.extend(files)
            return list(self._events)

    def reset(self) -> None:
        if self._inotify is not None:
            self._inotify.drain()
        with self._lock:
            self._events.clear()

    def label(self, secret: str) -> str:
        return self.labels.get(secret, "a honeytoken")


def honeytoken(kind: str) -> str:
    return f"mcpcanary-{kind}-{token_source.token_hex(12)}"


def routable_ipv4() -> str | None:
    """The host's own address on its default route (a UDP connect sends nothing), or None without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: only the route lookup happens
        except OSError:
            return None
        address: str = probe.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


class Listeners:
    """Every network canary, served by one selector thread that records and drops whatever arrives."""

    def __init__(self, canaries_record: Callable[[str], None]) -> None:
        self.record = canaries_record
        self.selector = selectors.DefaultSelector()
        self.sockets: list[socket.socket] = []
        self._wake_r, self._wake_w = socket.socketpair()
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)
        self.thread = threading.Thread(target=self._serve, name="security-canaries", daemon=True)

    def listen(self, family: int, kind: int, address: Any, label: str) -> socket.socket:
        sock = socket.socket(family, kind)
        if family != socket.AF_UNIX:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        if kind == socket.SOCK_STREAM:
            sock.listen(16)
        sock.setblocking(False)
        self.selector.register(sock, selectors.EVENT_READ, (label, kind))
        self.sockets.append(sock)
        return sock

    def _serve(self) -> None:
        while True:
            for key, _ in self.selector.select():
                if key.data is None:
                    return
                label, kind = key.data
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    if kind == socket.SOCK_STREAM:
                        conn, peer = sock.accept()
                        conn.close()
                        self.record(f"{label}: accepted a connection from {peer!r}")
                    else:
                        data, peer = sock.recvfrom(65536)
                        self.record(f"{label}: received a {len(data)}-byte datagram from {peer!r}")
                except OSError:
                    continue

    def close(self) -> None:
        self._wake_w.send(b"x")
        self.thread.join(timeout=5)
        for sock in self.sockets:
            sock.close()
        self._wake_r.close()
        self._wake_w.close()
        self.selector.close()


@contextlib.contextmanager
def created_file(path: Path, text: str) -> Iterator[Path | None]:
    """A honey file at a real host path, only if nothing is there (never clobbers), removed afterwards."""
    made_dirs: list[Path] = []
    parent = path.parent
    while not parent.exists():
        made_dirs.append(parent)
        parent = parent.parent
    if path.exists() or path.is_symlink():
        yield None
        return
    for directory in reversed(made_dirs):
        directory.mkdir(mode=0o700)
    try:
        path.write_text(text)
        path.chmod(0o600)
        yield path
    finally:
        path.unlink(missing_ok=True)
        for directory in made_dirs:
            with contextlib.suppress(OSError):
                directory.rmdir()


# --------------------------------------------------------------------------------------------------- targets


@dataclasses.dataclass
class Target:
    """One backend's real Bridge, running on an event loop of its own thread; tests call it synchronously."""

    name: str  # one of SECURITY_BACKENDS
    bridge: Bridge
    canaries: Canaries
    loop: asyncio.AbstractEventLoop = dataclasses.field(repr=False)
    results: list[ExecutionResult] = dataclasses.field(default_factory=list, repr=False)

    def submit(
        self, code: str, *, session: str | None = None, timeout: float = PROBE_TIMEOUT
    ) -> concurrent.futures.Future[ExecutionResult]:
        """Start running ``code`` (dedented, with ``report(value)`` defined: one JSON line) without waiting.

        ``session`` None: a fresh session of its own, discarded afterwards (a new sandbox every call).
        """
        key = SessionKey.cli(session or f"security-{uuid.uuid4().hex[:16]}")
        request = RunRequest(guest(textwrap.dedent(code)), timeout=timeout)

        async def run() -> ExecutionResult:
            try:
                return await self.bridge.run(request, key)
            finally:
                if session is None:
                    await self.bridge.discard(key)

        future = asyncio.run_coroutine_threadsafe(run(), self.loop)
        future.add_done_callback(self._keep)
        return future

    def run(self, code: str, *, session: str | None = None, timeout: float = PROBE_TIMEOUT) -> ExecutionResult:
        """Run ``code`` and wait for its result (see ``submit``)."""
        return self.submit(code, session=session, timeout=timeout).result(timeout + _WAIT_MARGIN)

    def discard(self, session: str) -> None:
        """Close the session ``session`` (a name given to ``run``) and its sandbox."""
        self.call(lambda: self.bridge.discard(SessionKey.cli(session)))

    def call(self, coro_factory: Callable[[], Coroutine[Any, Any, T]], timeout: float = 120.0) -> T:
        """Run a coroutine on the bridge's loop and wait for it, e.g. ``target.call(lambda: bridge.discard(k))``."""
        return asyncio.run_coroutine_threadsafe(coro_factory(), self.loop).result(timeout)

    def _keep(self, future: concurrent.futures.Future[ExecutionResult]) -> None:
        if not future.cancelled() and future.exception() is None:
            self.results.append(future.result())


def target_settings(name: str, state_dir: Path, **changes: Any) -> Settings:
    """Small limits: 256m, 64 processes (gVisor's host-thread floor is the backend's business), 20 s, 64k.

    20 s on an ordinary machine: ``CELL_TIMEOUT`` lengthens it on a slow one, where a probe has taken a minute.
    """
    runtime = "bubblewrap" if name == "bubblewrap" else "podman"
    extra: dict[str, Any] = {"oci_runtime": "runsc"} if name == "gvisor" else {}
    # No warm pool: attacks check that nothing of theirs is left while the bridge still runs, by counting the
    # bridge's sandboxes, and idle pooled ones would be counted (the pool has its own tests: test_warm_pool.py).
    extra["warm_pool"] = 0
    extra.update(changes)
    return sandbox_settings(runtime=runtime, state_dir=state_dir, timeout=CELL_TIMEOUT, **extra)


def require_backend(name: str, settings: Settings) -> None:
    """Under CI=true a backend that cannot run fails; elsewhere it skips, saying why."""
    backend = make_backend(settings.runtime, settings)
    if name == "gvisor":
        assert isinstance(backend, ContainerBackend) and backend.gvisor
    require_usable(backend)


# --------------------------------------------------------------------------------------------------- checks


def _result_texts(result: ExecutionResult) -> list[str]:
    texts = [result.stdout, result.stderr, result.value or "", result.notice]
    if result.error is not None:
        texts += [result.error.type, result.error.message, result.error.traceback]
    return texts


def assert_no_secrets(target: Target, *texts: str | ExecutionResult) -> None:
    """No honeytoken appears in any of ``texts`` (strings, or results: every text field of them)."""
    flat: list[str] = []
    for text in texts:
        flat += _result_texts(text) if isinstance(text, ExecutionResult) else [text]
    leaked = sorted({target.canaries.label(s) for s in target.canaries.secrets for t in flat if s in t})
    assert not leaked, f"{target.name}: leaked {', '.join(leaked)} into the sandbox's output"


# Guest helpers shared by the attack files: attempt(fn) names the errno an attempt failed with, or SUCCEEDED.
ATTEMPT = """
import errno, os
def attempt(fn):
    try:
        fn()
        return 'SUCCEEDED'
    except OSError as exc:
        return errno.errorcode.get(exc.errno, type(exc).__name__)
def write(path, data='x'):
    def go():
        with open(path, 'w') as handle:
            handle.write(data)
    return attempt(go)
"""


def outcome(result: ExecutionResult) -> dict[str, Any]:
    """The JSON object the guest reported on its last line (``report({...})``); the run must have succeeded."""
    assert result.status == "ok", explain(result)
    lines = result.stdout.strip().splitlines()
    assert lines, explain(result)
    try:
        value = json.loads(lines[-1])
    except json.JSONDecodeError:
        raise AssertionError(f"the last line is not a JSON report\n{explain(result)}") from None
    assert isinstance(value, dict), explain(result)
    return value


# --------------------------------------------------------------------------------------------------- the tally

RECORDS: dict[tuple[str, str], str] = {}


def attack_id(item: pytest.Item) -> tuple[str, str] | None:
    """(attack, backend) of a test of tests/security/ run against a target; None for every other test."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or "target" not in callspec.params or item.path.parent.name != "security":
        return None
    module = item.path.stem.removeprefix("test_")
    name = getattr(item, "originalname", item.name)
    extra = [f"{k}={v}" for k, v in sorted(callspec.params.items()) if k != "target"]
    attack = f"{module}::{name.removeprefix('test_')}" + (f"[{','.join(extra)}]" if extra else "")
    return attack, str(callspec.params["target"])
