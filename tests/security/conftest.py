"""The adversarial suite's foundation: real bridges on every backend, canaries on the host, and a tally.

Threat model encoded here (docs/security.md): every cell is written by an attacker. It runs through the real
``Bridge`` (relay, hub, sessions, backend) on bubblewrap, on podman with runc, and on podman with gVisor
(``runsc``), each with small limits and real upstream MCP servers discovered from a real config file that
carries credentials. The attacker wins if it can

- reach anything on the host: a TCP/UDP listener on loopback or on the host's routable address, a unix socket
  in the host's /tmp or its abstract namespace (the ``Canaries`` below notice every connection and datagram);
- read a secret: honey files in a fake home and at real paths (``~/.ssh``, ``~/.aws``, gcloud, ``/root/.netrc``,
  an MCP client config with tokens), the bridge's environment, an upstream server's ``env`` or ``headers``
  (inotify notices every open of a honey file; every output of every run is searched for every honeytoken);
- or change, exhaust or outlive anything outside its own sandbox (the attack files assert that precisely).

After every test the canaries must be untouched and no output may contain a honeytoken: that check is autouse,
so an attack that forgets to assert it still fails. A tool that deliberately returns its server's environment
(server-everything's ``get-env``) hands the code what the server has: that is the documented power of a
configured tool, not an escape, so tests must not call it while the secret check is on.

Each test's outcome per backend is recorded in ``.cache/security-report.json`` (attack id, backend, passed or
failed), and a per-backend tally is printed at the end of the session: passed means contained.
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
import shutil
import socket
import struct
import tempfile
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
from mcp_codemode.settings import Settings
from mcp_codemode.upstream.config import discover
from tests.support import upstreams
from tests.support.backends import IN_CI, require_usable, sandbox_settings
from tests.support.cells import explain, guest, private_state_dir

T = TypeVar("T")
SECURITY_BACKENDS = ("bubblewrap", "podman", "gvisor")  # gvisor = podman + oci_runtime="runsc"
BRIDGE_SECRET_ENV = "MCP_CANARY_BRIDGE_SECRET"
UPSTREAM_SECRET_ENV = "MCP_CANARY_UPSTREAM_TOKEN"
ROOT = Path(__file__).resolve().parents[2]
REPORT_FILE = ROOT / ".cache" / "security-report.json"
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


class _Inotify:
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
    _inotify: _Inotify | None = dataclasses.field(default=None, repr=False)

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


def _honeytoken(kind: str) -> str:
    return f"mcpcanary-{kind}-{token_source.token_hex(12)}"


def _routable_ipv4() -> str | None:
    """The host's own address on its default route (a UDP connect sends nothing), or None without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: only the route lookup happens
        except OSError:
            return None
        address: str = probe.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


class _Listeners:
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
def _created(path: Path, text: str) -> Iterator[Path | None]:
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


