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

from ..upstream.hub import Progress
from .relay_params import Reply

RelayFunction = Callable[[dict[str, Any]], Awaitable[Reply]]
# One line of news for the client of a running call (an upstream server's progress on a tool the code called).
News = Callable[[str], Awaitable[None]]


@dataclasses.dataclass
class Run:
    """One ``run_python`` call: whose it is, and how many tool calls it has made (its budget)."""

    owner: str
    session: str
    calls: int = 0
    news: News | None = None  # where upstream progress goes (None: the client asked for no progress)


def upstream_progress(news: News, server: str, tool: str) -> Progress:
    """An upstream call's progress callback that tells the run's client what the server reported, as one line
    naming the server and the tool (the client sees it as progress of its ``run_python`` call)."""

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        amount = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        await news(f"{server}/{tool}: {message} ({amount})" if message else f"{server}/{tool}: {amount}")

    return progress
