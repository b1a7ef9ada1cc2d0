"""MCP_BRIDGE_MOUNTS on every local backend (bubblewrap, podman with runc, podman with gVisor), in real sandboxes.

A mount is the one host directory a sandbox gains, so each backend must show that it is exactly that: a read-only one
is readable and refuses every kind of change with EROFS (the host directory here is writable by everyone, so only
the mount's flag can refuse), a writable one puts what code writes on the host, links inside it resolve in the
sandbox's own tree (never the host's), and without the setting the target does not exist at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import tempfile
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_codemode.mounts import parse_mounts
from mcp_codemode.runs.sessions import SessionManager
from mcp_codemode.sandbox.select import make_backend
from tests.support.backends import SANDBOX_UID
from tests.support.cells import guest, private_state_dir
from tests.support.security import ATTEMPT, SECURITY_BACKENDS, outcome, require_backend, target_settings

pytestmark = pytest.mark.backend


@dataclasses.dataclass(frozen=True)
class HostDirs:
    """Directories on the host for one test: ``ro`` the sandbox uid's and world-writable, with a file in it (so
    only the mount's flag can refuse a change), ``rw`` the sandbox uid's,
    and a secret beside them (world-readable: only the sandbox's isolation keeps code from it)."""

    base: Path
    ro: Path
    rw: Path
    secret: Path
    token: str


@pytest.fixture
def host() -> Iterator[HostDirs]:
    # Not pytest's tmp_path: it lies in a 0700 directory of root's, which bubblewrap's sandbox uid cannot pass.
    base = Path(tempfile.mkdtemp(prefix="mcp-mounts-test-"))
    base.chmod(0o755)
    token = f"mount-canary-{uuid.uuid4().hex}"
    ro, rw, secret = base / "ro", base / "rw", base / "secret.txt"
    ro.mkdir(mode=0o777)
    ro.chmod(0o777)
    (ro / "data.txt").write_text(token)
    (ro / "data.txt").chmod(0o666)
    for path in (ro, ro / "data.txt"):  # the sandbox uid's own: chmod and utime are refused by the mount alone
        os.chown(path, SANDBOX_UID, SANDBOX_UID)
    rw.mkdir(mode=0o755)
    os.chown(rw, SANDBOX_UID, SANDBOX_UID)
    secret.write_text(f"secret {token}")
    secret.chmod(0o644)
    try:
        yield HostDirs(base, ro, rw, secret, token)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run_cells(kind: str, mounts: str, *cells: str) -> list[dict[str, Any]]:
    """Run ``cells`` one after another in one session on backend ``kind`` with ``MCP_BRIDGE_MOUNTS=mounts``."""
    with private_state_dir() as state:
        settings = target_settings(kind, state, mounts=parse_mounts(mounts))
        require_backend(kind, settings)

        async def main() -> list[dict[str, Any]]:
            async with SessionManager(make_backend(settings.runtime, settings), settings) as sessions:
                results = [await sessions.execute(guest(ATTEMPT + textwrap.dedent(c)), session="m") for c in cells]
                return [outcome(result) for result in results]

        return asyncio.run(main())


def _snapshot(directory: Path) -> dict[str, tuple[int, str]]:
    return {p.name: (p.stat().st_mode, p.read_text() if p.is_file() else "") for p in sorted(directory.iterdir())}


@pytest.mark.parametrize("kind", SECURITY_BACKENDS)
def test_a_read_only_mount_is_readable_and_refuses_every_change(kind: str, host: HostDirs) -> None:
    before = _snapshot(host.ro)
    code = """
    d = '/mnt/data'
    seen = {'read': open(d + '/data.txt').read(), 'list': sorted(os.listdir(d))}
    seen['append'] = attempt(lambda: open(d + '/data.txt', 'a').write('x'))
    seen['create'] = write(d + '/new.txt')
    seen['mkdir'] = attempt(lambda: os.mkdir(d + '/sub'))
    seen['rename'] = attempt(lambda: os.rename(d + '/data.txt', d + '/moved.txt'))
    seen['chmod'] = attempt(lambda: os.chmod(d + '/data.txt', 0o600))
    seen['unlink'] = attempt(lambda: os.unlink(d + '/data.txt'))
    seen['utime'] = attempt(lambda: os.utime(d + '/data.txt', (0, 0)))
    seen['symlink'] = attempt(lambda: os.symlink('/etc/passwd', d + '/link'))
    report(seen)
    """
    (seen,) = run_cells(kind, f"{host.ro}:/mnt/data:ro", code)
    assert seen.pop("read") == host.token and seen.pop("list") == ["data.txt"], seen
    assert set(seen.values()) == {"EROFS"}, seen
    assert _snapshot(host.ro) == before


@pytest.mark.parametrize("kind", SECURITY_BACKENDS)
def test_a_writable_mount_under_the_workspace_puts_what_code_writes_on_the_host(kind: str, host: HostDirs) -> None:
    write_cell = f"""
    d = '/workspace/out'
    with open(d + '/result.txt', 'w') as handle:
        handle.write({host.token!r})
    os.mkdir(d + '/sub')
    os.rename(d + '/result.txt', d + '/sub/result.txt')
    report({{'cwd': os.getcwd(), 'workspace': sorted(os.listdir('/workspace'))}})
    """
    (seen,) = run_cells(kind, f"{host.rw}:/workspace/out:rw", write_cell)
    assert seen == {"cwd": "/workspace", "workspace": ["out"]}, seen
    written = host.rw / "sub" / "result.txt"
    assert written.read_text() == host.token
    assert written.stat().st_uid == SANDBOX_UID, "the file belongs to the sandbox's uid, not to root"


@pytest.mark.parametrize("kind", SECURITY_BACKENDS)
def test_links_in_a_mount_resolve_in_the_sandbox_never_on_the_host(kind: str, host: HostDirs) -> None:
    links = {
        "absolute": str(host.secret),  # the host's path, which the sandbox does not have
        "relative": "../secret.txt",  # climbs out of the mount: lands in the sandbox's /mnt
        "shadow": "/etc/shadow",  # the host's is root's; the sandbox's own is absent or unreadable
        "base": str(host.base),
    }
    for name, to in links.items():
        (host.ro / name).symlink_to(to)
    code = f"""
    def read(path):
        try:
            with open(path) as handle:
                return 'READ:' + handle.read()
        except OSError as exc:
            return errno.errorcode.get(exc.errno, type(exc).__name__)
    seen = {{name: read('/mnt/data/' + name) for name in {sorted(links)!r} if name != 'base'}}
    seen['base'] = attempt(lambda: os.listdir('/mnt/data/base'))
    seen['write through a link'] = write('/mnt/data/absolute', 'changed')
    report(seen)
    """
    (seen,) = run_cells(kind, f"{host.ro}:/mnt/data:ro", code)
    assert host.token not in repr(seen), seen
    assert not any(str(value).startswith("READ:") for value in seen.values()) or _own_shadow(seen), seen
    assert seen["absolute"] == seen["relative"] == seen["base"] == "ENOENT", seen
    assert seen["write through a link"] in ("ENOENT", "EROFS", "EACCES"), seen
    assert host.secret.read_text() == f"secret {host.token}"


def _own_shadow(seen: dict[str, Any]) -> bool:
    """Only /etc/shadow may be read, and then only the sandbox's own: never the host's."""
    host_shadow = ""
    with contextlib.suppress(OSError):
        host_shadow = Path("/etc/shadow").read_text()
    reads = [key for key, value in seen.items() if str(value).startswith("READ:")]
    return reads == ["shadow"] and seen["shadow"] != "READ:" + host_shadow


@pytest.mark.parametrize("kind", SECURITY_BACKENDS)
def test_without_mounts_the_target_does_not_exist(kind: str, host: HostDirs) -> None:
    code = f"""
    report({{'exists': os.path.exists('/mnt/data'), 'host path': os.path.exists({str(host.ro)!r})}})
    """
    (seen,) = run_cells(kind, "", code)
    assert seen == {"exists": False, "host path": False}, seen


@pytest.mark.parametrize("kind", SECURITY_BACKENDS)
def test_a_read_only_mount_nested_in_a_writable_one_refuses_changes_under_it(kind: str, host: HostDirs) -> None:
    """A repository mounted rw with its .git read-only: listed inner first, so the backend must reorder them (the
    outer bind, mounted second, would cover the inner one), and the sandbox uid owns everything, so only the nested
    mount's flag can refuse."""
    git = host.rw / ".git"
    git.mkdir(mode=0o777)
    (git / "config").write_text("[core]\n")
    for path in (git, git / "config"):
        os.chown(path, SANDBOX_UID, SANDBOX_UID)
    code = """
    seen = {'write beside': write('/mnt/repo/notes.txt', 'kept')}
    seen['append config'] = attempt(lambda: open('/mnt/repo/.git/config', 'a').write('[core]fsmonitor = x'))
    seen['create in .git'] = write('/mnt/repo/.git/hooks')
    seen['move .git away'] = attempt(lambda: os.rename('/mnt/repo/.git', '/mnt/repo/old'))
    report(seen)
    """
    (seen,) = run_cells(kind, f"{git}:/mnt/repo/.git:ro,{host.rw}:/mnt/repo:rw", code)
    assert seen == {
        "write beside": "SUCCEEDED",
        "append config": "EROFS",
        "create in .git": "EROFS",
        "move .git away": "EBUSY",  # a mount point cannot be renamed
    }, seen
    assert (host.rw / "notes.txt").read_text() == "kept"
    assert (git / "config").read_text() == "[core]\n" and sorted(os.listdir(git)) == ["config"]


# What the sandbox's mount table shows of a mount's host directory, per backend (docs/security.md, "Writable mounts
# shared with host-side servers"). bubblewrap and runc bind the host directory, and the kernel writes the mount's
# root, its path inside the host file system, into /proc/self/mountinfo for every process; nothing in the
# sandbox's set-up changes that (a fresh procfs reads the same table, a bind from a staging path keeps the source's
# root). gVisor's sentry keeps a mount table of its own, where a gofer mount's root is "/". /proc/mounts names only
# the device and the target everywhere.
SHOWS_HOST_PATH = {"bubblewrap": True, "podman": True, "gvisor": False}


@pytest.mark.parametrize("kind", SECURITY_BACKENDS)
def test_what_the_mount_table_shows_of_the_host_directory(kind: str, host: HostDirs) -> None:
    code = """
    report({name: [line for line in open(path).read().splitlines() if ' /mnt/out ' in line]
            for name, path in (('mountinfo', '/proc/self/mountinfo'), ('mounts', '/proc/mounts'))})
    """
    (seen,) = run_cells(kind, f"{host.rw}:/mnt/out:rw", code)
    assert len(seen["mountinfo"]) == len(seen["mounts"]) == 1, seen
    assert str(host.base) not in seen["mounts"][0], seen
    assert (str(host.rw) in seen["mountinfo"][0]) is SHOWS_HOST_PATH[kind], seen
