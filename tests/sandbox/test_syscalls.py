"""The seccomp denylist is enforced on every backend, not only compiled."""

from __future__ import annotations

import platform

import pytest

from mcp_codemode.sandbox.seccomp import DENIED_SYSCALLS, oci_profile
from tests.support.backends import fail_unless

pytestmark = pytest.mark.usefixtures("no_orphans")

# x86-64 numbers of syscalls whose refusal matters most for an escape or a host attack.
X86_64 = {
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "kexec_load": 246,
    "init_module": 175,
    "keyctl": 250,
    "add_key": 248,
    "perf_event_open": 298,
    "setns": 308,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "clock_settime": 227,
    "unshare": 272,
    "ptrace": 101,
}


def test_every_dangerous_syscall_fails_with_eperm(with_sessions):
    fail_unless(platform.machine() == "x86_64", "the syscall numbers below are x86-64's")
    code = f"""
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
outcomes = {{}}
for name, number in {X86_64!r}.items():
    rc = libc.syscall(number, 0, 0, 0, 0, 0)
    outcomes[name] = 'ALLOWED' if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), '?')
print(outcomes)
"""
    result = with_sessions(lambda s: s.execute(code))
    assert result.status == "ok", result
    outcomes = eval(result.stdout)
    assert outcomes == dict.fromkeys(X86_64, "EPERM"), outcomes


def test_only_unix_sockets_can_be_created(with_sessions):
    code = """
import socket
made = []
for family in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK, socket.AF_PACKET):
    try:
        socket.socket(family, socket.SOCK_RAW if family == socket.AF_PACKET else socket.SOCK_DGRAM).close()
        made.append(family.name)
    except OSError:
        pass
a, b = socket.socketpair()
a.sendall(b'unix ok'); print(made, b.recv(16))
"""
    result = with_sessions(lambda s: s.execute(code))
    assert result.status == "ok", result
    assert result.stdout.strip() == "[] b'unix ok'"


def test_the_container_profile_lists_the_same_syscalls_as_the_bwrap_filter():
    rules = oci_profile()["syscalls"]
    assert isinstance(rules, list)
    assert set(rules[0]["names"]) == set(DENIED_SYSCALLS)
