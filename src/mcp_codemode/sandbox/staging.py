"""Puts the guest worker where a sandbox can read it.

The package may live somewhere the sandbox uid cannot reach (root's home is mode 700 on our machines), so
the guest files are copied once into the state directory, under a name derived from their content: a
new version lands beside the old one and a running worker never sees its files change underneath it.

The guest modules are compiled to bytecode as they are staged. Every sandbox starts with ``-B`` on a read-only
mount, so without this each start compiled the whole guest again (about 12 ms of a 63 ms cold start here). The
bytecode is for this interpreter's version; a sandbox Python of another version finds no file for its tag and
compiles in memory as before. Because the directory never changes once staged, the files are written in
unchecked-hash mode: no source timestamps to compare, and nothing to go stale.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import py_compile
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

from ..state_files import open_to_the_sandbox
from .base import GUEST_MOUNT
from .seccomp import oci_profile
from .staged_trust import UntrustedStaging, check_staged, set_aside_if_untrusted, shared_state_dir

PASSWD = "root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:{uid}:{gid}:sandbox:/workspace:/usr/sbin/nologin\n"  # noqa: S105
GROUP = "root:x:0:\nsandbox:x:{gid}:\n"


def guest_sources() -> dict[str, bytes]:
    """Every file of the guest package, by path relative to it."""
    root = resources.files("mcp_codemode.guest")
    found: dict[str, bytes] = {}
    pending = [(root, "")]
    while pending:
        directory, prefix = pending.pop()
        for entry in directory.iterdir():
            name = prefix + entry.name
            if entry.is_dir():
                if entry.name != "__pycache__":
                    pending.append((entry, name + "/"))
            elif entry.name.endswith(".py"):
                found[name] = entry.read_bytes()
    return found


def _compile(root: Path, name: str) -> None:
    """Write the bytecode of ``root/name`` where Python looks for it, naming the path the sandbox sees."""
    source = str(root / name)
    compiled = importlib.util.cache_from_source(source)
    mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
    py_compile.compile(source, cfile=compiled, dfile=f"{GUEST_MOUNT}/{name}", doraise=True, invalidation_mode=mode)
    os.chmod(compiled, 0o644)


def stage_guest(state_dir: Path, uid: int, gid: int) -> Path:
    """Return a world-readable directory holding the guest files and a minimal /etc."""
    files = guest_sources()
    files["etc/passwd"] = PASSWD.format(uid=uid, gid=gid).encode()
    files["etc/group"] = GROUP.format(gid=gid).encode()
    files["etc/hosts"] = b"127.0.0.1 localhost sandbox\n"
    files["seccomp.json"] = json.dumps(oci_profile(), indent=1).encode()
    digest = hashlib.sha256(sys.implementation.cache_tag.encode() + b"\0")  # the bytecode's version
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name] + b"\0")
    open_to_the_sandbox(state_dir)  # every time: a directory made 0700 after the worker was staged is fixed as well
    shared = shared_state_dir(state_dir)
    if shared is not None:
        raise UntrustedStaging(*shared)
    base = state_dir / "guest"
    target = base / digest.hexdigest()[:16]
    # Found by name, so trusted only when nobody else could have written it (staged_trust.py).
    set_aside_if_untrusted(base, whole_tree=False)
    base.mkdir(mode=0o755, exist_ok=True)
    set_aside_if_untrusted(target, whole_tree=True)
    check_staged(base, whole_tree=False)  # made by someone else between the two lines above
    if target.is_dir():
        return target
    os.chmod(base, 0o755)  # noqa: S103 - the sandbox uid must read the guest files
    scratch = Path(tempfile.mkdtemp(prefix=".staging-", dir=base))
    try:
        for name, content in files.items():
            path = scratch / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            path.chmod(0o644)
        for name in files:
            if name.endswith(".py"):
                _compile(scratch, name)
        for directory in [scratch, *(p for p in scratch.rglob("*") if p.is_dir())]:
            directory.chmod(0o755)
        try:
            scratch.rename(target)
        except OSError:  # another bridge staged the same version first
            if not target.is_dir():
                raise
            check_staged(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target
