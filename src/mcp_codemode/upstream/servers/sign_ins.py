"""Where the sign-ins of ``mcp-codemode login`` are kept: one small JSON record per signed-in server, in a store that
every bridge sharing them reads and writes with compare-and-swap.

Why compare-and-swap and not a file written in place: one sign-in is used by several bridges at once (two local
clients each start a bridge on the same state directory; face replicas on Kubernetes share one Secret), and every
one of them writes it (a refresh replaces the tokens). A write that overwrote another's refresh, or two bridges
refreshing with the same refresh token, loses the sign-in where the provider rotates refresh tokens (each one is
honoured once; some providers then revoke the whole family). So each write names the record it replaces and fails
if that changed (``SignInStore.swap``), and ``SignIn`` builds every change on that: read, change, swap, again on a
conflict. Refreshes take turns on top of it (``SignIn.take_turn``, used by ``oauth.StoredTokens``).

Two stores: ``FileSignIns`` (a file per server under ``<state_dir>/oauth/``, swapped under a lock of the directory)
and, for replicas, the kubernetes one (``cluster/shared_state.py``: one Secret, a key per server), which the
upstream package does not import: whoever builds the tool directory hands it over, and the hub passes that one store
to each connection it makes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ...errors import CodemodeError
from ...state_files import make_private_dir
from ..model import ServerConfig

Record = dict[str, Any]
TURN_SECONDS = 30.0  # how long a refresh turn is held before another bridge may take it (a refresh is one request)
TURN_POLL = 0.2  # how often a bridge waiting for another's refresh looks at the store again
SWAP_TRIES = 20  # read-change-swap rounds before a change gives up (each lost round means another writer won one)


class SignInStore(Protocol):
    """Records by key (``sign_in_key``), each replaced only by a writer that names what it replaces."""

    def where(self, key: str) -> str:
        """Where the record is, for messages (a path, a Secret's key): never its content."""
        ...

    async def read(self, key: str) -> Record | None:
        """The record now (None: there is none, or it cannot be read)."""
        ...

    async def swap(self, key: str, expected: Record | None, new: Record | None) -> bool:
        """Replace the record with ``new`` (None: delete it) if it is still ``expected``; False when it was not."""
        ...

    def known(self, key: str) -> Record | None:
        """The record as this process last read or wrote it, without asking the store (for redaction, which must
        not wait): a token it never saw cannot be in an answer to a request it signed."""
        ...


def sign_in_key(config: ServerConfig) -> str:
    """A server's key: its name (readable) and a digest of name and URL (unambiguous: a config that points a name at
    another server does not send it the first one's tokens). Letters, digits, ``_``, ``.`` and ``-`` only, at most
    57 characters: a file name, and a valid key of a Secret's data."""
    digest = hashlib.sha256(f"{config.name}\0{config.url}".encode()).hexdigest()[:16]
    readable = re.sub(r"[^A-Za-z0-9_.-]", "_", config.name)[:40]
    return f"{readable}-{digest}"


class FileSignIns:
    """One private file per server in ``root`` (directory 0700, files 0600, replaced atomically); a swap holds an
    exclusive ``flock`` on the directory, so bridges on one machine swap one at a time."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._stamps: dict[str, tuple[tuple[int, int, int], Record | None]] = {}

    def path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def where(self, key: str) -> str:
        return str(self.path(key))

    async def read(self, key: str) -> Record | None:
        return self._read(key)

    def _read(self, key: str) -> Record | None:
        try:
            data = json.loads(self.path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    async def swap(self, key: str, expected: Record | None, new: Record | None) -> bool:
        return await asyncio.to_thread(self._swap, key, expected, new)

    def _swap(self, key: str, expected: Record | None, new: Record | None) -> bool:
        make_private_dir(self.root)  # and the state directory, 0711 whatever the umask
        lock = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self._read(key) != expected:
                return False
            path = self.path(key)
            if new is None:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                return True
            partial = path.with_name(path.name + ".partial")
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(new, out)
            os.replace(partial, path)
            return True
        finally:
            os.close(lock)  # and the lock with it

    def known(self, key: str) -> Record | None:
        """Read again only when the file changed (another bridge or ``login`` may write it at any time)."""
        try:
            info = self.path(key).stat()
        except OSError:
            return None
        stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
        seen = self._stamps.get(key)
        if seen is None or seen[0] != stamp:
            seen = self._stamps[key] = (stamp, self._read(key))
        return seen[1]


BUSY_FIX = "find what keeps writing it (a bridge writes a sign-in when it refreshes it, about once an hour); then retry"


class SignInStoreBusy(CodemodeError):
    """A change lost every round to other writers: something writes the record without pause."""


@dataclasses.dataclass
class SignIn:
    """One server's record in a store: read, and changed only by swapping what was read for its changed copy.

    ``record`` is the last one read or written here (``expires_at`` reads it without asking the store again).
    """

    store: SignInStore
    key: str
    record: Record = dataclasses.field(default_factory=dict)

    @property
    def where(self) -> str:
        return self.store.where(self.key)

    async def load(self) -> Record:
        self.record = await self.store.read(self.key) or {}
        return self.record

    async def change(self, edit: Callable[[Record], Record | None]) -> Record:
        """Apply ``edit`` to the record as it is now and store the result (keys set to None are dropped; an edit
        that returns None deletes the record), again on a fresh read whenever another writer came first."""
        for _ in range(SWAP_TRIES):
            current = await self.store.read(self.key)
            edited = edit(dict(current or {}))
            new = {k: v for k, v in edited.items() if v is not None} if edited is not None else None
            if await self.store.swap(self.key, current, new or None):
                self.record = new or {}
                return self.record
        raise SignInStoreBusy(
            f"the sign-in at {self.where} changed {SWAP_TRIES} times while the bridge tried to write it", fix=BUSY_FIX
        )

    async def take_turn(
        self, held: Record | None, holder: str, clock: Callable[[], float] = time.time
    ) -> Record | None:
        """Whether ``holder``, whose tokens (``held``: the SDK's, as stored) have expired, may refresh them now.

        None: yes, the turn is recorded in the store as ``holder``'s for ``TURN_SECONDS`` (``end_turn`` or the next
        ``set_tokens`` gives it back). Else the record to use instead: someone refreshed (or signed in again, or
        out) since ``held`` was read, so refreshing with ``held``'s refresh token would spend a token already spent.
        While another holder's turn runs, this waits for its outcome (bounded by that turn's end).
        """
        lost = 0
        while True:
            current = await self.store.read(self.key)
            record = self.record = current or {}
            if not same_tokens(record.get("tokens"), held):
                return record
            turn = record.get("refreshing")
            if isinstance(turn, dict) and turn.get("by") != holder and _number(turn.get("until")) > clock():
                await asyncio.sleep(TURN_POLL)
                continue
            mine = record | {"refreshing": {"by": holder, "until": clock() + TURN_SECONDS}}
            if await self.store.swap(self.key, current, mine):
                self.record = mine
                return None
            lost += 1
            if lost >= SWAP_TRIES:
                raise SignInStoreBusy(f"the sign-in at {self.where} changed {lost} times while the bridge tried to "
                                      "take its turn to refresh it", fix=BUSY_FIX)  # fmt: skip

    async def end_turn(self, holder: str) -> Record:
        """Give a turn back (the refresh failed, or never went): others need not wait for it to lapse."""

        def without(record: Record) -> Record:
            turn = record.get("refreshing")
            mine = isinstance(turn, dict) and turn.get("by") == holder
            return record | {"refreshing": None} if mine else record

        return await self.change(without)


def same_tokens(stored: object, held: object) -> bool:
    """Whether two stored token records are the same grant: the same access and refresh tokens."""
    if not isinstance(stored, dict) or not isinstance(held, dict):
        return stored is None and held is None
    return all(stored.get(key) == held.get(key) for key in ("access_token", "refresh_token"))


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
