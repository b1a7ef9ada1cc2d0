"""The per-cell context of sandboxed code's requests: whose run a request belongs to, and its call budget.

A bridge has one relay for every session; what differs between two ``run_python`` calls is who made them
(the owner, for the rate cap, the saved tools and the audit log), the session, and how many tool calls the
run has made so far. ``Relay.for_run`` binds one ``Run`` to a function the sandbox's worker calls for each
request of that run, so the worker never learns who the caller is and the budget resets with every run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from .relay_params import Reply

RelayFunction = Callable[[dict[str, Any]], Awaitable[Reply]]


@dataclasses.dataclass
class Run:
    """One ``run_python`` call: whose it is, and how many tool calls it has made (its budget)."""

    owner: str
    session: str
    calls: int = 0
