"""Secret theft: credentials in files, in the bridge's and the servers' environments and command lines, in
inherited descriptors, in the kernel keyring, and in what /proc tells about the host.

The canaries' honey files (a fake home with SSH, cloud, Docker and Kubernetes credentials, an MCP client config
with an ``env`` and a header token, and ``/root/.netrc``) are world-readable on purpose: only the sandbox's
isolation may keep code away from them. The autouse check fails a test whose code opened one (inotify), or
whose output carries any honeytoken.
"""

from __future__ import annotations

import hashlib
import platform
import textwrap
from pathlib import Path

import pytest

from tests.support.backends import fail_unless
from tests.support.security import ATTEMPT, BRIDGE_SECRET_ENV, UPSTREAM_SECRET_ENV, Target, outcome

pytestmark = pytest.mark.backend

READ_ATTEMPT = """
import errno, os
def attempt(path):
    try:
        if os.path.isdir(path):
            return 'LISTED %d entries' % len(os.listdir(path))
        with open(path, 'rb') as handle:
            return 'READ %d bytes' % len(handle.read())
    except OSError as exc:
        return errno.errorcode.get(exc.errno, type(exc).__name__)
"""

CREDENTIAL_PATHS = (
    "/root/.ssh/id_rsa",
    "/root/.ssh",
    "/root/.aws/credentials",
    "/root/.netrc",
    "/root/.config/gcloud/application_default_credentials.json",
    "/root/.docker/config.json",
    "/root/.kube/config",
    "/root/.claude.json",
    "/root/.cursor/mcp.json",
    "/root/.config/Claude/claude_desktop_config.json",
    "/root/.codex/config.toml",
    "/root/.config/mcp/servers",
    "/root/MCPs",
    "/var/lib/mcp-codemode",
    "/etc/mcp",
)


def test_credential_files_are_out_of_reach(target: Target) -> None:
    """The honey files by their real host paths, and the usual credential places, from inside."""
    c = target.canaries
    paths = sorted({*map(str, c.honey_files.values()), str(c.home), *CREDENTIAL_PATHS})
    home_relative = [".ssh/id_rsa", ".aws/credentials", ".netrc", ".claude.json", ".cursor/mcp.json"]
    code = (
        READ_ATTEMPT
        + f"""
paths = {paths!r} + [os.path.join(os.path.expanduser('~'), name) for name in {home_relative!r}]
report({{path: attempt(path) for path in paths}})
"""
    )
    seen = outcome(target.run(code))
    if target.name == "bubblewrap":
        # Nothing of the host's /root, /var, /home or /tmp is mounted at all.
        assert set(seen.values()) == {"ENOENT"}, seen
    else:
        # The image has its own /root (mode 700, root's): the container's uid cannot look inside it. The host's
        # files are not in the image at all.
        assert set(seen.values()) <= {"ENOENT", "EACCES"}, seen
        root_paths = {path: result for path, result in seen.items() if path.startswith("/root/")}
        assert set(root_paths.values()) == {"EACCES"}, seen


def test_etc_shadow_is_unreadable(target: Target) -> None:
    code = READ_ATTEMPT + "report({path: attempt(path) for path in ('/etc/shadow', '/etc/gshadow', '/etc/sudoers')})"
    seen = outcome(target.run(code))
    if target.name == "bubblewrap":
        # The synthetic /etc holds only passwd, group, hosts and a few public host entries.
        assert seen == dict.fromkeys(seen, "ENOENT"), seen
    else:
        # The image's own shadow files (root:shadow 0640; the image has no sudo), never the host's.
        assert seen == {"/etc/shadow": "EACCES", "/etc/gshadow": "EACCES", "/etc/sudoers": "ENOENT"}, seen


