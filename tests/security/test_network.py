"""Network attacks: no packet, connection or name lookup may leave the sandbox, whatever the address family.

Every backend refuses every socket family but AF_UNIX at ``socket()`` already (the seccomp denylist), on top of
an empty network namespace (bubblewrap, podman) or gVisor's ``network=none``. So the precise expectation for
every non-unix probe is the refusal errno: EAFNOSUPPORT, except under gVisor, whose runsc (20221219) applies
our OCI profile but ignores each rule's ``errnoRet`` and fails every denied call with EPERM. The canaries
(autouse) then prove that nothing reached the host's listeners either.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import pytest

from tests.support.backends import fail_unless
from tests.support.security import Target, outcome

pytestmark = pytest.mark.backend

# A host daemon's socket, if the host has it, is what an escape would go for; none may be reachable.
HOST_DAEMON_SOCKETS = (
    "/run/podman/podman.sock",
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/run/dbus/system_bus_socket",
    "/var/run/dbus/system_bus_socket",
    "/run/systemd/private",
    "/run/systemd/notify",
    "/run/systemd/journal/socket",
    "/run/systemd/journal/stdout",
    "/run/user/0/bus",
    "/var/run/nscd/socket",
)

PROBE = """
import errno, socket

def attempt(fn):
    try:
        fn()
        return 'SUCCEEDED'
    except OSError as exc:
        return errno.errorcode.get(exc.errno, type(exc).__name__) if exc.errno else type(exc).__name__

def connect(family, kind, address, timeout=2.0):
    def go():
        with socket.socket(family, kind) as s:
            s.settimeout(timeout)
            if kind == socket.SOCK_DGRAM and family != socket.AF_UNIX:
                s.sendto(b'mcp canary probe', address)
            else:
                s.connect(address)
    return attempt(go)