@pytest.fixture(scope="session")
def canaries() -> Iterator[Canaries]:
    """One set of canaries for the session (every backend's bridge shares them); ``reset`` per test."""
    tokens = {
        "ssh": _honeytoken("ssh-key"),
        "aws": _honeytoken("aws-secret"),
        "gcloud": _honeytoken("gcloud-refresh"),
        "netrc": _honeytoken("netrc-password"),
        "docker": _honeytoken("docker-auth"),
        "kube": _honeytoken("kube-token"),
        "bridge_env": _honeytoken("bridge-env"),
        "upstream_env": _honeytoken("upstream-env"),
        "config_header": _honeytoken("config-header"),
    }
    home = Path(tempfile.mkdtemp(prefix="mcp-canary-home-"))
    home.chmod(0o755)  # world-readable on purpose: only the sandbox's isolation may keep code out
    files = {
        "ssh_key": (home / ".ssh" / "id_rsa", f"-----BEGIN OPENSSH PRIVATE KEY-----\n{tokens['ssh']}\n-----END-----\n"),
        "aws_credentials": (
            home / ".aws" / "credentials",
            f"[default]\naws_access_key_id = AKIAMCPCANARY\naws_secret_access_key = {tokens['aws']}\n",
        ),
        "gcloud_adc": (
            home / ".config" / "gcloud" / "application_default_credentials.json",
            json.dumps({"type": "authorized_user", "client_id": "canary", "refresh_token": tokens["gcloud"]}),
        ),
        "docker_config": (home / ".docker" / "config.json", json.dumps({"auths": {"x": {"auth": tokens["docker"]}}})),
        "kube_config": (home / ".kube" / "config", f"users:\n- name: canary\n  user:\n    token: {tokens['kube']}\n"),
    }
    honey: dict[str, Path] = {}
    for label, (path, text) in files.items():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        path.write_text(text)
        path.chmod(0o644)
        honey[label] = path
    labels = {value: f"the {kind} honeytoken" for kind, value in tokens.items()}
    record_box: list[Canaries] = []
    listeners = _Listeners(lambda event: record_box[0].record(event))
    inotify = _Inotify()
    abstract = f"\0mcp-canary-{uuid.uuid4().hex[:12]}"
    unix_path = f"/tmp/mcp-canary-{uuid.uuid4().hex[:12]}.sock"
    with contextlib.ExitStack() as stack:
        netrc = stack.enter_context(
            _created(Path("/root/.netrc"), f"machine canary.invalid login canary password {tokens['netrc']}\n")
        )
        if netrc is not None:
            honey["root_netrc"] = netrc
        tcp = listeners.listen(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 0), "TCP canary on 127.0.0.1")
        udp = listeners.listen(socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", 0), "UDP canary on 127.0.0.1")
        listeners.listen(socket.AF_UNIX, socket.SOCK_STREAM, unix_path, f"unix canary {unix_path}")
        os.chmod(unix_path, 0o777)
        stack.callback(lambda: Path(unix_path).unlink(missing_ok=True))
        listeners.listen(socket.AF_UNIX, socket.SOCK_STREAM, abstract, "abstract unix canary")
        tcp_routable = udp_routable = None
        address = _routable_ipv4()
        if address is not None:
            routable_tcp = listeners.listen(
                socket.AF_INET, socket.SOCK_STREAM, (address, 0), f"TCP canary on {address}"
            )
            routable_udp = listeners.listen(socket.AF_INET, socket.SOCK_DGRAM, (address, 0), f"UDP canary on {address}")
            tcp_routable = (address, routable_tcp.getsockname()[1])
            udp_routable = (address, routable_udp.getsockname()[1])
        tcp6_port = None
        with contextlib.suppress(OSError):
            tcp6 = listeners.listen(socket.AF_INET6, socket.SOCK_STREAM, ("::1", 0), "TCP canary on ::1")
            tcp6_port = tcp6.getsockname()[1]
        result = Canaries(
            tcp_port=tcp.getsockname()[1],
            udp_port=udp.getsockname()[1],
            unix_path=unix_path,
            abstract_name=abstract,
            honey_files=honey,
            secrets=tuple(tokens.values()),
            tcp_routable=tcp_routable,
            udp_routable=udp_routable,
            tcp6_port=tcp6_port,
            home=home,
            labels=labels,
            tokens=tokens,
            _inotify=inotify,
        )
        record_box.append(result)
        listeners.thread.start()
        stack.callback(listeners.close)
        stack.callback(inotify.close)
        stack.callback(shutil.rmtree, home, True)
        yield result


def _watch_honey(canaries: Canaries) -> None:
    """Watch every honey file and the fake home's directories (listing them counts as touching them)."""
    assert canaries._inotify is not None
    for path in canaries.honey_files.values():
        canaries._inotify.watch(path)
    for directory in {canaries.home, *(p.parent for p in canaries.honey_files.values() if canaries.home in p.parents)}:
        canaries._inotify.watch(directory)


# --------------------------------------------------------------------------------------------------- the config


@pytest.fixture(scope="session")
def upstream_discovery(canaries: Canaries) -> Iterator[Any]:
    """The servers, from a real MCP client config file (a honey file too), read by the bridge's own discovery.

    ``everything`` (stdio) gets an ``env`` honeytoken; ``everything-http`` (a real streamable-HTTP server on
    127.0.0.1 for the session) gets an ``Authorization`` header honeytoken.
    """
    tokens = canaries.tokens
    stdio = upstreams.everything()
    with upstreams.everything_http() as http:
        config = canaries.home / ".cursor" / "mcp.json"
        config.parent.mkdir(mode=0o755, exist_ok=True)
        entries = {
            "everything": {
                "command": stdio.command,
                "args": list(stdio.args),
                "env": {UPSTREAM_SECRET_ENV: tokens["upstream_env"]},
            },
            "everything-http": {
                "type": "http",
                "url": http.url,
                "headers": {"Authorization": f"Bearer {tokens['config_header']}"},
            },
        }
        config.write_text(json.dumps({"mcpServers": entries}, indent=2))
        config.chmod(0o644)
        found = discover(home=canaries.home, cwd=canaries.home, env={}, explicit=(config,), use_defaults=False)
        assert not found.problems, found.problems
        assert {server.name for server in found.servers} == set(entries), found
        canaries.honey_files["mcp_config"] = config
        _watch_honey(canaries)
        canaries.reset()
        yield found


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
        self, code: str, *, session: str | None = None, timeout: float = 30.0
    ) -> concurrent.futures.Future[ExecutionResult]:
        """Start running ``code`` (dedented, with ``report(value)`` defined: one JSON line) without waiting.

        ``session`` None: a fresh session of its own, discarded afterwards (a new sandbox every call).
        """
        key = session or f"security-{uuid.uuid4().hex[:16]}"
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

    def run(self, code: str, *, session: str | None = None, timeout: float = 30.0) -> ExecutionResult:
        """Run ``code`` and wait for its result (see ``submit``)."""
        return self.submit(code, session=session, timeout=timeout).result(timeout + _WAIT_MARGIN)

    def call(self, coro_factory: Callable[[], Coroutine[Any, Any, T]], timeout: float = 120.0) -> T:
        """Run a coroutine on the bridge's loop and wait for it, e.g. ``target.call(lambda: bridge.discard(k))``."""
        return asyncio.run_coroutine_threadsafe(coro_factory(), self.loop).result(timeout)

    def _keep(self, future: concurrent.futures.Future[ExecutionResult]) -> None:
        if not future.cancelled() and future.exception() is None:
            self.results.append(future.result())