PROC_SCAN = """
import os, errno
needles = [('mcp' + 'canary-').encode(), ('MCP_' + 'CANARY_').encode()]
SKIP = {'kmsg', 'kcore', 'kpagecount', 'kpageflags', 'kpagecgroup', 'pagemap', 'mem', 'clear_refs',
        'sysrq-trigger', 'mapped_base', 'map_files', 'task', 'fd', 'fdinfo', 'ns', 'net', 'sys', 'self',
        'thread-self', 'cwd', 'root', 'exe', 'attr', 'timer_list', 'sched_debug'}
def scan_file(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return os.read(fd, 1 << 20)
    except OSError:
        return None
    finally:
        os.close(fd)
hits, scanned = [], 0
def visit(directory, depth):
    global scanned
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if name in SKIP:
            continue
        path = os.path.join(directory, name)
        if os.path.islink(path):
            continue
        if os.path.isdir(path):
            if depth < 2:
                visit(path, depth + 1)
            continue
        data = scan_file(path)
        if data is None:
            continue
        scanned += 1
        if any(needle in data for needle in needles):
            hits.append(path)
visit('/proc', 0)
for pid in [p for p in os.listdir('/proc') if p.isdigit()]:  # every thread's environment too
    for tid in os.listdir(f'/proc/{pid}/task') if os.path.isdir(f'/proc/{pid}/task') else []:
        data = scan_file(f'/proc/{pid}/task/{tid}/environ') or b''
        scanned += 1
        if any(needle in data for needle in needles):
            hits.append(f'/proc/{pid}/task/{tid}/environ')
environ_names = sorted(os.environ)
report({'hits': hits, 'scanned': scanned, 'environ': environ_names,
        'in os.environ': [k for k, v in os.environ.items() if any(n.decode() in k + v for n in needles)],
        'self environ': (scan_file('/proc/self/environ') or b'').decode(errors='replace').split('\\0'),
        'pid 1 environ': (scan_file('/proc/1/environ') or b'unreadable').decode(errors='replace').split('\\0')})
"""


def test_no_environment_or_proc_file_holds_a_secret(target: Target) -> None:
    """The bridge's environment and the servers' ``env``, searched in os.environ and every readable /proc file."""
    seen = outcome(target.run(PROC_SCAN))
    assert seen["hits"] == [] and seen["in os.environ"] == [], seen
    assert seen["scanned"] > 20, seen  # the scan really read /proc (gVisor's has fewer files)
    assert BRIDGE_SECRET_ENV not in str(seen) and UPSTREAM_SECRET_ENV not in str(seen), seen
    assert not any(name.startswith("MCP_") for name in seen["environ"]), seen


def test_command_lines_show_only_the_sandbox(target: Target) -> None:
    """/proc lists the sandbox's own processes: no bridge, no upstream server, no test runner."""
    code = """
    import os
    lines = {}
    for pid in sorted((p for p in os.listdir('/proc') if p.isdigit()), key=int):
        try:
            lines[pid] = open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\\0')[0].decode()
        except OSError as exc:
            lines[pid] = type(exc).__name__
    report({'programs': lines, 'me': os.getpid()})
    """
    seen = outcome(target.run(code))
    programs = {program for pid, program in seen["programs"].items() if int(pid) != seen["me"]}
    # Besides the probe itself (the worker): bubblewrap's own pid 1 or podman's init (catatonit).
    expected = {"/usr/bin/bwrap"} if target.name == "bubblewrap" else {"/run/podman-init"}
    assert programs == expected, seen
    assert len(seen["programs"]) == 2, seen


