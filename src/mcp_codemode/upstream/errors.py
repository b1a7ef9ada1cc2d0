"""The errors the hub raises when an upstream MCP server cannot be reached or answers badly.

Each one says which server (and tool) it is about, what happened, and what the user can do. Each has two
texts, because they go to two audiences. ``str(error)`` is what sandboxed code may see, and what the relay
forwards: no value of the server's ``env`` or ``headers`` (or any other secret the hub was given), and no host
path (its log file, the config file, the ``PATH`` searched, its URL). ``error.host_message`` is for the bridge's
user (``mcp-codemode servers``, the bridge's log): the same secrets hidden, the paths kept. The default is the
safe one, so an error passed on by ``str()`` anywhere leaks nothing. A tool call that the server answers with
``isError`` is not an error here: it is a normal result the agent should see.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mcp_types import URL_ELICITATION_REQUIRED

from ..errors import CodemodeError
from .suggest import close_matches, did_you_mean

HIDDEN = "<hidden>"
MIN_SECRET = 4  # shorter values ("1", "on") would garble every message they occur in, and guard nothing
# Names of variables (of the bridge's environment) and flags (in a server's args) whose values are credentials.
SECRET_NAME = re.compile(r"(?i)(token|secret|passw|pwd|api[-_]?key|apikey|access[-_]?key|private[-_]?key|"
                         r"credential|auth|session|cookie|bearer|signature)")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Redaction:
    """How one server's texts are cleaned before they leave the hub.

    ``secrets`` are hidden from everyone (``<hidden>``), longest first so a value that contains another is
    hidden whole. ``host_only`` pairs (text, stand-in) are replaced only in what sandboxed code sees. ``live``
    gives secrets that change while the bridge runs (a signed-in server's OAuth tokens, renewed at each refresh):
    asked at every use, so a token is hidden from the moment it is stored.
    """

    secrets: tuple[str, ...] = ()
    host_only: tuple[tuple[str, str], ...] = ()
    live: Callable[[], Iterable[str]] | None = dataclasses.field(default=None, compare=False)

    def for_host(self, text: str) -> str:
        secrets = self.secrets
        if self.live is not None:
            fresh = {value for value in self.live() if len(value) >= MIN_SECRET}
            secrets = tuple(sorted(fresh.union(secrets), key=len, reverse=True))
        for secret in secrets:
            text = text.replace(secret, HIDDEN)
        return text

    def for_sandbox(self, text: str) -> str:
        text = self.for_host(text)
        for value, stand_in in self.host_only:
            text = text.replace(value, stand_in)
        return text

    @classmethod
    def of(
        cls,
        secrets: Iterable[str],
        host_only: Iterable[tuple[str, str]] = (),
        live: Callable[[], Iterable[str]] | None = None,
    ) -> Redaction:
        kept = {value for value in secrets if len(value) >= MIN_SECRET}
        paths = [(value, stand_in) for value, stand_in in host_only if len(value) >= MIN_SECRET]
        return cls(
            tuple(sorted(kept, key=len, reverse=True)),
            tuple(sorted(dict(paths).items(), key=lambda pair: len(pair[0]), reverse=True)),
            live,
        )


NO_REDACTION = Redaction()


def secret_values(env: Mapping[str, str]) -> tuple[str, ...]:
    """The values of an environment whose names say they are credentials (``GITHUB_TOKEN``, ``DB_PASSWORD``)."""
    return tuple(value for name, value in env.items() if SECRET_NAME.search(name) and len(value) >= MIN_SECRET)


def secret_args(args: Sequence[str]) -> tuple[str, ...]:
    """The arguments that are credentials: the value after ``--token`` and the like, or in ``--token=value``."""
    found = []
    for index, arg in enumerate(args):
        flag, equals, value = arg.partition("=")
        if flag.startswith("-") and SECRET_NAME.search(flag):
            if equals:
                found.append(value)
            elif index + 1 < len(args):
                found.append(args[index + 1])
    return tuple(found)


# Why a server's connection ended for good when the bridge stops: what a call it cut short is told.
SHUTTING_DOWN = "the bridge is shutting down"


class UpstreamError(CodemodeError):
    """Base class of the hub's errors, so callers can catch "anything about an upstream server" at once."""

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server
        self.host_message = message  # for the bridge's user; ``str(self)`` is what sandboxed code may see


class UnknownServer(UpstreamError):
    """No configured server has this name; the message offers close matches and every configured name."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        close = close_matches(name, known, n=3, cutoff=0.6)
        hint = did_you_mean(close, lead="; did you mean ", joiner=" or ")
        listing = ", ".join(sorted(known)) if known else "none"
        super().__init__(f"no upstream MCP server named {name!r}{hint} (configured: {listing})", server=name)
        self.known = tuple(known)
        self.suggestions = tuple(close)


class ServerUnavailable(UpstreamError):
    """The server could not be started or connected to, or it died; says why, where its log is, and when it retries.

    ``retry_in`` is the number of seconds until the hub will try again (0: on the next call), so a caller can
    decide whether waiting is worth it. Only ``host_message`` names the log file.
    """

    def __init__(
        self,
        server: str,
        reason: str,
        *,
        log_file: Path | None = None,
        retry_in: float | None = None,
        redaction: Redaction = NO_REDACTION,
    ) -> None:
        head = f"upstream MCP server {server!r} is unavailable: {reason.rstrip('.')}."
        tail = []
        if retry_in is not None:
            tail.append(
                "The next call will try again."
                if retry_in <= 0
                else f"The hub will try again in {retry_in:.1f} s; calls until then fail at once."
            )
        log = [f"Its log: {log_file}."] if log_file is not None else []
        super().__init__(redaction.for_sandbox(" ".join([head, *tail])), server=server)
        self.host_message = redaction.for_host(" ".join([head, *log, *tail]))
        self.reason = redaction.for_host(reason)
        self.log_file = log_file
        self.retry_in = retry_in


class SelfServerSkipped(ServerUnavailable):
    """The server said it is a code-mode bridge (this one, most likely): closed, skipped, never started again.

    A ``ServerUnavailable`` like any other to code that calls it; ``mcp-codemode servers`` lists it as skipped.
    """


class UpstreamTimeout(UpstreamError):
    """A request got no answer in time; names the setting that sets that time, so the user can raise it.

    The connection stays usable: the hub has told the server to cancel the request.
    """

    def __init__(
        self, server: str, tool: str, seconds: float, setting: str, *, redaction: Redaction = NO_REDACTION
    ) -> None:
        message = (
            f"upstream MCP server {server!r} did not answer {tool!r} within {seconds:g} s; "
            f"if it needs longer, raise {setting}"
        )
        super().__init__(redaction.for_sandbox(message), server=server)
        self.host_message = redaction.for_host(message)
        self.tool = tool
        self.seconds = seconds
        self.setting = setting


class UpstreamCallError(UpstreamError):
    """The server refused a request with a JSON-RPC error (an unknown tool, bad arguments...) or answered garbage.

    ``code`` is the server's JSON-RPC error code (None when the answer itself was malformed), ``message`` and
    ``data`` are the server's own words, passed on unchanged.
    """

    def __init__(
        self,
        server: str,
        what: str,
        code: int | None,
        message: str,
        data: Any = None,
        *,
        redaction: Redaction = NO_REDACTION,
    ) -> None:
        where = f" (JSON-RPC error {code})" if code is not None else ""
        text = f"upstream MCP server {server!r} refused {what}{where}: {message}" + _browser_steps(code, data)
        super().__init__(redaction.for_sandbox(text), server=server)
        self.host_message = redaction.for_host(text)
        self.what = what
        self.code = code
        self.message = message
        self.data = data
        self.sandbox_data = _sandbox_data(data, redaction)


MAX_ERROR_DATA = 16_384  # characters of an error's JSON data passed on to sandboxed code; larger data is dropped


def _browser_steps(code: int | None, data: Any) -> str:
    """What the user must open before the call can succeed, for a URL-elicitation-required error: the URLs are
    the whole point of that error (the person completes a browser step, then the call is made again), and the
    message alone ("requires browser-based authorization") gives them no way to."""
    if code != URL_ELICITATION_REQUIRED or not isinstance(data, dict) or not isinstance(data.get("elicitations"), list):
        return ""
    steps = []
    for item in data["elicitations"][:4]:
        if isinstance(item, dict) and isinstance(item.get("url"), str):
            note = item.get("message")
            steps.append(item["url"][:2000] + (f" ({note[:300]})" if isinstance(note, str) and note else ""))
    if not steps:
        return ""
    return f"; the user must first open {' and '.join(steps)} in a browser, then the call can be made again"


def _sandbox_data(data: Any, redaction: Redaction) -> Any:
    """A server's JSON-RPC error data as sandboxed code may see it (``MCPError.details["data"]``): JSON only,
    redacted like the message, bounded; None when it is none of these."""
    if data is None:
        return None
    try:
        text = redaction.for_sandbox(json.dumps(data, ensure_ascii=False, allow_nan=False))
        return json.loads(text) if len(text) <= MAX_ERROR_DATA else None
    except (TypeError, ValueError, RecursionError):  # not JSON, or a stand-in landed inside a JSON token
        return None
