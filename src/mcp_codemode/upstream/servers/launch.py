"""How a stdio upstream server is launched, and what its log file says about it.

Stdio servers are launched through a small ``/bin/sh`` wrapper, started by ``setpriv --pdeathsig KILL`` (and the
server itself again under ``setpriv --pdeathsig KILL``), so that the kernel kills the wrapper when the hub's
process dies and the server when the wrapper dies; the wrapper writes the server's pid and exit status into its
log (prefixed by ``MARK``), where the connection reads them. This module holds that launcher's pieces, the
command's resolution, the private log file and ``ServerLog``, which reads it: the process side of a connection,
apart from its protocol side.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import re
import shutil
import signal
from pathlib import Path
from typing import TextIO

from mcp.client.stdio import get_default_environment

from ...errors import CodemodeError
from ...state_files import make_private_dir
from ..model import ServerConfig

# The hub's logger: the bridge's log lines carry the logger name, and these kept theirs when the code moved here.
logger = logging.getLogger("mcp_codemode.upstream.hub")

# Lines of a server's stderr quoted in an error, and the longest line quoted.
STDERR_TAIL_LINES = 12
STDERR_LINE_CHARS = 300
# A log file this big is rotated to <alias>.log.1 when the server next starts, so logs cannot fill the disk.
LOG_ROTATE_BYTES = 8 << 20
# How much of a log is read to find a pid, an exit status and the last lines of stderr.
LOG_TAIL_BYTES = 64 << 10
# Lines the launcher and the hub write into a server's log; the prefix tells them from the server's own stderr.
MARK = "[mcp-codemode]"
# The outer wrapper runs the server in the foreground, so it stays its parent and sees its exit status.
OUTER_SCRIPT = f'"$@"; status=$?; echo "{MARK} server exited with status $status" >&2; exit $status'
# The inner one reports the pid the server will have, then becomes it.
INNER_SCRIPT = f'echo "{MARK} server pid $$" >&2; exec "$@"'
SH = "/bin/sh"
_PID_LINE = re.compile(re.escape(MARK) + r" server pid (\d+)")
_EXIT_LINE = re.compile(re.escape(MARK) + r" server exited with status (\d+)")


class LaunchError(CodemodeError):
    """A stdio server cannot even be launched (command missing, bad cwd): a reason for a person, no traceback."""


def resolve_command(config: ServerConfig) -> str:
    """The executable the server's command names, found as the server's own PATH would find it.

    Done before launching so that a missing command is reported as such, with the PATH that was searched and
    the file to fix, instead of as a spawn error from deep inside the SDK.
    """
    command = config.command
    if not command:
        raise LaunchError(f"it has no command to run; add one in {config.source}")
    if "/" in command:
        path = Path(config.cwd or ".") / command if not os.path.isabs(command) else Path(command)
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        raise LaunchError(f"command {command!r} is not an executable file; fix its path in {config.source}")
    search = (get_default_environment() | dict(config.env)).get("PATH", os.defpath)
    found = shutil.which(command, path=search)
    if found is None:
        raise LaunchError(
            f"command {command!r} not found on PATH ({search}); install it or give its full path in {config.source}"
        )
    return found


def _open_private_log(path: Path) -> TextIO:
    """Open a server's log for appending, readable by the bridge's user only.

    Servers may log what they were given (tokens in URLs, headers, their environment). Modes are set again on
    every open, because a directory or file made by an older version, or by hand, may be world-readable.
    """
    make_private_dir(path.parent)
    with contextlib.suppress(OSError):
        path.parent.chmod(0o700)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o600)
    return open(fd, "a", encoding="utf-8")


def _describe_exit(status: int) -> str:
    if status > 128:
        number = status - 128
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "unknown signal"
        return f"it was killed by signal {number} ({name})"
    return f"it exited with status {status}"


class ServerLog:
    """One server's log file: a line marking each start, the hub's notes, and the launcher's pid and exit lines."""

    def __init__(self, config: ServerConfig, path: Path | None) -> None:
        self.path = path
        self._config = config
        self._offset = 0  # where the current start's part of the log begins

    def open(self, start: int) -> TextIO:
        """Open the server's log for appending, after a line that marks this start (and where it begins)."""
        assert self.path is not None
        try:
            if self.path.stat().st_size > LOG_ROTATE_BYTES:
                self.path.replace(self.path.with_name(self.path.name + ".1"))
        except FileNotFoundError:
            pass
        log = _open_private_log(self.path)
        self._offset = log.tell()
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        log.write(f"{MARK} {now} starting {self._config.name!r} (start {start}): {self._config.target}\n")
        log.flush()
        return log

    def note(self, event: str) -> None:
        """Record a failure in the server's log too, so the log alone tells what happened (even if it never ran)."""
        if self.path is None:
            return
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        try:
            with _open_private_log(self.path) as log:
                log.write(f"{MARK} {now} {self._config.name!r} {event}\n")
        except OSError as exc:
            logger.warning("cannot write to %s: %s", self.path, exc)

    def read(self, *, tail: bool) -> str:
        """The start (where the pid is) or the end (exit status, last words) of this start's part of the log."""
        if self.path is None:
            return ""
        try:
            with self.path.open("rb") as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(self._offset, size - LOG_TAIL_BYTES) if tail else self._offset)
                data = log.read(LOG_TAIL_BYTES)
        except OSError:
            return ""
        text = data.decode("utf-8", "replace")
        # A tail read may start mid-line: drop that partial first line.
        return text.split("\n", 1)[-1] if tail and size - self._offset > LOG_TAIL_BYTES else text

    def pid(self) -> int | None:
        found = _PID_LINE.findall(self.read(tail=False))
        return int(found[-1]) if found else None

    def exit_and_stderr(self) -> tuple[str, str]:
        """How the server's process ended (if it did), and the end of what it wrote to stderr, from its log."""
        text = self.read(tail=True)
        statuses = _EXIT_LINE.findall(text)
        ending = _describe_exit(int(statuses[-1])) if statuses else ""
        lines = [line for line in text.splitlines() if line.strip() and not line.startswith(MARK)]
        tail = [line if len(line) <= STDERR_LINE_CHARS else line[:STDERR_LINE_CHARS] + "…" for line in lines]
        tail = tail[-STDERR_TAIL_LINES:]
        return ending, "\n".join("  | " + line for line in tail)
