"""Fuzzing the host end of the frame channel: ``read_frame`` and the worker's dispatcher.

``read_frame`` is fed arbitrary bytes and structured-but-hostile frames (huge integers, deep nesting, NaN,
lone surrogates, duplicate keys, values that are not objects, truncations). Whatever it gets it must return a
message (a dict with a string ``type``, every string encodable, at most ``MAX_DEPTH`` deep, every number
finite), return None at a clean end, or raise ``FrameError``; and it must never read past the frame it
announced. The dispatcher is driven with arbitrary messages against a real worker in a real bubblewrap
sandbox: nothing may raise, and the worker must still run code afterwards.

Example counts are bounded and the runs derandomized, so the suite costs the same every time.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import struct
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeVar, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_codemode.guest import worker_channel as guest
from mcp_codemode.guest.protocol import MAX_DEPTH
from mcp_codemode.reply_encoding import EncodedReply, encode_value
from mcp_codemode.sandbox.calls import CellCalls
from mcp_codemode.sandbox.frames import HEADER, FrameError, encode_frame, encode_reply, read_frame
from mcp_codemode.sandbox.output import BoundedStream
from mcp_codemode.sandbox.results import ExecutionResult
from mcp_codemode.sandbox.select import make_backend
from mcp_codemode.sandbox.worker import Worker, _Cell
from tests.support.backends import require_usable, sandbox_settings
from tests.support.clients import require_bubblewrap
from tests.support.fuzzing import LoopThread, json_values

if TYPE_CHECKING:
    from mcp_codemode.guest.protocol import CallFrame, GuestFrame, ReplyValue
    from mcp_codemode.reply_encoding import Reply

T = TypeVar("T")
LIMIT = 4096
FUZZ = settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------------------------------ read_frame


def _read_all(data: bytes, limit: int = LIMIT) -> tuple[str, Any, bytes]:
    """(outcome, message or error, what the reader left unread)."""

    async def go() -> tuple[str, Any, bytes]:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        try:
            message = await read_frame(reader, limit)
        except FrameError as exc:
            return "error", exc, await reader.read()
        return "ok", message, await reader.read()

    return asyncio.run(go())


def _assert_clean(value: Any, depth: int = 1) -> None:
    """What the host may rely on in a message it accepted."""
    assert depth <= MAX_DEPTH
    if isinstance(value, dict):
        for key, item in value.items():
            key.encode("utf-8")
            _assert_clean(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _assert_clean(item, depth + 1)
    elif isinstance(value, str):
        value.encode("utf-8")
    elif isinstance(value, float):
        assert math.isfinite(value)


def _check(data: bytes, limit: int = LIMIT) -> None:
    outcome, result, rest = _read_all(data, limit)
    if len(data) >= 4:
        (size,) = struct.unpack(">I", data[:4])
        if size > limit:
            assert outcome == "error" and rest == data[4:], "read past a header that announced too much"
        elif len(data) >= 4 + size:
            assert rest == data[4 + size :], "read more (or less) than the announced frame"
    if outcome == "ok":
        if result is None:
            assert data == b""
        else:
            assert isinstance(result, dict) and isinstance(result["type"], str)
            _assert_clean(result)
            encode_frame(result)  # whatever was accepted can be sent on again


def _framed(payload: bytes) -> bytes:
    return HEADER.pack(len(payload)) + payload


@FUZZ
@given(st.binary(max_size=512), st.binary(max_size=16))
def test_arbitrary_bytes_become_a_message_none_or_frame_error(data: bytes, trailer: bytes) -> None:
    _check(data)
    _check(_framed(data) + trailer)  # a well-framed header around garbage


@st.composite
def hostile_payloads(draw: st.DrawFn) -> bytes:
    """A frame body that is JSON, nearly JSON, or JSON with a hostile part spliced in."""
    base: dict[str, Any] = {"type": draw(st.sampled_from(["call", "output", "result", "ready", "x"]))}
    base.update(draw(st.dictionaries(st.text(max_size=8), json_values, max_size=4)))
    text = json.dumps(base)
    hostile = draw(
        st.sampled_from(
            [
                "9" * 5000,  # over Python's int digit limit: ValueError, not JSONDecodeError
                "9" * 4300,
                "-" + "9" * 4301,
                "1e999",
                "-1e999",
                "NaN",
                "Infinity",
                "-Infinity",
                '"\\ud800"',  # a lone surrogate, escaped
                '"\\udc00x\\ud83d"',
                '"\\ud83d\\ude00"',  # a valid pair
                "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
                "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2),
                "[" * 5000 + "]" * 5000,
                '{"a":1,"a":2}',
                "[]",
                '"\\u0000"',
                '{"\\ud800":1}',
            ]
        )
    )
    where = draw(st.sampled_from(["value", "replace", "type"]))
    if where == "value":
        text = text[:-1] + (", " if len(base) else "") + f'"k": {hostile}}}'
    elif where == "type":
        text = f'{{"type": {hostile}}}'
    else:
        text = hostile
    payload = text.encode("utf-8")
    mutation = draw(st.sampled_from(["none", "truncate", "insert", "duplicate-type"]))
    if mutation == "truncate" and payload:
        payload = payload[: draw(st.integers(0, len(payload) - 1))]
    elif mutation == "insert":
        at = draw(st.integers(0, len(payload)))
        payload = payload[:at] + draw(st.binary(min_size=1, max_size=4)) + payload[at:]
    elif mutation == "duplicate-type":
        payload = payload.replace(b'{"type"', b'{"type": 1, "type"', 1)
    return payload


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@FUZZ
@given(
    JSON_VALUES, st.integers(min_value=0, max_value=2**31), st.dictionaries(st.sampled_from(["notes", "x"]), st.text())
)
def test_a_reply_with_a_pre_encoded_value_is_the_same_frame(value: Any, request_id: int, extra: dict[str, str]) -> None:
    """The relay encodes a result once (for the audit's byte count) and the worker splices those bytes in."""
    body = {"ok": True, "value": value, **extra}
    try:
        plain = encode_frame({"type": "reply", "id": request_id, **body})
    except UnicodeEncodeError:  # a lone surrogate: neither path may send it
        with pytest.raises(UnicodeEncodeError):
            encode_value(value)
        return
    spliced = encode_reply(request_id, EncodedReply(cast("ReplyValue", body), encode_value(value)))
    assert len(spliced) == len(plain) and HEADER.unpack(spliced[:4]) == HEADER.unpack(plain[:4])
    assert json.loads(spliced[4:]) == json.loads(plain[4:]) == {"type": "reply", "id": request_id, **body}
    assert encode_reply(request_id, body) == plain


@FUZZ
@given(hostile_payloads(), st.integers(min_value=0, max_value=8))
def test_structured_hostile_frames_become_a_clean_message_or_frame_error(payload: bytes, lie: int) -> None:
    _check(_framed(payload) + b"NEXT", limit=1 << 20)
    if payload:
        # A header that announces more or less than is there.
        _check(HEADER.pack(max(0, len(payload) - lie)) + payload, limit=1 << 20)
        _check(HEADER.pack(len(payload) + lie) + payload, limit=1 << 20)


def test_the_known_hostile_literals_each_get_their_verdict() -> None:
    cases = {
        '{"type":"x","n":' + "9" * 5000 + "}": "not JSON",
        '{"type":"x","n":NaN}': "not JSON",
        '{"type":"x","n":1e999}': "not JSON",
        '{"type":"x","n":' + "[" * 3000 + "]" * 3000 + "}": "not JSON",
        '{"type":"x","n":' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}": "nested more than",
        '{"type":"x","n":[' + "[]," * 300_000 + "[]]}": "more than 250,000 JSON values",
        "\ufeff" + '{"type":"x"}': "not JSON",
        '["type"]': "not an object",
    }
    for text, complaint in cases.items():
        outcome, result, _ = _read_all(_framed(text.encode()), 1 << 24)
        assert outcome == "error" and complaint in str(result), (text[:60], result)
    outcome, result, _ = _read_all(_framed(b'{"type":"x\\ud800","\\udfff":["\\ud800"],"type2":"\\ud83d\\ude00"}'))
    assert outcome == "ok" and result == {"type": "x\ufffd", "\ufffd": ["\ufffd"], "type2": "\U0001f600"}
    outcome, result, _ = _read_all(_framed(b'{"type":"a","type":"b"}'))  # the last wins, as everywhere in Python
    assert (outcome, result) == ("ok", {"type": "b"})


