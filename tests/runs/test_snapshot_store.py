"""The host's snapshot store, as pure logic: what it seals, what it refuses (every file on disk is hostile), what
it sweeps, that it keeps nothing per session in memory, and the host's check of what a guest says of its snapshot."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import hmac
import json
import os
import stat
import struct
import time
from pathlib import Path

import pytest

from mcp_codemode.errors import SettingsError
from mcp_codemode.hibernation_settings import store_dir_problem
from mcp_codemode.mounts import parse_mounts
from mcp_codemode.runs.hibernation import restored_notice
from mcp_codemode.runs.snapshot_store import MAGIC, Manifest, Refused, SnapshotStore, StoreError
from mcp_codemode.sandbox.snapshots import GuestReport, SnapshotError, checked_report, take
from mcp_codemode.settings import Settings

SESSION = "p:alice:work"
BLOB = b"\x80\x05 pickled bytes the host never loads " * 100


def _store(path: Path, **bounds: float) -> SnapshotStore:
    limits = {"max_bytes": 1 << 20, "max_age": 3600.0, "max_count": 100, **bounds}
    return SnapshotStore(path / "store", int(limits["max_bytes"]), limits["max_age"], int(limits["max_count"]))


def _manifest(session: str = SESSION, blob: bytes = BLOB, created: float | None = None) -> Manifest:
    return Manifest(session, len(blob), hashlib.sha256(blob).hexdigest(), time.time() if created is None else created,
                    "it idled out after 900 s", ("gen (generator: cannot pickle)",), (("variables", 3),))  # fmt: skip


def test_a_snapshot_is_sealed_private_and_taken_once(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save(_manifest(), BLOB)
    path = store.path(SESSION)
    assert stat.S_IMODE(os.stat(store.directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(store.directory / ".key").st_mode) == 0o600
    assert SESSION.encode() not in path.name.encode()  # named by a hash: no principal's name on disk
    found = store.take(SESSION)
    assert found is not None and found[1] == BLOB and found[0] == _manifest(created=found[0].created)
    assert not store.has(SESSION) and store.take(SESSION) is None


def _tampered(store: SnapshotStore, how: str) -> None:
    path = store.path(SESSION)
    data = bytearray(path.read_bytes())
    if how == "edited":
        data[len(MAGIC) + 10] ^= 1
    elif how == "truncated":
        del data[len(data) // 2 :]
    elif how == "planted":
        data = bytearray(os.urandom(len(data)))
    elif how == "oversized":
        data[len(MAGIC) : len(MAGIC)] = b"x" * (2 << 20)
    elif how == "empty":
        data = bytearray()
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["edited", "truncated", "planted", "oversized", "empty"])
def test_a_file_changed_on_disk_is_refused_and_deleted(tmp_path: Path, how: str) -> None:
    store = _store(tmp_path)
    store.save(_manifest(), BLOB)
    _tampered(store, how)
    with pytest.raises(Refused):
        store.take(SESSION)
    assert not store.has(SESSION)


def test_a_well_sealed_file_of_another_session_or_past_its_age_or_key_is_refused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save(_manifest("p:mallory:work"), BLOB)
    os.replace(store.path("p:mallory:work"), store.path(SESSION))  # another principal's snapshot under this name
    with pytest.raises(Refused, match="another session"):
        store.take(SESSION)
    store.save(_manifest(created=time.time() - 7200), BLOB)
    with pytest.raises(Refused, match="older than"):
        store.take(SESSION)
    store.save(_manifest(), BLOB)
    (store.directory / ".key").unlink()  # a new key: what the old one sealed is no longer ours
    with pytest.raises(Refused, match="seal"):
        _store(tmp_path).take(SESSION)


def test_a_sealed_manifest_of_the_wrong_shape_or_a_wrong_checksum_is_refused(tmp_path: Path) -> None:
    """Sealed with the store's own key (as a bug of ours might write it): the checks after the MAC still hold."""
    store = _store(tmp_path)
    for manifest, blob in (
        (dataclasses.replace(_manifest(), sha256="0" * 64), BLOB),
        (dataclasses.replace(_manifest(), size=len(BLOB) + 1), BLOB),
    ):
        encoded = manifest.encoded()
        head = MAGIC + blob + encoded
        mac = hmac.new(store._key, head + struct.pack(">I", len(encoded)), hashlib.sha256).digest()
        store.path(SESSION).write_bytes(head + struct.pack(">I32s", len(encoded), mac))
        os.chmod(store.path(SESSION), 0o600)
        with pytest.raises(Refused):
            store.take(SESSION)
    with pytest.raises(Refused, match="wrong type"):
        Manifest.decoded(json.dumps({"v": 1, "session": 1}).encode())
    with pytest.raises(Refused, match="another version"):
        Manifest.decoded(json.dumps({"v": 2}).encode())


def test_a_symlink_or_a_file_others_may_write_is_refused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save(_manifest(), BLOB)
    os.chmod(store.path(SESSION), 0o666)
    with pytest.raises(Refused, match="not the bridge's own"):
        store.take(SESSION)
    (tmp_path / "elsewhere").write_bytes(b"x")
    store.path(SESSION).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(Refused, match="regular file"):
        store.take(SESSION)
    assert (tmp_path / "elsewhere").exists() and not os.path.lexists(store.path(SESSION))


