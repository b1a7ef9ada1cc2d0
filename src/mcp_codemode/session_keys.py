"""Which session a call runs in, as a value: its kind, and the owner and name that tell it from every other.

Why a value and not a string: the faces place calls in sessions of four kinds (a stdio client's, a principal's over
HTTP, a handshake-era connection's own default, the command line's), and code that asked "whose session is this?"
once split strings by prefix in several files, each with its own idea of where a name ends. Here the parts are
fields, compared as fields; the string form exists for what must cross a process or wire boundary (the name the
session manager gives workers and audit lines, the body one replica forwards to another), and ``parse`` is the one
reader of it. The forms are those the bridge always wrote, so audit records and forwarded calls did not change:
``stdio:NAME``, ``p:OWNER:NAME``, ``h:TAG``, ``cli:NAME``.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from .errors import CodemodeError

Kind = Literal["stdio", "principal", "connection", "cli"]
_PREFIXES: dict[Kind, str] = {"stdio": "stdio", "principal": "p", "connection": "h", "cli": "cli"}
_KINDS: dict[str, Kind] = {prefix: kind for kind, prefix in _PREFIXES.items()}


class BadSessionKey(CodemodeError, ValueError):
    """A session key whose parts cannot be told apart again, or a string that is not one's form."""


@dataclasses.dataclass(frozen=True)
class SessionKey:
    """One session of the bridge: ``kind``, the ``name`` its client knows it by (a handshake-era connection's: the
    tag of its MCP session id), and for a principal's session the ``owner`` (a token's principal, or "local").

    Only the owner is delimited in the string form, so only the owner may not hold ':'; the name is the rest."""

    kind: Kind
    name: str
    owner: str = ""

    def __post_init__(self) -> None:
        if self.kind not in _PREFIXES:
            raise BadSessionKey(f"a session key's kind is one of {', '.join(_PREFIXES)}, not {self.kind!r}")
        if not self.name:
            raise BadSessionKey(f"a {self.kind} session key needs a name")
        if self.kind == "principal":
            if not self.owner or ":" in self.owner:
                raise BadSessionKey(f"a principal's session key needs an owner without ':', not {self.owner!r}")
        elif self.owner:
            raise BadSessionKey(f"only a principal's session key has an owner; a {self.kind} one does not")

    @classmethod
    def stdio(cls, name: str) -> SessionKey:
        """A session of the one client a stdio bridge serves."""
        return cls("stdio", name)

    @classmethod
    def principal(cls, owner: str, name: str) -> SessionKey:
        """A session ``owner`` named (or its stateless default): the kind replicas share."""
        return cls("principal", name, owner)

    @classmethod
    def connection(cls, tag: str) -> SessionKey:
        """A handshake-era connection's own default session, named by the tag of its MCP session id."""
        return cls("connection", tag)

    @classmethod
    def cli(cls, name: str) -> SessionKey:
        """A session of the command line's ``run``."""
        return cls("cli", name)

    def __str__(self) -> str:
        prefix = _PREFIXES[self.kind]
        return f"{prefix}:{self.owner}:{self.name}" if self.kind == "principal" else f"{prefix}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> SessionKey:
        """The key whose string form is ``text``; ``BadSessionKey`` when it is no key's."""
        prefix, colon, rest = text.partition(":")
        kind = _KINDS.get(prefix)
        if not colon or kind is None:
            raise BadSessionKey(f"{text!r} is not a session key: it starts with one of {', '.join(_KINDS)} and ':'")
        if kind != "principal":
            return cls(kind, rest)
        owner, colon, name = rest.partition(":")
        if not colon:
            raise BadSessionKey(f"{text!r} is not a session key: a principal's is p:OWNER:NAME")
        return cls(kind, name, owner)
