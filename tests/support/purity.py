"""The guard that keeps ``pytest -m "not backend"`` pure logic: no process started, no inet socket used.

Apart from conftest.py because it is plain code (patching and undoing three entry points) that conftest only
switches on. It is switched on when a session runs no test marked ``backend``, so a new test that starts a sandbox,
a server or a client without the marker fails there at once, naming the marker, instead of making the fast run slow
or dependent on this machine. Runs that include backend tests are left alone: their background tasks may start
processes while an unmarked test runs.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable
from typing import Any

FIX = 'mark the test (or its module) with pytest.mark.backend, so that `pytest -m "not backend"` leaves it out'


class NotPureLogic(RuntimeError):
    """Raised where a test not marked ``backend`` reaches for a process or the network."""


def forbid_processes_and_network() -> Callable[[], None]:
    """Patch subprocess.Popen and inet connect/bind to raise ``NotPureLogic``; return what undoes it."""
    popen_init = subprocess.Popen.__init__
    connect, bind = socket.socket.connect, socket.socket.bind

    def refuse_popen(self: subprocess.Popen[Any], args: Any, *rest: Any, **options: Any) -> None:
        raise NotPureLogic(f"a test not marked backend started a process ({args!r}): {FIX}")

    def inet(name: str, original: Callable[[socket.socket, Any], None]) -> Callable[[socket.socket, Any], None]:
        def guarded(self: socket.socket, address: Any) -> None:
            if self.family in (socket.AF_INET, socket.AF_INET6):
                raise NotPureLogic(f"a test not marked backend used the network ({name} {address!r}): {FIX}")
            original(self, address)

        return guarded

    subprocess.Popen.__init__ = refuse_popen  # type: ignore[method-assign]
    socket.socket.connect = inet("connect", connect)  # type: ignore[assignment,method-assign]
    socket.socket.bind = inet("bind", bind)  # type: ignore[assignment,method-assign]

    def undo() -> None:
        subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
        socket.socket.connect = connect  # type: ignore[method-assign]
        socket.socket.bind = bind  # type: ignore[method-assign]

    return undo