def test_only_the_workers_own_descriptors_are_open(target: Target) -> None:
    """fds 0-1023, by fstat and readlink: /dev/null and pipes, nothing of the host (files, sockets, the state dir)."""
    code = """
    import os, stat
    found = {}
    for fd in range(1024):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        try:
            link = os.readlink(f'/proc/self/fd/{fd}')
        except OSError as exc:
            link = type(exc).__name__
        found[fd] = [link, stat.filemode(st.st_mode)[0]]
    init = {}
    try:
        for name in os.listdir('/proc/1/fd'):
            init[name] = os.readlink('/proc/1/fd/' + name)
    except OSError as exc:
        init = type(exc).__name__
    report({'fds': found, 'pid 1': init})
    """
    seen = outcome(target.run(code))
    fds = seen["fds"]
    assert fds.pop("0") == ["/dev/null", "c"], seen
    # Everything else is a pipe: stdout/stderr capture and the worker's channel to the bridge. gVisor names the
    # pipes it was handed by the host "host:[n]"; no socket, file or directory of the host is open.
    pipe_names = ("pipe:[", "host:[") if target.name == "gvisor" else ("pipe:[",)
    assert all(kind == "p" and link.startswith(pipe_names) for link, kind in fds.values()), seen
    assert 4 <= len(fds) <= 8, seen
    # pid 1 (bwrap, or the container's init) belongs to the sandbox uid only under bubblewrap; either way none of
    # its descriptors may name a host path.
    if isinstance(seen["pid 1"], dict):
        paths = [link for link in seen["pid 1"].values() if link.startswith("/")]
        assert set(paths) <= {"/dev/null"}, seen
    state = str(target.bridge.settings.state_dir)
    assert state not in str(fds), seen


def test_the_kernel_keyring_is_out_of_reach(target: Target) -> None:
    fail_unless(platform.machine() == "x86_64", "the keyring syscall numbers below are x86-64's")
    code = """
    import ctypes, errno
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(4096)
    calls = {
        'keyctl GET_KEYRING_ID session': (250, 0, -3, 0),
        'keyctl GET_KEYRING_ID user': (250, 0, -4, 0),
        'keyctl READ user keyring': (250, 11, -4, buffer, 4096),
        'keyctl JOIN_SESSION_KEYRING': (250, 1, None),
        'add_key user': (248, b'user', b'mcp-probe', b'x', 1, -3),
        'request_key user': (249, b'user', b'mcp-probe', None, 0),
    }
    seen = {}
    for name, (number, *args) in calls.items():
        rc = libc.syscall(number, *args)
        seen[name] = 'ALLOWED %d' % rc if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), '?')
    for path in ('/proc/keys', '/proc/key-users'):
        try:
            seen[path] = open(path).read()
        except OSError as exc:
            seen[path] = type(exc).__name__
    report(seen)
    """
    seen = outcome(target.run(code))
    syscalls = {name: value for name, value in seen.items() if not name.startswith("/proc/")}
    assert syscalls == dict.fromkeys(syscalls, "EPERM"), seen
    if target.name == "bubblewrap":
        # A fresh user namespace sees no key of the host's; key-users lists the sandbox's own uid at most.
        assert seen["/proc/keys"] == "", seen
    elif target.name == "podman":
        assert seen["/proc/keys"] == "", seen  # podman masks it: /dev/null is bound over it
    else:
        assert seen["/proc/keys"] == "FileNotFoundError", seen  # gVisor has no keyring at all


def test_mountinfo_shows_no_secret_host_paths(target: Target) -> None:
    """What /proc/self/mountinfo tells about the host, pinned per backend (see the comments)."""
    seen = outcome(target.run("report({'mountinfo': open('/proc/self/mountinfo').read()})"))
    mountinfo: str = seen["mountinfo"]
    state = str(target.bridge.settings.state_dir)
    assert str(target.canaries.home) not in mountinfo and "/root" not in mountinfo, mountinfo
    if target.name == "bubblewrap":
        # Bind mounts show their source: the staged guest directory under the state dir, and the host /etc
        # entries that are bound (ld.so.cache, localtime's zoneinfo target, alternatives, fonts, matplotlibrc).
        assert f"{state}/guest/" in mountinfo, mountinfo
        sources = {line.split()[3] for line in mountinfo.splitlines()}
        assert all(s.startswith((state, "/usr", "/etc", "/newroot", "/sys", "/")) for s in sources), sources
    elif target.name == "podman":
        # runc shows the guest dir's host path, the overlay's storage paths (lowerdir/upperdir under
        # /var/lib/containers/storage), the container id and its cgroup path: layout, not secrets.
        assert f"{state}/guest/" in mountinfo and "/var/lib/containers/storage/overlay" in mountinfo, mountinfo
    else:
        # gVisor's mounts are 9p connections to its gofer: no host path appears at all.
        assert state not in mountinfo and "/var/lib/containers" not in mountinfo, mountinfo


