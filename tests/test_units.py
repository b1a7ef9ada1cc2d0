"""Pure logic: settings parsing, frame validation, the guest's output bounding. No sandbox needed."""

from __future__ import annotations

import asyncio
import json
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_codemode.errors import SettingsError
from mcp_codemode.guest import worker_capture, worker_cells, worker_tracebacks
from mcp_codemode.sandbox.frames import FrameError, encode_frame, read_frame
from mcp_codemode.session_capacity import COMPUTED
from mcp_codemode.settings import Settings
from mcp_codemode.sizes import parse_size


@pytest.mark.parametrize(
    ("text", "value"), [("512m", 512 << 20), ("1g", 1 << 30), ("1.5GiB", 3 << 29), ("2048", 2048), ("64K", 64 << 10)]
)
def test_sizes_parse_like_container_runtimes(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize(
    ("variable", "raw", "expect"),
    [
        ("MCP_BRIDGE_TIMEOUT", "30s", "whole seconds"),
        ("MCP_BRIDGE_MEMORY", "lots", "a size such as 512m"),
        ("MCP_BRIDGE_RUNTIME", "lxc", "one of auto, bubblewrap, podman, docker, kubernetes"),
        ("MCP_BRIDGE_PIDS", "3", "at least 8"),
        ("MCP_BRIDGE_CONTAINER_USER", "nobody", "UID or UID:GID"),
        ("MCP_BRIDGE_CAPTURE_LIMIT", "1g", "from 1k to 16m"),
        ("MCP_BRIDGE_KUBE_RUNTIME_CLASS", "gVisor", "or none to accept pods without one"),
    ],
)
def test_a_bad_environment_value_names_the_variable_and_what_to_send(variable, raw, expect):
    with pytest.raises(SettingsError) as caught:
        Settings.load(env={variable: raw})
    message = str(caught.value)
    assert message.startswith(f"{variable}={raw!r} is not valid")
    assert expect in message


@pytest.mark.parametrize("name", ["gvisor", "none", "kata-qemu", "sandbox.example.com"])
def test_a_runtime_class_is_a_kubernetes_name_or_none(name):
    assert Settings.load(env={"MCP_BRIDGE_KUBE_RUNTIME_CLASS": name}).kube_runtime_class == name
    assert Settings.load(env={}).kube_runtime_class == "gvisor"


@pytest.mark.parametrize(
    ("env", "expect"),
    [
        ({"MCP_BRIDGE_ASK_TOOLS": "*/delete_*"}, "ask_tools is part of the policy: set it in the [policy] table"),
        ({"MCP_BRIDGE_HTTP_TOKENS": "abc"}, "MCP_BRIDGE_HTTP_TOKENS (did you mean MCP_BRIDGE_HTTP_TOKEN?)"),
        ({"MCP_BRIDGE_NOTHING_LIKE_IT": "1"}, "MCP_BRIDGE_NOTHING_LIKE_IT: not a setting of mcp-codemode"),
        ({"MCP_BRIDGE_TIMOUT": "5", "MCP_BRIDGE_MEMORY": "1g"}, "MCP_BRIDGE_TIMOUT (did you mean MCP_BRIDGE_TIMEOUT?)"),
    ],
)
def test_an_unknown_bridge_variable_is_refused_with_what_was_meant(env, expect):
    """Ignored, a misspelt setting or a policy key written as a variable would leave the bridge without what its
    user asked for, and nothing would say so."""
    with pytest.raises(SettingsError) as caught:
        Settings.load(env=env)
    assert expect in str(caught.value)
    assert "would be ignored" in str(caught.value)


def test_variables_of_other_programs_and_every_setting_name_are_not_judged():
    """Only the bridge's own prefix is checked; the reference bridge's other name for the idle timeout is known."""
    loaded = Settings.load(env={"MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT": "60", "MCP_CODEMODE_CACHE_DIR": "/x", "HOME": "/h"})
    assert loaded.session_idle_timeout == 60


def test_reference_bridge_variables_are_honoured():
    env = {
        "MCP_BRIDGE_RUNTIME": "podman",
        "MCP_BRIDGE_IMAGE": "img:1",
        "MCP_BRIDGE_TIMEOUT": "10",
        "MCP_BRIDGE_MAX_TIMEOUT": "60",
        "MCP_BRIDGE_MEMORY": "1g",
        "MCP_BRIDGE_PIDS": "50",
        "MCP_BRIDGE_CPUS": "1.5",
        "MCP_BRIDGE_CONTAINER_USER": "1000:1000",
        "MCP_BRIDGE_STATE_DIR": "/srv/state",
        "MCP_BRIDGE_LOG_LEVEL": "debug",
    }
    s = Settings.load(env=env)
    assert (s.runtime, s.image, s.timeout, s.max_timeout) == ("podman", "img:1", 10, 60)
    assert (s.memory, s.pids, s.cpus, s.container_user) == (1 << 30, 50, 1.5, "1000:1000")
    assert (s.state_dir, s.log_level) == (Path("/srv/state"), "DEBUG")
    assert s.sources["timeout"] == "MCP_BRIDGE_TIMEOUT"


def test_the_reference_runtime_idle_timeout_sets_the_session_idle_timeout_and_a_disagreement_is_refused(tmp_path):
    alias, ours = "MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT", "MCP_BRIDGE_SESSION_IDLE_TIMEOUT"
    file = tmp_path / "settings.toml"
    file.write_text("session_idle_timeout = 600\n")
    aliased = Settings.load(env={alias: "300"}, settings_file=file)  # the environment beats the file, as always
    assert (aliased.session_idle_timeout, aliased.sources["session_idle_timeout"]) == (300.0, alias)
    assert Settings.load(env={alias: "300", ours: "300.0"}).session_idle_timeout == 300.0  # agreeing: fine
    with pytest.raises(SettingsError) as caught:
        Settings.load(env={alias: "300", ours: "900"})
    assert str(caught.value) == (
        f"{alias}='300' and {ours}='900' both set session_idle_timeout and disagree: remove {alias} (the "
        "reference bridge's name for it), or give both the same value"
    )
    with pytest.raises(SettingsError, match=rf"^{alias}='300s' is not valid: expected seconds \(for example {alias}="):
        Settings.load(env={alias: "300s"})


def test_precedence_is_file_then_environment_then_command_line(tmp_path):
    file = tmp_path / "settings.toml"
    file.write_text('[mcp-codemode]\ntimeout = 5\nmemory = "256m"\nruntime = "podman"\n')
    s = Settings.load(env={"MCP_BRIDGE_TIMEOUT": "7"}, settings_file=file, overrides={"runtime": "bubblewrap"})
    assert (s.timeout, s.memory, s.runtime) == (7, 256 << 20, "bubblewrap")
    assert s.sources == {"timeout": "MCP_BRIDGE_TIMEOUT", "memory": str(file), "runtime": "command line",
                         "max_sessions": COMPUTED}  # fmt: skip


def test_settings_file_errors_name_the_file_and_the_key(tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text("timeout = [")
    with pytest.raises(SettingsError, match="not valid TOML"):
        Settings.load(env={}, settings_file=broken)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("timout = 5\n")
    with pytest.raises(SettingsError, match=r"unknown key\(s\) timout; known keys: .*timeout"):
        Settings.load(env={}, settings_file=unknown)
    with pytest.raises(SettingsError, match="does not exist"):
        Settings.load(env={}, settings_file=tmp_path / "absent.toml")


def test_default_timeout_above_the_ceiling_is_refused():
    with pytest.raises(SettingsError, match="above the ceiling"):
        Settings.load(env={"MCP_BRIDGE_TIMEOUT": "300", "MCP_BRIDGE_MAX_TIMEOUT": "120"})


def test_requested_timeouts_are_clamped_to_the_ceiling():
    s = Settings.load(env={"MCP_BRIDGE_MAX_TIMEOUT": "60"})
    assert s.clamp_timeout(None) == 30
    assert s.clamp_timeout(600) == 60


def _reader(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


def _read(data: bytes, limit: int = 1 << 20) -> object:
    async def go() -> object:
        return await read_frame(_reader(data), limit)

    return asyncio.run(go())


def test_frames_round_trip_and_a_clean_end_reads_as_none():
    message = {"type": "output", "stream": "stdout", "data": "héllo\x00"}
    assert _read(encode_frame(message)) == message
    assert _read(b"") is None


@pytest.mark.parametrize(
    ("data", "complaint"),
    [
        (struct.pack(">I", 1 << 30), "announced a frame of"),
        (b"\x00\x00", "middle of a frame header"),
        (struct.pack(">I", 10) + b"{}", "middle of a frame"),
        (struct.pack(">I", 3) + b"{x}", "not JSON"),
        (struct.pack(">I", 2) + b"[]", "not an object"),
        (struct.pack(">I", 13) + b'{"type": 42 }', "not an object with a string 'type'"),
        (struct.pack(">I", 2) + b"\xff\xfe", "not JSON"),
    ],
)
def test_hostile_frames_are_refused_with_a_reason(data, complaint):
    with pytest.raises(FrameError, match=complaint):
        _read(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_never_escape_as_anything_but_frame_error(data):
    try:
        result = _read(data)
    except FrameError:
        return
    assert result is None or (isinstance(result, dict) and isinstance(result["type"], str))


class _Collect:
    def __init__(self) -> None:
        self.sent: list[dict[str, object]] = []

    def send(self, message: dict[str, object]) -> None:
        self.sent.append(message)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=300), max_size=40), st.integers(min_value=2, max_value=400))
def test_guest_sink_keeps_head_and_tail_and_counts_the_rest(chunks, limit):
    channel = _Collect()
    sink = worker_capture.StreamSink("stdout", channel, head_limit=limit // 2, tail_limit=limit - limit // 2)  # type: ignore[arg-type]
    for chunk in chunks:
        sink.feed(chunk.encode())
    tail, dropped = sink.finish()
    head = "".join(str(m["data"]) for m in channel.sent)
    whole = "".join(chunks)
    assert head + tail == whole if dropped == 0 else (whole.startswith(head) and whole.endswith(tail))
    assert len(head) + len(tail) + dropped == len(whole)
    assert len(head) <= limit // 2 and len(tail) <= limit - limit // 2


def test_guest_sink_sends_a_burst_of_writes_as_one_frame() -> None:
    """Unbuffered, each print is several writes; one frame per write cost the bridge's event loop a decode each."""
    channel = _Collect()
    sink = worker_capture.StreamSink("stdout", channel, head_limit=1 << 20, tail_limit=1 << 20)  # type: ignore[arg-type]
    for number in range(21):
        for piece in ("line", " ", str(number), "\n"):
            sink.feed(piece.encode())
    assert channel.sent == []  # the drain thread flushes it STREAM_DELAY_SECONDS later, or the result does
    sink.flush()
    assert [m["data"] for m in channel.sent] == ["".join(f"line {n}\n" for n in range(21))]
    sink.feed(b"x" * worker_capture.STREAM_FRAME_CHARS)  # a large burst does not wait
    assert len(channel.sent) == 2
    sink.feed(b"tail")
    assert sink.finish() == ("", 0) and channel.sent[-1]["data"] == "tail"


def test_guest_clip_keeps_both_ends():
    clipped = worker_tracebacks.clip("a" * 100 + "b" * 100, limit=20)
    assert clipped.startswith("a" * 10) and clipped.endswith("b" * 10)
    assert "180 characters cut" in clipped


def test_encoded_frames_are_compact_json_with_a_length_prefix():
    frame = encode_frame({"type": "execute", "id": 1, "code": "x"})
    (size,) = struct.unpack(">I", frame[:4])
    assert size == len(frame) - 4
    assert json.loads(frame[4:]) == {"type": "execute", "id": 1, "code": "x"}


def test_cell_sources_keep_the_recent_cells_and_those_with_code_within_the_budget() -> None:
    import linecache

    sources = worker_cells.CellSources(keep_recent=2, budget=12)
    names = [f"<cell t{number}>" for number in range(6)]
    for number, name in enumerate(names):
        sources.add(name, "f = 1\n" if number in (0, 1) else "1\n")
        if number in (0, 1):
            sources.defines_code()
    # t0 and t1 defined code (6 characters each, 12 in all); t2 and t3 did not and are older than the last two.
    assert [name in linecache.cache for name in names] == [True, True, False, False, True, True]
    sources.add("<cell t6>", "g = 22\n")
    sources.defines_code()
    sources.add("<cell t7>", "1\n")
    sources.add("<cell t8>", "1\n")  # t6 (7 characters) joins t0 and t1: 19, over the budget of 12
    # the oldest go first until it fits: t0 (13 left), then t1 (7)
    assert [name in linecache.cache for name in (*names, "<cell t6>")] == [False] * 6 + [True]
    for name in (*names, "<cell t6>", "<cell t7>", "<cell t8>"):
        linecache.cache.pop(name, None)
