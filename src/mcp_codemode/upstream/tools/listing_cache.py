"""The catalog cache: each configured server's last tool listing (and its prompts and resources), kept on disk
between runs.

Searching every configured server's tools must not mean starting every server on each run: a Node server costs
0.3 s to start and a Python one up to a second, and some ask for credentials or a network. So the listing a
server gave last time is kept in ``<state_dir>/catalog/``, one JSON file per server *configuration*, and used
until it is older than ``catalog_ttl`` (then refreshed in the background) or the server says its tools changed.

A file is keyed by what determines the listing (transport, command, args, env, cwd, url, headers, protocol),
not by the server's name: renaming a server keeps its listing, and changing its arguments or environment gives
it a new one. The key is an HMAC-SHA256 of those fields under a random salt kept next to the files, so a file
name says nothing that could be checked against a guessed token in ``env`` or ``headers``. The directory is
private to the bridge's user (0700, files 0600), writes are atomic, and a file that is oversized, corrupt or of
another format is logged and ignored, never trusted and never fatal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import json
import logging
import os
import secrets
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mcp import types
from pydantic import ValidationError

from ...state_files import make_state_dir, write_json
from ..model import ServerConfig
from .listing import NO_EXTRAS, Extras

log = logging.getLogger("mcp_codemode.upstream.listing_cache")  # the name log lines have always shown

FORMAT = 1
MAX_FILE_BYTES = 16 << 20  # a listing of 1,000 tools with full schemas is about 2 MB
SALT_BYTES = 32
SALT_FILE = ".salt"
SUFFIX = ".json"


@dataclasses.dataclass(frozen=True)
class CachedListing:
    """One server's listing as read back: the tools, when they were fetched (epoch seconds) and how long ago."""

    tools: tuple[types.Tool, ...]
    fetched_at: float
    age: float
    stale: bool
    extras: Extras = NO_EXTRAS


def listing_fields(config: ServerConfig) -> dict[str, Any]:
    """The parts of a server's configuration that decide which tools it lists (not its name or description)."""
    return {
        "format": FORMAT,
        "transport": config.transport,
        "command": config.command,
        "args": list(config.args),
        "env": dict(config.env),
        "cwd": config.cwd,
        "url": config.url,
        "headers": dict(config.headers),
        "protocol": config.protocol,
    }


def wire(tools: Sequence[types.Tool | types.Prompt | types.Resource | types.ResourceTemplate]) -> list[dict[str, Any]]:
    """Tools (or prompts, resources, templates) as they travel in a listing result (the form the cache keeps)."""
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]


# The keys a cache file keeps a server's extras under (optional: a file written before them has none).
_EXTRA_KEYS = (("prompts", types.Prompt), ("resources", types.Resource), ("resource_templates", types.ResourceTemplate))


