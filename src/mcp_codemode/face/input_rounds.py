"""Asking the client in the 2026-07-28 era: ``input_required`` rounds of a ``run_python`` call that keeps running.

A 2026-07-28 call has no channel for the server to ask the client anything while it runs. The era's way is the
multi-round-trip result: the server answers ``input_required`` with the questions and an opaque
``requestState``; the client asks its user (or its model), then sends the same call again with the answers and
the state. Most servers restart the work on each round. A cell cannot be restarted (it has already called tools
and changed its session), so here the run goes on in the background, parked where it asked: the round that
finds it waiting answers ``input_required``; the next round hands the answers to the waiting questions and waits
again, for the next questions or for the result.

Questions are the ones the handshake era sends as requests: an approval (``ask_tools``), an upstream server's
elicitation, an upstream server's sampling request. The state is this module's key of the parked run and of the
round that issued it, sealed by the SDK's ``RequestStateBoundary`` (AES-GCM, bound to the caller's principal and
the method, with an expiry) before it leaves; a round is also checked against the run's owner and its arguments,
so a state can only resume its own call, and against the run's latest round, so it answers that round once: the
seal alone would let a state answer every later round of its run until it expired (issue 30), a replay that the
docs promise is refused. A run nobody comes back for ends at its timeout like any other, and is forgotten after
``KEEP``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

import mcp_types as types
import pydantic
from mcp.shared.exceptions import MCPError

from ..errors import CannotAsk
from ..runs.relay_run import Caller, News
from ..session_keys import SessionKey

KEEP = 600.0  # seconds a parked run's entry outlives its last round (the sealed state expires then too)
MAX_PARKED = 256  # parked runs at once; each holds its session, so the session cap bounds them first
Answer = types.ElicitResult | types.CreateMessageResult | types.ListRootsResult
ListRoots = Callable[[], Awaitable[types.ListRootsResult]]  # asks the client its roots, in a round
GONE = (
    "this run_python call is no longer waiting for answers (it ended and its result was taken, or it was "
    "forgotten {keep:g} s after its last round); call run_python again"
)
REPLAYED = (
    "replay refused: this requestState is of an earlier round of its run_python call, whose answers were already "
    "given, and the run is no longer waiting for that round; a requestState answers only the round that issued it "
    "(the run goes on): send the answers with the requestState of the latest input_required result"
)


ABANDONED = (
    "note: a run_python call in this session was waiting for an answer to its question ({what}) that never came "
    "(the user stopped, or the client gave up); it was stopped so that this call could run, and the session's state "
    "was kept"
)


@dataclasses.dataclass
class _Question:
    request: types.InputRequest
    kind: type[types.ElicitResult] | type[types.CreateMessageResult] | type[types.ListRootsResult]
    answer: asyncio.Future[Answer]


@dataclasses.dataclass
class _Parked:
    owner: str
    session: SessionKey  # the session the run holds
    arguments: str  # a digest of the call's arguments: a round must resend the same ones
    questions: dict[str, _Question] = dataclasses.field(default_factory=dict)
    asked: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    task: asyncio.Task[types.CallToolResult] | None = None
    report: News | None = None  # the progress line of the round now waiting, if it asked for progress
    round: str = ""  # the token of the one round whose state may come back now; "" while none may
    touched: float = dataclasses.field(default_factory=time.monotonic)


def arguments_digest(arguments: Mapping[str, Any] | None) -> str:
    text = json.dumps(arguments or {}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class InputRounds:
    """The parked runs of one MCP server (face)."""

    def __init__(self) -> None:
        self._parked: dict[str, _Parked] = {}
        self._numbers = 0

    async def start(
        self,
        owner: str,
        session: SessionKey,
        arguments: Mapping[str, Any] | None,
        capabilities: types.ClientCapabilities,
        run: Callable[[Caller, News, ListRoots | None], Coroutine[Any, Any, types.CallToolResult]],
        report: News | None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Start ``run`` (given the caller that asks through rounds, a news line to the current round's progress,
        and a way to ask the client's roots when it declared them) in the background; answer its result, or
        ``input_required`` as soon as it asks something."""
        self._forget_stale()
        if len(self._parked) >= MAX_PARKED:
            raise MCPError(types.INVALID_REQUEST, f"{MAX_PARKED} run_python calls wait for answers; answer those first")
        key = secrets.token_urlsafe(18)
        parked = _Parked(owner, session, arguments_digest(arguments), report=report)
        caller = self._caller(parked, capabilities)
        list_roots = self._roots_asker(parked) if capabilities.roots is not None else None
        parked.task = asyncio.get_running_loop().create_task(run(caller, self._news(parked), list_roots))
        self._parked[key] = parked
        return await self._round(key, parked, report)

    def abandon_waiting(self, session: SessionKey) -> str | None:
        """Stop the run of ``session`` that waits for answers nobody is bringing, and say what it asked.

        A new call (not a round) for a session whose parked run has asked and whose client has not come back: the
        user stopped the agent while a dialog was open, or the client's callback failed. The parked run holds the
        session, so the new call would wait, silently, until that run's timeout; the handshake era frees it at
        once, as the cancelled request ends the run. So does this: the run is cancelled (its cell interrupted,
        its state kept) and its entry forgotten, and the new call is told. A run whose round is in progress (a
        client is waiting for it) is left alone: the new call queues behind it like any other.
        """
        for key, parked in list(self._parked.items()):
            if parked.session != session or not parked.round:  # no state out: not waiting on a client
                continue
            if parked.task is None or parked.task.done():
                continue
            what = ", ".join(sorted({q.request.method for q in parked.questions.values()})) or "a question"
            self._parked.pop(key, None)
            parked.task.cancel()
            return what
        return None

    async def resume(
        self,
        state: str,
        owner: str,
        arguments: Mapping[str, Any] | None,
        responses: Mapping[str, Any] | None,
        report: News | None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """A round that brings answers (``state``: the ``requestState`` of the latest round, unsealed): hand them to
        the questions that wait, then wait for the next or the end."""
        key, _, round_token = state.partition(".")  # as _round issued it: the run's key, then its round's
        parked = self._parked.get(key)
        if parked is None or parked.owner != owner:
            raise MCPError(types.INVALID_PARAMS, GONE.format(keep=KEEP))
        if not (parked.round and secrets.compare_digest(round_token.encode(), parked.round.encode())):
            raise MCPError(types.INVALID_PARAMS, REPLAYED)
        if parked.arguments != arguments_digest(arguments):
            raise MCPError(
                types.INVALID_PARAMS,
                "the arguments differ from those of the run_python call that asked: send the same arguments with "
                "the answers (its code is already running)",
            )
        parked.round = ""  # taken: this state never answers again, not even while this round waits
        for name, response in (responses or {}).items():
            question = parked.questions.get(name)
            if question is not None and not question.answer.done():
                _answer(question, response)
        return await self._round(key, parked, report)

    async def _round(
        self, key: str, parked: _Parked, report: News | None
    ) -> types.CallToolResult | types.InputRequiredResult:
        assert parked.task is not None
        parked.report, parked.touched = report, time.monotonic()
        try:
            while True:
                if parked.task.done():
                    self._parked.pop(key, None)
                    return parked.task.result()
                waiting: types.InputRequests = {
                    name: q.request for name, q in parked.questions.items() if not q.answer.done()
                }
                if waiting:
                    parked.round = secrets.token_urlsafe(12)
                    return types.InputRequiredResult(input_requests=waiting, request_state=f"{key}.{parked.round}")
                parked.asked.clear()
                asked = asyncio.ensure_future(parked.asked.wait())
                try:
                    await asyncio.wait({parked.task, asked}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    asked.cancel()
        except asyncio.CancelledError:  # the client cancelled this round: the run stops, as a cancelled call does
            self._parked.pop(key, None)
            parked.task.cancel()
            raise
        finally:
            parked.report, parked.touched = None, time.monotonic()

    async def _ask(self, parked: _Parked, request: types.InputRequest, kind: Any) -> Any:
        """Put one question to the client in the next round, and wait for its answer."""
        self._numbers += 1
        name = f"{request.method.split('/')[0]}-{self._numbers}"
        question = _Question(request, kind, asyncio.get_running_loop().create_future())
        parked.questions[name] = question
        parked.asked.set()
        try:
            return await question.answer
        finally:
            parked.questions.pop(name, None)

    def _roots_asker(self, parked: _Parked) -> ListRoots:
        async def list_roots() -> types.ListRootsResult:
            answer: types.ListRootsResult = await self._ask(parked, types.ListRootsRequest(), types.ListRootsResult)
            return answer

        return list_roots

    def _caller(self, parked: _Parked, capabilities: types.ClientCapabilities) -> Caller:
        async def ask(request: types.ElicitRequest | types.CreateMessageRequest, kind: Any) -> Any:
            return await self._ask(parked, request, kind)

        async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
            elicitation = capabilities.elicitation
            if isinstance(params, types.ElicitRequestURLParams) and (elicitation is None or elicitation.url is None):
                raise CannotAsk("the client did not declare URL-mode elicitation (capabilities.elicitation.url)")
            answer: types.ElicitResult = await ask(types.ElicitRequest(params=params), types.ElicitResult)
            return answer

        async def sample(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
            answer: types.CreateMessageResult = await ask(
                types.CreateMessageRequest(params=params), types.CreateMessageResult
            )
            return answer

        return Caller(
            elicit=elicit if capabilities.elicitation is not None else None,
            sample=sample if capabilities.sampling is not None else None,
            asker=f"stateless:{parked.owner}",  # stateless calls of one principal cannot be told apart
        )

    @staticmethod
    def _news(parked: _Parked) -> News:
        """Lines for the round now waiting (none while no round waits: nobody would receive them)."""

        async def news(text: str) -> None:
            if parked.report is not None:
                with contextlib.suppress(Exception):  # a round whose client went away is noticed by the round
                    await parked.report(text)

        return news

    def _forget_stale(self) -> None:
        now = time.monotonic()
        for key, parked in list(self._parked.items()):
            if parked.report is None and now - parked.touched > KEEP and (parked.task is None or parked.task.done()):
                self._parked.pop(key, None)


def _answer(question: _Question, response: Any) -> None:
    """Give ``response`` to ``question`` as the result type it asked for; one that is not becomes ``CannotAsk``."""
    try:
        raw = response.model_dump(by_alias=True, mode="json") if isinstance(response, pydantic.BaseModel) else response
        question.answer.set_result(question.kind.model_validate(raw))
    except pydantic.ValidationError:
        what = {types.ElicitResult: "an elicitation answer", types.ListRootsResult: "a list of roots"}.get(
            question.kind, "a sampling result"
        )
        question.answer.set_exception(CannotAsk(f"the client's answer was not {what}"))
