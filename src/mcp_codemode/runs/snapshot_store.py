"""Hibernated sessions on disk: opaque bytes from a sandbox, sealed with a manifest the bridge can check.

A snapshot is data from the sandbox, and the sandbox is hostile: its bytes are pickles, which run code when loaded.
So the host never loads them. It stores what the guest handed over as it is, beside a small manifest of its own
(the session it belongs to, its size and sha256, when and why it was taken, what the guest said it could not keep)
and a keyed MAC over both; only a new sandbox of the same session is handed the bytes back, and it unpickles them
there. Reading one back checks everything before a byte goes anywhere: the file is a regular file of ours, not a
link; its size is within the bound; the manifest is small, strict JSON of the expected shape and version; the MAC
matches (a file planted in the directory, edited, truncated or copied from another session's name is refused);
the session is the one asked for (so one principal's snapshot never reaches another's session); it is not older
than allowed; the sha256 of the bytes matches. A refused file is deleted, and the caller is told why in words the
model can read.

The directory is the index: one file per session, named by a hash of the session's key, so ten thousand
hibernated sessions cost the bridge no memory, only directory entries. The directory is 0700 and every file 0600;
the MAC key is a file beside them (made once, 0600), so replicas that share the directory share the key. Writes
go to a temporary file renamed into place, so a reader sees a whole snapshot or none. ``sweep`` deletes what is
older than the age bound and, past the count bound, the oldest.

File layout: ``MAGIC``, the guest's bytes, the manifest (JSON), its length (4 bytes) and the MAC (32 bytes) over
everything before it. The trailer comes last so the guest's bytes can be written as they arrive.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import json
import os
import secrets
import stat
import struct
import time
from pathlib import Path
from typing import BinaryIO

from ..errors import CodemodeError

MAGIC = b"MCSNAP01"
VERSION = 1
KEY_FILE = ".key"
SUFFIX = ".snap"
_TRAILER = struct.Struct(">I32s")  # the manifest's length, the MAC
MAX_MANIFEST = 32 * 1024
MAX_LOST = 60
_COUNT_NAMES = frozenset({"definitions", "imports", "variables", "files"})
_STALE_PARTIAL = 3600.0  # a temporary file left by a bridge that died while writing


class StoreError(CodemodeError):
    """The snapshot store cannot be used (its directory or key); the message names the path and the fix."""


class Refused(CodemodeError):
    """A snapshot file that is not one this bridge wrote for this session; the message says why, for the model."""


@dataclasses.dataclass(frozen=True)
class Manifest:
    """What the host knows of a snapshot: checked, never taken from the guest's bytes."""

    session: str
    size: int
    sha256: str
    created: float  # seconds since the epoch
    why: str  # why it was hibernated ("expired after 900 s without use")
    lost: tuple[str, ...] = ()  # what the guest said it could not keep
    counts: tuple[tuple[str, int], ...] = ()  # definitions, imports, variables, files

    def encoded(self) -> bytes:
        body = dataclasses.asdict(self)
        body.update(v=VERSION, lost=list(self.lost), counts=dict(self.counts))
        return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def decoded(cls, data: bytes) -> Manifest:
        """The manifest of ``data``, or ``Refused``: every field's type and bounds checked."""
        try:
            body = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise Refused("its manifest is not valid JSON") from None
        if not isinstance(body, dict) or body.get("v") != VERSION:
            raise Refused("it was written by another version of the snapshot format")
        fields = {"session": str, "size": int, "sha256": str, "created": float, "why": str}
        for name, kind in fields.items():
            value = body.get(name)
            if kind is float and type(value) is int:
                value = float(value)
            if type(value) is not kind:
                raise Refused(f"its manifest's {name} is missing or of the wrong type")
            body[name] = value
        lost, counts = body.get("lost"), body.get("counts")
        if not isinstance(lost, list) or len(lost) > MAX_LOST or not all(isinstance(item, str) for item in lost):
            raise Refused("its manifest's list of what was not kept is malformed")
        if (
            not isinstance(counts, dict)
            or not set(counts) <= _COUNT_NAMES
            or not all(type(value) is int and value >= 0 for value in counts.values())
        ):
            raise Refused("its manifest's counts are malformed")
        return cls(body["session"], body["size"], body["sha256"], body["created"], body["why"][:300],
                   tuple(item[:300] for item in lost), tuple(sorted(counts.items())))  # fmt: skip