class ListingCache:
    """``<state_dir>/catalog/``: load, store and forget one server configuration's listing."""

    def __init__(self, state_dir: Path, ttl: float, clock: Callable[[], float] = time.time) -> None:
        self.state_dir = state_dir
        self.root = state_dir / "catalog"
        self.ttl = ttl
        self._clock = clock
        self._salt: bytes | None = None

    # -- keys ---------------------------------------------------------------------------------------------

    def key(self, config: ServerConfig) -> str:
        """The file name (without suffix) of ``config``'s listing: HMAC-SHA256 of its listing fields, in hex.

        Makes the catalog directory and its salt on first use.
        """
        return self._key(config, self._salt_bytes())

    def path(self, config: ServerConfig) -> Path:
        return self.root / (self.key(config) + SUFFIX)

    @staticmethod
    def _key(config: ServerConfig, salt: bytes) -> str:
        canonical = json.dumps(listing_fields(config), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hmac.new(salt, canonical.encode("utf-8"), hashlib.sha256).hexdigest()

    def _salt_bytes(self) -> bytes:
        if self._salt is None:
            self._salt = self._read_or_make_salt()
        return self._salt

    def _existing_salt(self) -> bytes | None:
        """The salt if it exists (reading a cache never creates one: without a salt there is nothing to read)."""
        if self._salt is None:
            try:
                salt = (self.root / SALT_FILE).read_bytes()
            except FileNotFoundError:
                return None
            if len(salt) != SALT_BYTES:
                return None
            self._salt = salt
        return self._salt

    def _read_or_make_salt(self) -> bytes:
        self._make_root()
        salt_file = self.root / SALT_FILE
        for _ in range(3):
            with contextlib.suppress(FileNotFoundError):
                salt = salt_file.read_bytes()
                if len(salt) == SALT_BYTES:
                    return salt
                # A salt of the wrong size was not written by us: start over (every cached listing is orphaned).
                log.warning("catalog cache: %s is damaged; making a new one (cached listings are dropped)", salt_file)
                salt_file.unlink(missing_ok=True)
            # Write the whole salt under a temporary name, then link it into place: link() fails if another
            # process got there first, and a reader never sees a half-written salt.
            handle, temporary = tempfile.mkstemp(dir=self.root, prefix=".salt.", suffix=".tmp")
            try:
                with os.fdopen(handle, "wb") as stream:
                    stream.write(secrets.token_bytes(SALT_BYTES))
                with contextlib.suppress(FileExistsError):
                    os.link(temporary, salt_file)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
        raise OSError(f"cannot create a stable salt in {salt_file}")

    def _make_root(self) -> None:
        make_state_dir(self.state_dir)
        self.root.mkdir(mode=0o700, exist_ok=True)
        os.chmod(self.root, 0o700)

    # -- staleness ------------------------------------------------------------------------------------------

    def is_stale(self, fetched_at: float) -> bool:
        """Older than the TTL (with ``catalog_ttl`` 0 every listing is), or from the future (a clock that jumped)."""
        age = self._clock() - fetched_at
        return self.ttl <= 0 or age > self.ttl or age < 0

    def now(self) -> float:
        return self._clock()

    # -- reading and writing --------------------------------------------------------------------------------

    def load(self, config: ServerConfig) -> CachedListing | None:
        """``config``'s cached listing, or None when there is none or the file cannot be trusted (logged)."""
        try:
            salt = self._existing_salt()
        except OSError as exc:
            log.warning("catalog cache: cannot use %s: %s", self.root, exc)
            return None
        if salt is None:
            return None
        path = self.root / (self._key(config, salt) + SUFFIX)
        try:
            with path.open("rb") as stream:
                size = os.fstat(stream.fileno()).st_size
                if size > MAX_FILE_BYTES:
                    log.warning(
                        "catalog cache: ignoring %s (server %r): %d bytes, more than the %d a listing may take",
                        path, config.name, size, MAX_FILE_BYTES,
                    )  # fmt: skip
                    return None
                raw = stream.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("catalog cache: cannot read %s (server %r): %s", path, config.name, exc)
            return None
        try:
            tools, fetched_at, extras = _parse(raw)
        except (ValueError, TypeError, RecursionError, ValidationError) as exc:
            reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            log.warning("catalog cache: ignoring %s (server %r): %s", path, config.name, reason)
            return None
        age = self._clock() - fetched_at
        return CachedListing(tools, fetched_at, age, self.is_stale(fetched_at), extras)

    def store(
        self,
        config: ServerConfig,
        tools: Sequence[types.Tool],
        fetched_at: float | None = None,
        extras: Extras = NO_EXTRAS,
    ) -> Path:
        """Write ``config``'s listing atomically (a temporary file renamed over the old one), readable by us only."""
        path = self.path(config)
        document: dict[str, Any] = {
            "format": FORMAT,
            "server": config.name,
            "fetched_at": self._clock() if fetched_at is None else fetched_at,
            "tools": wire(tools),
        }
        for key, items in (("prompts", extras.prompts), ("resources", extras.resources),
                           ("resource_templates", extras.templates)):  # fmt: skip
            if items:
                document[key] = wire(items)
        return write_json(path, document, compact=True)

    def forget(self, config: ServerConfig) -> bool:
        """Remove ``config``'s listing; whether there was one."""
        salt = self._existing_salt()
        if salt is None:
            return False
        try:
            (self.root / (self._key(config, salt) + SUFFIX)).unlink()
        except FileNotFoundError:
            return False
        return True


def _parse(raw: bytes) -> tuple[tuple[types.Tool, ...], float, Extras]:
    document = json.loads(raw.decode("utf-8"))
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    if document.get("format") != FORMAT:
        raise ValueError(f"format {document.get('format')!r:.20}, not {FORMAT}")
    fetched_at = document.get("fetched_at")
    if isinstance(fetched_at, bool) or not isinstance(fetched_at, (int, float)) or fetched_at != fetched_at:
        raise ValueError("fetched_at is not a time")
    listed = document.get("tools")
    if not isinstance(listed, list):
        raise ValueError("tools is not a list")
    found: list[tuple[Any, ...]] = []
    for key, model in _EXTRA_KEYS:
        items = document.get(key, [])
        if not isinstance(items, list):
            raise ValueError(f"{key} is not a list")
        found.append(tuple(model.model_validate(item) for item in items))
    extras = Extras(*found)
    return tuple(types.Tool.model_validate(item) for item in listed), float(fetched_at), extras
