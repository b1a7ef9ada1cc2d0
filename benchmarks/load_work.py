"""What each client of ``benchmarks/load.py`` calls, in which order, and how it knows an answer is its own.

Why a module of its own: the load benchmark and the fault harness (``benchmarks/faults.py``) drive the same
clients with the same mix and the same checks, and only the driver differs.

The session's counter: every client's first call stores ``_load = {"id": <client id>, "n": 0, ...}`` in its own
session's Python state, and every later call (but the timeout) adds one to ``n`` and answers ``@@<id> <n>@@``.
Only that client's calls reach that session, so an answer with another id came from another session, and one
with a count other than the client's own came from a session that lost or repeated a call.
"""

from __future__ import annotations

import base64
import dataclasses
import re
import time
from collections.abc import Sequence
from typing import Any, Literal

import anyio

Side = Literal["bridge", "floor"]
Era = Literal["http-legacy", "http-modern", "stdio"]
ERAS: tuple[Era, ...] = ("http-legacy", "http-modern", "stdio")
KINDS = ("cell", "print", "image", "everything", "time", "timeout")
UPSTREAM_KINDS = ("everything", "time")  # the kinds whose cell calls an upstream server: one audit record each
# One cycle of a client's calls: warm cells, calls to the two real upstream servers, prints and an image.
CYCLE = (
    "cell", "everything", "cell", "print", "cell", "time", "cell", "image", "cell", "everything",
    "cell", "cell", "time", "cell", "print", "cell", "everything", "cell", "image", "cell",
)  # fmt: skip
TIMEOUT_EVERY = 100  # one deliberate timeout per this many calls of a client, at an offset of its own
TIMEOUT_S = 1  # the smallest timeout run_python takes
GRACE_S = 10.0  # a call must end within its timeout plus this, or it counts as late
DEFAULT_TIMEOUT_S = 30.0  # the bridge's default timeout (MCP_BRIDGE_TIMEOUT), which the other cells run under
MARKER = re.compile(r"@@(c\d+) (\d+)@@")
# A 1x1 PNG: the image every image call shows, made once per session so the call measures the image's path.
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c63f8cfc0f00f0004850180848ca9210000000049454e44ae426082"
    )
).decode()
_BUMP = "_load['n'] += 1\n"
_ANSWER = "f\"@@{_load['id']} {_load['n']}@@\""
CELLS = {
    "cell": _BUMP + _ANSWER,
    "print": _BUMP + "for _i in range(20):\n    print('line', _i, 'of a printing cell')\nprint(" + _ANSWER + ")",
    "image": _BUMP + "runtime.show(_load['png'])\n" + _ANSWER,
    "everything": _BUMP + "_v = await mcp_everything.echo(message=_load['id'])\n"
    "assert _v == 'Echo: ' + _load['id'], _v\n" + _ANSWER,
    "time": _BUMP + "_v = await mcp_time.get_current_time(timezone='UTC')\n"
    "assert _v['timezone'] == 'UTC', _v\n" + _ANSWER,
    "timeout": "import time\ntime.sleep(60)",
    "read": _ANSWER,  # the counter as it stands, without a step: how a client finds its place after a lost answer
}


def init_cell(ident: str) -> str:
    return f"import base64\n_load = {{'id': {ident!r}, 'n': 0, 'png': base64.b64decode({PNG!r})}}\n{_ANSWER}"


def kind_of(index: int, offset: int) -> str:
    """The kind of a client's call number ``index``: the cycle, and every TIMEOUT_EVERY-th call a timeout."""
    if (index + offset) % TIMEOUT_EVERY == TIMEOUT_EVERY - 1:
        return "timeout"
    return CYCLE[(index + offset) % len(CYCLE)]


