"""Fuzzing the relay's dispatcher (``Relay.handle``) with arbitrary requests against a real upstream server.

The directory and its hub run server-everything for real, on a loop thread that lives for the module. Each
request is what a hostile worker could get past the frame reader: an arbitrary JSON object, sent through
``decode_frame`` exactly as the worker's frames are. Every reply must be a dict with a bool ``ok``; a refusal
carries an ``error`` whose ``kind`` names one of the runtime's exception classes and whose ``message`` is a
string; the reply must be encodable as a frame; and no exception may escape. Only tools that answer at once
are offered by name (no long-running, sampling or elicitation tool, which would wait for the timeout).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from mcp_codemode.guest import protocol
from mcp_codemode.guest.mcp import _rpc
from mcp_codemode.runs.relay import Relay
from mcp_codemode.runs.saved_tools import FileSavedTools, SavedToolStore
from mcp_codemode.sandbox.frames import FrameError, decode_frame, encode_frame
from mcp_codemode.upstream.tools.directory import ToolDirectory
from tests.support import upstreams
from tests.support.backends import sandbox_settings
from tests.support.fuzzing import LoopThread, json_values

if TYPE_CHECKING:
    from mcp_codemode.guest.protocol import CallFrame

pytestmark = pytest.mark.backend

KINDS = set(_rpc.ERRORS)
QUICK_TOOLS = ["echo", "get-sum", "get-tiny-image", "get-annotated-message", "get-structured-content"]
OPS = sorted(protocol.CALL_OPS)  # every op the guest may send: a new one is fuzzed the day it is added


@pytest.fixture(scope="module")
def relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LoopThread, Relay]]:
    state = tmp_path_factory.mktemp("fuzz-relay")
    config = sandbox_settings(state_dir=state, tool_timeout=10.0, search_wait=1.0)
    loop = LoopThread()
    directory = ToolDirectory([upstreams.everything()], config)

    async def start() -> Relay:
        await directory.__aenter__()
        await directory.listing("everything", live=True)  # started once, before the examples
        return Relay(directory, FileSavedTools(SavedToolStore(Path(state) / "saved-tools")), config)

    try:
        yield loop, loop.run(start())
    finally:
        loop.run(directory.aclose())
        loop.close()


texts = st.one_of(st.text(max_size=30), st.text(min_size=250, max_size=400), st.just(""), st.just("  "))
fields = {
    "server": st.one_of(
        st.sampled_from(["everything", "everything", "everything", "nope", "everythin"]), texts, json_values
    ),
    "tool": st.one_of(
        st.sampled_from(QUICK_TOOLS), st.sampled_from([*QUICK_TOOLS, "get_sum", "get-sun"]), texts, json_values
    ),
    "arguments": st.one_of(
        st.fixed_dictionaries({"message": st.one_of(st.text(max_size=20), json_values)}),
        st.fixed_dictionaries({"a": json_values, "b": json_values}),
        st.fixed_dictionaries({"city": st.text(max_size=12)}),  # args-prompt's argument
        st.dictionaries(st.text(max_size=8), json_values, max_size=4),
        json_values,
    ),
    "timeout": st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(), json_values),
    "query": st.one_of(texts, json_values),
    "limit": st.one_of(st.integers(min_value=-(10**20), max_value=10**20), json_values),
    "offset": st.one_of(st.integers(min_value=-(10**20), max_value=10**20), json_values),
    "detail": st.one_of(st.sampled_from(["name", "summary", "full", "stub", "everything"]), json_values),
    "uri": st.one_of(
        st.sampled_from(["demo://resource/static/document/architecture.md", "file:///etc/passwd"]), texts, json_values
    ),
    "prompt": st.one_of(
        st.sampled_from(["simple-prompt", "args-prompt", "resource-prompt", "simple-promt"]), texts, json_values
    ),
    "name": st.one_of(st.sampled_from(["fuzzed", "_private", "not an identifier"]), texts, json_values),
    "source": st.one_of(st.just("def fuzzed():\n    return 1\n"), texts, json_values),
    "description": st.one_of(texts, json_values),
}


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "call", "id": draw(st.integers(1, 1 << 40))}
    known = draw(st.integers(0, 4)) > 0  # mostly a real operation, so the requests reach past the dispatch
    message["op"] = draw(st.sampled_from(OPS) if known else st.one_of(texts, json_values))
    chosen = {name for name in ("server", "tool", "arguments") if draw(st.integers(0, 4))}  # mostly present
    chosen.update(draw(st.lists(st.sampled_from(sorted(fields)), max_size=4, unique=True)))
    for name in sorted(chosen):
        message[name] = draw(fields[name])
    if draw(st.booleans()):
        message[draw(st.text(max_size=10))] = draw(json_values)  # a parameter no operation takes
    return message


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
@example(message={"type": "call", "id": 1, "op": []})  # an op no dictionary can hash once crashed the dispatch
def test_every_request_gets_a_well_formed_reply(relay: tuple[LoopThread, Relay], message: dict[str, Any]) -> None:
    loop, handler = relay
    try:  # exactly what the worker's frame reader would hand the relay (lone surrogates repaired, bounds checked)
        checked = decode_frame(json.dumps(message).encode())
    except FrameError:
        return
    # Typed as the worker types what it hands on: a call frame, whose every field the relay checks before use.
    reply: Mapping[str, Any] = loop.run(handler.handle("fuzz", cast("CallFrame", checked)))
    assert isinstance(reply, dict) and isinstance(reply.get("ok"), bool), reply
    event("ok" if reply["ok"] else str(reply["error"].get("kind")))
    if not reply["ok"]:
        error = reply.get("error")
        assert isinstance(error, dict), reply
        assert error.get("kind") in KINDS, reply
        assert isinstance(error.get("message"), str), reply
    encode_frame({"type": "reply", "id": message["id"], **reply})


def test_the_upstream_still_answers_after_the_fuzzing(relay: tuple[LoopThread, Relay]) -> None:
    loop, handler = relay
    message = {"type": "call", "id": 1, "op": "call", "server": "everything", "tool": "echo",
               "arguments": {"message": "still here"}}  # fmt: skip
    reply: Mapping[str, Any] = loop.run(handler.handle("fuzz", cast("CallFrame", message)))
    assert reply["ok"], reply
    assert reply["value"]["content"][0]["text"] == "Echo: still here"


def test_a_lone_surrogate_that_reaches_the_relay_is_refused_without_touching_the_server(
    relay: tuple[LoopThread, Relay],
) -> None:
    """Defence in depth, found by fuzzing the relay directly: the frame reader repairs lone surrogates, but a
    request that bypasses it (another caller of ``Relay.handle``) with one in its arguments made the SDK fail
    to encode the request, which closed the shared connection: the server died for every session. The relay
    refuses such text (ArgumentError) in a reply that can be encoded."""
    loop, handler = relay
    state = handler.hub.state("everything")
    message = {"type": "call", "id": 1, "op": "call", "server": "everything", "tool": "echo",
               "arguments": {"message": "\ud800"}}  # fmt: skip
    reply: Mapping[str, Any] = loop.run(handler.handle("fuzz", cast("CallFrame", message)))
    assert reply["ok"] is False and reply["error"]["kind"] == "ArgumentError", reply
    after = handler.hub.state("everything")
    assert (after.status, after.pid) == ("ready", state.pid), after
    for field in ("server", "tool"):
        forged = {**message, "arguments": {"message": "fine"}, field: "echo\udfff"}
        reply = loop.run(handler.handle("fuzz", cast("CallFrame", forged)))
        assert reply["ok"] is False and reply["error"]["kind"] == "ArgumentError", reply
        assert "lone surrogate" in reply["error"]["message"], reply
        encode_frame({"type": "reply", "id": 1, **reply})
    assert handler.hub.state("everything").pid == state.pid
