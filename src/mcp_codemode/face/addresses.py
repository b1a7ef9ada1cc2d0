"""Whether a listening address stays on this machine, apart from the HTTP face that uses it.

Why a module of its own: both the HTTP face (refusing to listen beyond loopback without a token) and doctor's pure
weak-setup rules ask the same question; keeping the answer here lets the rules import it without dragging uvicorn,
starlette and the whole server stack into doctor.
"""

from __future__ import annotations

import ipaddress

_LOOPBACK_NAMES = ("localhost", "localhost.localdomain")


def is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