def target_settings(name: str, state_dir: Path, **changes: Any) -> Settings:
    """Small limits: 256m, 64 processes (gVisor's host-thread floor is the backend's business), 20 s, 64k."""
    runtime = "bubblewrap" if name == "bubblewrap" else "podman"
    extra: dict[str, Any] = {"oci_runtime": "runsc"} if name == "gvisor" else {}
    # No warm pool: attacks check that nothing of theirs is left while the bridge still runs, by counting the
    # bridge's sandboxes, and idle pooled ones would be counted (the pool has its own tests: test_warm_pool.py).
    extra["warm_pool"] = 0
    extra.update(changes)
    return sandbox_settings(runtime=runtime, state_dir=state_dir, timeout=20, **extra)


def require_backend(name: str, settings: Settings) -> None:
    """Under CI=true a backend that cannot run fails; elsewhere it skips, saying why."""
    backend = make_backend(settings.runtime, settings)
    if name == "gvisor":
        assert isinstance(backend, ContainerBackend) and backend.gvisor
    require_usable(backend)


@pytest.fixture(scope="module", params=SECURITY_BACKENDS, ids=list(SECURITY_BACKENDS))
def target(request: pytest.FixtureRequest, canaries: Canaries, upstream_discovery: Any) -> Iterator[Target]:
    """A real Bridge on one backend, with the canaries' servers, a private state dir and small limits."""
    name: str = request.param
    tokens = canaries.tokens
    with pytest.MonkeyPatch.context() as patch, private_state_dir() as state:
        # In the bridge's own environment, where an escape that reads the bridge's environ would find it.
        patch.setenv(BRIDGE_SECRET_ENV, tokens["bridge_env"])
        settings = target_settings(name, state)
        require_backend(name, settings)
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name=f"bridge-{name}", daemon=True)
        thread.start()
        ready: concurrent.futures.Future[Bridge] = concurrent.futures.Future()
        stop = asyncio.Event()

        async def hold() -> None:
            try:
                async with Bridge(settings, upstream_discovery) as bridge:
                    ready.set_result(bridge)
                    await stop.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                raise

        held = asyncio.run_coroutine_threadsafe(hold(), loop)
        try:
            bridge = ready.result(120)
            assert bridge.sessions is not None, bridge.backend_error
            yield Target(name, bridge, canaries, loop)
        finally:
            loop.call_soon_threadsafe(stop.set)
            with contextlib.suppress(Exception):
                held.result(120)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(30)
            loop.close()


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


