"""The audit log: its lines for every outcome of a tool call, its rotation, its permissions, and its failures.

The lines are produced by real calls: sandboxed code in bubblewrap through ``Bridge.run``, or (for cancelling a
call in flight, which needs a handle on the call) the relay itself, against the real reference servers. The
file's own mechanics (rotation, modes, a path that cannot be written) are tested on ``AuditLog`` alone.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import stat
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from mcp_codemode.policy.rules import Policy, canonical_json
from mcp_codemode.runs import audit
from mcp_codemode.runs.audit import AuditLog
from mcp_codemode.runs.bridge import Bridge
from mcp_codemode.runs.relay import Relay
from mcp_codemode.runs.relay_run import Run
from mcp_codemode.runs.saved_tools import FileSavedTools, SavedToolStore
from mcp_codemode.settings import Settings
from mcp_codemode.upstream.model import Discovery
from mcp_codemode.upstream.tools.directory import ToolDirectory
from tests.support import upstreams
from tests.support.backends import sandbox_settings
from tests.support.cells import private_state_dir, reported, run
from tests.support.clients import require_bubblewrap

if TYPE_CHECKING:
    from mcp_codemode.guest.protocol import CallFrame

SECRET = "sk-live-0123456789abcdef-DO-NOT-LOG"
FIELDS = ["time", "session", "owner", "server", "tool", "args_sha256", "args_bytes", "outcome", "duration_ms",
          "result_bytes"]  # fmt: skip


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def record(log: AuditLog, outcome: str = "ok", **changes: Any) -> None:
    fields: dict[str, Any] = {"session": "s", "owner": "local", "server": "time", "tool": "get_current_time",
                              "arguments": b"{}", "outcome": outcome, "duration": 0.0015}  # fmt: skip
    fields.update(changes)
    log.record(**fields)


# ------------------------------------------------------------------------------------------- the settings


def test_the_audit_settings_default_to_a_file_under_the_state_directory(tmp_path: Path) -> None:
    settings = Settings.load(env={}, overrides={"state_dir": tmp_path})
    assert settings.audit_path == tmp_path / "audit" / "audit.jsonl"
    assert (settings.audit_max_bytes, settings.audit_backups) == (10 << 20, 5)
    env = {"MCP_BRIDGE_AUDIT_LOG": "off"}
    assert Settings.load(env=env).audit_path is None
    env = {"MCP_BRIDGE_AUDIT_LOG": "~/calls.jsonl", "MCP_BRIDGE_AUDIT_MAX_BYTES": "1m", "MCP_BRIDGE_AUDIT_BACKUPS": "0"}
    settings = Settings.load(env=env)
    assert settings.audit_path == Path("~/calls.jsonl").expanduser()
    assert (settings.audit_max_bytes, settings.audit_backups) == (1 << 20, 0)
    file = tmp_path / "settings.toml"
    file.write_text('audit_log = "OFF"\naudit_backups = 100\n')
    assert Settings.load(env={}, settings_file=file).audit_path is None


# ------------------------------------------------------------------------------------------- the file


def test_a_line_has_every_field_and_the_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "audit" / "audit.jsonl"
    log = AuditLog(path)
    record(log, arguments=canonical_json({"timezone": "UTC"}), result_bytes=120)
    record(log, "refused", rule="deny_tools", arguments=None, result_bytes=None)
    record(log, "error", error="ArgumentError")
    ok, refused, error = lines(path)
    assert list(ok) == FIELDS
    assert ok["args_sha256"] == hashlib.sha256(b'{"timezone":"UTC"}').hexdigest() and ok["args_bytes"] == 18
    assert ok["time"].endswith("+00:00") and len(ok["time"].split(".")[1]) == len("123+00:00")
    assert (ok["duration_ms"], ok["result_bytes"]) == (1.5, 120)
    assert (refused["outcome"], refused["rule"], refused["args_sha256"]) == ("refused", "deny_tools", None)
    assert (error["outcome"], error["error"]) == ("error", "ArgumentError")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_file_grown_past_its_size_is_rotated_keeping_the_number_of_backups(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, max_bytes=1000, backups=2)
    for number in range(40):
        record(log, session=f"s{number:02d}")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]
    for file in tmp_path.iterdir():
        assert file.stat().st_size <= 1000
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
    newest = [line["session"] for line in lines(path)]
    assert newest[-1] == "s39"
    kept = [line["session"] for name in ("audit.jsonl.2", "audit.jsonl.1", "audit.jsonl") for line in
            lines(tmp_path / name)]  # fmt: skip
    assert kept == [f"s{n:02d}" for n in range(40 - len(kept), 40)]  # in order, the oldest dropped whole
    none = AuditLog(tmp_path / "none" / "audit.jsonl", max_bytes=1000, backups=0)
    for number in range(40):
        record(none, session=f"s{number:02d}")
    assert sorted(p.name for p in (tmp_path / "none").iterdir()) == ["audit.jsonl"]


@pytest.mark.anyio
async def test_on_an_event_loop_lines_wait_for_the_next_turn_and_keep_order_and_the_size_bound(tmp_path: Path) -> None:
    """The relay sends its reply before the line is written: a line queued in one turn of the loop reaches the
    file on the next. Lines queued together are written in order, in chunks that keep rotation's bound."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, max_bytes=1000, backups=2)
    record(log, session="first")
    assert not path.exists()  # not during the turn that queued it
    await asyncio.sleep(0)
    assert [line["session"] for line in lines(path)] == ["first"]
    for number in range(40):  # one turn: a burst of gathered calls ending together
        record(log, session=f"s{number:02d}")
    assert len(lines(path)) == 1
    await asyncio.sleep(0)
    kept = [line["session"] for name in ("audit.jsonl.2", "audit.jsonl.1", "audit.jsonl") for line in
            lines(tmp_path / name)]  # fmt: skip
    assert kept == [f"s{n:02d}" for n in range(40 - len(kept), 40)]
    assert all(file.stat().st_size <= 1000 for file in tmp_path.iterdir())
    record(log, session="last")
    log.flush()  # what the bridge does when it closes: nothing queued is left behind
    assert lines(path)[-1]["session"] == "last"
    await asyncio.sleep(0)
    assert [line["session"] for line in lines(path)].count("last") == 1


