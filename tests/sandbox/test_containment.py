"""Hostile code on every real backend, at the session manager: the host is invisible and the bridge stays in charge.

The limits (time, memory, processes, output) are attacked through the whole bridge on all three backends in
tests/security/test_resources.py, which holds everything the session-level versions here checked, and more.
"""

from __future__ import annotations

import socket
import threading

import pytest

from mcp_codemode.runs.sessions import SessionManager
from tests.support.backends import ONE_BACKEND

pytestmark = pytest.mark.usefixtures("no_orphans")


@ONE_BACKEND
def test_huge_repr_of_the_last_value_is_clipped(with_sessions):
    result = with_sessions(lambda s: s.execute("'z' * 5_000_000"))
    assert result.status == "ok"
    assert result.value is not None and len(result.value) < 300_000
    assert "characters cut" in result.value


def test_forged_frames_on_the_control_channel_kill_only_that_worker(with_sessions):
    forge = (
        "import os\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, b'\\xff\\xff\\xff\\xff' + b'not a frame' * 100)\n"
        "    except OSError:\n"
        "        pass\n"
        "import time; time.sleep(5)"
    )

    async def body(s: SessionManager):
        forged = await s.execute(forge, timeout=10)
        after = await s.execute("'recovered'")
        return forged, after

    forged, after = with_sessions(body)
    assert forged.status == "crashed"
    assert "protocol" in forged.notice
    assert after.value == "'recovered'"


@ONE_BACKEND
def test_forged_result_frame_is_ignored_unless_it_matches(with_sessions):
    forge = (
        "import json, os, struct\n"
        "frame = json.dumps({'type': 'result', 'id': 999999, 'status': 'ok', 'value': 'forged'}).encode()\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, struct.pack('>I', len(frame)) + frame)\n"
        "    except OSError:\n"
        "        pass\n"
        "'genuine'"
    )
    result = with_sessions(lambda s: s.execute(forge))
    assert result.status == "ok"
    assert result.value == "'genuine'"


def test_no_network_at_all(with_sessions):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted: list[object] = []
    server.settimeout(15)
    thread = threading.Thread(target=lambda: accepted.append(_accept(server)), daemon=True)
    thread.start()
    code = f"""
import socket
outcomes = []
for host, port in (('127.0.0.1', {port}), ('1.1.1.1', 53), ('10.0.2.2', 80)):
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect((host, port))
        outcomes.append('connected')
    except OSError as exc:
        outcomes.append(type(exc).__name__)
interfaces = [line.split(':')[0].strip() for line in open('/proc/net/dev').read().splitlines()[2:]]
print(outcomes, interfaces)
"""
    try:
        result = with_sessions(lambda s: s.execute(code, timeout=30))
    finally:
        server.close()
    assert result.status == "ok", result
    assert "connected" not in result.stdout
    assert result.stdout.strip().endswith("['lo']"), result.stdout
    thread.join(timeout=1)
    assert accepted in ([], [None]), "the sandbox reached a server on the host's loopback"


def _accept(server: socket.socket) -> object:
    try:
        conn, _ = server.accept()
    except OSError:
        return None
    conn.close()
    return "accepted"


SECRET_NAME = "MCP_CODEMODE_TEST_SECRET"


def test_host_files_and_the_bridges_environment_are_invisible(with_sessions, monkeypatch):
    monkeypatch.setenv(SECRET_NAME, "hunter2-do-not-leak")
    code = f"""
import os, glob
found = {{}}
for path in ('/etc/shadow', '/root', '/home', '/var/lib', '/run'):
    try:
        found[path] = sorted(os.listdir(path)) if os.path.isdir(path) else open(path).read()[:20]
    except OSError as exc:
        found[path] = type(exc).__name__
leak = '{SECRET_NAME}' in os.environ
for environ in glob.glob('/proc/*/environ'):
    try:
        leak = leak or b'hunter2' in open(environ, 'rb').read()
    except OSError:
        pass
print(found, 'LEAK' if leak else 'clean')
"""
    result = with_sessions(lambda s: s.execute(code))
    assert result.status == "ok", result
    assert "hunter2" not in result.stdout
    assert result.stdout.strip().endswith("clean"), result.stdout
    assert "root:" not in result.stdout  # no line of a shadow file
    for path in ("/root", "/home"):
        assert (
            f"'{path}': []" in result.stdout
            or f"'{path}': 'FileNotFoundError'" in result.stdout
            or (f"'{path}': 'PermissionError'" in result.stdout)
        ), result.stdout


