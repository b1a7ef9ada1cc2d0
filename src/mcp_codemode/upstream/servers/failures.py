"""How a server's outage is put into words: why it failed to start, why it stopped, and the one-line headline.

Apart from the connection (``connection.py``) because the wording is read from outside the state machine: from
the exception that ended a connection and from the end of the server's log (``launch.ServerLog``). The
directory uses ``headline`` too, for one-line reasons without the quoted stderr.
"""

from __future__ import annotations

from ..model import ServerConfig
from .launch import ServerLog
from .oauth import SignInRequired, TokenRefused


def headline(reason: str) -> str:
    """A reason without the stderr lines quoted after it (the log they would go into already has them)."""
    return (reason.split("; the end of its stderr", 1)[0].splitlines() or [""])[0]


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups, which is what a person needs to read."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _remote_cause(exc: BaseException) -> str:
    """Why an HTTP connection failed, in the words a person would search for (httpx's own are vaguer)."""
    leaf = _leaf(exc)
    cause: BaseException | None = leaf
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused (is the server running, and on that port?)"
        if isinstance(cause, (SignInRequired, TokenRefused)):
            return str(cause)
        cause = cause.__cause__ or cause.__context__
    return f"{type(leaf).__name__}: {leaf}"


def describe_failure(config: ServerConfig, server_log: ServerLog, exc: BaseException, *, started: bool) -> str:
    """Why a connection failed to start or broke, from the exception and the end of the server's log."""
    if config.transport != "stdio":
        verb = "could not connect to" if started else "lost its connection to"
        return f"it {verb} {config.url}: {_remote_cause(exc)}"
    ending, tail = server_log.exit_and_stderr()
    if not ending and isinstance(exc, OSError):
        return f"it could not be started: {exc}"
    when = "during startup" if started else "while connected"
    leaf = _leaf(exc)
    reason = f"{ending} {when}" if ending else f"the MCP handshake failed ({type(leaf).__name__}: {leaf})"
    return reason + (f"; the end of its stderr:\n{tail}" if tail else "; it wrote nothing to stderr")


def crash_reason(config: ServerConfig, server_log: ServerLog) -> str:
    """Why a connection that was up has ended, from the end of the server's log."""
    if config.transport != "stdio":
        return f"the connection to {config.url} closed"
    ending, tail = server_log.exit_and_stderr()
    reason = f"{ending} while connected" if ending else "it closed its output while connected"
    return reason + (f"; the end of its stderr:\n{tail}" if tail else "")
