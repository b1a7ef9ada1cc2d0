"""The per-cell context of sandboxed code's requests: whose run a request belongs to, and its call budget.

A bridge has one relay for every session; what differs between two ``run_python`` calls is who made them
(the owner, for the rate cap, the saved tools and the audit log), the session, and how many tool calls the
run has made so far. ``Relay.for_run`` binds one ``Run`` to a function the sandbox's worker calls for each
request of that run, so the worker never learns who the caller is and the budget resets with every run.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable

import mcp_types as types

from ..upstream.servers.call_links import Elicit, Sample, UpstreamLog
from ..upstream.servers.hub import Progress

# One line of news for the client of a running call (an upstream server's progress on a tool the code called).
News = Callable[[str], Awaitable[None]]


@dataclasses.dataclass
class Caller:
    """The client of one ``run_python`` call, as that call's code reaches it through the bridge.

    ``news`` takes lines for the client (upstream progress and log messages; None: it asked for no progress);
    ``elicit`` asks its user (an upstream server's elicitation passed on, or the bridge's own approval question
    for ``ask_tools``) and ``sample`` passes an upstream server's sampling request on: None when the client
    declared no such capability or the call was forwarded from another replica, and either may raise
    ``CannotAsk``; ``approved`` holds the tools a user allowed for the rest of the session (``ask_tools``),
    kept by the session it runs in, each for the client it was asked through: ``asker`` names that client (a
    connection, or the principal whose stateless calls share the session; "" when it has none), so one program's
    "remember" never lets another program in a shared session run the tool unasked.
    """

    news: News | None = None
    elicit: Elicit | None = None
    sample: Sample | None = None
    approved: set[str] = dataclasses.field(default_factory=set)
    asker: str = ""

    def telling(self, news: News | None) -> Caller:
        """The same client, its news sent through ``news``: made for every call with the console on, so by hand
        (``dataclasses.replace`` costs several times as much); a field added above belongs here too."""
        return Caller(news, self.elicit, self.sample, self.approved, self.asker)


@dataclasses.dataclass
class Run:
    """One ``run_python`` call: whose it is, and how many tool calls it has made (its budget)."""

    owner: str
    session: str
    calls: int = 0
    caller: Caller = dataclasses.field(default_factory=Caller)  # the call's client: news, questions, approvals
    log_lines: int = 0  # upstream log messages passed on as news so far (at most MAX_LOG_LINES)
    client_requests: int = 0  # upstream elicitation and sampling requests passed on (at most MAX_CLIENT_REQUESTS)
    call: str = ""  # the run_python call's id (telemetry/tracing.py), on each audit line of its uses
    trace: object = None  # the cell's trace context, current again while a request of its code is served


# An upstream server's log messages during a run's calls, passed on as news: a bound per run (a server that
# logs in a loop would otherwise flood the client with notifications) and per message.
MAX_LOG_LINES = 50
# An upstream server's elicitation and sampling requests passed on to the client, per run: a person answers
# each (and a sampling request costs a model call), so a server that asks in a loop is cut off.
MAX_CLIENT_REQUESTS = 20
MAX_LOG_TEXT = 500


def upstream_progress(news: News, server: str, tool: str) -> Progress:
    """An upstream call's progress callback that tells the run's client what the server reported, as one line
    naming the server and the tool (the client sees it as progress of its ``run_python`` call)."""

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        amount = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        await news(f"{server}/{tool}: {message} ({amount})" if message else f"{server}/{tool}: {amount}")

    return progress


def upstream_log(run: Run, news: News, server: str, tool: str) -> UpstreamLog:
    """An upstream call's log listener that tells the run's client what the server logged while the call was in
    flight, one line each (``everything/echo log (warning): ...``), up to ``MAX_LOG_LINES`` per run, then once
    that the rest were dropped. The text is the server's, so it is flattened to one printable line and cut."""

    async def log(params: types.LoggingMessageNotificationParams) -> None:
        run.log_lines += 1
        if run.log_lines > MAX_LOG_LINES + 1:
            return
        if run.log_lines == MAX_LOG_LINES + 1:
            await news(f"{server}: further log messages of this run were dropped (at most {MAX_LOG_LINES})")
            return
        data = params.data if isinstance(params.data, str) else json.dumps(params.data, default=str)
        text = "".join(ch if ch.isprintable() else " " for ch in data[: MAX_LOG_TEXT + 1])
        text = text if len(text) <= MAX_LOG_TEXT else text[:MAX_LOG_TEXT] + "…"
        source = f"{params.level}, {params.logger:.80}" if params.logger else params.level
        await news(f"{server}/{tool} log ({source}): {text}")

    return log
