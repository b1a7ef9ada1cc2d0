"""Protocol: hostile code attacks the bridge through the channel it reports on and the relay to MCP servers.

Every attack runs through the real Bridge on bubblewrap, podman (runc) and gVisor (runsc). What docs/security.md
promises, and what is asserted here:

- fds 1 and 2 are capture pipes: frames forged there are only output.
- On the worker's real channel, a frame that is cut off, not JSON, announced larger than the bound, or nested
  deeper than the frame check allows is a protocol violation: the worker is killed, the call says so
  ("killed for breaking the frame protocol"), and the session starts fresh. A well-formed frame of the wrong
  kind (a result with a wrong id, a second ``ready``) is ignored.
- Requests are checked on the host: unknown servers and tools are refused before anything is sent, arguments are
  capped in size and depth, calls are bounded in flight and per run, and a call made when no run is running is
  refused. Nothing refused ever reaches the upstream server: a recorder wrapped around the bridge's hub (this
  process owns the bridge) lists every call that really went upstream, and the audit log must agree.

After every attack a different session of the same bridge must still run code, and a bystander session keeps
its state.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import textwrap
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_codemode.runs.bridge import Bridge, RunRequest
from mcp_codemode.sandbox import calls as calls_module
from mcp_codemode.sandbox import worker as worker_module
from mcp_codemode.sandbox.results import ExecutionResult
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.upstream.servers.hub import Hub
from tests.support.cells import explain
from tests.support.patience import patient
from tests.support.security import Target, assert_no_secrets

pytestmark = pytest.mark.backend

VIOLATION = "killed for breaking the frame protocol"

# Finds the worker's private channel to the bridge: the lowest write-only pipe among fds >= 3 (the
# worker dups stdin, then stdout, then stderr before anything else, so the channel comes before the
# diagnostics fd). Guest code, prepended to the cases that write to it.
FIND_CHANNEL = """
import fcntl, json, os, struct
def frame(message):
    payload = json.dumps(message).encode() if isinstance(message, dict) else message
    return struct.pack(">I", len(payload)) + payload
def pipe_fd(access):   # the lowest pipe among fds >= 3 open for access (os.O_WRONLY or os.O_RDONLY)
    for fd in sorted(int(name) for name in os.listdir("/proc/self/fd")):
        if fd < 3:
            continue
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            mode = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
        except OSError:
            continue
        if mode == access and target.startswith(("pipe:", "socket:", "host:")):  # gVisor: host:[N]
            return fd
    raise SystemExit("no channel fd found")
CHANNEL = pipe_fd(os.O_WRONLY)
"""


# --------------------------------------------------------------------------------------------------- helpers


def value_of(result: ExecutionResult) -> Any:
    """The guest's last reported value (any JSON)."""
    assert result.status == "ok", explain(result)
    return json.loads(result.stdout.strip().splitlines()[-1])


def assert_still_serving(target: Target) -> None:
    after = target.run("1+1")
    assert after.status == "ok" and after.value == "2", explain(after)


@contextlib.contextmanager
def upstream_calls(hub: Hub) -> Iterator[list[tuple[str, str, dict[str, Any]]]]:
    """Every tool call a bridge's hub really sends upstream while the block runs: (server, tool, arguments)."""
    original = hub.call_tool
    seen: list[tuple[str, str, dict[str, Any]]] = []

    async def recording(
        name: str,
        tool: str,
        arguments: dict[str, Any],
        timeout: float | None = None,
        progress: Any = None,
        link: Any = None,
    ) -> Any:
        seen.append((name, tool, arguments))
        return await original(name, tool, arguments, timeout=timeout, progress=progress, link=link)

    hub.call_tool = recording  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        hub.call_tool = original  # type: ignore[method-assign]