def test_root_and_proc_sys_are_read_only(with_sessions):
    code = """
outcomes = {}
for path in ('/proc/sys/kernel/core_pattern', '/proc/sys/kernel/hostname', '/usr/bin/python3', '/etc/passwd',
             '/new-file', '/opt/mcp-codemode/worker.py'):
    try:
        with open(path, 'w') as handle:
            handle.write('x')
        outcomes[path] = 'WRITTEN'
    except OSError as exc:
        outcomes[path] = type(exc).__name__
for path in ('/workspace/ok', '/tmp/ok'):
    with open(path, 'w') as handle:
        handle.write('fine')
    outcomes[path] = 'ok'
print(outcomes)
"""
    result = with_sessions(lambda s: s.execute(code))
    assert result.status == "ok", result
    assert "WRITTEN" not in result.stdout
    assert "'/workspace/ok': 'ok'" in result.stdout and "'/tmp/ok': 'ok'" in result.stdout


def test_tmpfs_size_caps_hold(with_sessions):
    code = """
written = 0
try:
    with open('/workspace/fill', 'wb') as handle:
        for _ in range(64):
            handle.write(b'0' * (1 << 20))
            written += 1
except OSError as exc:
    print('stopped', written, type(exc).__name__)
"""
    result = with_sessions(lambda s: s.execute(code), workspace_size=8 << 20)
    assert result.status == "ok", result
    words = result.stdout.split()
    assert words[0] == "stopped" and int(words[1]) <= 8


def test_sandbox_runs_as_an_unprivileged_user(with_sessions):
    code = "import os\nprint(os.getuid(), os.geteuid(), os.getgid(), open('/proc/self/status').read())"
    result = with_sessions(lambda s: s.execute(code))
    assert result.stdout.split()[:3] == ["65534", "65534", "65534"]
    capabilities = {
        line.split(":")[0]: line.split(":")[1].strip() for line in result.stdout.splitlines()[1:] if ":" in line
    }
    assert capabilities["CapEff"] == "0000000000000000"
    assert capabilities["NoNewPrivs"] == "1"


def test_ptrace_and_new_namespaces_are_refused(with_sessions):
    code = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
outcomes = {}
for name, call in (('ptrace', lambda: libc.ptrace(16, 1, 0, 0)),           # PTRACE_ATTACH to pid 1
                   ('unshare_user', lambda: libc.unshare(0x10000000)),     # CLONE_NEWUSER
                   ('unshare_net', lambda: libc.unshare(0x40000000))):     # CLONE_NEWNET
    rc = call()
    outcomes[name] = 'allowed' if rc == 0 else os.strerror(ctypes.get_errno())
print(outcomes)
"""
    result = with_sessions(lambda s: s.execute(code))
    assert result.status == "ok", result
    assert "allowed" not in result.stdout, result.stdout


def test_environment_is_minimal(with_sessions):
    result = with_sessions(lambda s: s.execute("import os\nsorted(os.environ)"))
    names = set(eval(result.value or "[]"))
    allowed = {"PATH", "HOME", "PWD", "TMPDIR", "LANG", "HOSTNAME", "container", "TERM", "LC_CTYPE"}
    allowed |= {"MPLBACKEND", "MPLCONFIGDIR"}  # set by the worker itself so plots render to bytes in /tmp
    assert names <= allowed, names
    assert not any(name.startswith("MCP_") for name in names)
