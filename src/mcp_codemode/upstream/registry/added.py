"""The servers a person consented to add, per principal, kept in the bridge's own state (never a client's config).

One private JSON file per principal (``added-servers/<sha256 of the principal>.json``, 0600 in a 0700 folder),
written whole through a temporary file and a rename, so a crash leaves the old file or the new one. A file that
cannot be read as this module wrote it is an error naming the file and the fix, and is never overwritten: what the
person once consented to is not lost to a bad edit.

An added server runs in the hub beside the configured ones under a name of its principal's own
(``<name>@<principal>``), so two principals may add the same entry, each with its own process and secrets, and the
relay shows each principal only its own (``runs/added_servers.py``). The record keeps the plan the person was shown
and its digest, the program the install produced, and no secret: their values are read from the secret settings
each time the server's configuration is built.

Whose secrets: the local user's added servers read ``MCP_BRIDGE_SECRETS_DIR`` itself, as the servers the user
configured do; a token principal's read only its own subdirectory of it (``<secrets dir>/t-3f2a.../NAME``), which the
operator fills for that principal. The entry names the variable, and anyone may publish an entry: were a token
holder's server given the bridge's own ``GITHUB_TOKEN`` because his entry asks for a secret of that name, every
credential the operator provisioned would be one ``add_server`` away from every token holder.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import CodemodeError
from ...state_files import make_private_dir, write_json
from ..config.secrets import read_secret
from ..model import ServerConfig, Transport
from .plans import CannotAdd, LaunchPlan

FORMAT = 1
LOCAL = "local"  # the principal of stdio calls and of HTTP calls without tokens: the host's own user
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
ALIAS = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,39}$")
MAX_ADDED = 50  # servers one principal may add: each is a process on the host


class AddedStoreError(CodemodeError):
    """A principal's file of added servers cannot be read; it is left as it is."""


def owner_tag(owner: str) -> str:
    """The principal as it appears in its servers' names: as it is when short and plain (``local``, ``t-3f2a...``),
    else a hash of it."""
    if re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,31}", owner):
        return owner
    return "p" + hashlib.sha256(owner.encode("utf-8", "surrogateescape")).hexdigest()[:12]


def secrets_of(secrets_dir: Path | None, owner: str) -> Path | None:
    """The directory ``owner``'s added servers read their secrets from: the secrets directory for the local user, a
    subdirectory named after the principal (its ``owner_tag``) for anyone else."""
    if secrets_dir is None or owner == LOCAL:
        return secrets_dir
    return secrets_dir / owner_tag(owner)


def default_name(entry: str) -> str:
    """``io.github.acme/weather-server`` -> ``weather-server``: the server's part of its registry name, made plain."""
    name = re.sub(r"[^a-z0-9-]+", "-", entry.rsplit("/", 1)[-1].lower()).strip("-")[:40].rstrip("-")
    return name if NAME.match(name) else "server"


def alias_of(name: str) -> str:
    alias = re.sub(r"\W", "_", name)
    return alias if ALIAS.match(alias) else f"s_{alias}"[:40]


@dataclasses.dataclass(frozen=True)
class AddedServer:
    """One server a principal added: its plan as consented to, and what the install made of it."""

    name: str  # as the principal knows it, e.g. "time"
    alias: str  # mcp_<alias>
    owner: str
    plan: LaunchPlan
    digest: str  # of the plan, as the consent was given to it
    program: str = ""  # the installed program (packages); "" for a remote server
    added_at: str = ""

    @property
    def hub_name(self) -> str:
        return f"{self.name}@{owner_tag(self.owner)}"

    def config(self, secrets_dir: Path | None) -> ServerConfig:
        """The server as the hub runs it; the secrets are read now, from its principal's own (``SecretError`` names a
        missing one)."""
        plan, mine = self.plan, secrets_of(secrets_dir, self.owner)
        values = {name: read_secret(mine, name, header=plan.kind == "remote") for name in plan.secrets}
        source = f"added by {self.owner} from {plan.entry} {plan.entry_version}"
        description = f"{plan.entry} {plan.entry_version}, added from a registry with a person's consent"
        if plan.kind == "remote":
            transport: Transport = "http" if plan.transport == "streamable-http" else "sse"
            return ServerConfig(
                name=self.hub_name, alias=self.alias, transport=transport, source=source, url=plan.url,
                headers={**dict(plan.headers), **values}, description=description,
            )  # fmt: skip
        return ServerConfig(
            name=self.hub_name, alias=self.alias, transport="stdio", source=source, command=self.program,
            args=plan.arguments, env={**dict(plan.env), **values}, description=description,
        )  # fmt: skip

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "alias": self.alias, "plan": self.plan.as_json(), "digest": self.digest,
                "program": self.program, "added_at": self.added_at}  # fmt: skip


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


class AddedStore:
    """Each principal's added servers, in files under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, owner: str) -> Path:
        return self.directory / (hashlib.sha256(owner.encode("utf-8", "surrogateescape")).hexdigest()[:32] + ".json")

    def load(self, owner: str) -> list[AddedServer]:
        path = self.path(owner)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise AddedStoreError(f"the added servers' file {path} cannot be read ({exc.strerror})") from None
        return self._parse(text, path, owner)

    def _parse(self, text: str, path: Path, owner: str | None) -> list[AddedServer]:
        fix = f"fix or remove {path} (it is left as it is; removing it forgets that principal's added servers)"
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("owner"), str):
                raise ValueError("not a file of added servers")
            if owner is not None and data["owner"] != owner:
                raise ValueError("it belongs to another principal")
            servers = []
            for item in data.get("servers", []):
                plan = LaunchPlan.from_json(item["plan"])
                text_fields = [item[key] for key in ("name", "alias", "digest", "program", "added_at")]
                if not all(isinstance(value, str) for value in text_fields):
                    raise ValueError("a field is not text")
                if not NAME.match(item["name"]) or not ALIAS.match(item["alias"]) or plan.digest() != item["digest"]:
                    raise ValueError(f"the server {str(item['name'])[:40]!r} does not match what was consented to")
                servers.append(AddedServer(item["name"], item["alias"], data["owner"], plan, item["digest"],
                                           item["program"], item["added_at"]))  # fmt: skip
        except (ValueError, KeyError, TypeError, CannotAdd) as exc:
            raise AddedStoreError(f"the added servers' file {path} is damaged ({exc})", fix=fix) from None
        return servers

    def save(self, owner: str, servers: list[AddedServer]) -> None:
        make_private_dir(self.directory)
        document = {"format": FORMAT, "owner": owner, "servers": [server.as_json() for server in servers]}
        write_json(self.path(owner), document)

    def everyone(self) -> Iterator[tuple[Path, list[AddedServer] | AddedStoreError]]:
        """Every principal's servers (or the error of a damaged file), for the bridge's start and the CLI."""
        if not self.directory.is_dir():
            return
        for path in sorted(self.directory.glob("*.json")):
            try:
                yield path, self._parse(path.read_text(encoding="utf-8"), path, None)
            except AddedStoreError as exc:
                yield path, exc
            except OSError as exc:
                yield path, AddedStoreError(f"the added servers' file {path} cannot be read ({exc.strerror})")