def test_commas_and_brackets_inside_strings_do_not_count_as_values() -> None:
    """Legitimate output full of commas (a CSV, printed JSON) is one value however many commas it holds."""
    text = "a,b,[c],{d}," * 100_000
    outcome, result, _ = _read_all(encode_frame({"type": "output", "stream": "stdout", "data": text}), 1 << 24)
    assert outcome == "ok" and result["data"] == text


# ------------------------------------------------------------------------------------------- the dispatcher


@pytest.fixture(scope="module")
def live_worker() -> Iterator[tuple[LoopThread, Worker]]:
    """One real worker in a real bubblewrap sandbox, on a loop thread of its own, for the whole module."""
    require_bubblewrap()
    config = sandbox_settings(runtime="bubblewrap")
    backend = make_backend("bubblewrap", config)
    require_usable(backend)
    loop = LoopThread()
    worker = Worker(backend, config, "fuzz")
    loop.run(worker.start())
    try:
        yield loop, worker
    finally:
        loop.run(worker.close())
        loop.close()


ids = st.one_of(
    st.just("CELL"),  # replaced by the running cell's id
    st.integers(min_value=-(1 << 64), max_value=1 << 64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.text(max_size=5),
    st.none(),
    json_values,
)
images = st.lists(
    st.dictionaries(
        st.sampled_from(["mime", "data"]),
        st.one_of(st.sampled_from(["image/png", "image/gif", "text/html"]), st.text(max_size=12), json_values),
    ),
    max_size=3,
)


@st.composite
def worker_messages(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["ready", "output", "result", "call", "reply", "execute", "unknown"]))
    message: dict[str, Any] = {"type": kind, "id": draw(ids)}
    fields = {
        "python": json_values,
        "stream": st.one_of(st.sampled_from(["stdout", "stderr", "stdin"]), json_values),
        "data": json_values,
        "status": st.one_of(st.sampled_from(["ok", "error", "interrupted"]), json_values),
        "value": json_values,
        "error": st.one_of(
            json_values, st.dictionaries(st.sampled_from(["type", "message", "traceback"]), json_values)
        ),
        "stdout_tail": json_values,
        "stdout_dropped": st.one_of(st.integers(min_value=-(10**30), max_value=10**4000), json_values),
        "images": st.one_of(images, json_values),
        "notes": json_values,
        "op": st.one_of(st.sampled_from(["servers", "call", "nope"]), json_values),
    }
    for name in draw(st.lists(st.sampled_from(sorted(fields)), max_size=6, unique=True)):
        message[name] = draw(fields[name])
    return message