@pytest.mark.anyio
async def test_lines_a_write_failed_to_write_are_kept_in_order_and_written_once_it_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A full file table (the bridge at its descriptor limit) or a full disk fails a write for a while: its lines
    wait, ahead of later ones, and reach the file with the retry; past HELD_BYTES the newest are dropped, counted.
    (Here the file's path is a directory for a while, which fails the open as EMFILE would: a real failure.)"""
    monkeypatch.setattr(audit, "RETRY_SECONDS", 0.01)
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    record(log, session="before")
    await asyncio.sleep(0)
    path.rename(tmp_path / "kept.jsonl")
    path.mkdir()  # from now on the open fails (EISDIR)
    for number in range(3):
        record(log, session=f"while-{number}")
    await asyncio.sleep(0)
    assert path.is_dir() and len(log._pending) == 3  # tried, failed, held
    path.rmdir()
    record(log, session="after")
    await asyncio.sleep(0.2)  # the retry (0.01 s) comes first: no other line was needed
    assert [line["session"] for line in lines(path)] == ["while-0", "while-1", "while-2", "after"]

    one_line = len((path.read_bytes().splitlines(keepends=True))[0])
    monkeypatch.setattr(audit, "HELD_BYTES", 2 * one_line + 10)
    path.rename(tmp_path / "kept2.jsonl")
    path.mkdir()
    with caplog.at_level(logging.WARNING, logger="mcp_codemode.runs.audit"):
        for number in range(5):
            record(log, session=f"burst-{number}")
            await asyncio.sleep(0.05)  # a retry comes between lines (0.01 s), fails and holds what fits
        path.rmdir()
        log.flush()  # what a console page or a closing bridge does
    assert [line["session"] for line in lines(path)] == ["burst-0", "burst-1"]
    assert "works again (3 lines that did not fit in the meantime were dropped)" in caplog.text


@pytest.mark.anyio
async def test_a_line_that_may_wait_shares_the_next_write_and_none_waits_past_its_linger_or_outlives_a_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console's run lines (``soon=False``): calls that follow each other share one write instead of one each;
    none waits longer than ``LINGER`` (an ordering of the loop's timers, not a measured time), none is left queued
    when the bridge closes (``flush``), and a queue grown to ``MAX_PENDING`` is written on the next turn."""
    monkeypatch.setattr(audit, "LINGER", 0.05)
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)

    def written() -> list[str]:
        return [line.get("call") or line["session"] for line in lines(path)] if path.exists() else []

    log.write({"call": "run1"}, soon=False)
    await asyncio.sleep(0)
    assert written() == []  # not on the next turn, as a tool's line would be
    record(log, session="tool")  # one that may not wait: the run line goes with it, in the order both came
    await asyncio.sleep(0)
    assert written() == ["run1", "tool"]
    log.write({"call": "run2"}, soon=False)
    log.write({"call": "run3"}, soon=False)
    await asyncio.sleep(0)
    assert written() == ["run1", "tool"]
    await asyncio.sleep(2 * audit.LINGER)  # a timer due after the log's: the log's has run first
    assert written() == ["run1", "tool", "run2", "run3"]
    log.write({"call": "run4"}, soon=False)
    log.flush()  # the bridge closing: nothing queued is left behind, and nothing is written twice
    await asyncio.sleep(2 * audit.LINGER)
    assert written() == ["run1", "tool", "run2", "run3", "run4"]
    monkeypatch.setattr(audit, "MAX_PENDING", 3)
    for number in range(3):
        log.write({"call": f"burst{number}"}, soon=False)
    await asyncio.sleep(0)
    assert written()[-3:] == ["burst0", "burst1", "burst2"]


def test_a_log_that_cannot_be_written_warns_once_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    log = AuditLog(blocker / "audit.jsonl")  # its directory would have to be inside a regular file
    with caplog.at_level(logging.DEBUG, logger="mcp_codemode.runs.audit"):
        for _ in range(3):
            record(log)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "cannot write" in warnings[0].getMessage()
    assert not AuditLog(None).enabled
    AuditLog(None).write({"anything": 1})  # off: nothing happens


# ------------------------------------------------------------------------------------------- real calls


@pytest.mark.backend
@pytest.mark.anyio
async def test_calls_from_the_sandbox_get_a_line_per_outcome_without_argument_values(tmp_path: Path) -> None:
    require_bubblewrap()
    policy = Policy(deny_tools=("everything/get-env",))
    with private_state_dir() as state:
        settings = sandbox_settings(runtime="bubblewrap", state_dir=state, policy=policy)
        servers = (upstreams.everything(), upstreams.time())
        async with Bridge(settings, Discovery(servers=servers)) as bridge:
            code = textwrap.dedent(f"""
                outcomes = []
                outcomes.append(await mcp_everything.echo(message={SECRET!r}))
                for make in (lambda: mcp_time.get_current_time(timezone="Mars/{SECRET}"),
                             lambda: runtime.call_tool("everything", "get-env", {{"key": {SECRET!r}}}),
                             lambda: runtime.call_tool("everything", "trigger-long-running-operation",
                                                       {{"duration": 60, "steps": 2}}, timeout=1),
                             lambda: runtime.call_tool("everything", "echo", {{"wrong": {SECRET!r}}})):
                    try:
                        await make()
                    except runtime.MCPError as exc:
                        outcomes.append(type(exc).__name__)
                report(outcomes)
                """)
            result = await run(bridge, code, "audited", owner="alice")
            assert reported(result) == [f"Echo: {SECRET}", "ToolError", "PolicyError", "ToolTimeout", "ArgumentError"]
        path = state / "audit" / "audit.jsonl"
        text = path.read_text()
        assert SECRET not in text and "Mars" not in text
        ok, tool_error, refused, timeout, error = lines(path)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for line in (ok, tool_error, refused, timeout, error):
        assert (line["session"], line["owner"]) == ("cli:audited", "alice")  # the key's form, as `run --session`
        assert line["duration_ms"] >= 0
    assert (ok["server"], ok["tool"], ok["outcome"]) == ("everything", "echo", "ok")
    echoed = canonical_json({"message": SECRET})
    assert (ok["args_sha256"], ok["args_bytes"]) == (hashlib.sha256(echoed).hexdigest(), len(echoed))
    assert ok["result_bytes"] > len(SECRET)
    assert (tool_error["server"], tool_error["tool"]) == ("time", "get_current_time")
    assert tool_error["outcome"] == "tool_error"
    assert tool_error["result_bytes"] > 0
    assert (refused["tool"], refused["outcome"], refused["rule"], refused["result_bytes"]) == (
        "get-env", "refused", "deny_tools", None)  # fmt: skip
    assert refused["args_sha256"] == hashlib.sha256(canonical_json({"key": SECRET})).hexdigest()
    assert (timeout["tool"], timeout["outcome"]) == ("trigger-long-running-operation", "timeout")
    assert (error["outcome"], error["error"]) == ("error", "ArgumentError")


@pytest.mark.backend
@pytest.mark.anyio
async def test_a_call_cancelled_in_flight_gets_a_line_and_an_unwritable_log_breaks_no_call(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for path in (tmp_path / "audit.jsonl", blocker / "audit.jsonl"):
        settings = sandbox_settings(state_dir=tmp_path / "state")
        async with ToolDirectory((upstreams.everything(),), settings) as directory:
            relay = Relay(directory, FileSavedTools(SavedToolStore(tmp_path / "saved")), settings, AuditLog(path))
            run_ = Run("local", "cancelled")
            echo = {"op": "call", "server": "everything", "tool": "echo", "arguments": {"message": "hi"}}
            reply = await relay.handle("local", cast("CallFrame", echo), run_)
            assert reply["ok"], reply
            long = {"op": "call", "server": "everything", "tool": "trigger-long-running-operation",
                    "arguments": {"duration": 60, "steps": 2}}  # fmt: skip
            task = asyncio.create_task(relay.handle("local", cast("CallFrame", long), run_))
            while directory.hub.state("everything").status != "ready" or run_.calls < 2:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    ok, cancelled = lines(tmp_path / "audit.jsonl")
    assert ok["outcome"] == "ok"
    assert (cancelled["tool"], cancelled["outcome"], cancelled["result_bytes"]) == (
        "trigger-long-running-operation", "cancelled", None)  # fmt: skip
