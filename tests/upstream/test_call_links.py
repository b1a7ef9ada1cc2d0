"""Routing a server's requests of the client to the run_python call they are about (pure logic)."""

from __future__ import annotations

import asyncio

import mcp_types as types

from mcp_codemode.errors import CannotAsk
from mcp_codemode.upstream.servers.call_links import CallLink, CallLinks

FORM = types.ElicitRequestFormParams(message="name?", requested_schema={"type": "object", "properties": {}})


def answer(text: str) -> CallLink:
    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"who": text})

    return CallLink(elicit=elicit)


def test_a_request_goes_to_the_only_call_in_flight_and_is_refused_with_none_or_several() -> None:
    links = CallLinks("srv")

    async def main() -> list[object]:
        seen: list[object] = [await links.on_elicit(None, FORM)]
        with links.holding(answer("a")):
            seen.append(await links.on_elicit(None, FORM))
            with links.holding(answer("b")):
                # Asked from inside call b's own task (a 2026-07-28 server asks within the call): b, exactly.
                seen.append(await links.on_elicit(None, FORM))

                async def from_elsewhere() -> object:  # the receive loop of a handshake-era session
                    return await links.on_elicit(None, FORM)

                seen.append(await asyncio.get_running_loop().create_task(from_elsewhere(), context=None))
        return seen

    none, only, own, child = asyncio.run(main())
    assert isinstance(none, types.ErrorData) and "no tool call from sandboxed code is in flight" in none.message
    assert isinstance(only, types.ElicitResult) and only.content == {"who": "a"}
    assert isinstance(own, types.ElicitResult) and own.content == {"who": "b"}
    # A task created inside call b inherits its context, so it is b's too: the SDK's receive loop is not.
    assert isinstance(child, types.ElicitResult) and child.content == {"who": "b"}


def test_a_request_from_outside_any_call_with_two_in_flight_is_refused_naming_why() -> None:
    links = CallLinks("srv")

    async def main() -> object:
        outside = asyncio.Event()
        result: list[object] = []

        async def receive_loop() -> None:  # started before any call, as the SDK's is
            await outside.wait()
            result.append(await links.on_elicit(None, FORM))

        loop_task = asyncio.get_running_loop().create_task(receive_loop())
        with links.holding(answer("a")), links.holding(answer("b")):
            outside.set()
            await loop_task
        return result[0]

    refused = asyncio.run(main())
    assert isinstance(refused, types.ErrorData) and refused.code == types.INVALID_REQUEST
    assert "2 tool calls are in flight on this server" in refused.message


def test_a_link_that_cannot_ask_or_takes_no_such_request_is_a_refusal_with_its_reason() -> None:
    links = CallLinks("srv")

    async def cannot(params: types.ElicitRequestParams) -> types.ElicitResult:
        raise CannotAsk("the policy says no")

    async def main() -> tuple[object, object]:
        with links.holding(CallLink(elicit=cannot)):
            first = await links.on_elicit(None, FORM)
        with links.holding(CallLink()):
            params = types.CreateMessageRequestParams(messages=[], max_tokens=5)
            second = await links.on_sample(None, params)
        return first, second

    first, second = asyncio.run(main())
    assert isinstance(first, types.ErrorData)
    assert first.message == "mcp-codemode did not pass on this elicitation request: the policy says no"
    assert isinstance(second, types.ErrorData) and "does not take sampling requests" in second.message
