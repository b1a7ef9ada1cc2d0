"""A flood of malformed frames from one session leaves the bridge serving every other session.

Everything is real: a ``Bridge`` on bubblewrap, server-everything upstream, and guest code that writes straight
to its worker's control channel (the private descriptor the worker keeps its original stdout on; the guest
runtime's ``rpc`` holds the channel, so forged frames need no fd hunting). One session writes 10,000 malformed
*requests* (well framed, so the worker survives) while another keeps running code and calling a tool; then a
bounded series of sessions break the framing itself (each way twice, eight at a time), and each is killed with the
documented message. The bridge's memory and task count are printed before and after (no thresholds on time).
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
from typing import Any

import pytest

from mcp_codemode.runs.bridge import Bridge
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.upstream.model import Discovery
from tests.support import upstreams
from tests.support.backends import sandbox_settings
from tests.support.cells import private_state_dir, reported, run
from tests.support.clients import require_bubblewrap

pytestmark = pytest.mark.backend

FLOOD = 10_000

# Guest code: build FLOOD malformed requests of every kind and write them to the real control channel.
ATTACK = """
import json, random
from mcp._rpc import rpc
channel = rpc._send.__self__  # the worker's Channel: writes frames to the host, serialised by its lock
rng = random.Random(4711)
deep = {}
node = deep
for _ in range(40):
    node["d"] = {}
    node = node["d"]
kinds = [
    lambda i: {"type": "call", "id": i, "op": rng.choice([7, None, [], {}, True, 1.5])},         # wrong types
    lambda i: {"type": "call", "id": i, "op": rng.choice(["rm -rf /", "__class__", "", "CALL", "x" * 300])},
    lambda i: {"type": "call", "id": rng.choice([-1, 0, 2**60, 1.5, True, "7", None, [i], {"id": i}]),
               "op": "servers"},                                                                 # bad ids
    lambda i: {"type": "call", "op": "call", "server": "everything", "tool": "echo"},            # no id
    lambda i: {"type": "call", "id": i},                                                         # no op
    lambda i: {"type": "call", "id": i, "op": "call"},                                           # no server
    lambda i: {"type": "call", "id": i, "op": "call", "server": "everything"},                   # no tool
    lambda i: {"type": "call", "id": i, "op": "call", "server": "s" * 10_000, "tool": "echo"},   # oversized
    lambda i: {"type": "call", "id": i, "op": "call", "server": "everything", "tool": "t" * 100_000},
    lambda i: {"type": "call", "id": i, "op": "read_resource", "server": "everything", "uri": "u" * 20_000},
    lambda i: {"type": "call", "id": i, "op": "call", "server": "everything", "tool": "echo",
               "arguments": rng.choice([[], "text", 5, None, {"message": [1] * 1000}, {"message": deep},
                                        {"nope": 1}, {"message": "\\ud800" * 10}])},            # garbage arguments
    lambda i: {"type": "call", "id": i, "op": "call", "server": ["everything"], "tool": {"echo": 1}},
    lambda i: {"type": "call", "id": i, "op": "search", "query": {"q": 1}, "limit": 10**30, "evil": 1},
    lambda i: {"type": "call", "id": i, "op": "save_tool", "name": "../../etc/passwd", "source": 5},
    lambda i: {"type": rng.choice(["reply", "execute", "interrupt", "shutdown", "", "CALL"]), "id": i},
    lambda i: {"type": "result", "id": i + 10**9, "status": "ok", "value": "forged"},           # not this cell's
    lambda i: {"type": "output", "stream": rng.choice([["stdout"], {"s": 1}, 3, "stdin"]), "data": [1]},
]
for i in range(1, FLOOD + 1):
    channel._write(json.dumps(kinds[i % len(kinds)](i + 10**6)))
# A real request after the flood: answered once the host got through everything before it.
alive = rpc.request("servers")
report({"sent": FLOOD, "servers": [entry["name"] for entry in alive]})
""".replace("FLOOD", str(FLOOD))

VICTIM = """
result = await mcp_everything.echo(message="still served")
counter = globals().get("counter", 0) + 1
report({"echo": result if isinstance(result, str) else result["content"][0]["text"], "counter": counter})
"""

BREAKS = [
    # An announced length over the bound.
    "channel_write(HEADER.pack(0x7FFFFFFF) + b'{}')",
    # Not JSON.
    "channel_write(HEADER.pack(9) + b'not json!')",
    # A header cut short: the next frame is read out of step.
    "channel_write(b'\\x00\\x00'); channel._write(json.dumps({'type': 'output', 'stream': 'stdout', 'data': 'x'}))",
    # An integer over Python's digit limit (ValueError inside json, not JSONDecodeError).
    "channel._write('{\"type\":\"call\",\"id\":' + '9' * 5000 + '}')",
    # NaN, nesting past the bound, not an object, a type that is not a string, bad UTF-8.
    'channel._write(\'{"type":"call","id":1,"op":"call","arguments":{"x":NaN}}\')',
    "channel._write('{\"type\":\"x\",\"v\":' + '[' * 150 + ']' * 150 + '}')",
    'channel._write(\'["type", "call"]\')',
    "channel._write('{\"type\": 7}')",
    "channel_write(HEADER.pack(4) + b'\\xff\\xfe\\xfd\\xfc')",
]
BREAK_PRELUDE = """
import json, os, struct, time
from mcp._rpc import rpc
channel = rpc._send.__self__
HEADER = struct.Struct('>I')
def channel_write(data):
    with channel._lock:
        os.write(channel._fd, data)