@pytest.fixture(autouse=True)
def _canaries_untouched(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every test that uses a target: nothing on the host touched, no honeytoken in any output."""
    if "target" not in request.fixturenames:
        yield
        return
    target: Target = request.getfixturevalue("target")
    target.canaries.reset()
    target.results.clear()
    yield
    touched = target.canaries.touched()
    results, target.results[:] = list(target.results), []
    assert not touched, f"{target.name}: the sandbox reached the host's canaries: {touched}"
    assert_no_secrets(target, *results)


# --------------------------------------------------------------------------------------------------- the tally

_RECORDS: dict[tuple[str, str], str] = {}


def _attack_id(item: pytest.Item) -> tuple[str, str] | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None or "target" not in callspec.params:
        return None
    module = item.path.stem.removeprefix("test_")
    name = getattr(item, "originalname", item.name)
    extra = [f"{k}={v}" for k, v in sorted(callspec.params.items()) if k != "target"]
    attack = f"{module}::{name.removeprefix('test_')}" + (f"[{','.join(extra)}]" if extra else "")
    return attack, str(callspec.params["target"])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report_box = yield
    report: pytest.TestReport = report_box.get_result()  # type: ignore[attr-defined]
    key = _attack_id(item)
    if key is None:
        return
    if report.failed:
        _RECORDS[key] = "failed"
    elif report.skipped and report.when in ("setup", "call"):
        _RECORDS.setdefault(key, "skipped")
    elif report.when == "call" and report.passed:
        _RECORDS.setdefault(key, "passed")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _RECORDS:
        return
    rows = [{"attack": a, "backend": b, "outcome": o} for (a, b), o in sorted(_RECORDS.items())]
    REPORT_FILE.parent.mkdir(parents=True, exist_ok=True)
    REPORT_FILE.write_text(json.dumps({"ci": IN_CI, "results": rows}, indent=2) + "\n")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _RECORDS:
        return
    terminalreporter.section("security suite: attacks per backend")
    for backend in SECURITY_BACKENDS:
        outcomes = [o for (_, b), o in _RECORDS.items() if b == backend]
        if not outcomes:
            continue
        contained = outcomes.count("passed")
        failed = outcomes.count("failed")
        skipped = outcomes.count("skipped")
        terminalreporter.write_line(
            f"{backend:>10}: {len(outcomes)} tried, {contained} contained, {failed} not contained/failed"
            + (f", {skipped} skipped" if skipped else "")
        )
    for (attack, backend), result in sorted(_RECORDS.items()):
        if result == "failed":
            terminalreporter.write_line(f"  FAILED {backend}: {attack}")
    terminalreporter.write_line(f"(written to {REPORT_FILE.relative_to(ROOT)})")