def test_the_staged_guest_directory_is_read_only(target: Target) -> None:
    state = target.bridge.settings.state_dir
    # The guest is staged when the first sandbox starts: start one, whatever ran before this test (pytest-xdist
    # decides the order of groups; this test found nothing staged once when it came first).
    assert target.run("1 + 1").status == "ok"
    workers = sorted(state.glob("guest/*/worker.py"))
    assert workers, f"no staged worker under {state}"
    before = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in workers}
    code = ATTEMPT + textwrap.dedent("""
    worker = '/opt/mcp-codemode/worker.py'
    report({
        'append to worker.py': attempt(lambda: open(worker, 'a').write('# owned')),
        'truncate worker.py': attempt(lambda: os.truncate(worker, 0)),
        'create a file': attempt(lambda: open('/opt/mcp-codemode/evil.py', 'w').close()),
        'mkdir': attempt(lambda: os.mkdir('/opt/mcp-codemode/evil')),
        'unlink worker.py': attempt(lambda: os.unlink(worker)),
        'rename worker.py': attempt(lambda: os.rename(worker, '/opt/mcp-codemode/w.py')),
        'chmod worker.py': attempt(lambda: os.chmod(worker, 0o777)),
        'utime worker.py': attempt(lambda: os.utime(worker, (0, 0))),
        'symlink in': attempt(lambda: os.symlink('/tmp/x', '/opt/mcp-codemode/link')),
        'remove etc/passwd': attempt(lambda: os.unlink('/opt/mcp-codemode/etc/passwd')),
    })
    """)
    seen = outcome(target.run(code))
    assert "SUCCEEDED" not in seen.values(), seen
    # Opening a root-owned file for writing fails on its permissions (EACCES) before the read-only mount is even
    # consulted; everything that needs the mount writable fails with EROFS (EPERM: chmod/utime of another's file).
    assert set(seen.values()) <= {"EROFS", "EACCES", "EPERM"}, seen
    assert seen["mkdir"] == "EROFS", seen  # gVisor checks the root-owned directory's permissions before the mount
    after = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in workers}
    assert after == before
    assert not any(Path(state, "guest").glob("*/evil*"))


def test_the_relay_hands_out_no_credentials(target: Target) -> None:
    """Code sees server names, tools and results; never a server's ``env``, ``headers``, command or URL secret."""
    code = """
    import json
    echoed = await mcp_everything.echo(message='stdio ok')
    echoed_http = await mcp_everything_http.echo(message='http ok')
    described = {name: runtime.describe_server(name) for name in ('everything', 'everything-http')}
    try:
        await runtime.call_tool('everything-http', 'no-such-tool', {})
        missing = 'no error'
    except Exception as exc:
        missing = type(exc).__name__ + ': ' + str(exc)
    report({'echo': str(echoed), 'echo http': str(echoed_http), 'described': described,
            'servers': await runtime.list_servers(detailed=True),
            'repr': repr(mcp_everything) + repr(mcp_everything_http),
            'missing tool': missing, 'summary': runtime.capability_summary()})
    """
    seen = outcome(target.run(code, timeout=60))
    assert "stdio ok" in seen["echo"] and "http ok" in seen["echo http"], seen
    assert "Bearer" not in str(seen) and "Authorization" not in str(seen), seen
    # The autouse check searches all of it for the env and header honeytokens.
