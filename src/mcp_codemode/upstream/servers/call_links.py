"""What an upstream server sends back while it serves a tool call: log messages, and requests of the client
(elicitation, sampling). They belong to the ``run_python`` call whose code made the tool call, so each call in
flight on a connection holds a ``CallLink`` there while it runs, and this module routes the server's messages
and requests to the right one.

Which call a request is about: a 2026-07-28 server asks inside the call itself (``input_required``), so the
SDK runs the callback in the calling task and a context variable names the call exactly. A handshake-era
server's request names no call (on stdio nothing ties it to one), so it goes to the only call in flight on
that connection; with none, or several, it is refused, saying why, rather than guessed. Log messages go to
every call in flight on the connection, since each may be the one they are about.

A request that cannot be passed on is answered with an MCP error whose message says why (the client cannot,
the policy refuses, no call is in flight): the server sees a clear refusal, and the tool call fails with it.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import mcp_types as types

from ...errors import CannotAsk

logger = logging.getLogger("mcp_codemode.upstream.call_links")  # the name log lines have always shown

# Hears an upstream server's log messages while a call is in flight.
UpstreamLog = Callable[[types.LoggingMessageNotificationParams], Awaitable[None]]
# Passes a server's elicitation or sampling request on to the client of the run_python call, and its answer back.
Elicit = Callable[[types.ElicitRequestParams], Awaitable[types.ElicitResult]]
Sample = Callable[[types.CreateMessageRequestParams], Awaitable[types.CreateMessageResult]]


@dataclasses.dataclass(frozen=True)
class CallLink:
    """One tool call in flight, as its server's messages and requests reach the client of the run_python call
    that made it. A missing part means that client takes none of those (a request is then refused, saying so)."""

    log: UpstreamLog | None = None
    elicit: Elicit | None = None
    sample: Sample | None = None


_CURRENT: contextvars.ContextVar[CallLink | None] = contextvars.ContextVar("mcp_codemode_call_link", default=None)


class CallLinks:
    """The links of the calls in flight on one server's connection, and the callbacks its client is given."""

    def __init__(self, server: str) -> None:
        self.server = server
        self._links: list[CallLink] = []

    @contextlib.contextmanager
    def holding(self, link: CallLink | None) -> Iterator[None]:
        """While the block runs (one tool call), ``link`` takes what the server sends about it."""
        if link is None:
            yield
            return
        self._links.append(link)
        token = _CURRENT.set(link)
        try:
            yield
        finally:
            _CURRENT.reset(token)
            self._links.remove(link)

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        for link in tuple(self._links):
            if link.log is None:
                continue
            try:
                await link.log(params)
            except Exception:  # a client that went away must not stop the server's connection
                logger.debug("a log listener of %r failed", self.server, exc_info=True)

    async def on_elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        result: types.ElicitResult | types.ErrorData = await self._pass_on("elicitation", params)
        return result

    async def on_sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        result: types.CreateMessageResult | types.ErrorData = await self._pass_on("sampling", params)
        return result

    async def _pass_on(self, what: str, params: Any) -> Any:
        """``params`` (a request of ``what``) to the client of the call it is about, or the refusal saying why."""
        link = self._asked_by(what)
        if isinstance(link, types.ErrorData):
            return link
        forward = link.elicit if what == "elicitation" else link.sample
        if forward is None:
            return self._refusal(what, f"the client of the run_python call that made this tool call does not take "
                                 f"{what} requests")  # fmt: skip
        try:
            return await forward(params)
        except CannotAsk as exc:
            return self._refusal(what, str(exc))

    def _asked_by(self, what: str) -> CallLink | types.ErrorData:
        """The call a request is about: the one whose task it arrives in, or the only one in flight."""
        current = _CURRENT.get()
        if current is not None:
            return current
        if len(self._links) == 1:
            return self._links[0]
        if not self._links:
            return self._refusal(what, "no tool call from sandboxed code is in flight on this server, so there is "
                                 "no client to ask")  # fmt: skip
        return self._refusal(what, f"{len(self._links)} tool calls are in flight on this server and the request "
                             "does not say which one it is about")  # fmt: skip

    def _refusal(self, what: str, reason: str) -> types.ErrorData:
        logger.info("refused %s request of %r: %s", what, self.server, reason)
        return types.ErrorData(code=types.INVALID_REQUEST, message=f"mcp-codemode did not pass on this {what} "
                               f"request: {reason}")  # fmt: skip
