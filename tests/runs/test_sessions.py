"""Notebook behaviour of sessions on a real sandbox: the logic on the default backend (ONE_BACKEND), what a backend
does itself (output plumbing, isolation, interrupts) on every one."""

from __future__ import annotations

import ast
import asyncio
import json

import pytest

from mcp_codemode.errors import SessionLimitError
from mcp_codemode.runs.sessions import SessionManager
from tests.support.backends import ONE_BACKEND

pytestmark = pytest.mark.usefixtures("no_orphans")


@ONE_BACKEND
def test_variables_imports_and_functions_persist_between_calls(with_sessions):
    async def body(s: SessionManager):
        first = await s.execute("import math\nx = 20\ndef double(v):\n    return v * 2")
        second = await s.execute("print(double(x) + math.floor(2.5))")
        return first, second

    first, second = with_sessions(body)
    assert first.status == "ok" and first.value is None
    assert second.status == "ok"
    assert second.stdout == "42\n"


@ONE_BACKEND
def test_last_bare_expression_is_shown_and_kept_in_underscore(with_sessions):
    async def body(s: SessionManager):
        shown = await s.execute("y = 6\ny * 7")
        none = await s.execute("None")
        underscore = await s.execute("_ + 1")
        statement = await s.execute("z = 1")
        return shown, none, underscore, statement

    shown, none, underscore, statement = with_sessions(body)
    assert shown.value == "42"
    assert none.value is None
    assert underscore.value == "43"
    assert statement.value is None


@ONE_BACKEND
def test_top_level_await_runs_and_its_value_is_shown(with_sessions):
    async def body(s: SessionManager):
        return await s.execute(
            "import asyncio\nasync def f():\n    await asyncio.sleep(0.01)\n    return 'done'\nawait f()"
        )

    result = with_sessions(body)
    assert result.status == "ok", result
    assert result.value == "'done'"


@ONE_BACKEND
def test_exception_reports_only_the_users_frames(with_sessions):
    async def body(s: SessionManager):
        await s.execute("def inner():\n    raise ValueError('bad value')")
        return await s.execute("inner()")

    result = with_sessions(body)
    assert result.status == "error"
    assert result.error is not None
    assert result.error.type == "ValueError"
    assert result.error.message == "bad value"
    assert "<cell 2>" in result.error.traceback and "<cell 1>" in result.error.traceback
    assert "worker.py" not in result.error.traceback
    assert "asyncio" not in result.error.traceback


@ONE_BACKEND
def test_old_cells_sources_are_dropped_unless_they_defined_code(with_sessions):
    """A long session must not keep every cell's source: only cells that left code behind keep theirs."""

    async def body(s: SessionManager):
        await s.execute("def inner():\n    raise ValueError('from the first cell')")
        for _ in range(150):
            await s.execute("1")
        raised = await s.execute("inner()")
        kept = await s.execute(
            "import linecache; sorted(int(k[6:-1]) for k in linecache.cache if k.startswith('<cell '))"
        )
        return raised, kept

    raised, kept = with_sessions(body)
    assert raised.error is not None and "raise ValueError('from the first cell')" in raised.error.traceback
    cells = ast.literal_eval(kept.value or "")
    assert cells[0] == 1  # it defined a function: kept
    assert 2 not in cells and len(cells) <= 101  # old cells without code are gone; the last 100 stay


@ONE_BACKEND
def test_syntax_error_points_at_the_line(with_sessions):
    result = with_sessions(lambda s: s.execute("x = (1,\nprint('never')"))
    assert result.status == "error"
    assert result.error is not None and result.error.type == "SyntaxError"
    assert "worker.py" not in result.error.traceback


@ONE_BACKEND
def test_system_exit_does_not_end_the_session(with_sessions):
    async def body(s: SessionManager):
        await s.execute("kept = 'yes'")
        exited = await s.execute("import sys; sys.exit(3)")
        after = await s.execute("kept")
        return exited, after

    exited, after = with_sessions(body)
    assert exited.status == "error" and exited.error is not None and exited.error.type == "SystemExit"
    assert after.value == "'yes'"


def test_output_from_fds_subprocesses_and_stderr_is_captured_in_order(with_sessions):
    code = (
        "import os, subprocess, sys\n"
        "print('from print')\n"
        "os.write(1, b'from os.write\\n')\n"
        "subprocess.run(['/bin/echo', 'from a subprocess'])\n"
        "print('to stderr', file=sys.stderr)\n"
        "os.write(2, b'fd 2\\n')"
    )

    async def body(s: SessionManager):
        result = await s.execute(code)
        after = await s.execute("'channel intact'")
        return result, after

    result, after = with_sessions(body)
    assert result.status == "ok", result
    assert result.stdout == "from print\nfrom os.write\nfrom a subprocess\n"
    assert result.stderr == "to stderr\nfd 2\n"
    assert after.value == "'channel intact'"


