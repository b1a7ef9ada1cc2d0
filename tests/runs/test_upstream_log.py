"""An upstream server's log messages, passed on as news of the run: one printable line each, bounded per run."""

from __future__ import annotations

import asyncio

import mcp_types as types

from mcp_codemode.runs.relay_run import MAX_LOG_LINES, MAX_LOG_TEXT, Run, upstream_log


def test_log_messages_become_one_bounded_line_each_and_a_flood_is_cut_with_one_notice() -> None:
    lines: list[str] = []

    async def news(text: str) -> None:
        lines.append(text)

    async def main() -> None:
        run = Run("local", "s")
        log = upstream_log(run, news, "srv", "tool")
        await log(types.LoggingMessageNotificationParams(level="warning", data="disk\nfull\x1b[2J", logger="io"))
        await log(types.LoggingMessageNotificationParams(level="info", data={"n": 1}))
        await log(types.LoggingMessageNotificationParams(level="error", data="x" * (MAX_LOG_TEXT * 3)))
        for _ in range(MAX_LOG_LINES * 2):
            await log(types.LoggingMessageNotificationParams(level="debug", data="spam"))
        # A second run starts its own count.
        await upstream_log(Run("local", "s"), news, "srv", "tool")(
            types.LoggingMessageNotificationParams(level="info", data="next run")
        )

    asyncio.run(main())
    assert lines[0] == "srv/tool log (warning, io): disk full [2J"
    assert lines[1] == 'srv/tool log (info): {"n": 1}'
    assert lines[2] == "srv/tool log (error): " + "x" * MAX_LOG_TEXT + "…"
    assert lines[MAX_LOG_LINES] == f"srv: further log messages of this run were dropped (at most {MAX_LOG_LINES})"
    assert len(lines) == MAX_LOG_LINES + 2 and lines[-1] == "srv/tool log (info): next run"
