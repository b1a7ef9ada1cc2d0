"""Privilege: hostile code tries to become root, leave its namespaces, or reach the kernel's sharp edges.

Every probe runs through the real Bridge on bubblewrap, podman (runc) and gVisor (runsc), and reports one JSON
line; the assertions live here. Probes that would change something if they succeeded run with harmless
arguments (the current time, a reboot command that only disables Ctrl-Alt-Del, a mount inside the sandbox's own
/workspace) or in a forked child, so a failure of containment is reported, not inflicted on the host.

Backend differences (asserted precisely below, explained where they appear):

- bubblewrap's sandbox lives in a user namespace where host root (uid 0) is not mapped at all, so
  ``setuid(0)`` fails with ``EINVAL`` ("no such uid here"); in a container (no user namespace) uid 0 exists
  and the call fails with ``EPERM``. Either way the process stays uid 65534.
- bubblewrap's ``/dev`` has a ``core`` symlink (to ``/proc/kcore``, unreadable without CAP_SYS_RAWIO); podman
  adds an ``mqueue`` directory. Both are otherwise the same minimal set.
- gVisor: the guest talks to gVisor's own kernel (the sentry), not the host's. Its ``/proc/self/status`` is
  gVisor's; our seccomp profile is applied inside the sentry (``--runtime-flag oci-seccomp``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.security import Target, assert_no_secrets, outcome

pytestmark = pytest.mark.backend

SANDBOX_UID = 65534

# ----------------------------------------------------------------------------------------------- shared prelude

# Raw syscalls through ctypes: every probe reports the errno name, or "ALLOWED" when the call succeeded.
SYSCALLS = """
import ctypes, errno, json, os, signal, struct, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def verdict(rc):
    return "ALLOWED" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))

def sc(number, *args):
    padded = [ctypes.c_long(a) for a in args] + [ctypes.c_long(0)] * (6 - len(args))
    ctypes.set_errno(0)
    return verdict(libc.syscall(number, *padded))

def in_child(probe):
    # Run probe() in a forked child and return its dict: whatever it manages to change dies with the child.
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            data = json.dumps(probe()).encode()
        except BaseException as exc:
            data = json.dumps({"child_error": repr(exc)}).encode()
        os.write(write_end, data)
        os._exit(0)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    return json.loads(b"".join(chunks) or b"{}")

def cstr(text):
    return ctypes.c_char_p(text.encode())

def addr(obj):
    return ctypes.addressof(obj)
