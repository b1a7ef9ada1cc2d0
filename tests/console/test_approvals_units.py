"""The console's waiting approvals (runs/approvals.py), as pure logic: only the call's owner answers, once, only
while the call waits, and only for exactly what the page showed; and the setting that chooses who answers."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from mcp_codemode.errors import SettingsError
from mcp_codemode.runs.approvals import Approvals, Waiting, shown_digest
from mcp_codemode.settings import Settings

SHOWN = '{\n "path": "/tmp/a"\n}'


def _ask(approvals: Approvals, owner: str = "t-a") -> contextlib.AbstractContextManager[Waiting]:
    return approvals.waiting(owner, "p:t-a:work", "c1", "files", "delete", 'ask_tools pattern "files/*"', SHOWN)


def test_only_the_owner_sees_and_answers_and_only_once() -> None:
    async def scenario() -> None:
        changes: list[int] = []
        approvals = Approvals("console", lambda: changes.append(1))
        with _ask(approvals) as waiting:
            assert [w.id for w in approvals.waiting_of("t-a")] == [waiting.id]
            assert approvals.waiting_of("t-b") == []  # another token's holder does not see it
            assert not approvals.answer(waiting.id, "t-b", waiting.digest, True)  # nor answer it
            assert not waiting.answer.done()
            assert not approvals.answer("no-such-id", "t-a", waiting.digest, True)
            assert approvals.answer(waiting.id, "t-a", waiting.digest, False)
            assert not approvals.answer(waiting.id, "t-a", waiting.digest, True)  # one answer only
            assert await waiting.answer is False
            assert approvals.waiting_of("t-a") == []  # answered: off the page
        assert changes == [1, 1]  # shown, then gone: the live page follows

    asyncio.run(scenario())


def test_an_answer_approves_only_what_the_page_showed() -> None:
    async def scenario() -> None:
        approvals = Approvals("console")
        with _ask(approvals) as waiting:
            assert waiting.digest == shown_digest("files", "delete", SHOWN)
            other = shown_digest("files", "delete", '{\n "path": "/"\n}')
            for digest in (other, shown_digest("files", "write", SHOWN), "", waiting.digest[:-1]):
                assert not approvals.answer(waiting.id, "t-a", digest, True)
            assert not waiting.answer.done()
            assert approvals.answer(waiting.id, "t-a", waiting.digest, True)
            assert await waiting.answer is True

    asyncio.run(scenario())


def test_no_answer_after_the_call_ended() -> None:
    async def scenario() -> None:
        approvals = Approvals("either")
        with _ask(approvals) as waiting:
            pass  # the call timed out or was cancelled while it waited
        assert waiting.answer.cancelled()
        assert not approvals.answer(waiting.id, "t-a", waiting.digest, True)
        assert approvals.waiting_of("t-a") == []

    asyncio.run(scenario())


def test_who_answers_follows_the_mode() -> None:
    assert [Approvals(mode).answers_for(False) for mode in ("client", "console", "either")] == [False, True, True]
    assert [Approvals(mode).answers_for(True) for mode in ("client", "console", "either")] == [False, True, False]
    with pytest.raises(ValueError, match="anyone"):
        Approvals("anyone")


def test_the_approvals_setting_is_checked_and_defaults_by_the_console() -> None:
    assert Settings.load(env={}).approvers == "client"
    assert Settings.load(env={"MCP_BRIDGE_CONSOLE": "on"}).approvers == "either"
    on = {"MCP_BRIDGE_CONSOLE": "on"}
    assert Settings.load(env={**on, "MCP_BRIDGE_APPROVALS": "Console"}).approvers == "console"
    assert Settings.load(env={**on, "MCP_BRIDGE_APPROVALS": "client"}).approvers == "client"
    with pytest.raises(SettingsError, match="MCP_BRIDGE_APPROVALS='anyone' is not valid: expected who may answer"):
        Settings.load(env={**on, "MCP_BRIDGE_APPROVALS": "anyone"})
    with pytest.raises(SettingsError, match="MCP_BRIDGE_APPROVALS is console, but MCP_BRIDGE_CONSOLE is off"):
        Settings.load(env={"MCP_BRIDGE_APPROVALS": "console"})