def audit_lines(target: Target) -> list[dict[str, Any]]:
    path = target.bridge.settings.audit_path
    if path is None or not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def args_hash(arguments: dict[str, Any]) -> str:
    """The audit log's ``args_sha256``: canonical compact JSON with sorted keys."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


@pytest.fixture
def bystander(target: Target) -> Iterator[str]:
    """A session with state, made before the attack; it must keep that state through it."""
    session = f"bystander-{uuid.uuid4().hex[:8]}"
    made = target.run("kept = 41", session=session)
    assert made.status == "ok", explain(made)
    yield session
    try:
        after = target.run("kept + 1", session=session)
        assert after.status == "ok" and after.value == "42", explain(after)
        assert not after.state_lost and after.notice == "", explain(after)
    finally:
        target.discard(session)


# ------------------------------------------------------------------------------------------- forged frames: fd 1


def test_frames_forged_on_fd_1_and_2_are_just_output(target: Target, bystander: str) -> None:
    result = target.run(
        """
        import json, os, struct, sys
        def frame(message):
            payload = json.dumps(message).encode()
            return struct.pack(">I", len(payload)) + payload
        forged = [
            {"type": "result", "id": 1, "status": "ok", "value": "'FORGED-RESULT'"},
            {"type": "ready", "python": "FORGED-READY"},
            {"type": "output", "stream": "stdout", "data": "FORGED-OUTPUT"},
            {"type": "call", "id": 7, "op": "call", "server": "everything", "tool": "echo",
             "arguments": {"message": "FORGED-CALL"}},
        ]
        for message in forged:
            os.write(1, frame(message))
            os.write(2, frame(message))
        os.write(1, b"\\xff\\xff\\xff\\xffnot a frame\\n")
        sys.stdout.write("\\n")
        "genuine"
        """,
    )
    assert result.status == "ok" and result.value == "'genuine'", explain(result)
    for text in (result.stdout, result.stderr):  # the forged bytes arrive verbatim, as text
        assert '"value": "\'FORGED-RESULT\'"' in text and '"python": "FORGED-READY"' in text, text
        assert '"data": "FORGED-OUTPUT"' in text and '"message": "FORGED-CALL"' in text, text
    assert "not a frame" in result.stdout
    assert_still_serving(target)


# ------------------------------------------------------------------------------- forged frames: the real channel

# case -> (a guest expression for the bytes written to the channel, what must happen to the run)
# Each of these breaks the protocol: the worker is killed and its run says so. (case -> a guest expression for the
# bytes written to the channel.)
CHANNEL_VIOLATIONS: dict[str, str] = {
    "bogus-length-header": "b'\\xff\\xff\\xff\\xff' + b'garbage' * 100",
    "huge-announced-length": "struct.pack('>I', 1 << 30)",
    "truncated-frame": "struct.pack('>I', 100) + b'{\"type\": \"outp'",
    "not-json": "frame(b'this is not JSON {{{')",
    "json-but-not-an-object": "frame(b'[1, 2, 3]')",
    "object-without-type": "frame({'kind': 'result'})",
    "nested-10000-deep": (
        'frame((\'{"type":"call","id":1,"op":"call","server":"everything","tool":"echo",'
        "\"arguments\":{\"message\":' + '[' * 10000 + ']' * 10000 + '}}').encode())"
    ),
}

# Well-formed frames of the wrong kind: ignored, all in one run.
CHANNEL_IGNORED = (
    "frame({'type': 'result', 'id': 987654321, 'status': 'ok', 'value': 'FORGED'})",  # not the running cell's id
    "frame({'type': 'ready', 'python': 'FORGED' * 1000, 'pid': 1})",  # a second ready
    "frame({'type': 'output', 'stream': 'secrets', 'data': 'FORGED'})",  # not stdout or stderr
    "frame({'type': 'output', 'stream': 'stdout', 'data': ['FORGED']})",  # not a string
    "frame({'type': 'reply', 'id': 1, 'ok': True, 'value': 'FORGED'})",  # a host-to-guest kind
    "frame({'type': 'call', 'id': -5, 'op': 'servers'})",  # no valid id to answer to
)


def write_and_finish(writes: str) -> str:
    return FIND_CHANNEL + textwrap.dedent(
        f"""
        {writes}
        import time
        time.sleep(0.5)   # the host reads the channel meanwhile
        print("still running")
        "genuine"
        """
    )


@pytest.mark.parametrize("case", list(CHANNEL_VIOLATIONS))
def test_protocol_violations_on_the_real_channel_kill_only_that_worker(
    target: Target, bystander: str, case: str
) -> None:
    result = target.run(write_and_finish(f"os.write(CHANNEL, {CHANNEL_VIOLATIONS[case]})"), timeout=10)
    assert_no_secrets(target, result)
    assert result.status == "crashed" and result.state_lost, explain(result)
    assert VIOLATION in result.notice, explain(result)
    assert_still_serving(target)


def test_well_formed_frames_of_the_wrong_kind_are_ignored(target: Target, bystander: str) -> None:
    writes = "; ".join(f"os.write(CHANNEL, {expression})" for expression in CHANNEL_IGNORED)
    result = target.run(write_and_finish(writes), timeout=10)
    assert result.status == "ok" and result.value == "'genuine'", explain(result)
    assert result.stdout == "still running\n" and result.stderr == "", explain(result)
    assert "FORGED" not in result.notice
    assert_still_serving(target)


# ---------------------------------------------------------------------------------------- names that aren't there


def test_unknown_servers_tools_and_operations_are_refused_before_anything_is_sent(target: Target) -> None:
    with upstream_calls(target.bridge.hub) as sent:
        result = target.run(
            """
            import mcp._rpc as rpc
            rows = {}
            async def attempt(label, make):
                try:
                    value = make()
                    if hasattr(value, "__await__"):
                        value = await value
                    rows[label] = ["no error", repr(value)[:100]]
                except Exception as exc:
                    rows[label] = [type(exc).__name__, str(exc)[:300]]
            await attempt("tool", lambda: runtime.call_tool("everything", "no_such_tool", {}))
            await attempt("attribute", lambda: mcp_everything.no_such_tool)
            await attempt("server", lambda: runtime.call_tool("not-configured", "echo", {"message": "x"}))
            await attempt("index", lambda: mcp_servers["not-configured"])
            await attempt("url-as-server", lambda: runtime.call_tool("http://127.0.0.1:1/mcp", "echo", {}))
            await attempt("command-as-server", lambda: runtime.call_tool("/bin/sh -c id", "echo", {}))
            await attempt("raw-op", lambda: rpc.rpc.request("spawn", command="/bin/sh"))
            await attempt("raw-server-type", lambda: rpc.rpc.request("call", server=["everything"], tool="echo"))
            await attempt("raw-args-type", lambda: rpc.rpc.request("call", server="everything", tool="echo",
                                                                     arguments="message=x"))
            await attempt("raw-long-name", lambda: rpc.rpc.request("call", server="e" * 100_000, tool="echo"))
            await attempt("after", lambda: mcp_everything.echo(message="fine"))
            report(rows)
            """,
        )
    rows = value_of(result)
    assert rows["tool"][0] == "ToolNotFound" and "no_such_tool" in rows["tool"][1], rows
    assert rows["attribute"][0] == "ToolNotFound", rows
    for label in ("server", "index", "url-as-server", "command-as-server"):
        assert rows[label][0] == "ServerNotFound", (label, rows)
    assert rows["raw-op"][0] == "MCPError" and "unknown request" in rows["raw-op"][1], rows
    for label in ("raw-server-type", "raw-args-type", "raw-long-name"):
        assert rows[label][0] == "ArgumentError", (label, rows)
    assert rows["after"] == ["no error", "'Echo: fine'"], rows
    assert sent == [("everything", "echo", {"message": "fine"})], sent  # nothing refused went upstream
    assert_still_serving(target)


# ----------------------------------------------------------------------------------------------- big arguments


def test_oversized_arguments_are_refused_and_the_bridge_keeps_serving(target: Target, bystander: str) -> None:
    """2 MB is over the policy's 1 MiB argument cap: a PolicyError, the session lives on. 40 MB is over the frame
    bound itself (about 26 MB at the suite's settings): the frame is refused before it is read, which is a
    protocol violation, so that worker is killed and its session starts fresh (docs/security.md)."""
    session = f"big-{uuid.uuid4().hex[:8]}"
    try:
        with upstream_calls(target.bridge.hub) as sent:
            capped = target.run(
                """
                try:
                    await mcp_everything.echo(message="x" * (2 << 20))
                    report("sent")
                except runtime.MCPError as exc:
                    report([type(exc).__name__, exc.message[:300]])
                """,
                session=session,
            )
            verdict = value_of(capped)
            assert verdict[0] == "PolicyError" and "max_argument_bytes" in verdict[1], verdict
            huge = target.run("await mcp_everything.echo(message='y' * (40 << 20))", session=session, timeout=60)
            assert huge.status == "crashed" and huge.state_lost, explain(huge)
            assert VIOLATION in huge.notice and "announced a frame of" in huge.notice, explain(huge)
            again = target.run("report(await mcp_everything.echo(message='small'))", session=session)
            assert value_of(again) == "Echo: small"
        assert sent == [("everything", "echo", {"message": "small"})], [(s, t, len(str(a))) for s, t, a in sent]
    finally:
        target.discard(session)
    assert_still_serving(target)


def test_deeply_nested_arguments_are_refused_without_recursion_on_the_host(target: Target) -> None:
    """500 levels through runtime.call_tool and 40 (over the policy's 32, under the frame check's 64) sent past the
    guest's own check: both are PolicyErrors, and nothing reaches the server. 10,000 levels as a raw frame are
    in CHANNEL_VIOLATIONS (a protocol violation)."""
    with upstream_calls(target.bridge.hub) as sent:
        result = target.run(
            """
            import json
            import mcp._rpc as rpc
            def nested(depth):
                return json.loads("[" * depth + "]" * depth)   # built without recursion in our code
            rows = {}
            try:
                await runtime.call_tool("everything", "echo", {"message": nested(500)})
                rows["call-500"] = "sent"
            except Exception as exc:
                rows["call-500"] = [type(exc).__name__, str(exc)[:200]]
            rpc.rpc.max_depth = 0   # switch off the guest's courtesy check: the host must hold on its own
            try:
                rpc.rpc.request("call", server="everything", tool="echo", arguments={"message": nested(40)})
                rows["raw-40"] = "sent"
            except Exception as exc:
                rows["raw-40"] = [type(exc).__name__, str(exc)[:200]]
            rows["after"] = await mcp_everything.echo(message="fine")
            report(rows)
            """,
        )
    rows = value_of(result)
    for label in ("call-500", "raw-40"):
        assert rows[label][0] == "PolicyError" and "max_argument_depth" in rows[label][1], (label, rows)
    assert rows["after"] == "Echo: fine", rows
    assert sent == [("everything", "echo", {"message": "fine"})], sent
    assert_still_serving(target)


# ------------------------------------------------------------------------------------------------ call floods

FLOOD = 5_000


def test_a_flood_of_calls_is_bounded_and_every_call_is_answered(target: Target) -> None:
    with upstream_calls(target.bridge.hub) as sent:
        flood = target.submit(
            f"""
            import asyncio, collections
            results = await asyncio.gather(*[mcp_everything.echo(message=str(i)) for i in range({FLOOD})],
                                           return_exceptions=True)
            kinds = collections.Counter()
            wrong = []
            for i, value in enumerate(results):
                if isinstance(value, BaseException):
                    kinds[type(value).__name__ + ": " + str(value)[:60]] += 1
                else:
                    kinds["ok"] += 1
                    if value != f"Echo: {{i}}":
                        wrong.append([i, value])
            report({{"kinds": dict(kinds), "wrong": wrong[:5]}})
            """,
            timeout=600,  # a budget, not a limit under test: 5,000 relayed calls took over 120 s on a starved VM
        )
        assert_still_serving(target)  # while the flood is relayed
        result = flood.result(900)
    seen = value_of(result)
    kinds: dict[str, int] = seen["kinds"]
    assert sum(kinds.values()) == FLOOD, kinds  # every call answered, one way or the other
    assert seen["wrong"] == [], seen
    ok = kinds.get("ok", 0)
    # At most 1,024 in flight at once (the rest are told so at once) and at most 1,000 per run (the policy's
    # max_calls_per_run): the server sees no more than that, and exactly the calls that succeeded.
    assert 0 < ok <= 1000, kinds
    refused = {kind: count for kind, count in kinds.items() if kind != "ok"}
    assert all(kind.startswith(("PolicyError", "MCPError")) for kind in refused), refused
    assert len(sent) == ok, (len(sent), kinds)
    assert_still_serving(target)


# Stops the worker's control thread from ever reading again (after FIND_CHANNEL): the lowest read-only pipe among
# fds >= 3 is its copy of the bridge's channel in (the worker dups stdin first), and a pipe nobody writes takes its
# place. The read in progress keeps the old pipe and takes one more frame; every later read waits for good.
DEAFEN = """
_silent, _ = os.pipe()
os.dup2(_silent, pipe_fd(os.O_RDONLY))
"""
UNREAD_CALLS = 1000
UNREAD_BYTES = 100_000


def test_a_guest_that_stops_reading_cannot_make_the_bridge_buffer_its_answers(target: Target, bystander: str) -> None:
    """The guest stops reading its channel and sends 1,000 calls whose answers are 100 kB each (100 MB in all). The
    bridge writes answers until 8 MiB wait unread (REPLY_BACKLOG_BYTES), then holds the rest, and the relay slots
    they hold keep later calls from reaching the server: about 80 written, 64 held, where an unbounded writer
    would have relayed them all while the cell waited. The session dies of its own deafness; others serve on."""
    session = f"deaf-{uuid.uuid4().hex[:8]}"
    try:
        with upstream_calls(target.bridge.hub) as sent:
            attack = target.run(
                FIND_CHANNEL
                + DEAFEN
                + f"""
import time
message = "x" * {UNREAD_BYTES}
for i in range(1, {UNREAD_CALLS} + 1):
    call = {{"type": "call", "id": i, "op": "call", "server": "everything", "tool": "echo",
            "arguments": {{"message": message}}}}
    data = memoryview(frame(call))
    while data:   # a pipe may take part of a 100 kB write (gVisor's does)
        data = data[os.write(CHANNEL, data):]
time.sleep({patient(3):.1f})   # an unbounded bridge relays hundreds of calls a second: past the 200 asserted below
print("sent")
""",
                session=session,
                timeout=300,  # a budget: writing 100 MB into a deaf channel is slow on a starved machine
            )
        assert attack.status == "ok" and "sent" in attack.stdout, explain(attack)
        relayed = len(sent)
        assert 0 < relayed <= 200, f"{relayed} of {UNREAD_CALLS} calls reached the server while the guest read none"
    finally:
        target.discard(session)
    assert_still_serving(target)


def test_a_guest_that_stops_reading_and_keeps_calling_is_killed(target: Target, bystander: str) -> None:
    """Refusals cannot wait as relayed answers do (they are written as the call is read), so a deaf guest that
    keeps the relay slots and the 1,024 in-flight places full and then sends call after call would make the bridge
    buffer one refusal per frame. Past a bound of unread bytes the worker is killed as a protocol violation.

    The bound is lowered for this test to 1 MiB over the backlog: at the real one (72 MiB over) it would take
    300,000 refused frames to reach, and the mechanism under test is the same."""
    session = f"deaf-flood-{uuid.uuid4().hex[:8]}"
    real_bound = worker_module._UNREAD_KILL_BYTES
    worker_module._UNREAD_KILL_BYTES = calls_module.REPLY_BACKLOG_BYTES + (1 << 20)
    try:
        attack = target.run(
            FIND_CHANNEL
            + DEAFEN
            + f"""
import time
def send_all(data):
    data = memoryview(data)
    while data:
        data = data[os.write(CHANNEL, data):]
def call(i, size):
    return frame({{"type": "call", "id": i, "op": "call", "server": "everything", "tool": "echo",
                  "arguments": {{"message": "x" * size}}}})
send_all(b"".join(call(i, {UNREAD_BYTES}) for i in range(1, 201)))   # fills the backlog and the relay slots
time.sleep(3)
send_all(b"".join(call(i, 1) for i in range(201, 20_001)))   # 1,024 in flight, then one refusal per frame
time.sleep(240)   # the kill cuts this short; the bridge may take a while to read 20,000 frames on a slow machine
print("not killed")
""",
            session=session,
            timeout=300,  # a budget, as the sleep: what is under test is the kill, not how soon it comes
        )
    finally:
        worker_module._UNREAD_KILL_BYTES = real_bound
        target.discard(session)
    assert attack.status == "crashed" and attack.state_lost, explain(attack)
    assert VIOLATION in attack.notice and "stopped reading the bridge's answers" in attack.notice, explain(attack)
    assert_still_serving(target)


# -------------------------------------------------------------------------------------- calls after the run ended


LATE_CALLER = """
import sys, threading, time
next_cell = threading.Event()
attempts = []
cell_ended = threading.Event()  # set by the cell's last statement: its code has nothing left to run
def keep_calling(prefix, pause):
    # Not "the main thread left the cell's frame": a cell suspended at a top-level await is off the stack too.
    cell_ended.wait()
    time.sleep(pause)
    for i in range(10):
        during_next = next_cell.is_set()
        try:
            value = mcp_everything.echo.sync(message=f"{prefix}-{i}")
            attempts.append([i, during_next, "answered", value])
        except Exception as exc:
            attempts.append([i, during_next, type(exc).__name__, str(exc)[:200]])
        time.sleep(0.02)
"""


@dataclasses.dataclass
class LateCalls:
    between: list[list[Any]]  # [i, False, outcome, message]: attempts made before the next cell began
    finished: bool  # the calling thread made all ten attempts (a call nobody answers blocks it for good)
    late: list[str]  # the late messages that reached server-everything


def late_calls(target: Target, pause: float) -> LateCalls:
    """A thread started by a cell calls a tool ten times, starting ``pause`` s after the cell returned; the host
    waits a moment, then the next cell collects what each call got."""
    session = f"late-{uuid.uuid4().hex[:8]}"
    prefix = f"late-{uuid.uuid4().hex[:8]}"
    try:
        with upstream_calls(target.bridge.hub) as sent:
            started = target.run(
                LATE_CALLER
                + f"caller = threading.Thread(target=keep_calling, args=({prefix!r}, {pause}), daemon=True)\n"
                "caller.start()\n"
                "report(await mcp_everything.echo(message='in the run'))\n"
                "cell_ended.set()",
                session=session,
            )
            assert value_of(started) == "Echo: in the run"
            # Each refusal is immediate, so this pause lets the thread's calls fall between the two runs (a
            # pace, not an assertion: every row says whether it was made before the next cell began).
            time.sleep(pause + 1.0)
            collected = target.run(
                "next_cell.set()\ncaller.join(5)\nreport([attempts, caller.is_alive()])", session=session
            )
        attempts, alive = value_of(collected)
        between = [row for row in attempts if not row[1]]
        hashes = {args_hash({"message": f"{prefix}-{row[0]}"}) for row in between if row[2] != "answered"}
        logged = audit_lines(target)
        assert any(line.get("args_sha256") == args_hash({"message": "in the run"}) for line in logged), logged[-3:]
        assert not [line for line in logged if line.get("args_sha256") in hashes], "refused late calls were audited"
        late = [str(args.get("message")) for _, _, args in sent if str(args.get("message", "")).startswith(prefix)]
        return LateCalls(between, not alive and len(attempts) == 10, late)
    finally:
        target.discard(session)


def test_calls_after_the_run_ended_are_refused_and_never_reach_the_server(target: Target) -> None:
    """The thread starts calling 0.3 s after its cell returned, when the run is over on the host as well."""
    calls = late_calls(target, pause=0.3)
    assert calls.finished and len(calls.between) >= 5, calls  # most of them fell between the two runs
    for _, _, kind, message in calls.between:
        assert kind == "MCPError" and "only while a run_python call is running" in message, calls
    assert calls.late == [], calls  # none of them reached server-everything
    assert_still_serving(target)


def test_calls_racing_the_end_of_the_cell_never_reach_the_server(target: Target) -> None:
    """The thread calls 10 ms after its cell returned, while the worker is still sending the cell's result.

    The host relays calls until the result frame arrives, and the worker sends it only after the output fence
    (up to 50 ms). Found by this suite: such calls used to run upstream as part of the finished run, and one
    still in flight when the result arrived was cancelled without a reply, so its caller waited forever. The
    guest now closes its request gate the moment the cell's code returns and wakes every waiting caller with
    an error; a frame forged past the gate is refused by the host once the result is in (the test below).
    """
    calls = late_calls(target, pause=0.01)
    executed = [row for row in calls.between if row[2] == "answered"]
    assert executed == [] and calls.late == [], (
        f"{target.name}: calls made after the cell returned ran upstream: {calls.late}"
    )
    assert calls.finished, f"{target.name}: a late call got no answer at all; its thread still waits: {calls}"
    for _, _, kind, message in calls.between:
        assert kind == "MCPError" and "only while a run_python call is running" in message, calls
    assert_still_serving(target)


def test_forged_call_frames_after_the_run_ended_never_reach_the_server(target: Target) -> None:
    """Hostile code skips the guest's gate and writes call frames itself after its run ended: the host, which
    has no running cell, answers them with an error and relays nothing."""
    session = f"forged-late-{uuid.uuid4().hex[:8]}"
    prefix = f"forged-{uuid.uuid4().hex[:8]}"
    code = f"""
import threading, time
from mcp import runtime
def forge():
    time.sleep(0.5)
    for i in range(20):
        runtime.rpc._send({{"type": "call", "id": 10**6 + i, "op": "call", "server": "everything",
                           "tool": "echo", "arguments": {{"message": "{prefix}-%d" % i}}}})
        time.sleep(0.01)
forger = threading.Thread(target=forge, daemon=True)
forger.start()
report("started")
"""
    try:
        with upstream_calls(target.bridge.hub) as sent:
            assert value_of(target.run(code, session=session)) == "started"
            time.sleep(1.5)  # a pace: the forged frames are written between the two runs
            assert value_of(target.run("forger.join(5)\nreport(forger.is_alive())", session=session)) is False
        late = [args for _, _, args in sent if str(args.get("message", "")).startswith(prefix)]
        assert late == [], f"{target.name}: forged calls after the run reached the server: {late}"
    finally:
        target.discard(session)
    assert_still_serving(target)


# ------------------------------------------------------------------------------------------------------ policy


def test_a_policy_refused_tool_raises_policy_error_and_never_reaches_the_server(
    target: Target, upstream_discovery: Any
) -> None:
    from mcp_codemode.policy.rules import Policy  # the policy feature (built alongside this suite)

    settings = target.bridge.settings.replace(policy=Policy(deny_tools=("everything/echo",)))
    code = textwrap.dedent(
        """
        import json
        import mcp._rpc as rpc
        rows = {"listed": "echo" in dir(mcp_everything)}
        for label, make in (("by-name", lambda: runtime.call_tool("everything", "echo", {"message": "x"})),
                            ("raw", lambda: rpc.rpc.arequest("call", server="everything", tool="echo",
                                                              arguments={"message": "x"}))):
            try:
                rows[label] = ["no error", await make()]
            except runtime.MCPError as exc:
                rows[label] = [type(exc).__name__, isinstance(exc, runtime.PolicyError), exc.message[:300]]
        rows["other-tool"] = await runtime.call_tool("everything", "get-sum", {"a": 1, "b": 2})
        print(json.dumps(rows))
        """
    )

    async def main() -> tuple[ExecutionResult, list[tuple[str, str]]]:
        async with Bridge(settings, upstream_discovery) as bridge:
            assert bridge.sessions is not None, bridge.backend_error
            with upstream_calls(bridge.hub) as seen:
                result = await bridge.run(RunRequest(code, timeout=60), SessionKey.cli("policy-refusal"))
            return result, [(name, tool) for name, tool, _ in seen]

    result, sent = asyncio.run(main())
    assert_no_secrets(target, result)
    rows = json.loads(result.stdout.strip().splitlines()[-1]) if result.status == "ok" else explain(result)
    assert isinstance(rows, dict), rows
    assert rows["listed"] is False, rows  # a refused tool is hidden from the proxies too
    for label in ("by-name", "raw"):
        assert rows[label][:2] == ["PolicyError", True], (label, rows)
        assert "deny_tools" in rows[label][2] and "everything/echo" in rows[label][2], (label, rows)
    assert sent == [("everything", "get-sum")], sent