@pytest.mark.backend
@settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(worker_messages())
def test_the_dispatcher_survives_any_message(live_worker: tuple[LoopThread, Worker], message: dict[str, Any]) -> None:
    loop, worker = live_worker
    calls: list[CallFrame] = []

    async def relay(request: CallFrame) -> Reply:
        calls.append(request)
        return {"ok": True, "value": None}

    async def go() -> ExecutionResult | None:
        streams = {"stdout": BoundedStream(1000), "stderr": BoundedStream(1000)}
        cell = _Cell(next(Worker._ids), asyncio.get_running_loop().create_future(), streams, None, CellCalls(relay))
        if message.get("id") == "CELL":
            message["id"] = cell.id
        worker._cell = cell
        try:
            worker._dispatch(cast("GuestFrame", message), len(json.dumps(message)))
            for _ in range(3):
                await asyncio.sleep(0)
            return worker._finish(cell, time.monotonic()) if cell.done.done() else None
        finally:
            worker._cell = None
            cell.calls.close()

    result = loop.run(go())
    assert result is None or result.status in ("ok", "error")
    assert worker.alive
    if message["type"] == "call" and type(message["id"]) is int and 0 < message["id"] < 1 << 53:
        assert calls == [message] or not calls  # relayed as it was, or still queued when the cell ended


@pytest.mark.backend
def test_the_worker_still_runs_code_after_the_fuzzing(live_worker: tuple[LoopThread, Worker]) -> None:
    loop, worker = live_worker
    result = loop.run(worker.execute("6 * 7", timeout=30))
    assert (result.status, result.value) == ("ok", "42"), result


# ------------------------------------------------------------------------------------- the guest's own side


def test_the_guest_refuses_to_send_what_the_host_would_kill_it_for() -> None:
    """User values the host's frame checks would refuse raise ValueError in the guest (an ArgumentError for the
    code), so a well-behaved worker is never killed for what its user passed."""
    sent: list[bytes] = []
    read_fd, write_fd = os.pipe()
    try:
        channel = guest.Channel(write_fd)
        deep: Any = []
        for _ in range(MAX_DEPTH):
            deep = [deep]
        very_deep: Any = []
        for _ in range(5000):  # past Python's recursion limit: json.dumps fails before any shape check
            very_deep = [very_deep]
        for bad in (
            {"x": float("nan")},
            {"x": float("inf")},
            {"x": deep},
            {"x": very_deep},
            {"x": [0] * guest.MAX_VALUES},
        ):
            with pytest.raises(ValueError, match=r"not JSON compliant|nested more than|more than .* values"):
                channel.send_strict({"type": "call", "id": 1, "arguments": bad})
        at_limit: Any = []
        for _ in range(MAX_DEPTH - 3):  # the frame and its arguments are two levels: exactly MAX_DEPTH in all
            at_limit = [at_limit]
        channel.send_strict({"type": "call", "id": 1, "arguments": {"x": at_limit}})
        assert len(os.read(read_fd, 1 << 16)) > MAX_DEPTH
        channel.send_strict({"type": "call", "id": 1, "arguments": {"x": "\ud800", "y": [[[1]]]}})
        sent.append(os.read(read_fd, 1 << 16))
    finally:
        os.close(read_fd)
        os.close(write_fd)
    outcome, message, _ = _read_all(sent[0])
    assert outcome == "ok" and message["arguments"] == {"x": "\ufffd", "y": [[[1]]]}


def test_a_reply_the_guest_cannot_decode_fails_that_call_only() -> None:
    payload = b'{"type":"reply","id":42,"ok":true,"value":' + b"[" * 5000 + b"]" * 5000 + b"}"
    try:
        json.loads(payload)
    except RecursionError as exc:
        reply = guest.undecodable_reply(payload, exc)
    assert reply is not None and reply["id"] == 42 and reply["ok"] is False
    assert guest.undecodable_reply(b'{"type":"interrupt","id":1,' + b"[" * 10, ValueError("x")) is None