"""


# Each way of breaking the framing twice, eight sessions at a time: every way is seen killed while others are (fifty
# sessions, as there were, showed nothing more and started forty sandboxes more).
BREAKERS = 2 * len(BREAKS)


def _rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def test_ten_thousand_malformed_requests_and_every_broken_framing_leave_the_bridge_serving() -> None:
    require_bubblewrap()

    async def body() -> dict[str, Any]:
        with private_state_dir() as state:
            settings = sandbox_settings(runtime="bubblewrap", state_dir=state, max_sessions=16)
            async with Bridge(settings, Discovery(servers=(upstreams.everything(),))) as bridge:
                assert bridge.backend_name == "bubblewrap", bridge.backend_error
                warm = reported(await run(bridge, VICTIM, "victim"))
                assert warm == {"echo": "Echo: still served", "counter": 1}
                reported(await run(bridge, "x = 1\nreport(x)", "attacker"))
                rss_before, tasks_before = _rss_mib(), len(asyncio.all_tasks())

                flood_done = asyncio.Event()
                victim_runs: list[Any] = []

                async def victim() -> None:
                    while not flood_done.is_set() or not victim_runs:
                        victim_runs.append(reported(await run(bridge, VICTIM, "victim")))

                async def attacker() -> Any:
                    try:
                        return reported(await run(bridge, ATTACK, "attacker", timeout=120))
                    finally:
                        flood_done.set()

                started = time.monotonic()
                attack, _ = await asyncio.gather(attacker(), victim())
                flood_seconds = time.monotonic() - started
                assert attack == {"sent": FLOOD, "servers": ["everything"]}
                assert all(run_["echo"] == "Echo: still served" for run_ in victim_runs), victim_runs
                assert [run_["counter"] for run_ in victim_runs] == list(range(2, len(victim_runs) + 2))
                # The attacker's own worker survived its malformed requests: its state is still there.
                assert reported(await run(bridge, "report(x)", "attacker")) == 1
                rss_after_flood, tasks_after_flood = _rss_mib(), len(asyncio.all_tasks())

                started = time.monotonic()
                gate = asyncio.Semaphore(8)

                async def breaker(index: int) -> str:
                    code = BREAK_PRELUDE + BREAKS[index % len(BREAKS)] + "\ntime.sleep(30)\n"
                    async with gate:
                        result = await run(bridge, code, f"break-{index}", timeout=60)
                        await bridge.discard(SessionKey.cli(f"break-{index}"))
                    assert result.status == "crashed", (index, result)
                    assert "killed for breaking the frame protocol" in result.notice, (index, result.notice)
                    return result.notice

                notices = await asyncio.gather(*(breaker(index) for index in range(BREAKERS)))
                break_seconds = time.monotonic() - started

                after = reported(await run(bridge, VICTIM, "victim"))
                fresh = reported(await run(bridge, VICTIM, "fresh"))
                assert after["echo"] == fresh["echo"] == "Echo: still served"
                assert fresh["counter"] == 1 and after["counter"] == len(victim_runs) + 2
                return {
                    "flood_seconds": round(flood_seconds, 2),
                    "victim_runs_during_flood": len(victim_runs),
                    "break_seconds": round(break_seconds, 2),
                    "rss_mib": [round(rss_before, 1), round(rss_after_flood, 1), round(_rss_mib(), 1)],
                    "asyncio_tasks": [tasks_before, tasks_after_flood, len(asyncio.all_tasks())],
                    "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                    "distinct_notices": len({notice.split(":", 2)[-1][:40] for notice in notices}),
                }

    numbers = asyncio.run(body())
    print(f"\nmalformed frames: {numbers}")
    # Everything the flood started has ended: no task of it is left behind (the loop's own few remain).
    assert numbers["asyncio_tasks"][1] <= numbers["asyncio_tasks"][0] + 2, numbers


USER_VALUES = """
from mcp import runtime
kept = "state"
outcomes = []
deep = []
for _ in range(120):
    deep = [deep]
for value in (float("nan"), float("-inf"), deep, [0] * 300_000, "\\ud800 lone"):
    try:
        result = await mcp_everything.echo(message=value)
        outcomes.append(["ok", result if isinstance(result, str) else result["content"][0]["text"]])
    except runtime.MCPError as exc:
        outcomes.append([type(exc).__name__, exc.message[:80]])
report(outcomes)
"""


def test_values_the_frame_checks_refuse_are_an_error_for_the_code_not_a_killed_session() -> None:
    """A well-behaved worker refuses, as an ArgumentError (or the policy's PolicyError), what the host would kill
    it for: NaN, infinities, nesting past the bounds, more values than a frame may hold."""
    require_bubblewrap()

    async def body() -> tuple[Any, Any]:
        with private_state_dir() as state:
            settings = sandbox_settings(runtime="bubblewrap", state_dir=state)
            async with Bridge(settings, Discovery(servers=(upstreams.everything(),))) as bridge:
                outcomes = reported(await run(bridge, USER_VALUES, "values"))
                return outcomes, reported(await run(bridge, "report(kept)", "values"))

    outcomes, kept = asyncio.run(body())
    assert kept == "state"  # the session was never killed
    kinds = [kind for kind, _ in outcomes]
    assert kinds[:4] == ["ArgumentError", "ArgumentError", kinds[2], "ArgumentError"], outcomes
    assert kinds[2] in ("ArgumentError", "PolicyError"), outcomes
    assert outcomes[4] == ["ok", "Echo: \ufffd lone"], outcomes  # a lone surrogate arrives repaired
