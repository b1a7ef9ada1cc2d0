"""One server entry as read from a client's file, before it is normalised: shared by the readers, the parser
and the precedence rules, so it sits below all three.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from ..model import Transport

_TRANSPORTS: Final[Mapping[str, Transport]] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamablehttp": "http",
    "sse": "sse",
}


@dataclasses.dataclass(frozen=True)
class ReadContext:
    """What entries are read against: ``env`` without the ``withheld`` names (the bridge's own secrets, which no
    entry may pass on), and the directory ``${secret:NAME}`` reads (None: not set)."""

    home: Path
    cwd: Path
    env: Mapping[str, str]
    secrets_dir: Path | None = None
    withheld: frozenset[str] = frozenset()


@dataclasses.dataclass
class RawEntry:
    """One server entry as written, mapped onto common slots. Values are unchecked (``None`` = absent).

    The ``*_key`` fields keep the key the user wrote, so a message can say ``httpUrl`` or
    ``tool_timeout_sec`` rather than our internal name.
    """

    name: str
    source: str
    base: Path  # what a relative cwd is relative to: the config file's directory
    fmt: str = "json"  # the client format it was read in, which decides how its variables are filled in
    command: object = None
    args: object = None
    env: object = None
    cwd: object = None
    url: object = None
    url_key: str = "url"
    url_transport: Transport | None = None  # the transport the url key implies (Gemini, Codex); None: guess
    type: object = None
    type_key: str = "type"
    headers: object = None
    headers_key: str = "headers"
    env_headers: object = None  # Codex env_http_headers: header name → environment variable name
    bearer_env: object = None  # Codex bearer_token_env_var
    disabled: bool = False
    description: object = None
    protocol: object = None
    timeout: object = None
    timeout_key: str = "timeout"
    timeout_scale: float = 1.0  # Gemini's timeout is milliseconds
    errors: list[str] = dataclasses.field(default_factory=list)  # found while mapping; the first is reported


def transport_of(value: object) -> Transport | None:
    return _TRANSPORTS.get(value.strip().lower()) if isinstance(value, str) else None


def kind_of(value: object) -> str:
    """What a JSON/TOML value is, in words, without echoing it (it may be a secret)."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    if value is None:
        return "null"
    return type(value).__name__