class SnapshotStore:
    """One directory of sealed snapshots; holds no state per session (the directory is the index)."""

    def __init__(self, directory: Path, max_bytes: int, max_age: float, max_count: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.max_age = max_age
        self.max_count = max_count
        self._key = _key(directory)
        self._directory = str(directory)

    def file(self, session: str) -> str:
        """Where ``session``'s snapshot is kept: a plain string, because ``pathlib`` interns every part of every path
        it parses, which kept about 200 bytes per session in the bridge for good."""
        return os.path.join(self._directory, hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:40]
                            + SUFFIX)  # fmt: skip

    def path(self, session: str) -> Path:
        return Path(self.file(session))

    def has(self, session: str) -> bool:
        return os.path.lexists(self.file(session))

    def save(self, manifest: Manifest, blob: bytes) -> None:
        """Write ``blob`` (the guest's bytes, untouched) sealed with ``manifest``; replaces an older snapshot."""
        if len(blob) != manifest.size or len(blob) > self.max_bytes:
            raise ValueError("the snapshot's size does not match its manifest, or is over the bound")
        target = self.file(manifest.session)
        partial = f"{target}.{secrets.token_hex(6)}.partial"
        encoded = manifest.encoded()
        head = MAGIC + blob + encoded
        mac = hmac.new(self._key, head + struct.pack(">I", len(encoded)), hashlib.sha256).digest()
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(head)
                file.write(_TRAILER.pack(len(encoded), mac))
            os.replace(partial, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(partial)
            raise

    def take(self, session: str, now: float | None = None) -> tuple[Manifest, bytes] | None:
        """The snapshot of ``session`` and its bytes, removed from the store (the live session is the truth now);
        None when there is none. ``Refused`` when there is one that is not sound: it is deleted all the same."""
        try:
            fd = os.open(self.file(session), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as exc:  # a symlink planted under the name (ELOOP), or worse
            self.drop(session)
            raise Refused(f"its file could not be opened as a regular file ({os.strerror(exc.errno or 0)})") from None
        try:
            with os.fdopen(fd, "rb") as file:
                found = self._read(file, session, time.time() if now is None else now)
        except Refused:
            self.drop(session)
            raise
        self.drop(session)
        return found

    def _read(self, file: BinaryIO, session: str, now: float) -> tuple[Manifest, bytes]:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Refused("it is not a regular file")
        if info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise Refused("its file is not the bridge's own (owner or permissions changed)")
        size = info.st_size
        if size > self.max_bytes + MAX_MANIFEST + len(MAGIC) + _TRAILER.size:
            raise Refused(f"it is {size:,} bytes, over the bound of MCP_BRIDGE_HIBERNATE_MAX_BYTES")
        if size < len(MAGIC) + _TRAILER.size:
            raise Refused("it is truncated")
        data = file.read(size + 1)
        if len(data) != size:
            raise Refused("it changed while it was read")
        length, mac = _TRAILER.unpack(data[-_TRAILER.size :])
        if length > MAX_MANIFEST or length > size - len(MAGIC) - _TRAILER.size:
            raise Refused("it is truncated or its manifest is too large")
        sealed = data[: -_TRAILER.size]
        expected = hmac.new(self._key, sealed + struct.pack(">I", length), hashlib.sha256).digest()
        if not data.startswith(MAGIC) or not hmac.compare_digest(mac, expected):
            raise Refused("its seal does not match: it was changed, truncated, or not written by this bridge")
        manifest = Manifest.decoded(sealed[-length:])
        blob = sealed[len(MAGIC) : -length]
        if manifest.session != session:
            raise Refused("it belongs to another session")
        if manifest.size != len(blob) or manifest.size > self.max_bytes:
            raise Refused("its size does not match its manifest, or is over MCP_BRIDGE_HIBERNATE_MAX_BYTES")
        if now - manifest.created > self.max_age:
            raise Refused(f"it is older than MCP_BRIDGE_HIBERNATE_MAX_AGE ({self.max_age:g} s)")
        if not hmac.compare_digest(hashlib.sha256(blob).hexdigest(), manifest.sha256):
            raise Refused("its contents do not match their checksum")
        return manifest, blob

    def drop(self, session: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.file(session))

    def sweep(self, now: float | None = None) -> int:
        """Delete snapshots older than the age bound and, past the count bound, the oldest; returns how many went.
        One pass over the directory, holding only what the count bound needs sorted."""
        now = time.time() if now is None else now
        removed = 0
        kept: list[tuple[float, str]] = []
        with os.scandir(self.directory) as entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                partial = entry.name.endswith(".partial")
                if entry.name.endswith(SUFFIX) or partial:
                    limit = _STALE_PARTIAL if partial else self.max_age
                    if now - info.st_mtime > limit:
                        removed += _unlink(entry.path)
                    elif not partial:
                        kept.append((info.st_mtime, entry.path))
        if len(kept) > self.max_count:
            kept.sort()
            for _, path in kept[: len(kept) - self.max_count]:
                removed += _unlink(path)
        return removed


def _unlink(path: str) -> int:
    try:
        os.unlink(path)
    except OSError:
        return 0
    return 1


def _key(directory: Path) -> bytes:
    """The store's MAC key: made once, 0600, in a 0700 directory; refused when anyone else could have read or set it."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.stat(directory, follow_symlinks=False)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            raise StoreError(f"{directory} is not a directory of the bridge's own user; choose another "
                             "MCP_BRIDGE_HIBERNATE_DIR")  # fmt: skip
        if info.st_mode & 0o077:
            os.chmod(directory, 0o700)
        path = directory / KEY_FILE
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as file:
                file.write(secrets.token_bytes(32))
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as file:
            key_info = os.fstat(file.fileno())
            key = file.read(64)
    except OSError as exc:
        raise StoreError(f"the snapshot store {directory} cannot be used ({exc}); fix its permissions or choose "
                         "another MCP_BRIDGE_HIBERNATE_DIR") from None  # fmt: skip
    if not stat.S_ISREG(key_info.st_mode) or key_info.st_uid != os.geteuid() or key_info.st_mode & 0o077:
        raise StoreError(f"{path} is not the bridge's own 0600 file; remove it (every snapshot made with it is then "
                         "refused) or fix its owner and mode")  # fmt: skip
    if len(key) != 32:
        raise StoreError(f"{path} does not hold a 32-byte key; remove it (every snapshot made with it is then refused)")
    return key
