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
failed), and a per-backend tally is printed at the end of the session: passed means contained. That tally is kept
by ``tests/support/tally.py`` (a plugin of the root conftest), where the reports of every pytest-xdist worker meet.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import shutil
import socket
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_codemode.runs.bridge import Bridge
from mcp_codemode.upstream.config.discovery import discover
from tests.support import upstreams
from tests.support.cells import private_state_dir
from tests.support.security import (
    BRIDGE_SECRET_ENV,
    SECURITY_BACKENDS,
    UPSTREAM_SECRET_ENV,
    Canaries,
    Inotify,
    Listeners,
    Target,
    assert_no_secrets,
    created_file,
    honeytoken,
    require_backend,
    routable_ipv4,
    target_settings,
)


@pytest.fixture(scope="session")
def canaries() -> Iterator[Canaries]:
    """One set of canaries for the session (every backend's bridge shares them); ``reset`` per test."""
    tokens = {
        "ssh": honeytoken("ssh-key"),
        "aws": honeytoken("aws-secret"),
        "gcloud": honeytoken("gcloud-refresh"),
        "netrc": honeytoken("netrc-password"),
        "docker": honeytoken("docker-auth"),
        "kube": honeytoken("kube-token"),
        "bridge_env": honeytoken("bridge-env"),
        "upstream_env": honeytoken("upstream-env"),
        "config_header": honeytoken("config-header"),
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
    listeners = Listeners(lambda event: record_box[0].record(event))
    inotify = Inotify()
    abstract = f"\0mcp-canary-{uuid.uuid4().hex[:12]}"
    unix_path = f"/tmp/mcp-canary-{uuid.uuid4().hex[:12]}.sock"
    with contextlib.ExitStack() as stack:
        netrc = stack.enter_context(
            created_file(Path("/root/.netrc"), f"machine canary.invalid login canary password {tokens['netrc']}\n")
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
        address = routable_ipv4()
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