"""


def refused(target: Target) -> str:
    """The errno a non-AF_UNIX ``socket()`` fails with (see the module docstring for gVisor's EPERM)."""
    return "EPERM" if target.name == "gvisor" else "EAFNOSUPPORT"


def test_tcp_and_udp_to_the_hosts_listeners(target: Target) -> None:
    c = target.canaries
    probes: dict[str, tuple[str, str, object]] = {
        "tcp loopback canary": ("AF_INET", "SOCK_STREAM", ("127.0.0.1", c.tcp_port)),
        "udp loopback canary": ("AF_INET", "SOCK_DGRAM", ("127.0.0.1", c.udp_port)),
    }
    if c.tcp_routable is not None:
        probes["tcp routable canary"] = ("AF_INET", "SOCK_STREAM", c.tcp_routable)
        probes["tcp routable ssh"] = ("AF_INET", "SOCK_STREAM", (c.tcp_routable[0], 22))
    if c.udp_routable is not None:
        probes["udp routable canary"] = ("AF_INET", "SOCK_DGRAM", c.udp_routable)
    if c.tcp6_port is not None:
        probes["tcp6 loopback canary"] = ("AF_INET6", "SOCK_STREAM", ("::1", c.tcp6_port))
    code = (
        PROBE + "report({name: connect(getattr(socket, f), getattr(socket, k), a) for name, (f, k, a) in %r.items()})"
    )
    seen = outcome(target.run(code % probes))
    assert seen == dict.fromkeys(probes, refused(target)), seen


def test_the_internet_is_unreachable(target: Target) -> None:
    probes = {
        "tcp 1.1.1.1:53": ("AF_INET", "SOCK_STREAM", ("1.1.1.1", 53)),
        "tcp 8.8.8.8:443": ("AF_INET", "SOCK_STREAM", ("8.8.8.8", 443)),
        "udp 8.8.8.8:53": ("AF_INET", "SOCK_DGRAM", ("8.8.8.8", 53)),
        "udp 1.1.1.1:53": ("AF_INET", "SOCK_DGRAM", ("1.1.1.1", 53)),
        "tcp6 [2606:4700:4700::1111]:53": ("AF_INET6", "SOCK_STREAM", ("2606:4700:4700::1111", 53)),
        "tcp 169.254.169.254:80 (cloud metadata)": ("AF_INET", "SOCK_STREAM", ("169.254.169.254", 80)),
    }
    code = (
        PROBE + "report({name: connect(getattr(socket, f), getattr(socket, k), a) for name, (f, k, a) in %r.items()})"
    )
    seen = outcome(target.run(code % probes))
    assert seen == dict.fromkeys(probes, refused(target)), seen


def test_dns_resolution_fails_and_resolv_conf_names_no_host_resolver(target: Target) -> None:
    code = """
    import socket
    try:
        found = socket.getaddrinfo('example.com', 443)
        resolved = 'RESOLVED ' + repr(found[:1])
    except socket.gaierror as exc:
        resolved = 'gaierror'
    except OSError as exc:
        resolved = type(exc).__name__
    try:
        localhost = sorted({info[4][0] for info in socket.getaddrinfo('localhost', 80, socket.AF_INET)})
    except OSError as exc:
        localhost = type(exc).__name__
    try:
        resolv = open('/etc/resolv.conf').read()
    except OSError as exc:
        resolv = type(exc).__name__
    report({'resolved': resolved, 'resolv.conf': resolv, 'localhost': localhost})
    """
    seen = outcome(target.run(code))
    assert seen["resolved"] == "gaierror", seen
    # /etc/hosts still answers for localhost (no socket is needed for that): the sandbox's own one.
    assert seen["localhost"] == ["127.0.0.1"], seen
    if target.name == "bubblewrap":
        # The synthetic /etc has no resolv.conf at all.
        assert seen["resolv.conf"] == "FileNotFoundError", seen
    else:
        # podman copies the host's resolv.conf into the container even with --network none (gVisor too): it
        # tells the code the host's resolver address, nothing more, and no lookup can use it (socket() of any
        # non-unix family is refused). It must be that copy, not something that reaches further.
        host = Path("/etc/resolv.conf").read_text() if Path("/etc/resolv.conf").exists() else ""
        ours = [line for line in str(seen["resolv.conf"]).splitlines() if line.strip() and not line.startswith("#")]
        assert all(line in host.splitlines() for line in ours), seen


def test_host_unix_sockets_are_absent(target: Target) -> None:
    c = target.canaries
    paths = [c.unix_path, *HOST_DAEMON_SOCKETS]
    code = PROBE + f"report({{path: connect(socket.AF_UNIX, socket.SOCK_STREAM, path) for path in {paths!r}}})"
    seen = outcome(target.run(code))
    # Not refused, not denied: absent. The sandbox's /tmp is a tmpfs of its own and no host /run is mounted.
    assert seen == dict.fromkeys(paths, "ENOENT"), {
        "seen": seen,
        "on the host": [path for path in paths if os.path.exists(path)],
    }


def test_the_hosts_abstract_unix_sockets_are_another_namespace(target: Target) -> None:
    name = target.canaries.abstract_name
    code = (
        PROBE
        + f"""
name = {name!r}
first = connect(socket.AF_UNIX, socket.SOCK_STREAM, name)
# The same name is free in here: the sandbox has an abstract namespace of its own, so binding it works and
# reaching it connects to this listener, never to the host's.
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as mine:
    mine.bind(name)
    mine.listen(1)
    second = connect(socket.AF_UNIX, socket.SOCK_STREAM, name)
report({{'connect': first, 'bind own': 'ok', 'connect own': second}})
"""
    )
    seen = outcome(target.run(code))
    assert seen == {"connect": "ECONNREFUSED", "bind own": "ok", "connect own": "SUCCEEDED"}, seen


def test_raw_packet_netlink_vsock_and_other_families_are_refused(target: Target) -> None:
    families = {
        "AF_INET SOCK_RAW icmp": (2, 3, 1),
        "AF_INET6 SOCK_RAW icmpv6": (10, 3, 58),
        "AF_PACKET SOCK_RAW": (17, 3, 0x0300),
        "AF_PACKET SOCK_DGRAM": (17, 2, 0x0300),
        "AF_NETLINK route": (16, 3, 0),
        "AF_NETLINK audit": (16, 3, 9),
        "AF_NETLINK kobject_uevent": (16, 2, 15),
        "AF_VSOCK stream": (40, 1, 0),
        "AF_ALG (kernel crypto)": (38, 5, 0),
        "AF_XDP": (44, 3, 0),
        "AF_KEY": (15, 3, 2),
        "AF_BLUETOOTH": (31, 3, 1),
        "AF_CAN": (29, 3, 1),
        "AF_TIPC": (30, 5, 0),
        "AF_RDS": (21, 5, 0),
        "AF_NFC": (39, 2, 1),
        "AF_INET6 SOCK_DGRAM": (10, 2, 0),
        "AF_INET SOCK_STREAM": (2, 1, 0),
    }
    code = """
    import errno, socket
    seen = {}
    for name, (family, kind, proto) in %r.items():
        try:
            s = socket.socket(family, kind, proto)
        except OSError as exc:
            seen[name] = errno.errorcode.get(exc.errno, str(exc.errno))
            continue
        seen[name] = 'CREATED'
        if family == 16:  # a netlink socket that exists: try the route dump an attacker would read
            try:
                s.bind((0, 0))
                s.send(bytes.fromhex('1400000012000103000000000000000000000000'))  # RTM_GETLINK dump
                seen[name] += ' and dumped %%d bytes' %% len(s.recv(65536))
            except OSError as exc:
                seen[name] += ' ' + errno.errorcode.get(exc.errno, '?')
        s.close()
    report(seen)
    """
    seen = outcome(target.run(code % families))
    assert seen == dict.fromkeys(families, refused(target)), seen


def test_io_uring_cannot_be_set_up(target: Target) -> None:
    fail_unless(platform.machine() == "x86_64", "the io_uring syscall numbers below are x86-64's")
    code = """
    import ctypes, errno
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    seen = {}
    for name, number, args in (('io_uring_setup', 425, (8, params)), ('io_uring_enter', 426, (0, 1, 0, 0, None, 0)),
                               ('io_uring_register', 427, (0, 0, None, 0))):
        rc = libc.syscall(number, *args)
        seen[name] = 'ALLOWED fd=%d' % rc if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), '?')
    report(seen)
    """
    seen = outcome(target.run(code))
    assert seen == dict.fromkeys(("io_uring_setup", "io_uring_enter", "io_uring_register"), "EPERM"), seen


def test_the_sandbox_has_no_interface_and_cannot_see_the_hosts_sockets(target: Target) -> None:
    """Only loopback exists (or nothing), and /proc/net shows none of the host's listeners."""
    c = target.canaries
    ports = {f"{port:04X}" for port in (c.tcp_port, c.udp_port, c.tcp6_port or 0) if port}
    code = """
    def read(path):
        try:
            return open(path).read()
        except OSError as exc:
            return type(exc).__name__
    dev = read('/proc/net/dev')
    interfaces = [line.split(':')[0].strip() for line in dev.splitlines()[2:]] if ':' in dev else dev
    tables = {name: read('/proc/net/' + name) for name in ('tcp', 'tcp6', 'udp', 'udp6', 'unix', 'if_inet6')}
    ports = %r
    visible = sorted(p for p in ports if any(':' + p + ' ' in t for t in tables.values()))
    report({'interfaces': interfaces, 'host ports seen': visible,
            'host unix socket seen': %r in tables['unix'], 'abstract seen': %r in tables['unix'],
            'if_inet6': tables['if_inet6']})
    """
    seen = outcome(target.run(code % (sorted(ports), c.unix_path, c.abstract_name[1:])))
    assert seen["host ports seen"] == [], seen
    assert seen["host unix socket seen"] is False and seen["abstract seen"] is False, seen
    if target.name == "gvisor":
        # network=none: gVisor has no network stack to show, only its own loopback device.
        assert seen["interfaces"] in (["lo"], [], "FileNotFoundError"), seen
    else:
        assert seen["interfaces"] == ["lo"], seen
    host_addresses = {c.tcp_routable[0]} if c.tcp_routable else set()
    assert not any(address in str(seen) for address in host_addresses), seen


def test_ipv6_is_refused_like_ipv4(target: Target) -> None:
    c = target.canaries
    probes = {
        "tcp6 ::1 canary": ("AF_INET6", "SOCK_STREAM", ("::1", c.tcp6_port or c.tcp_port)),
        "tcp6 v4-mapped loopback canary": ("AF_INET6", "SOCK_STREAM", ("::ffff:127.0.0.1", c.tcp_port)),
        "udp6 v4-mapped loopback canary": ("AF_INET6", "SOCK_DGRAM", ("::ffff:127.0.0.1", c.udp_port)),
        "tcp6 link-local all-nodes": ("AF_INET6", "SOCK_STREAM", ("fe80::1", 80, 0, 1)),
    }
    code = (
        PROBE + "report({name: connect(getattr(socket, f), getattr(socket, k), a) for name, (f, k, a) in %r.items()})"
    )
    seen = outcome(target.run(code % probes))
    assert seen == dict.fromkeys(probes, refused(target)), seen


def test_the_gvisor_backend_runs_without_a_network_stack_and_with_our_seccomp_profile(tmp_path: Path) -> None:
    """What makes gVisor safe here is in podman's argv: ``network=none`` and ``oci-seccomp`` (runsc ignores the
    profile without it), a pids limit the sentry can live with, and nproc as the per-sandbox process limit."""
    from mcp_codemode.sandbox.container import GVISOR_MIN_PIDS, ContainerBackend
    from tests.support.security import target_settings

    settings = target_settings("gvisor", tmp_path / "state")
    backend = ContainerBackend(settings, "podman", binary="/usr/bin/podman")
    argv = backend.run_argv("name", {})
    assert argv[1:6] == ["--runtime-flag", "network=none", "--runtime-flag", "oci-seccomp", "run"], argv
    assert argv[argv.index("--runtime") + 1] == "runsc" and argv[argv.index("--network") + 1] == "none"
    assert argv[argv.index("--pids-limit") + 1] == str(GVISOR_MIN_PIDS)
    assert f"nproc={settings.pids}:{settings.pids}" in argv
    profile = argv[argv.index("--security-opt", argv.index("no-new-privileges")) + 1]
    assert profile.startswith("seccomp=") and "clone3" not in Path(profile.removeprefix("seccomp=")).read_text()
    limits = {limit.name: limit for limit in backend.enforced_limits()}
    assert limits["processes"].value == str(settings.pids) and "nproc" in limits["processes"].mechanism
    assert limits["kernel"].value == "gVisor"
    missing = ContainerBackend(settings.replace(oci_runtime="/nonexistent/runsc"), "podman", binary="/usr/bin/podman")
    availability = missing.availability()
    fail_unless(not availability.reason.startswith("image"), availability.reason)
    assert not availability.usable and "gVisor" in availability.reason and "apt-get install runsc" in availability.fix
    # runc is untouched: no global flags, the configured pids limit, the staged profile with its clone3 rule.
    runc = ContainerBackend(settings.replace(oci_runtime="runc"), "podman", binary="/usr/bin/podman")
    runc_argv = runc.run_argv("name", {})
    assert runc_argv[1] == "run" and runc_argv[runc_argv.index("--pids-limit") + 1] == str(settings.pids)