@ONE_BACKEND
def test_reset_gives_a_fresh_namespace(with_sessions):
    async def body(s: SessionManager):
        await s.execute("secret = 1")
        return await s.execute("'secret' in dir()", reset=True)

    result = with_sessions(body)
    assert result.value == "False"
    assert "reset" in result.notice


def test_sessions_are_isolated_from_each_other(with_sessions):
    async def body(s: SessionManager):
        await s.execute("owner = 'alice'", session="alice")
        return await s.execute("'owner' in dir()", session="bob")

    assert with_sessions(body).value == "False"


def _interval(code_result) -> tuple[float, float]:
    start, end = json.loads(code_result.stdout)
    return float(start), float(end)


TIMED = "import time, json\nt0 = time.time()\ntime.sleep(0.5)\nprint(json.dumps([t0, time.time()]))"


@ONE_BACKEND
def test_different_sessions_run_in_parallel(with_sessions):
    async def body(s: SessionManager):
        await asyncio.gather(s.execute("1", session="a"), s.execute("1", session="b"))  # warm both workers
        return await asyncio.gather(s.execute(TIMED, session="a"), s.execute(TIMED, session="b"))

    a, b = (_interval(r) for r in with_sessions(body))
    assert a[0] < b[1] and b[0] < a[1], f"the two sessions' runs did not overlap: {a} {b}"


@ONE_BACKEND
def test_calls_into_one_session_queue(with_sessions):
    async def body(s: SessionManager):
        await s.execute("1")
        return await asyncio.gather(s.execute(TIMED), s.execute(TIMED))

    a, b = sorted(_interval(r) for r in with_sessions(body))
    assert a[1] <= b[0], f"two calls of one session overlapped: {a} {b}"


@ONE_BACKEND
def test_idle_sessions_expire_and_the_next_call_says_so(with_sessions):
    async def body(s: SessionManager):
        await s.execute("x = 1", session="idle")
        await asyncio.sleep(1.2)
        # The manager's own reaper (every 0.5 s here) may have expired it already; then there is nothing left.
        still_there = "idle" in s.names()
        expired = await s.expire_idle()
        gone = "idle" not in s.names()
        after = await s.execute("'x' in dir()", session="idle")
        return still_there, expired, gone, after

    still_there, expired, gone, after = with_sessions(body, session_idle_timeout=1.0)
    assert gone
    assert expired == (1 if still_there else 0)
    assert after.value == "False"
    assert "expired" in after.notice


@ONE_BACKEND
def test_session_cap_evicts_the_least_recently_used(with_sessions):
    async def body(s: SessionManager):
        await s.execute("v = 'a'", session="a")
        await s.execute("v = 'b'", session="b")
        await s.execute("v = 'c'", session="c")
        names = s.names()
        back = await s.execute("'v' in dir()", session="a")
        return names, back

    names, back = with_sessions(body, max_sessions=2)
    assert names == ["b", "c"]
    assert back.value == "False"
    assert "make room" in back.notice


@ONE_BACKEND
def test_new_sessions_arriving_together_at_the_cap_never_exceed_it_nor_wait_forever(with_sessions):
    # While one new session's eviction closed its victim, another took the freed place, and both were added:
    # three sessions for two workers, and the third call waited for a worker no idle session ever gives back.
    async def body(s: SessionManager):
        await s.execute("1", session="a")
        await s.execute("1", session="b")
        calls = (s.execute("'ran'", session=name) for name in ("c", "d", "e"))
        results = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 60)
        return results, s.names(), s.pool.counters.peak_live

    results, names, peak = with_sessions(body, max_sessions=2, warm_pool=0)
    ran = [result for result in results if not isinstance(result, BaseException)]
    refused = [result for result in results if isinstance(result, SessionLimitError)]
    assert len(ran) + len(refused) == 3, results
    assert ran and all(result.value == "'ran'" for result in ran), results
    assert len(names) <= 2 and peak <= 2, (names, peak)


@ONE_BACKEND
def test_bad_session_name_is_refused_with_the_rule(with_sessions):
    async def body(s: SessionManager):
        with pytest.raises(ValueError, match="letters, digits"):
            await s.execute("1", session="../etc")

    with_sessions(body)


def test_cancelling_a_call_interrupts_the_code_and_keeps_state(with_sessions):
    async def body(s: SessionManager):
        await s.execute("kept = 5")
        task = asyncio.create_task(s.execute("import time\ntime.sleep(60)"))
        await asyncio.sleep(1.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await s.execute("kept")

    assert with_sessions(body).value == "5"
