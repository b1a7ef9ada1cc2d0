"""The one tool, ``run_python``: the check of every argument a model sends it (its listing is listing.py's).

Apart from the server because it is pure (no request, no bridge): a wrong argument must come back as a tool result
the model can read and fix (``isError``), never as a protocol error that some clients swallow.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mcp.server.context import ServerRequestContext

from ..errors import CodemodeError
from ..guest.protocol import USER_SESSION_NAME_PATTERN
from ..runs.bridge import RunRequest
from ..settings import Settings
from .workspace_files import BadFiles, parse_files

MAX_CODE_CHARS = 1_000_000
SESSION_PATTERN = USER_SESSION_NAME_PATTERN  # the name a user gives; sessions.py checks the internal key
SESSION_RE = re.compile(SESSION_PATTERN)
_ARGUMENTS = ("code", "servers", "timeout", "session", "reset")
# Files for the session's /workspace travel in the request's _meta, from the client program: not an argument, so
# the model pays nothing for them in the listing and strict-schema clients keep a schema they can express.
FILES_META_KEY = "codemode/files"


class InvalidArguments(CodemodeError, ValueError):
    """A ``run_python`` argument we cannot use; the message says what to send instead."""


def parse_arguments(arguments: Mapping[str, Any] | None, settings: Settings) -> RunRequest:
    """Check every argument the model sent; each message names the argument and shows a good value."""
    args = dict(arguments or {})
    unknown = sorted(set(args) - set(_ARGUMENTS))
    if unknown:
        raise InvalidArguments(
            f"run_python has no argument {', '.join(map(repr, unknown))}; it takes code (required), "
            "servers, timeout, session and reset"
        )
    code = args.get("code")
    if not isinstance(code, str) or not code.strip():
        what = "missing" if code is None else ("empty" if isinstance(code, str) else f"a {_json_type(code)}")
        raise InvalidArguments(
            f'`code` is {what}: send the Python source to run as a string, for example {{"code": "print(1 + 1)"}}'
        )
    if len(code) > MAX_CODE_CHARS:
        raise InvalidArguments(
            f"`code` is {len(code):,} characters; the limit is {MAX_CODE_CHARS:,}: send less code and keep data "
            "in files under /workspace or in session variables"
        )
    return RunRequest(
        code=code,
        timeout=_timeout(args.get("timeout"), settings),
        session=_session(args.get("session")),
        reset=_reset(args.get("reset")),
        servers=_servers(args.get("servers")),
    )


def meta_files(ctx: ServerRequestContext[Any, Any]) -> tuple[tuple[str, bytes], ...]:
    """The files the client program sent in the request's ``_meta`` for the session's /workspace."""
    meta: Mapping[str, Any] = ctx.meta or {}
    try:
        return parse_files(meta.get(FILES_META_KEY), f'_meta["{FILES_META_KEY}"]')
    except BadFiles as exc:
        raise InvalidArguments(str(exc)) from None


def _json_type(value: object) -> str:
    names = {bool: "boolean", int: "number", float: "number", str: "string", list: "list", dict: "object"}
    return names.get(type(value), type(value).__name__)


# Strict-schema clients (OpenAI's strict function calling) must send every property, so they send an optional
# one as its "empty" value: null, "" or []. Each means "not given"; anything else still has to be right.


def _timeout(value: object, settings: Settings) -> int | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= settings.max_timeout:
        raise InvalidArguments(
            f"`timeout` must be a whole number of seconds from 1 to {settings.max_timeout}, not {value!r}; "
            f'for example {{"timeout": {min(60, settings.max_timeout)}}}, or leave it out for '
            f"{settings.timeout} s"
        )
    return value


def _session(value: object) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not SESSION_RE.fullmatch(value):
        raise InvalidArguments(
            f"`session` {value!r} is not a valid session name: use 1-64 letters, digits, '_', '.', '@' or '-', "
            'starting with a letter or digit, for example {"session": "analysis-1"}; or leave it out for your '
            "own default session"
        )
    return value


def _reset(value: object) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidArguments(f'`reset` must be true or false, not {value!r}; for example {{"reset": true}}')
    return value


def _servers(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) and 0 < len(item) <= 128 for item in value):
        raise InvalidArguments(
            f"`servers` must be a list of server names, not {value!r}; for example "
            '{"servers": ["github"]}, or leave it out (every configured server is reachable anyway)'
        )
    return tuple(dict.fromkeys(value))
