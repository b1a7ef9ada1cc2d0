"""What one upstream server's connection looks like from outside: its status and a snapshot of its state.

Apart from the connection that fills it so that ``servers``/``doctor`` output and the tests read a server's state
without importing the connection's machinery.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

Status = Literal["idle", "connecting", "ready", "failed"]


@dataclasses.dataclass(frozen=True)
class ServerState:
    """A snapshot of one server's connection, for ``servers``/``doctor`` output and for tests.

    ``tools`` is the number of tools in the cached listing (None until listed), ``restarts`` how often the server
    was started again after its first start, ``pid`` the server's process id while a stdio server runs, and
    ``retry_in`` the seconds until the hub will try again after a failure (0: on the next call), and ``protocol``
    the protocol version negotiated on the last connection ("" before the first). ``error`` is why it failed as
    sandboxed code may see it (no secret, no host path); ``detail`` is the same for the bridge's user, with paths.
    """

    status: Status
    error: str = ""
    tools: int | None = None
    restarts: int = 0
    log_file: Path | None = None
    pid: int | None = None
    retry_in: float | None = None
    protocol: str = ""
    detail: str = ""
