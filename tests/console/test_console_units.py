"""The console's pure parts: sign-in codes and cookie sessions, the Host and Origin rules, escaping, the audit log
read back, the call board, and its settings. Nothing here starts a process or opens a socket."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import hashlib
import json
import re
from collections.abc import Awaitable
from pathlib import Path
from typing import cast

import mcp_types as types
import pytest

from mcp_codemode.console.audit_reader import Search, audited_calls, search
from mcp_codemode.console.guards import host_ok, origin_ok
from mcp_codemode.console.pages import calls_page, esc, output_blocks, sessions_page, size
from mcp_codemode.console.signins import CODE_TTL, SESSION_IDLE, SignIns, cookie, csrf_ok
from mcp_codemode.errors import SettingsError
from mcp_codemode.runs.audit import AuditLog, stamp
from mcp_codemode.runs.call_board import BATCH, CANCELLED, CallBoard, CallSeen, SessionSeen, _run_line
from mcp_codemode.runs.relay_run import Caller, News
from mcp_codemode.sandbox.results import ExecutionResult
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.settings import Settings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_sign_in_code_works_once_and_expires() -> None:
    clock = Clock()
    signins = SignIns(clock)
    code = signins.mint("local")
    assert signins.redeem(code) == "local"
    assert signins.redeem(code) is None  # once
    late = signins.mint("local")
    clock.now += CODE_TTL + 1
    assert signins.redeem(late) is None  # expired
    assert signins.redeem("made-up") is None


def test_a_cookie_session_names_its_principal_until_it_idles_out_or_signs_out() -> None:
    clock = Clock()
    signins = SignIns(clock)
    value = signins.open("t-abc")
    visitor = signins.visitor(value)
    assert visitor is not None and visitor.principal == "t-abc"
    assert csrf_ok(visitor, visitor.csrf) and not csrf_ok(visitor, "") and not csrf_ok(visitor, None)
    assert not csrf_ok(visitor, visitor.csrf + "x")
    assert signins.visitor("forged") is None and signins.visitor(None) is None
    signins.close(value)
    assert signins.visitor(value) is None
    idle = signins.open("local")
    clock.now += SESSION_IDLE
    assert signins.visitor(idle) is None


def test_the_cookie_is_http_only_strict_and_scoped_to_the_console() -> None:
    flags = [part.strip() for part in cookie("v", "/console", secure=False).split(";")]
    assert {"HttpOnly", "SameSite=Strict", "Path=/console"} <= set(flags) and "Secure" not in flags
    assert "Secure" in cookie("v", "/console", secure=True)


@pytest.mark.parametrize(
    ("host", "loopback", "ok"),
    [
        ("127.0.0.1:8770", True, True),
        ("localhost:8770", True, True),
        ("[::1]:8770", True, True),
        ("127.0.0.1", True, True),
        ("evil.example:8770", True, False),  # DNS rebinding: a foreign name that resolves to 127.0.0.1
        ("127.0.0.1.evil.example:8770", True, False),
        ("", True, False),
        ("bridge.example.com", False, True),
    ],
)
def test_a_loopback_console_answers_loopback_names_only(host: str, loopback: bool, ok: bool) -> None:
    assert host_ok(host, loopback) is ok


def test_an_action_needs_the_consoles_own_origin() -> None:
    host = "127.0.0.1:8770"
    assert origin_ok("http://127.0.0.1:8770", host, (), required=True)
    assert not origin_ok(None, host, (), required=True)  # a form post always carries one
    assert origin_ok(None, host, (), required=False)  # a plain page load may not
    assert not origin_ok("http://evil.example", host, (), required=True)
    assert not origin_ok("http://127.0.0.1:9999", host, (), required=True)
    assert origin_ok("https://ops.example", host, ("https://ops.example",), required=True)


def test_output_is_escaped_and_only_picture_types_are_shown_as_images() -> None:
    assert esc('<script>alert("x")</script>') == "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"
    result = types.CallToolResult(content=[
        types.TextContent(type="text", text="<script>alert(1)</script>"),
        types.ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
        types.ImageContent(type="image", data="PHN2Zz4=", mime_type="image/svg+xml"),
        types.ImageContent(type="image", data='x" onerror="alert(1)', mime_type="image/png"),
    ])  # fmt: skip
    shown = output_blocks(result)
    assert "<script>" not in shown and "&lt;script&gt;" in shown
    assert shown.count("<img") == 1 and 'src="data:image/png;base64,iVBORw0KGgo="' in shown
    assert "onerror" not in shown and "image/svg+xml, not shown" in shown


def _audit_lines(path: Path, lines: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"torn', encoding="utf-8")


def test_finished_calls_are_read_back_per_owner_and_searched(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _audit_lines(path, [
        {"time": "2026-11-28T07:00:00.000+00:00", "call": "c1", "session": "stdio:a", "owner": "local",
         "server": "time", "tool": "now", "outcome": "ok", "duration_ms": 3.0},
        {"time": "2026-11-28T07:00:00.000+00:00", "call": "c1", "session": "stdio:a", "owner": "local",
         "kind": "run", "outcome": "ok", "duration_ms": 9.0},
        {"time": "2026-11-28T08:00:00.000+00:00", "call": "c2", "session": "stdio:b", "owner": "local",
         "kind": "run", "outcome": "timeout", "duration_ms": 30000.0},
        {"time": "2026-11-28T08:30:00.000+00:00", "call": "c3", "session": "p:t-x:a", "owner": "t-x",
         "kind": "run", "outcome": "ok", "duration_ms": 1.0},
    ])  # fmt: skip
    calls = audited_calls(path, "local")
    assert set(calls) == {"c1", "c2"} and calls["c1"].run is not None and len(calls["c1"].uses) == 1
    assert [c.call for c in search(path, "local", Search())] == ["c2", "c1"]  # newest first
    assert [c.call for c in search(path, "local", Search(server="time", tool="now"))] == ["c1"]
    assert [c.call for c in search(path, "local", Search(outcome="timeout"))] == ["c2"]
    assert [c.call for c in search(path, "local", Search(session="stdio:b"))] == ["c2"]
    assert [c.call for c in search(path, "local", Search(since="2026-11-28T07:30"))] == ["c2"]
    assert [c.call for c in search(path, "local", Search(until="2026-11-28T07"))] == ["c1"]
    assert [c.call for c in search(path, "t-x", Search())] == ["c3"]
    assert search(path, "t-y", Search()) == [] and audited_calls(tmp_path / "missing", "local") == {}


def test_the_console_is_off_unless_turned_on_and_its_settings_are_checked() -> None:
    assert Settings.load(env={}).console is False
    on = Settings.load(env={"MCP_BRIDGE_CONSOLE": "on", "MCP_BRIDGE_CONSOLE_PORT": "8770"})
    assert on.console and on.console_port == 8770
    with pytest.raises(SettingsError, match="MCP_BRIDGE_CONSOLE='maybe' is not valid: expected on or off"):
        Settings.load(env={"MCP_BRIDGE_CONSOLE": "maybe"})
    with pytest.raises(SettingsError, match="MCP_BRIDGE_CONSOLE_PORT='70000' is not valid"):
        Settings.load(env={"MCP_BRIDGE_CONSOLE_PORT": "70000"})


def test_the_board_keeps_calls_per_owner_and_only_their_owner_cancels_them(tmp_path: Path) -> None:
    async def scenario() -> None:
        audit = AuditLog(tmp_path / "audit.jsonl")
        board = CallBoard(audit, lambda key: True)
        key = SessionKey.principal("t-a", "work")
        started = asyncio.Event()

        async def slow() -> ExecutionResult:
            started.set()
            await asyncio.sleep(3600)
            return ExecutionResult("ok")

        task = asyncio.ensure_future(_track(board, slow(), "c1", key, "t-a", "print('<b>')"))
        await started.wait()
        assert [c.call for c in board.running_of("t-a")] == ["c1"] and board.running_of("t-b") == []
        assert board.call("c1", "t-b") is None and board.session(key, "t-b") is None
        assert not board.cancel("c1", "t-b")  # another principal: as if there were no such call
        assert board.cancel("c1", "t-a")
        result = await task
        assert result.status == "error" and result.error is not None and result.error.type == CANCELLED
        ended = board.call("c1", "t-a")
        assert ended is not None and ended.outcome == "cancelled" and ended.code == "print('<b>')"
        assert await _track(board, _done(), "c2", key, "t-a", "1") == ExecutionResult("ok")
        assert [c.call for c in board.finished_of("t-a")] == ["c2", "c1"] and board.finished_of("t-b") == []
        assert board.sessions_of("t-a")[0].calls == 2
        audit.flush()

    asyncio.run(scenario())
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [(line["call"], line["kind"], line["outcome"]) for line in lines] == [
        ("c1", "run", "cancelled"),
        ("c2", "run", "ok"),
    ]
    assert "print" not in json.dumps(lines)  # the code's sha256 and size, never the code


async def _done() -> ExecutionResult:
    return ExecutionResult("ok")


async def _track(board: CallBoard, work: Awaitable[ExecutionResult], call: str, key: SessionKey, owner: str,
                 code: str) -> ExecutionResult:  # fmt: skip
    """A call on the board as the bridge runs one: begun in the task it runs in, then tracked."""
    entry, _ = board.begin(call, key, owner, code, None)
    return await board.track(work, entry)


def test_a_console_cancel_is_taken_back_from_the_calls_task_and_a_callers_own_cancel_still_goes_up() -> None:
    """The board cancels a call through the task it runs in (no cancel scope of its own, which cost every call):
    the task goes on afterwards with nothing owed (``cancelling() == 0``, so its own scopes and timeouts behave),
    whether the cancel ended the call or the code swallowed it; and a cancel of the caller's own, at the same
    time, is never swallowed with it."""

    async def scenario() -> None:
        board = CallBoard(AuditLog(None), lambda key: True)
        key = SessionKey.principal("t-a", "work")
        started = asyncio.Event()

        async def slow(swallow: bool = False) -> ExecutionResult:
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if not swallow:
                    raise
            return ExecutionResult("ok")

        async def caller(call: str, swallow: bool) -> tuple[ExecutionResult, int]:
            result = await _track(board, slow(swallow), call, key, "t-a", "1")
            task = asyncio.current_task()
            assert task is not None
            return result, task.cancelling()

        for call, swallow, status in (("c1", False, "error"), ("c2", True, "ok")):
            started.clear()
            running = asyncio.ensure_future(caller(call, swallow))
            await started.wait()
            assert board.cancel(call, "t-a") and board.cancel(call, "t-a")  # a second click: still one cancel
            result, owed = await running
            assert (result.status, owed) == (status, 0), (call, result)
        started.clear()
        both = asyncio.ensure_future(_track(board, slow(), "c3", key, "t-a", "1"))
        await started.wait()
        assert board.cancel("c3", "t-a")
        both.cancel()  # the caller gives up too: that is its own, and goes on up
        with pytest.raises(asyncio.CancelledError):
            await both
        ended = board.call("c3", "t-a")
        assert ended is not None and ended.outcome == "cancelled" and ended.task is None

    asyncio.run(scenario())


@pytest.mark.parametrize("traced", [True, False])
def test_a_run_line_written_by_hand_is_the_json_line_its_fields_make(traced: bool) -> None:
    """``_run_line`` writes its JSON by hand (``json.dumps`` cost every call three times as much): whatever a
    session's name, an owner or the output hold (quotes, a newline, a script tag, other scripts, a lone
    surrogate), the line is one line of JSON with the documented fields in their order, as ``json`` would write it."""
    hostile = 'a"b\\c\n</script>\u2028é\x00'
    key = SessionKey.principal("t-a", hostile)
    entry = CallSeen("c1", key, hostile, "print('x')\n# \udcff", 1764331875.0625, "ab" * 16 if traced else "")
    entry.result = ExecutionResult("ok", stdout="é\udcff\n", stderr="w")
    entry.outcome, entry.duration = "ok", 0.12345
    raw = _run_line(entry)
    assert raw.endswith(b"}\n") and raw.count(b"\n") == 1
    code = entry.code.encode("utf-8", "surrogatepass")
    expected = {"time": "2025-11-28T12:11:15.062+00:00", "call": "c1", "session": str(key), "owner": hostile,
                "kind": "run", "outcome": "ok", "duration_ms": round(0.12345 * 1000, 1),
                "code_sha256": hashlib.sha256(code).hexdigest(), "code_bytes": len(code), "output_bytes": 7,
                "images": 0} | ({"trace_id": "ab" * 16} if traced else {})  # fmt: skip
    line = json.loads(raw)
    assert line == expected and list(line) == list(expected)
    assert raw == (json.dumps(expected, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    for when in (0.0, 1764331875.0625, 1764331875.999, 1e9 + 0.0005, 4102444800.5):
        assert stamp(when) == datetime.datetime.fromtimestamp(when, datetime.UTC).isoformat(timespec="milliseconds")


def test_run_lines_that_share_a_queue_entry_keep_the_logs_order_and_none_is_lost(tmp_path: Path) -> None:
    """Calls that end one after another queue their run lines as one entry (``_RunLines``): a line queued by
    anyone else in between starts a new one (the log keeps its order), a batch already written is never added
    to (its line would be lost), and a batch holds at most ``BATCH`` lines; each line is the one ``_run_line``
    makes."""
    path = tmp_path / "audit.jsonl"

    async def scenario() -> None:
        audit = AuditLog(path)
        board = CallBoard(audit, lambda key: True)
        key = SessionKey.stdio("a")
        for n in range(BATCH + 2):  # one batch full, and the next begun
            await _track(board, _done(), f"r{n}", key, "local", "1")
        assert len(audit._pending) == 2  # a full batch, and the next
        audit.record(session=str(key), owner="local", server="s", tool="t", arguments=b"{}", outcome="ok",
                     duration=0.0)  # fmt: skip
        await _track(board, _done(), "after-tool", key, "local", "1")
        board.written()
        await _track(board, _done(), "after-flush", key, "local", "1")
        assert len(audit._pending) == 1  # its own entry, not one already written
        board.written()

    asyncio.run(scenario())
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    expected = [f"r{n}" for n in range(BATCH + 2)] + ["tool", "after-tool", "after-flush"]
    assert [line["call"] if line.get("kind") == "run" else "tool" for line in lines] == expected


def test_a_caller_told_through_the_board_keeps_every_other_field() -> None:
    """``Caller.telling`` copies by hand (``dataclasses.replace`` costs several times as much on every call): a
    field added to ``Caller`` and forgotten there would be dropped from every call with the console on."""
    given = Caller(**{field.name: object() for field in dataclasses.fields(Caller)})  # type: ignore[arg-type]
    news = cast(News, object())
    told = given.telling(news)
    assert told.news is news
    assert all(getattr(told, field.name) is getattr(given, field.name) for field in dataclasses.fields(Caller)
               if field.name != "news")  # fmt: skip


def test_a_watcher_wakes_when_the_board_changes(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, int]:
        board = CallBoard(AuditLog(None), lambda key: True)
        version = board.version
        waiting = asyncio.ensure_future(board.wait_change(version, 60))
        await asyncio.sleep(0)
        await _track(board, _done(), "c1", SessionKey.stdio("a"), "local", "1")
        return version, await asyncio.wait_for(waiting, 60)

    before, after = asyncio.run(scenario())
    assert after > before


def test_a_running_calls_latest_progress_is_kept_on_the_board_and_passed_on_only_to_a_client_that_asked(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        board = CallBoard(AuditLog(None), lambda key: True)
        key = SessionKey.principal("t-a", "work")
        heard: list[str] = []

        async def told(line: str) -> None:
            heard.append(line)

        first, silent = board.begin("c1", key, "t-a", "1", None)  # a client that asked for no progress
        second, asking = board.begin("c2", key, "t-a", "2", Caller(news=told, asker="x"))
        assert asking.asker == "x" and silent.news is not None and asking.news is not None
        go = asyncio.Event()

        async def reporting(news: News) -> ExecutionResult:
            await news("everything/longRunningOperation: step 1 (1/3)")
            await news("everything/longRunningOperation: <b>step 2</b> (2/3)")
            await go.wait()
            return ExecutionResult("ok")

        one = asyncio.ensure_future(board.track(reporting(silent.news), first))
        two = asyncio.ensure_future(board.track(reporting(asking.news), second))
        await asyncio.sleep(0.01)
        running = {c.call: c.progress for c in board.running_of("t-a")}
        assert running == dict.fromkeys(("c1", "c2"), "everything/longRunningOperation: <b>step 2</b> (2/3)")
        assert heard == ["everything/longRunningOperation: step 1 (1/3)",
                         "everything/longRunningOperation: <b>step 2</b> (2/3)"]  # fmt: skip
        page = calls_page(board.running_of("t-a"), [], [], Search(), True, 0.0, "/console", "x")
        assert "&lt;b&gt;step 2&lt;/b&gt; (2/3)" in page and "<b>step" not in page
        go.set()
        await asyncio.gather(one, two)
        await silent.news("late")  # the call ended: nothing to keep, nothing kept
        assert board.running_of("t-a") == []

    asyncio.run(scenario())


def test_the_sessions_memory_is_its_sandboxes_or_its_snapshots_and_unknown_rather_than_a_guess() -> None:
    def seen(name: str) -> SessionSeen:
        return SessionSeen(SessionKey.stdio(name), "local", 0.0, 0.0)

    rows = [
        (seen("live"), "running", 47 << 20),
        (seen("asleep"), "hibernated: its next call restores it", 3 << 10),
        (seen("podman"), "running", None),
        (seen("fresh"), "reset: starts fresh on its next call", None),
    ]
    page = sessions_page(rows, "bubblewrap", 0.0, "/console", "x")
    cells = re.findall(r'<span class="memory">([^<]*)</span>', page)
    assert cells == ["47.0 MiB", "3.0 KiB on disk", "unknown", ""]
    assert size(512) == "512 B" and size(3 << 30) == "3.0 GiB"
