"""The rounds of a parked run (face/input_rounds.py), as pure logic: runs here are coroutines standing in for a
cell (the real thing, through the SDK client and a sandbox, is in tests/upstream/test_client_requests_e2e.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from mcp_codemode.errors import CannotAsk
from mcp_codemode.face.input_rounds import InputRounds
from mcp_codemode.runs.relay_run import Caller, News
from mcp_codemode.session_keys import SessionKey

ELICITING = types.ClientCapabilities(elicitation=types.ElicitationCapability())
FORM = types.ElicitRequestFormParams(message="allow?", requested_schema={"type": "object", "properties": {}})
ARGUMENTS = {"code": "x"}
SESSION = SessionKey.principal("me", "default")


def text(result: Any) -> str:
    assert isinstance(result, types.CallToolResult), result
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def done(value: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)])


async def asks_twice(caller: Caller, news: News, roots: Any = None) -> types.CallToolResult:
    assert caller.elicit is not None
    answers: list[str] = []
    for _ in range(2):
        try:
            answers.append((await caller.elicit(FORM)).action)
        except CannotAsk as exc:
            answers.append(f"cannot: {exc}")
    return done(",".join(answers))


def test_a_run_that_asks_parks_and_each_round_hands_over_answers_until_the_result() -> None:
    async def main() -> list[Any]:
        rounds = InputRounds()
        first = await rounds.start("me", SESSION, ARGUMENTS, ELICITING, asks_twice, None)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        (name,) = first.input_requests or {}
        second = await rounds.resume(
            first.request_state, "me", ARGUMENTS, {name: types.ElicitResult(action="accept")}, None
        )
        assert isinstance(second, types.InputRequiredResult) and second.request_state
        (other,) = second.input_requests or {}
        assert other != name and second.request_state != first.request_state  # each round its own state
        unanswered = await rounds.resume(second.request_state, "me", ARGUMENTS, {}, None)  # asked again
        assert isinstance(unanswered, types.InputRequiredResult) and list(unanswered.input_requests or {}) == [other]
        assert unanswered.request_state
        last = await rounds.resume(unanswered.request_state, "me", ARGUMENTS, {other: {"action": "decline"}}, None)
        return [text(last)]

    assert asyncio.run(main()) == ["accept,decline"]


def test_a_state_resumes_only_its_own_run_with_the_same_arguments() -> None:
    async def main() -> None:
        rounds = InputRounds()
        first = await rounds.start("me", SESSION, ARGUMENTS, ELICITING, asks_twice, None)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        for key, owner, arguments, message in [
            ("unknown", "me", ARGUMENTS, "no longer waiting"),
            (first.request_state, "someone-else", ARGUMENTS, "no longer waiting"),
            (first.request_state, "me", {"code": "other"}, "arguments differ"),
        ]:
            with pytest.raises(MCPError, match=message):
                await rounds.resume(key, owner, arguments, {}, None)

    asyncio.run(main())


def test_a_rounds_state_answers_that_round_once_and_a_replay_in_a_later_round_leaves_the_run_alone() -> None:
    """Issue 30: the state of round 1, sent again once the run asks in round 2, answered round 2's question (the
    seal binds the principal, not the round). Now it is refused, before it touches anything, and the run goes on
    with the latest state; a state is also spent as soon as its round starts, so a copy sent beside it is refused."""

    async def main() -> str:
        rounds = InputRounds()
        first = await rounds.start("me", SESSION, ARGUMENTS, ELICITING, asks_twice, None)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        (name,) = first.input_requests or {}
        second = await rounds.resume(first.request_state, "me", ARGUMENTS, {name: {"action": "accept"}}, None)
        assert isinstance(second, types.InputRequiredResult) and second.request_state
        (other,) = second.input_requests or {}
        for stale in ({other: {"action": "accept"}}, {name: {"action": "accept"}}, {}):
            with pytest.raises(MCPError, match="replay refused: this requestState is of an earlier round"):
                await rounds.resume(first.request_state, "me", ARGUMENTS, stale, None)
        key = first.request_state.partition(".")[0]
        for forged in (key, f"{key}.", f"{key}.{'A' * 16}", f"{key}.é"):
            with pytest.raises(MCPError, match="replay refused"):
                await rounds.resume(forged, "me", ARGUMENTS, {other: {"action": "accept"}}, None)
        waiting = asyncio.ensure_future(rounds.resume(second.request_state, "me", ARGUMENTS, {}, None))
        await asyncio.sleep(0)  # that round has started, and waits (nothing was answered)
        with pytest.raises(MCPError, match="replay refused"):
            await rounds.resume(second.request_state, "me", ARGUMENTS, {other: {"action": "accept"}}, None)
        third = await waiting
        assert isinstance(third, types.InputRequiredResult) and third.request_state
        last = await rounds.resume(third.request_state, "me", ARGUMENTS, {other: {"action": "decline"}}, None)
        return text(last)

    assert asyncio.run(main()) == "accept,decline"  # the replays answered nothing


def test_an_answer_of_the_wrong_shape_reaches_the_code_as_cannot_ask() -> None:
    async def main() -> str:
        rounds = InputRounds()
        first = await rounds.start("me", SESSION, ARGUMENTS, ELICITING, asks_twice, None)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        (name,) = first.input_requests or {}
        wrong = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}  # a sampling result
        second = await rounds.resume(first.request_state, "me", ARGUMENTS, {name: wrong}, None)
        assert isinstance(second, types.InputRequiredResult) and second.request_state
        (other,) = second.input_requests or {}
        last = await rounds.resume(second.request_state, "me", ARGUMENTS, {other: {"action": "cancel"}}, None)
        return text(last)

    assert asyncio.run(main()) == "cannot: the client's answer was not an elicitation answer,cancel"


def test_a_run_that_never_asks_answers_at_once_and_a_cancelled_round_stops_the_run() -> None:
    stopped = asyncio.Event()

    async def quiet(caller: Caller, news: News, roots: Any = None) -> types.CallToolResult:
        return done("quiet")

    async def asks_then_waits(caller: Caller, news: News, roots: Any = None) -> types.CallToolResult:
        try:
            assert caller.elicit is not None
            await caller.elicit(FORM)
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            stopped.set()
            raise
        return done("never")

    async def main() -> str:
        rounds = InputRounds()
        result = text(await rounds.start("me", SESSION, ARGUMENTS, ELICITING, quiet, None))
        first = await rounds.start("me", SESSION, ARGUMENTS, ELICITING, asks_then_waits, None)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        (name,) = first.input_requests or {}
        waiting = asyncio.ensure_future(
            rounds.resume(first.request_state, "me", ARGUMENTS, {name: {"action": "accept"}}, None)
        )
        await asyncio.sleep(0.05)
        waiting.cancel()
        await asyncio.wait_for(stopped.wait(), 5)
        with pytest.raises(MCPError, match="no longer waiting"):
            await rounds.resume(first.request_state, "me", ARGUMENTS, {}, None)
        return result

    assert asyncio.run(main()) == "quiet"


def test_what_the_client_declared_is_what_the_run_can_ask() -> None:
    seen: dict[str, Any] = {}

    async def probe(caller: Caller, news: News, roots: Any = None) -> types.CallToolResult:
        seen["elicit"], seen["sample"] = caller.elicit, caller.sample
        if caller.elicit is not None:
            url = types.ElicitRequestURLParams(message="sign in", url="https://example.com", elicitation_id="e1")
            with pytest.raises(CannotAsk, match="URL-mode"):
                await caller.elicit(url)
        return done("probed")

    async def main() -> None:
        rounds = InputRounds()
        sampling = types.ClientCapabilities(sampling=types.SamplingCapability())
        assert text(await rounds.start("me", SESSION, ARGUMENTS, sampling, probe, None)) == "probed"
        assert seen["elicit"] is None and seen["sample"] is not None
        assert text(await rounds.start("me", SESSION, ARGUMENTS, ELICITING, probe, None)) == "probed"
        assert seen["elicit"] is not None and seen["sample"] is None

    asyncio.run(main())


def test_a_new_call_ends_a_run_whose_question_was_never_answered_but_not_one_whose_round_runs() -> None:
    """The user stopped the agent while a dialog was open: the parked run holds the session, and a new call would
    wait for it silently until its timeout. The new call ends it (cancelled where it waits) and learns what it
    asked; a run whose round is in progress, or another session's, is left alone."""

    async def main() -> tuple[Any, ...]:
        rounds = InputRounds()
        first = await rounds.start("me", SESSION, ARGUMENTS, ELICITING, asks_twice, None)
        assert isinstance(first, types.InputRequiredResult)
        other = await rounds.start("me", SessionKey.principal("me", "other"), ARGUMENTS, ELICITING, asks_twice, None)
        assert isinstance(other, types.InputRequiredResult)
        ended = rounds.abandon_waiting(SESSION)
        again = rounds.abandon_waiting(SESSION)
        with pytest.raises(MCPError, match="no longer waiting for answers"):
            await rounds.resume(first.request_state or "", "me", ARGUMENTS, {}, None)

        async def slow(caller: Caller, news: News, roots: Any = None) -> types.CallToolResult:
            await asyncio.sleep(0.05)
            return done("finished")

        running = asyncio.ensure_future(
            rounds.start("me", SessionKey.principal("me", "busy"), ARGUMENTS, ELICITING, slow, None)
        )
        await asyncio.sleep(0)
        busy = rounds.abandon_waiting(SessionKey.principal("me", "busy"))
        return ended, again, busy, text(await running), rounds.abandon_waiting(SessionKey.principal("me", "other"))

    ended, again, busy, finished, other = asyncio.run(main())
    assert (ended, again, busy, finished) == ("elicitation/create", None, None, "finished")
    assert other == "elicitation/create"


def test_a_stdio_clients_roots_are_asked_in_a_round_when_it_declared_them() -> None:
    """The 2026-07-28 era carries a roots request in input_required, as it does elicitation and sampling."""

    async def wants_roots(caller: Caller, news: News, roots: Any = None) -> types.CallToolResult:
        assert roots is not None
        given = await roots()
        return done(",".join(str(root.uri) for root in given.roots))

    async def main() -> tuple[Any, Any]:
        rounds = InputRounds()
        declared = types.ClientCapabilities(roots=types.RootsCapability())
        first = await rounds.start("me", SESSION, ARGUMENTS, declared, wants_roots, None)
        assert isinstance(first, types.InputRequiredResult) and first.input_requests is not None
        (name, request), *_ = first.input_requests.items()
        answer = {"roots": [{"uri": "file:///srv/project", "name": "project"}]}
        return request, await rounds.resume(first.request_state or "", "me", ARGUMENTS, {name: answer}, None)

    request, result = asyncio.run(main())
    assert isinstance(request, types.ListRootsRequest), request
    assert text(result) == "file:///srv/project"
