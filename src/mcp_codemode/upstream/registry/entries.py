"""What one MCP Registry entry (a ``server.json``) says about a server: how it runs and what it needs.

The registry is a third party and its data reaches both the model (as search results) and, once a person
consents, a command line on the host. So every field is read defensively: types checked, lengths bounded,
unknown fields ignored (the format grows: 2025-09-29, 2025-12-11, ...), and anything the bridge would have to
guess at (a package version range, ``latest``) refused with a message naming the entry and the field. The
dataclasses are plain data; turning an entry into a command line is the adder's job, which shows it to the
person first.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Literal

from ...errors import CodemodeError

NAME = re.compile(r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$")  # reverse-DNS namespace, one slash, server name
MAX_TEXT = 2_000  # characters of any free text kept (descriptions); a hostile registry cannot flood the model
MAX_ITEMS = 64  # packages, remotes, variables, headers or arguments read from one entry
# A version the registry schema forbids because it names no one release: the person must see what will run.
VERSION_RANGE = re.compile(r"^(latest|\*|.*[\^~<>=*xX| ].*)$")
RemoteTransport = Literal["streamable-http", "sse"]
REMOTE_TRANSPORTS: tuple[RemoteTransport, ...] = ("streamable-http", "sse")


class RegistryDataError(CodemodeError):
    """A registry entry that cannot be used as it is: which entry, which field, and why."""


@dataclasses.dataclass(frozen=True)
class InputNeed:
    """An environment variable or header a server needs, as the registry describes it (never its value)."""

    name: str
    description: str = ""
    required: bool = False
    secret: bool = False
    default: str | None = None  # a fixed, non-secret value the entry gives; secrets never come from a registry
    choices: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Argument:
    """One command-line argument of a package: ``positional`` (``value``) or ``named`` (``name`` and ``value``)."""

    kind: Literal["positional", "named"]
    name: str = ""  # the flag, with its dashes, for a named argument
    value: str | None = None  # a fixed value; None: the person must supply it (``hint`` says what it is)
    hint: str = ""
    description: str = ""
    required: bool = False


@dataclasses.dataclass(frozen=True)
class PackageRun:
    """A way to run the server from a package registry (npm, PyPI, OCI, ...) on the host, over stdio or HTTP."""

    registry_type: str  # "npm", "pypi", "oci", "nuget", "mcpb": the adder decides which it can run
    identifier: str  # the package name (or, for mcpb, its download URL)
    version: str  # one exact release, never a range
    transport: str = "stdio"
    runtime_hint: str = ""  # "npx", "uvx", "docker", ...: a hint only, the adder chooses the runtime
    registry_base_url: str = ""
    file_sha256: str = ""
    runtime_arguments: tuple[Argument, ...] = ()
    package_arguments: tuple[Argument, ...] = ()
    environment: tuple[InputNeed, ...] = ()


@dataclasses.dataclass(frozen=True)
class RemoteRun:
    """A server already running elsewhere, reached over Streamable HTTP or SSE at ``url``."""

    transport: RemoteTransport
    url: str
    headers: tuple[InputNeed, ...] = ()


@dataclasses.dataclass(frozen=True)
class ServerEntry:
    """One version of one server as a registry or catalog lists it."""

    name: str  # "io.github.owner/server": unique within a registry, the name a person consents to
    version: str
    description: str
    source: str  # where the entry came from (a registry's base URL or a catalog file), for the person and the audit
    title: str = ""
    repository_url: str = ""
    website_url: str = ""
    packages: tuple[PackageRun, ...] = ()
    remotes: tuple[RemoteRun, ...] = ()
    status: str = "active"  # the registry's own status ("active", "deprecated", "deleted") when it says one
    is_latest: bool = True

    @property
    def secrets(self) -> tuple[str, ...]:
        """Names of every secret input any way of running it asks for (environment variables and headers)."""
        needs = [n for p in self.packages for n in p.environment] + [h for r in self.remotes for h in r.headers]
        return tuple(dict.fromkeys(n.name for n in needs if n.secret))


def parse_server_json(data: object, source: str) -> ServerEntry:
    """Read one ``server.json`` object (or a registry list item ``{"server": ..., "_meta": ...}``).

    Raises ``RegistryDataError`` naming the entry and the field for anything that cannot be used; an unknown
    package type or transport is kept (the adder refuses what it cannot run, with its own reason).
    """
    meta: Mapping[str, object] = {}
    if isinstance(data, Mapping) and isinstance(data.get("server"), Mapping):
        raw_meta = data.get("_meta")
        official = raw_meta.get("io.modelcontextprotocol.registry/official") if isinstance(raw_meta, Mapping) else None
        meta = official if isinstance(official, Mapping) else {}
        data = data["server"]
    if not isinstance(data, Mapping):
        raise RegistryDataError(f"a registry entry from {source} is not a JSON object", fix="report it to the registry")
    read = _Reader(data, f"registry entry from {source}")
    name = read.text("name", required=True, limit=200)
    if not NAME.match(name):
        raise RegistryDataError(
            f"the registry entry {name!r} from {source} has a malformed name",
            fix="a server name is a reverse-DNS namespace, one slash and a name, e.g. io.github.owner/weather",
        )
    read = _Reader(data, f"registry entry {name!r} from {source}")
    repository = data.get("repository")
    return ServerEntry(
        name=name,
        version=read.text("version", required=True, limit=255),
        description=read.text("description", limit=MAX_TEXT),
        source=source,
        title=read.text("title", limit=200),
        repository_url=_Reader(repository, read.where).text("url", limit=MAX_TEXT)
        if isinstance(repository, Mapping)
        else "",
        website_url=read.text("websiteUrl", limit=MAX_TEXT),
        packages=tuple(_package(item, read.at("packages", i)) for i, item in read.items("packages")),
        remotes=tuple(_remote(item, read.at("remotes", i)) for i, item in read.items("remotes")),
        status=_Reader(meta, read.where).text("status", limit=40) or "active",
        is_latest=meta.get("isLatest") is not False,
    )


def _package(data: Mapping[str, object], where: str) -> PackageRun:
    read = _Reader(data, where)
    version = read.text("version", limit=255) or _pinned_by_identifier(data, where)
    if VERSION_RANGE.match(version):
        raise RegistryDataError(
            f"{where} names the version {version!r}, which is not one release",
            fix="a registry entry must pin an exact package version; ask its publisher to fix it",
        )
    transport = data.get("transport")
    return PackageRun(
        registry_type=read.text("registryType", required=True, limit=40),
        identifier=read.text("identifier", required=True, limit=MAX_TEXT),
        version=version,
        transport=(_Reader(transport, where).text("type", limit=40) if isinstance(transport, Mapping) else "")
        or "stdio",
        runtime_hint=read.text("runtimeHint", limit=40),
        registry_base_url=read.text("registryBaseUrl", limit=MAX_TEXT),
        file_sha256=read.text("fileSha256", limit=64),
        runtime_arguments=tuple(
            _argument(a, read.at("runtimeArguments", i)) for i, a in read.items("runtimeArguments")
        ),
        package_arguments=tuple(
            _argument(a, read.at("packageArguments", i)) for i, a in read.items("packageArguments")
        ),
        environment=tuple(_need(v, read.at("environmentVariables", i)) for i, v in read.items("environmentVariables")),
    )


def _pinned_by_identifier(data: Mapping[str, object], where: str) -> str:
    """The release a package without a ``version`` names anyway, as the registry allows for two types: an OCI image
    by its tag or digest (``docker.io/o/s:1.7.2``), an MCPB file by its ``fileSha256``. Anything else is refused."""
    read = _Reader(data, where)
    kind, identifier = read.text("registryType", limit=40), read.text("identifier", limit=MAX_TEXT)
    if kind == "oci":
        image, at, digest = identifier.partition("@")
        name, colon, tag = image.rpartition(":")
        if at and digest:
            return digest
        if colon and "/" not in tag and name:
            return tag
    if kind == "mcpb" and re.fullmatch(r"[a-f0-9]{64}", read.text("fileSha256", limit=64)):
        return "sha256:" + read.text("fileSha256", limit=64)
    raise RegistryDataError(
        f"{where}: 'version' is missing, and the {kind or 'package'} identifier {identifier[:120]!r} pins no release",
        fix="a registry entry must pin an exact package version; ask its publisher to fix it",
    )


def _remote(data: Mapping[str, object], where: str) -> RemoteRun:
    read = _Reader(data, where)
    transport = read.text("type", required=True, limit=40)
    if transport not in REMOTE_TRANSPORTS:
        raise RegistryDataError(
            f"{where} has the transport {transport!r}",
            fix=f"a remote server is reached by one of {', '.join(REMOTE_TRANSPORTS)}",
        )
    url = read.text("url", required=True, limit=MAX_TEXT)
    if not url.startswith(("https://", "http://")):
        raise RegistryDataError(
            f"{where} has the URL {url[:80]!r}, which is not http(s)", fix="report it to the registry"
        )
    headers = tuple(_need(h, read.at("headers", i)) for i, h in read.items("headers"))
    return RemoteRun(transport=transport, url=url, headers=headers)


def _need(data: Mapping[str, object], where: str) -> InputNeed:
    read = _Reader(data, where)
    secret = read.flag("isSecret")
    fixed = read.text("value", limit=MAX_TEXT) or read.text("default", limit=MAX_TEXT)
    return InputNeed(
        name=read.text("name", required=True, limit=200),
        description=read.text("description", limit=MAX_TEXT),
        required=read.flag("isRequired"),
        secret=secret,
        default=None if secret or not fixed else fixed,
        choices=tuple(str(c)[:200] for c in _list(data.get("choices"))[:MAX_ITEMS]),
    )


def _argument(data: Mapping[str, object], where: str) -> Argument:
    read = _Reader(data, where)
    kind = read.text("type", required=True, limit=20)
    if kind not in ("positional", "named"):
        raise RegistryDataError(f"{where} is an argument of type {kind!r}", fix="an argument is positional or named")
    return Argument(
        kind=kind,  # type: ignore[arg-type]  # checked above
        name=read.text("name", required=kind == "named", limit=200),
        value=read.text("value", limit=MAX_TEXT) or read.text("default", limit=MAX_TEXT) or None,
        hint=read.text("valueHint", limit=200),
        description=read.text("description", limit=MAX_TEXT),
        required=read.flag("isRequired"),
    )


def _list(value: object) -> Sequence[object]:
    return value if isinstance(value, list) else ()


@dataclasses.dataclass(frozen=True)
class _Reader:
    """Typed, bounded reads of one JSON object, each failure naming ``where`` and the field."""

    data: object
    where: str

    def text(self, key: str, *, required: bool = False, limit: int) -> str:
        value = self.data.get(key) if isinstance(self.data, Mapping) else None
        if value is None and not required:
            return ""
        if not isinstance(value, str) or (required and not value.strip()):
            raise RegistryDataError(
                f"{self.where}: {key!r} is {'missing' if value is None else 'not a non-empty string'}",
                fix="report it to the registry, or leave this entry out of a local catalog",
            )
        return value[:limit]

    def flag(self, key: str) -> bool:
        return isinstance(self.data, Mapping) and self.data.get(key) is True

    def items(self, key: str) -> list[tuple[int, Mapping[str, object]]]:
        value = self.data.get(key) if isinstance(self.data, Mapping) else None
        if value is None:
            return []
        if not isinstance(value, list):
            raise RegistryDataError(f"{self.where}: {key!r} is not a list", fix="report it to the registry")
        found = []
        for index, item in enumerate(value[:MAX_ITEMS]):
            if not isinstance(item, Mapping):
                raise RegistryDataError(f"{self.at(key, index)} is not an object", fix="report it to the registry")
            found.append((index, item))
        return found

    def at(self, key: str, index: int) -> str:
        return f"{self.where}, {key}[{index}]"