@dataclasses.dataclass
class ClientState:
    """One client: its id, its era, its session, and the count only it advances."""

    index: int
    era: Era
    side: Side
    expected: int = 0
    synced: bool = True  # False after an answer was lost: the next call reads the count before it steps again
    lost: bool = False  # True once the session lost its state: the next call starts the count again
    losses: int = 0

    @property
    def ident(self) -> str:
        return f"c{self.index}"

    @property
    def offset(self) -> int:
        return (self.index * 37) % TIMEOUT_EVERY

    def arguments(self, kind: str) -> tuple[str, dict[str, Any], float]:
        """The tool, its arguments and the call's own timeout (s) for a call of ``kind``."""
        if self.side == "floor":
            if kind == "timeout":
                return "wait", {"seconds": TIMEOUT_S}, TIMEOUT_S
            return "noop", {}, DEFAULT_TIMEOUT_S
        code = init_cell(self.ident) if kind == "init" else CELLS[kind]
        arguments: dict[str, Any] = {"code": code}
        if self.era == "http-modern":  # a stateless client has no connection of its own: it names its session
            arguments["session"] = self.ident
        if kind == "timeout":
            arguments["timeout"] = TIMEOUT_S
            return "run_python", arguments, TIMEOUT_S
        return "run_python", arguments, DEFAULT_TIMEOUT_S

    def check(self, kind: str, reply: Any) -> str | None:
        """None when ``reply`` is the right answer for this client's session; else the kind of error."""
        texts = [block.text for block in reply.content if getattr(block, "type", None) == "text"]
        text = "\n".join(texts)
        if self.side == "floor":
            return None if not reply.is_error and texts == ["ok"] else "tool_error"
        if kind == "timeout":
            if reply.is_error and "Timed out after" in text:  # killed when the interrupt was not heeded in time
                return "timeout_killed" if "was lost" in text else None
            return "timeout_not_reported"
        if reply.is_error:
            return "state_lost" if "state was lost" in text or "name '_load' is not defined" in text else "tool_error"
        found = MARKER.findall(text)
        if len(found) != 1:
            return "no_marker"
        ident, count = found[0][0], int(found[0][1])
        if ident != self.ident:
            return "wrong_session"
        step = 0 if kind in ("init", "read") else 1
        if not self.synced:
            self.expected, self.synced = count - step, True
        if count != self.expected + step:
            return "wrong_count"
        if kind == "image" and not any(getattr(block, "type", None) == "image" for block in reply.content):
            return "no_image"
        self.expected = count
        return None


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One call as the client saw it."""

    client: int
    era: Era
    kind: str
    started: float  # seconds since the window opened
    latency_ms: float
    error: str | None
    detail: str = ""

    @property
    def late(self) -> bool:
        bound = TIMEOUT_S if self.kind == "timeout" else DEFAULT_TIMEOUT_S
        return self.latency_ms > (bound + GRACE_S) * 1000


async def one_call(client: Any, state: ClientState, kind: str, opened: float) -> Outcome:
    """Make one call, bounded by its timeout plus GRACE_S, and classify how it ended."""
    if state.side == "bridge" and state.lost:
        kind, state.lost, state.expected = "init", False, 0
    elif state.side == "bridge" and not state.synced and kind != "timeout":
        kind = "read"
    tool, arguments, timeout = state.arguments(kind)
    began = time.perf_counter()
    error: str | None
    detail = ""
    try:
        with anyio.fail_after(timeout + GRACE_S):
            reply = await client.call_tool(tool, arguments)
        error = state.check(kind, reply)
        if error is not None:
            detail = shortened(" ".join(getattr(block, "text", "") for block in reply.content))
    except TimeoutError:
        error, detail = "late", f"no answer within {timeout + GRACE_S:g} s"
    except Exception as exc:  # noqa: BLE001 - every way a call can fail is an outcome to count, not a crash
        error, detail = f"exception:{type(exc).__name__}", shortened(str(exc))
    if error in ("state_lost", "timeout_killed"):  # said by this answer: the next call starts the count again
        state.lost, state.losses = True, state.losses + 1
    elif error is not None:
        state.synced = False  # the session may or may not have stepped (a cell that failed after its step did)
    elapsed = (time.perf_counter() - began) * 1000
    return Outcome(state.index, state.era, kind, began - opened, elapsed, error, detail)


def shortened(text: str, keep: int = 300) -> str:
    """The head (what failed) and the tail (the traceback's last line) of a long answer."""
    return text if len(text) <= 2 * keep else f"{text[:keep]} … {text[-keep:]}"


def eras_for(clients: int, stdio: int) -> list[Era]:
    """Each client's era: ``stdio`` stdio bridges, the rest over HTTP, alternating the two eras."""
    http: Sequence[Era] = ("http-legacy", "http-modern")
    return [http[index % 2] if index < clients - stdio else "stdio" for index in range(clients)]
