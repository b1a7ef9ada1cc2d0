"""One call's progress line: the heartbeat and upstream servers' news on one rising scale (pure logic)."""

from __future__ import annotations

import pytest

from mcp_codemode.face.heartbeat import ProgressLine
from mcp_codemode.runs.relay_run import upstream_progress

pytestmark = pytest.mark.anyio


async def test_news_and_beats_share_one_strictly_rising_line() -> None:
    sent: list[tuple[float, float | None, str | None]] = []

    async def report(progress: float, total: float | None, message: str | None) -> None:
        sent.append((progress, total, message))

    line = ProgressLine(30, report)
    await line.news("time/get_current_time: 1/2")
    await line.news("time/get_current_time: 2/2")  # at once: the same instant must still be a higher value
    await line.beat()
    values = [progress for progress, _, _ in sent]
    assert values == sorted(values) and len(set(values)) == 3, values
    assert [message for _, _, message in sent][:2] == ["time/get_current_time: 1/2", "time/get_current_time: 2/2"]
    assert str(sent[2][2]).startswith("running for 0 s of at most 30 s")
    assert {total for _, total, _ in sent} == {30}


async def test_news_for_a_client_that_went_away_is_dropped_quietly() -> None:
    async def gone(progress: float, total: float | None, message: str | None) -> None:
        raise RuntimeError("the client hung up")

    await ProgressLine(5, gone).news("server/tool: 1")  # the call itself notices a client that left


async def test_an_upstream_report_becomes_one_line_naming_server_and_tool() -> None:
    lines: list[str] = []

    async def news(text: str) -> None:
        lines.append(text)

    progress = upstream_progress(news, "everything", "trigger-long-running-operation")
    await progress(2, 4, None)
    await progress(3, 4, "copying")
    await progress(0.5, None, None)
    assert lines == [
        "everything/trigger-long-running-operation: 2/4",
        "everything/trigger-long-running-operation: copying (3/4)",
        "everything/trigger-long-running-operation: 0.5",
    ]
