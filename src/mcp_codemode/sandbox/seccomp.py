"""The seccomp denylist handed to bubblewrap (``--seccomp FD``), compiled with libseccomp.

A denylist rather than an allowlist: Python and whatever native packages users add call a wide, changing
set of syscalls, and an allowlist that misses one breaks them in confusing ways. What we deny is the
kernel surface a sandbox escape or a host attack needs and ordinary Python code never does: tracing other
processes, mounting, namespaces, keyrings, BPF, perf, io_uring, userfaultfd, kernel modules, clocks,
network sockets (only AF_UNIX is allowed) and terminal injection. Each denied call fails with EPERM (or
EAFNOSUPPORT for sockets) instead of killing the process, so user code gets a clean Python exception.
Syscalls from a foreign architecture (32-bit ``int 0x80`` on x86-64) kill the process: libseccomp's
default for a bad architecture.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import json
import os
import tempfile
from typing import Any

from ..errors import CodemodeError

DENIED_SYSCALLS: tuple[str, ...] = (
    # Looking into or steering other processes.
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    # Mounts, roots and namespaces.
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
    "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "name_to_handle_at", "open_by_handle_at",
    # Kernel key rings, BPF, perf, io_uring, userfaultfd, fanotify.
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "fanotify_init",
    # The machine itself.
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "acct", "syslog", "quotactl", "vhangup", "iopl", "ioperm",
    "lookup_dcookie", "uselib", "personality",
    # Clocks.
    "clock_settime", "clock_adjtime", "settimeofday", "adjtimex",
)  # fmt: skip

CLONE_NAMESPACE_FLAGS = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)
AF_UNIX = 1
TIOCSTI = 0x5412
TIOCLINUX = 0x541C


class SeccompUnavailable(CodemodeError):
    """libseccomp (the shared library or its Python binding) is missing."""


@dataclasses.dataclass(frozen=True)
class Rule:
    """One refusal: ``syscall`` fails with ``errno_value``, when argument ``arg`` masked by ``mask`` equals
    ``value`` (or, with ``unequal``, differs from it); with ``arg`` None, always."""

    syscall: str
    errno_value: int
    arg: int | None = None
    mask: int = 0xFFFFFFFFFFFFFFFF
    value: int = 0
    unequal: bool = False


def _rules() -> list[Rule]:
    """The denylist as data, rendered both to BPF (bubblewrap) and to an OCI profile (containers)."""
    rules = [Rule(name, errno.EPERM) for name in DENIED_SYSCALLS]
    # Sockets: only local (AF_UNIX) ones; everything else looks like a kernel without that family.
    rules.append(Rule("socket", errno.EAFNOSUPPORT, arg=0, value=AF_UNIX, unequal=True))
    # New namespaces through clone; clone3 hides its flags in memory, so make it look absent and
    # let the C library fall back to clone, whose flags we can see.
    rules += [Rule("clone", errno.EPERM, arg=0, mask=flag, value=flag) for flag in _single_bits(CLONE_NAMESPACE_FLAGS)]
    rules.append(Rule("clone3", errno.ENOSYS))
    # Pushing characters into a terminal's input queue, and other console tricks. The kernel reads the
    # request as a 32-bit int, so only the low 32 bits are compared (garbage above them must not slip by).
    rules += [Rule("ioctl", errno.EPERM, arg=1, mask=0xFFFFFFFF, value=request) for request in (TIOCSTI, TIOCLINUX)]
    return rules


@functools.cache
def denylist_bpf() -> bytes:
    """The compiled filter; built once per process because it never changes."""
    try:
        import pyseccomp as sc
    except (ImportError, OSError) as exc:  # OSError: the binding loads libseccomp.so.2 with ctypes
        raise SeccompUnavailable(
            f"libseccomp is not usable ({exc}); install it with: apt-get install libseccomp2"
        ) from None
    flt = sc.SyscallFilter(sc.ALLOW)
    for rule in _rules():
        if rule.arg is None:
            conditions = []
        elif rule.unequal:
            conditions = [sc.Arg(rule.arg, sc.NE, rule.value)]
        else:
            conditions = [sc.Arg(rule.arg, sc.MASKED_EQ, rule.mask, rule.value)]
        try:
            flt.add_rule(sc.ERRNO(rule.errno_value), rule.syscall, *conditions)
        except (ValueError, OSError):
            continue  # not a syscall on this architecture
    with tempfile.TemporaryFile() as handle:
        flt.export_bpf(handle)
        handle.seek(0)
        return handle.read()


def oci_profile() -> dict[str, object]:
    """The same denylist as an OCI seccomp profile, for ``podman/docker --security-opt seccomp=FILE``.

    Containers get it too because the engines' default profiles allow ptrace of same-uid processes and
    differ between engines and versions; one list for every backend keeps the promise the same everywhere.
    """
    # Rules that differ only in the syscall share one entry, as hand-written profiles do.
    grouped: dict[tuple[int, str], dict[str, Any]] = {}
    for rule in _rules():
        args: list[dict[str, object]] = []
        if rule.arg is not None and rule.unequal:
            args = [{"index": rule.arg, "value": rule.value, "op": "SCMP_CMP_NE"}]
        elif rule.arg is not None:
            args = [{"index": rule.arg, "value": rule.mask, "valueTwo": rule.value, "op": "SCMP_CMP_MASKED_EQ"}]
        key = (rule.errno_value, json.dumps(args))
        entry = grouped.setdefault(key, {"names": [], "action": "SCMP_ACT_ERRNO", "errnoRet": rule.errno_value})
        entry["names"].append(rule.syscall)
        if args:
            entry["args"] = args
    syscalls = list(grouped.values())
    return {
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"],
        "syscalls": syscalls,
    }


def _single_bits(mask: int) -> list[int]:
    return [1 << bit for bit in range(mask.bit_length()) if mask & (1 << bit)]


def bpf_pipe() -> int:
    """A readable fd holding the filter, ready to pass to bubblewrap, which reads it to the end."""
    program = denylist_bpf()
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, program)
    finally:
        os.close(write_fd)
    return read_fd