"""


def probe(target: Target, body: str, timeout: float = 30.0) -> dict[str, Any]:
    """Run the shared prelude plus ``body`` (which calls report) in a fresh sandbox; the reported dict."""
    result = target.run(SYSCALLS + textwrap.dedent(body), timeout=timeout)
    assert_no_secrets(target, result)
    return outcome(result)


def assert_still_serving(target: Target) -> None:
    """A different session on the same bridge still runs code."""
    after = target.run("1+1")
    assert after.status == "ok" and after.value == "2", after


# ------------------------------------------------------------------------------------------ credentials & status


def test_no_capabilities_no_new_privs_and_a_seccomp_filter(target: Target) -> None:
    seen = probe(
        target,
        """
        status = {}
        for line in open("/proc/self/status"):
            name, _, value = line.partition(":")
            status[name] = value.strip()
        # The same facts from the kernel's own calls: capget(2) and prctl(2), not only /proc's rendering.
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
        data = (ctypes.c_uint32 * 6)()
        capget = verdict(libc.capget(header, data))
        bounding = [cap for cap in range(64) if libc.prctl(23, cap, 0, 0, 0) == 1]       # PR_CAPBSET_READ
        ambient = [cap for cap in range(64) if libc.prctl(47, 1, cap, 0, 0) == 1]        # PR_CAP_AMBIENT_IS_SET
        report({
            "status": {k: status.get(k) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs",
                                                  "Seccomp")},
            "capget": [capget, list(data)],
            "bounding": bounding,
            "ambient": ambient,
            "no_new_privs": libc.prctl(39, 0, 0, 0, 0),                                  # PR_GET_NO_NEW_PRIVS
            "seccomp_mode": libc.prctl(21, 0, 0, 0, 0),                                  # PR_GET_SECCOMP
            "ids": [os.getuid(), os.geteuid(), os.getgid(), os.getegid()],
            "resuid": list(os.getresuid()), "resgid": list(os.getresgid()),
            "groups": os.getgroups(),
        })
        """,
    )
    zero = "0000000000000000"
    status = seen["status"]
    assert status["CapInh"] == zero and status["CapPrm"] == zero and status["CapEff"] == zero, seen
    assert status["CapBnd"] == zero, seen
    if target.name == "gvisor":
        # gVisor's /proc/PID/status (the sentry's own rendering) has no CapAmb or NoNewPrivs line; the
        # prctl answers below are the kernel's word for them there.
        assert status["CapAmb"] is None and status["NoNewPrivs"] is None, seen
    else:
        assert status["CapAmb"] == zero, seen
        assert status["NoNewPrivs"] == "1", seen
    # Seccomp mode 2 (filter) everywhere: bwrap --seccomp, podman's OCI profile, and under gVisor the same profile
    # applied by the sentry itself (runsc --oci-seccomp), which reports mode 2 in its own /proc as well.
    assert status["Seccomp"] == "2", seen
    assert seen["capget"] == ["ALLOWED", [0] * 6], seen
    assert seen["bounding"] == [] and seen["ambient"] == [], seen
    assert seen["no_new_privs"] == 1, seen
    # PR_GET_SECCOMP: a filtered process gets 2 back (only strict mode would kill it for asking).
    assert seen["seccomp_mode"] == 2, seen
    assert seen["ids"] == [SANDBOX_UID] * 4, seen
    assert seen["resuid"] == [SANDBOX_UID] * 3 and seen["resgid"] == [SANDBOX_UID] * 3, seen
    # No supplementary group but the sandbox's own (bwrap: none; podman adds the user's primary group).
    assert set(seen["groups"]) <= {SANDBOX_UID}, seen


def test_setuid_and_setgid_to_root_fail(target: Target) -> None:
    seen = probe(
        target,
        """
        def attempt():
            rows = {}
            rows["setuid0"] = verdict(libc.setuid(0))
            rows["setgid0"] = verdict(libc.setgid(0))
            rows["setresuid0"] = verdict(libc.setresuid(0, 0, 0))
            rows["setresgid0"] = verdict(libc.setresgid(0, 0, 0))
            rows["setgroups0"] = verdict(libc.setgroups(1, ctypes.byref(ctypes.c_uint(0))))
            rows["setfsuid0_then"] = (libc.setfsuid(0), libc.setfsuid(-1))  # returns the previous fsuid
            rows["after"] = [list(os.getresuid()), list(os.getresgid())]
            return rows
        report(in_child(attempt))
        """,
    )
    # bubblewrap: uid/gid 0 are not mapped in the sandbox's user namespace (EINVAL); containers: EPERM.
    expected = "EINVAL" if target.name == "bubblewrap" else "EPERM"
    for call in ("setuid0", "setgid0", "setresuid0", "setresgid0"):
        assert seen[call] == expected, seen
    assert seen["setgroups0"] == "EPERM", seen
    if target.name == "gvisor":
        assert seen["setfsuid0_then"] == [-1, -1], seen  # gVisor does not implement setfsuid(2) at all
    else:
        assert seen["setfsuid0_then"] == [SANDBOX_UID, SANDBOX_UID], seen  # the change was silently refused
    assert seen["after"] == [[SANDBOX_UID] * 3, [SANDBOX_UID] * 3], seen


# ----------------------------------------------------------------------------------------------------- ptrace


def test_ptrace_and_cross_process_memory_access_are_refused(target: Target) -> None:
    seen = probe(
        target,
        """
        class iovec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
        rows = {"traceme": in_child(lambda: {"rc": verdict(libc.ptrace(0, 0, 0, 0))})["rc"]}
        child = os.fork()
        if child == 0:
            time.sleep(60)
            os._exit(0)
        rows["attach_child"] = verdict(libc.ptrace(16, child, 0, 0))       # PTRACE_ATTACH
        rows["seize_child"] = verdict(libc.ptrace(0x4206, child, 0, 0))    # PTRACE_SEIZE
        rows["attach_init"] = verdict(libc.ptrace(16, 1, 0, 0))
        buffer = ctypes.create_string_buffer(64)
        local = iovec(ctypes.cast(buffer, ctypes.c_void_p), 64)
        remote = iovec(ctypes.cast(buffer, ctypes.c_void_p), 64)
        rows["process_vm_readv"] = sc(310, child, addr(local), 1, addr(remote), 1, 0)
        rows["process_vm_writev"] = sc(311, child, addr(local), 1, addr(remote), 1, 0)
        rows["kcmp"] = sc(312, os.getpid(), child, 0, 0, 0)
        pidfd = sc(434, child, 0)                                           # pidfd_open is allowed ...
        rows["pidfd_open"] = pidfd
        rows["pidfd_getfd"] = sc(438, 0, 0, 0)                              # ... stealing its fds is not
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        rows["pids_visible"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        rows["me"] = os.getpid()
        report(rows)
        """,
    )
    for call in ("traceme", "attach_child", "seize_child", "attach_init", "process_vm_readv", "process_vm_writev",
                 "kcmp"):  # fmt: skip
        assert seen[call] == "EPERM", (call, seen)
    # gVisor does not implement pidfd_getfd at all (ENOSYS); elsewhere the filter refuses it.
    assert seen["pidfd_getfd"] == ("ENOSYS" if target.name == "gvisor" else "EPERM"), seen
    # Only the sandbox's own processes exist for it (a PID namespace per sandbox): a handful, never the host's.
    assert seen["me"] in seen["pids_visible"], seen
    assert len(seen["pids_visible"]) <= 8, seen


# ------------------------------------------------------------------------------------------------ namespaces


def test_no_new_namespaces_by_unshare_clone_setns_or_the_unshare_binary(target: Target) -> None:
    seen = probe(
        target,
        """
        import subprocess
        flags = {"user": 0x10000000, "mount": 0x00020000, "net": 0x40000000, "pid": 0x20000000,
                 "uts": 0x04000000, "ipc": 0x08000000, "cgroup": 0x02000000}
        rows = {}
        for name, flag in flags.items():
            rows["unshare_" + name] = in_child(lambda: {"rc": verdict(libc.unshare(flag))})["rc"]
        for name, flag in flags.items():
            rc = libc.syscall(56, ctypes.c_long(flag | signal.SIGCHLD), ctypes.c_long(0), ctypes.c_long(0),
                              ctypes.c_long(0), ctypes.c_long(0))   # raw clone(2): fork-like with the flag
            if rc == 0:
                os._exit(0)
            if rc > 0:
                os.waitpid(rc, 0)
            rows["clone_" + name] = verdict(rc)
        rows["clone3"] = sc(435, 0, 0)
        fd = os.open("/proc/self/ns/net", os.O_RDONLY)
        rows["setns"] = sc(308, fd, 0)
        os.close(fd)
        binary = "/usr/bin/unshare"
        if os.path.exists(binary):
            done = subprocess.run([binary, "--user", "--map-root-user", "--net", "--mount", "id", "-u"],
                                  capture_output=True, text=True, timeout=20)
            rows["unshare_binary"] = [done.returncode, done.stdout.strip(), done.stderr.strip()[-200:]]
        else:
            rows["unshare_binary"] = "absent"
        report(rows)
        """,
    )
    for name in ("user", "mount", "net", "pid", "uts", "ipc", "cgroup"):
        assert seen["unshare_" + name] == "EPERM", (name, seen)
        assert seen["clone_" + name] == "EPERM", (name, seen)
    assert seen["clone3"] == "ENOSYS", seen  # so the C library falls back to clone, whose flags seccomp sees
    assert seen["setns"] == "EPERM", seen
    unshared = seen["unshare_binary"]
    assert unshared != "absent", "util-linux's unshare is in every image we run; the probe must exercise it"
    assert unshared[0] != 0 and unshared[1] == "", seen
    assert "Operation not permitted" in unshared[2], seen


# ---------------------------------------------------------------------------------------- the kernel's surface


def test_kernel_surface_syscalls_fail_with_eperm(target: Target) -> None:
    """bpf, perf, userfaultfd, io_uring, keyrings, clocks, mounts, chroot, reboot, kexec, modules, personality …

    Each with real arguments where a success would be visible, in a forked child, so an allowed call is
    reported and cannot change the worker (and the clock is "set" to what it already is).
    """
    seen = probe(
        target,
        """
        def attempt():
            rows = {}
            # bpf(BPF_MAP_CREATE, {array, key 4, value 4, 1 entry}, size)
            attr = struct.pack("IIII", 2, 4, 4, 1) + bytes(112)
            attr_buf = ctypes.create_string_buffer(attr, len(attr))
            rows["bpf"] = sc(321, 0, addr(attr_buf), len(attr))
            # perf_event_open(software cpu-clock on this process) - allowed to users at perf_event_paranoid <= 2
            pattr = struct.pack("IIQ", 1, 128, 0) + bytes(112)
            pattr_buf = ctypes.create_string_buffer(pattr, len(pattr))
            rows["perf_event_open"] = sc(298, addr(pattr_buf), 0, -1, -1, 0)
            rows["userfaultfd"] = sc(323, 0o2000000 | 1)                   # O_CLOEXEC | UFFD_USER_MODE_ONLY
            params = ctypes.create_string_buffer(120)
            rows["io_uring_setup"] = sc(425, 4, addr(params))
            rows["keyctl"] = sc(250, 0, -3, 0)                              # KEYCTL_GET_KEYRING_ID(session)
            rows["add_key"] = libc.syscall(248, cstr("user"), cstr("mcp"), cstr("x"), ctypes.c_long(1),
                                           ctypes.c_long(-3)) and verdict(-1)
            now = time.time()
            class timeval(ctypes.Structure):
                _fields_ = [("sec", ctypes.c_long), ("usec", ctypes.c_long)]
            class timespec(ctypes.Structure):
                _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]
            tv = timeval(int(now), 0)
            rows["settimeofday"] = verdict(libc.settimeofday(ctypes.byref(tv), None))
            ts = timespec(int(time.time()), 0)
            rows["clock_settime"] = verdict(libc.clock_settime(0, ctypes.byref(ts)))
            timex = ctypes.create_string_buffer(256)
            ctypes.c_uint.from_buffer(timex).value = 0x4000               # ADJ_TICK with the current tick
            rows["adjtimex"] = sc(159, addr(timex))
            rows["clock_adjtime"] = sc(305, 0, addr(timex))
            os.makedirs("/workspace/mnt", exist_ok=True)
            rows["mount"] = verdict(libc.mount(cstr("none"), cstr("/workspace/mnt"), cstr("tmpfs"), 0, None))
            rows["umount2"] = verdict(libc.umount2(cstr("/tmp"), 2))           # MNT_DETACH
            rows["chroot"] = verdict(libc.chroot(cstr("/tmp")))
            rows["pivot_root"] = sc(155, ctypes.addressof(ctypes.create_string_buffer(b"/tmp")), 0)
            rows["open_tree"] = sc(428, -100, 0, 0)
            rows["fsopen"] = verdict(libc.syscall(430, cstr("tmpfs"), ctypes.c_long(0)))
            rows["reboot"] = sc(169, 0xfee1dead, 672274793, 0)                  # LINUX_REBOOT_CMD_CAD_OFF
            rows["kexec_load"] = sc(246, 0, 0, 0, 0)
            rows["kexec_file_load"] = sc(320, -1, -1, 0, 0, 0)
            rows["init_module"] = sc(175, 0, 0, 0)
            rows["finit_module"] = sc(313, -1, 0, 0)
            rows["delete_module"] = verdict(libc.syscall(176, cstr("loop"), ctypes.c_long(0o4000)))
            rows["personality"] = sc(135, 0x0040000)                          # ADDR_NO_RANDOMIZE
            rows["syslog"] = sc(103, 10, 0, 0)                                   # SYSLOG_ACTION_SIZE_BUFFER
            rows["acct"] = sc(163, 0)
            rows["swapon"] = verdict(libc.syscall(167, cstr("/workspace/swap"), ctypes.c_long(0)))
            rows["iopl"] = sc(172, 3)
            rows["ioperm"] = sc(173, 0x80, 1, 1)
            rows["quotactl"] = sc(179, 0, 0, 0, 0)
            rows["name_to_handle_at"] = sc(303, -100, 0, 0, 0, 0)
            rows["fanotify_init"] = sc(300, 0, 0)
            rows["vhangup"] = sc(153)
            return rows
        report(in_child(attempt))
        """,
    )
    assert "child_error" not in seen, seen
    refused = {name: value for name, value in seen.items() if value != "EPERM"}
    assert refused == {}, f"{target.name}: not refused with EPERM: {refused}"


def test_modules_and_kernel_files_are_out_of_reach(target: Target) -> None:
    seen = probe(
        target,
        """
        rows = {}
        for path in ("/proc/kcore", "/dev/core", "/proc/kallsyms", "/sys/kernel/notes", "/proc/sysrq-trigger",
                     "/sys/fs/cgroup/pids/pids.max", "/proc/sys/kernel/modprobe", "/proc/sys/kernel/core_pattern"):
            try:
                with open(path, "r+b") as handle:
                    handle.write(b"x")
                rows[path] = "WRITTEN"
            except OSError as exc:
                rows[path] = errno.errorcode.get(exc.errno, str(exc.errno))
        try:
            with open("/proc/kcore", "rb") as handle:
                rows["read_kcore"] = len(handle.read(16))
        except OSError as exc:
            rows["read_kcore"] = errno.errorcode.get(exc.errno, str(exc.errno))
        rows["lib_modules"] = os.path.exists("/lib/modules") and bool(os.listdir("/lib/modules"))
        report(rows)
        """,
    )
    assert "WRITTEN" not in seen.values(), seen
    assert not isinstance(seen["read_kcore"], int), seen
    assert seen["lib_modules"] is False or target.name == "bubblewrap", seen  # bwrap sees the host's /usr/lib


# ----------------------------------------------------------------------------------------------- setuid binaries

SETUID_PROBE = """
import json, os, stat, subprocess, time
found = []
for root in ("/usr", "/bin", "/sbin"):
    if os.path.islink(root):
        continue
    for directory, _, names in os.walk(root, onerror=lambda error: None):
        for name in names:
            path = os.path.join(directory, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                found.append(path)
observed = {}
for path in found:
    # Start it with a pipe for stdin (most wait there for a password), and read its credentials from /proc
    # once /proc/PID/exe shows the binary: that is after execve, where a setuid bit would have taken effect.
    try:
        proc = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
    except OSError as exc:
        observed[path] = {"ids": None, "spawn": type(exc).__name__}
        continue
    ids = None
    deadline = time.monotonic() + 1.0
    while ids is None and time.monotonic() < deadline and proc.poll() is None:
        try:
            status = open(f"/proc/{proc.pid}/status").read()
            exe = os.readlink(f"/proc/{proc.pid}/exe")
        except OSError:
            break
        if exe == os.path.realpath(path):
            ids = [line.split()[1:] for line in status.splitlines() if line.startswith(("Uid:", "Gid:"))]
        else:
            time.sleep(0.002)
    proc.kill()
    proc.communicate()
    observed[path] = {"ids": ids}
named = {}
for argv in (["su", "root", "-c", "id -u"], ["mount", "-t", "tmpfs", "none", "/workspace"], ["passwd", "-d", "root"],
             ["newuidmap", str(os.getpid()), "0", "0", "1"]):
    try:
        done = subprocess.run(argv, input=b"\\n", capture_output=True, timeout=10)
        named[argv[0]] = [done.returncode, (done.stdout + done.stderr).decode(errors="replace")[-300:]]
    except FileNotFoundError:
        named[argv[0]] = "absent"
report({"found": found, "observed": observed, "named": named, "uid": os.geteuid()})
"""


def test_setuid_binaries_gain_nothing(target: Target) -> None:
    """Every setuid/setgid binary in the sandbox's /usr (bwrap: the host's; containers: the image's) runs as 65534."""
    seen = probe(target, SETUID_PROBE, timeout=60)
    assert seen["found"], "the image and the host both ship setuid binaries (su, mount, passwd); none found"
    watched = {path: row["ids"] for path, row in seen["observed"].items() if row["ids"] is not None}
    # Enough of them were caught alive after execve for the check to mean something (su and passwd wait for input).
    assert len(watched) >= 3, seen
    for path, ids in watched.items():
        for row in ids:  # Uid: real effective saved fs; Gid: the same
            assert row == [str(SANDBOX_UID)] * 4, (path, ids)
    named = seen["named"]
    su = named["su"]
    assert su != "absent" and su[0] != 0 and "0" not in su[1].split(), named
    mount = named["mount"]
    assert mount != "absent" and mount[0] != 0 and "must be superuser" in mount[1], named
    passwd = named["passwd"]
    assert passwd != "absent" and passwd[0] != 0, named
    newuidmap = named["newuidmap"]
    assert newuidmap == "absent" or newuidmap[0] != 0, named
    assert seen["uid"] == SANDBOX_UID


# ------------------------------------------------------------------------------------------------------ /dev & tty

BASE_DEV = {"fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty", "urandom", "zero"}


def test_dev_holds_only_the_minimal_set_and_tiocsti_is_refused(target: Target) -> None:
    seen = probe(
        target,
        """
        import stat
        rows = {"dev": sorted(os.listdir("/dev"))}
        rows["devices"] = {}
        for name in rows["dev"]:
            st = os.lstat("/dev/" + name)
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                rows["devices"][name] = [os.major(st.st_rdev), os.minor(st.st_rdev)]
        rows["pts"] = sorted(os.listdir("/dev/pts"))
        def tiocsti(fd):
            char = ctypes.c_char(b"x")
            return verdict(libc.ioctl(fd, 0x5412, ctypes.byref(char)))
        for fd in (0, 1, 2):
            rows[f"tiocsti_fd{fd}"] = tiocsti(fd)
        try:
            tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
        except OSError as exc:
            rows["dev_tty"] = errno.errorcode.get(exc.errno, str(exc.errno))
        else:
            rows["dev_tty"] = tiocsti(tty)
            os.close(tty)
        # A new pseudo-terminal of the sandbox's own: TIOCSTI into it is refused too.
        master = os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)
        rows["tiocsti_ptmx"] = tiocsti(master)
        rows["tioclinux"] = verdict(libc.ioctl(master, 0x541C, ctypes.byref(ctypes.c_char(b"\\x06"))))
        os.close(master)
        rows["sid_is_own"] = os.getsid(0) != 0
        report(rows)
        """,
    )
    # bwrap adds a /dev/core link (to /proc/kcore, unreadable: see above); podman an mqueue mount; gVisor its own
    # emulated /dev/fuse and /dev/net/tun, devices of the sentry (FUSE needs mount(2), refused; tun has no
    # network stack under network=none), not of the host.
    extra = {"bubblewrap": {"core"}, "podman": {"mqueue"}, "gvisor": {"fuse", "net"}}[target.name]
    assert set(seen["dev"]) <= BASE_DEV | extra, seen["dev"]
    assert BASE_DEV - {"stdin", "stdout", "stderr", "fd"} <= set(seen["dev"]), seen["dev"]
    # Only the harmless character devices: null 1:3, zero 1:5, full 1:7, random 1:8, urandom 1:9, tty 5:0,
    # ptmx 5:2 — no disk, no memory (1:1 /dev/mem), no kmsg, no console.
    allowed = {(1, 3), (1, 5), (1, 7), (1, 8), (1, 9), (5, 0), (5, 2)}
    if target.name == "gvisor":
        allowed.add((10, 229))  # gVisor's /dev/fuse
    unexpected = {name: dev for name, dev in seen["devices"].items() if tuple(dev) not in allowed}
    assert unexpected == {}, unexpected
    for key in ("tiocsti_fd0", "tiocsti_fd1", "tiocsti_fd2", "tiocsti_ptmx", "tioclinux"):
        assert seen[key] == "EPERM", (key, seen)
    # No controlling terminal at all (bwrap --new-session; containers run without -t): /dev/tty cannot open.
    assert seen["dev_tty"] == ("EIO" if target.name == "gvisor" else "ENXIO"), seen  # gVisor answers EIO


# ------------------------------------------------------------------------------------------------------- signals


def wait_for_uid(pid: int, command: str) -> int | None:
    """The real uid of ``pid`` once it runs ``command`` (setpriv execs it); a bounded poll."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return None
        if comm == command:
            return int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
        time.sleep(0.01)
    return None


def _host_canary_process() -> subprocess.Popen[bytes]:
    """A process on the host running as the sandbox's own uid: only namespaces keep the sandbox from it."""
    setpriv = shutil.which("setpriv")
    assert setpriv is not None
    return subprocess.Popen(
        [setpriv, f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--", "sleep", "600"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def test_signals_cannot_reach_the_bridge_or_any_host_process(target: Target) -> None:
    """SIGKILL to every pid 1..32768 (but the sandbox's own ancestors), then kill(-1, SIGKILL): the bridge,
    its upstream server and a host process running as the sandbox's own uid all survive."""
    canary = _host_canary_process()
    try:
        assert wait_for_uid(canary.pid, "sleep") == SANDBOX_UID, "the host canary did not start as the sandbox uid"
        seen = probe(
            target,
            f"""
            me = os.getpid()
            ancestors, pid = set(), me
            while pid > 1:
                ancestors.add(pid)
                pid = int(open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[1])
            ancestors.add(1)
            # The worker's own threads: kill() of a thread id signals its whole process, the worker itself.
            ancestors.update(int(tid) for tid in os.listdir("/proc/self/task"))
            delivered, refused = [], {{}}
            host_pids = [{os.getpid()}, {canary.pid}]  # the bridge's and the canary's pids on the host
            for pid in [*range(1, 32769), *host_pids]:
                if pid in ancestors:
                    continue
                try:
                    os.kill(pid, signal.SIGKILL)
                    delivered.append(pid)
                except ProcessLookupError:
                    pass
                except PermissionError:
                    refused[pid] = "EPERM"
            try:
                os.kill(-1, signal.SIGKILL)
                everyone = "sent"
            except OSError as exc:
                everyone = errno.errorcode.get(exc.errno, str(exc.errno))
            report({{"delivered": delivered, "refused": refused, "ancestors": sorted(ancestors),
                     "kill_all": everyone, "me": me}})
            """,
            timeout=60,
        )
        assert canary.poll() is None, "the sandbox killed a host process running as its own uid"
        # Whatever the sandbox signalled was its own: at most a few processes of its own PID namespace
        # (none, normally: the worker has no other children when the probe runs).
        assert len(seen["delivered"]) <= 4, seen
        assert seen["refused"] == {}, seen  # no pid outside its namespace is even visible to be refused
        # kill(-1) reaches only the caller's PID namespace; with nothing left there to signal it fails ESRCH.
        assert seen["kill_all"] in ("sent", "ESRCH"), seen
        # The bridge (this process) and its upstream server still answer.
        after = target.run("report(await mcp_everything.echo(message='still here'))")
        assert outcome_line(after) == "Echo: still here", after
        assert_still_serving(target)
    finally:
        canary.kill()
        canary.wait()


def outcome_line(result: Any) -> Any:
    """The guest's last reported value (any JSON, not only a dict)."""
    assert result.status == "ok", result
    return json.loads(result.stdout.strip().splitlines()[-1])
