"""The errors the hub raises when an upstream MCP server cannot be reached or answers badly.

Each one says which server (and tool) it is about, what happened, and what the user can do: the layer above
turns them into messages for the agent, and the command line prints them as they are. A tool call that the server
answers with ``isError`` is not an error here: it is a normal result the agent should see.
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import get_close_matches
from pathlib import Path
from typing import Any

from ..errors import CodemodeError


class UpstreamError(CodemodeError):
    """Base class of the hub's errors, so callers can catch "anything about an upstream server" at once."""

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class UnknownServer(UpstreamError):
    """No configured server has this name; the message offers close matches and every configured name."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        close = get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(repr(match) for match in close)}?" if close else ""
        listing = ", ".join(sorted(known)) if known else "none"
        super().__init__(f"no upstream MCP server named {name!r}{hint} (configured: {listing})", server=name)
        self.known = tuple(known)
        self.suggestions = tuple(close)


class ServerUnavailable(UpstreamError):
    """The server could not be started or connected to, or it died; says why, where its log is, and when it retries.

    ``retry_in`` is the number of seconds until the hub will try again (0: on the next call), so a caller can
    decide whether waiting is worth it.
    """

    def __init__(
        self, server: str, reason: str, *, log_file: Path | None = None, retry_in: float | None = None
    ) -> None:
        parts = [f"upstream MCP server {server!r} is unavailable: {reason.rstrip('.')}."]
        if log_file is not None:
            parts.append(f"Its log: {log_file}.")
        if retry_in is not None:
            parts.append(
                "The next call will try again."
                if retry_in <= 0
                else f"The hub will try again in {retry_in:.1f} s; calls until then fail at once."
            )
        super().__init__(" ".join(parts), server=server)
        self.reason = reason
        self.log_file = log_file
        self.retry_in = retry_in


class UpstreamTimeout(UpstreamError):
    """A request got no answer in time; names the setting that sets that time, so the user can raise it.

    The connection stays usable: the hub has told the server to cancel the request.
    """

    def __init__(self, server: str, tool: str, seconds: float, setting: str) -> None:
        super().__init__(
            f"upstream MCP server {server!r} did not answer {tool!r} within {seconds:g} s; "
            f"if it needs longer, raise {setting}",
            server=server,
        )
        self.tool = tool
        self.seconds = seconds
        self.setting = setting


class UpstreamCallError(UpstreamError):
    """The server refused a request with a JSON-RPC error (an unknown tool, bad arguments...) or answered garbage.

    ``code`` is the server's JSON-RPC error code (None when the answer itself was malformed), ``message`` and
    ``data`` are the server's own words, passed on unchanged.
    """

    def __init__(self, server: str, what: str, code: int | None, message: str, data: Any = None) -> None:
        where = f" (JSON-RPC error {code})" if code is not None else ""
        super().__init__(f"upstream MCP server {server!r} refused {what}{where}: {message}", server=server)
        self.what = what
        self.code = code
        self.message = message
        self.data = data
