"""Running provisioning's long host commands: their output streams to the user as it comes, and its tail is kept.

Building an image or installing packages takes seconds to minutes, so the user sees the tool's own lines (uv's,
pip's, debootstrap's, podman's) indented under ours, instead of a silent wait. The last lines are kept so a
failure can be explained in one sentence (``hint``) without asking the user to scroll.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from ..errors import CodemodeError

TAIL_LINES = 60


class ProvisionError(CodemodeError):
    """A build or install step failed; the message says which, why (as far as we can tell) and what is unchanged."""


@dataclasses.dataclass(frozen=True)
class Ran:
    returncode: int
    tail: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def say(out: TextIO, text: str) -> None:
    """One line of our own progress, prefixed so it stands apart from the tools' output."""
    out.write(f"mcp-codemode: {text}\n")
    out.flush()


def stream(argv: Sequence[str], out: TextIO, *, log: Path | None = None, cwd: Path | None = None) -> Ran:
    """Run ``argv`` with its standard output and error shown on ``out`` line by line (and appended to ``log``).

    Files it creates get umask 022: what provisioning builds must be readable by the sandbox's uid.
    """
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            cwd=cwd,
            umask=0o022,
        )
    except OSError as exc:
        raise ProvisionError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    assert process.stdout is not None
    with open(log, "a", encoding="utf-8") if log is not None else contextlib.nullcontext() as sink:
        for line in process.stdout:
            out.write("    " + line if line.strip() else line)
            out.flush()
            if sink is not None:
                sink.write(line)
            tail.append(line.rstrip())
    return Ran(process.wait(), tuple(tail))


_HINTS = (
    (
        (
            # uv names where it looked: "the package registry", "the provided package locations", "the cache".
            "was not found in the",
            "No matching distribution found",
            "Could not find a version",
        ),
        "a package of that name (or that version) is not on the package index: check its spelling on pypi.org",
    ),
    (
        (
            "Failed to fetch",
            "Temporary failure in name resolution",
            "Network is unreachable",
            "Could not resolve host",
            "Connection refused",
            "ConnectError",
            "NewConnectionError",
            "Failed to establish a new connection",
            "Could not connect",
        ),
        "the host could not reach the package index: check the network (or the proxy / index settings of uv or pip)",
    ),
    (
        ("No solution found", "ResolutionImpossible", "conflicting dependencies"),
        "the packages asked for cannot be installed together: their version requirements conflict",
    ),
    (
        ("only-binary", "no matching wheel", "has no wheels with a matching platform", "Failed to build"),
        "a package has no wheel for the sandbox's Python and platform, and cannot be built for it here",
    ),
)


def hint(tail: Sequence[str]) -> str:
    """The most likely cause of a failed install, from the installer's last lines ("" when nothing matches)."""
    text = "\n".join(tail)
    for needles, cause in _HINTS:
        if any(needle.lower() in text.lower() for needle in needles):
            return cause
    return ""