def test_a_key_others_could_read_stops_the_store(tmp_path: Path) -> None:
    _store(tmp_path)
    os.chmod(tmp_path / "store" / ".key", 0o644)
    with pytest.raises(StoreError, match="0600"):
        _store(tmp_path)


def test_sweep_removes_what_is_past_the_age_or_count_bound(tmp_path: Path) -> None:
    store = _store(tmp_path, max_count=3, max_age=1000)
    now = time.time()
    for index in range(6):
        store.save(_manifest(f"s:{index}"), BLOB)
        os.utime(store.path(f"s:{index}"), (now - 2000 if index == 0 else now - 100 + index,) * 2)
    assert store.sweep(now) == 3  # s:0 by age; s:1 and s:2 by count, the oldest
    assert [store.has(f"s:{index}") for index in range(6)] == [False, False, False, True, True, True]


def test_the_store_holds_nothing_per_session_in_memory(tmp_path: Path) -> None:
    """The directory is the index: the store object's state does not grow with the sessions it keeps (the benchmark
    counts 10,000 and the bridge's memory; this shows the design at the cheapest level)."""
    store = _store(tmp_path, max_count=1000)
    before = dict(vars(store))
    for index in range(200):
        store.save(_manifest(f"s:{index}", b"x"), b"x")
    assert vars(store) == before
    assert all(store.has(f"s:{index}") for index in range(200))


def test_the_guest_report_is_checked_and_cut() -> None:
    report = checked_report({"counts": {"variables": 2}, "lost": ["x\x1b[31m" + "y" * 500]})
    assert report.counts == (("variables", 2),) and report.lost == ("x [31m" + "y" * 234,)
    for value in ({"counts": {"evil": 1}, "lost": []}, {"counts": {"variables": -1}, "lost": []},
                  {"counts": {}, "lost": ["a"] * 52}, {"counts": {}, "lost": [1]}, {}):  # fmt: skip
        with pytest.raises(SnapshotError):
            checked_report(value)


def test_the_notice_says_what_came_back_and_what_did_not() -> None:
    notice = restored_notice(_manifest(), GuestReport((("definitions", 2), ("variables", 3)), ("fh (open file)",)))
    assert notice == (
        "This session was hibernated (it idled out after 900 s) and restored in a new sandbox: 2 definitions, "
        "3 variables came back. Not kept: gen (generator: cannot pickle); fh (open file)."
    )


def test_the_store_may_not_lie_where_a_sandbox_looks(tmp_path: Path) -> None:
    assert "system directories" in store_dir_problem(Path("/usr/share/x"), [], [])
    mounts = parse_mounts(f"{tmp_path}:/data:rw")
    assert "MCP_BRIDGE_MOUNTS" in store_dir_problem(tmp_path / "store", mounts, [])
    assert "holds" in store_dir_problem(tmp_path.parent, mounts, [])
    assert "sandbox Python" in store_dir_problem(tmp_path / "env" / "x", [], [tmp_path / "env"])
    assert store_dir_problem(tmp_path / "store", [], [tmp_path / "env"]) == ""
    with pytest.raises(SettingsError, match="MCP_BRIDGE_HIBERNATE_DIR"):
        Settings.load(env={"MCP_BRIDGE_HIBERNATE": "on", "MCP_BRIDGE_HIBERNATE_DIR": "/etc/snapshots"})
    with pytest.raises(SettingsError, match="MCP_BRIDGE_HIBERNATE_MAX_BYTES='2g' is not valid: expected a size"):
        Settings.load(env={"MCP_BRIDGE_HIBERNATE_MAX_BYTES": "2g"})
    assert Settings.load(env={"MCP_BRIDGE_HIBERNATE_DIR": "/usr/x"}).hibernate is False  # off: no store is made


class _Guest:
    """A worker whose guest answers snapshot requests as scripted: what a hostile one may send."""

    def __init__(self, announce: dict[str, object], chunks: list[object]) -> None:
        self.announce, self.chunks, self.asked = announce, chunks, 0

    async def files(self, request: dict[str, object], timeout: float) -> dict[str, object]:
        if request["op"] == "snapshot":
            return self.announce
        self.asked += 1
        return {"data": self.chunks.pop(0) if self.chunks else ""}


def _take(guest: _Guest, limit: int = 1000) -> tuple[bytes, GuestReport] | None:
    return asyncio.run(take(guest, limit, 1.0))  # type: ignore[arg-type]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_a_guest_that_lies_about_its_snapshot_is_refused_before_its_bytes_are_kept() -> None:
    report = {"counts": {"variables": 1}, "lost": []}
    over = _Guest({"size": 10_000, **report}, [_b64(b"x" * 10_000)])
    with pytest.raises(SnapshotError, match="over the bound"):
        _take(over)
    assert over.asked == 0  # refused on the announcement, before a byte was asked for
    for chunks in ([_b64(b"x" * 600), _b64(b"x" * 600)], ["not base64!"], [""], [12]):
        with pytest.raises(SnapshotError):
            _take(_Guest({"size": 1000, **report}, list(chunks)))
    with pytest.raises(SnapshotError, match="malformed"):
        _take(_Guest({"size": 10, "counts": {"rm -rf": 1}, "lost": []}, [_b64(b"x" * 10)]))
    assert _take(_Guest({"declined": True}, [])) is None
    taken = _take(_Guest({"size": 10, **report}, [_b64(b"x" * 4), _b64(b"y" * 6)]))
    assert taken is not None and taken[0] == b"xxxxyyyyyy" and taken[1].counts == (("variables", 1),)
