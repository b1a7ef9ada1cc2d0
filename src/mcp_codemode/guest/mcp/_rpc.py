"""Requests from sandboxed code to the bridge, over the worker's frame channel.

Standard library only. A request is a ``call`` frame with a fresh id; the host answers with a ``reply``
frame carrying the same id. The worker's control thread hands replies to ``deliver``, which wakes whoever
waits: a lock the synchronous caller blocks on, or the event loop of an awaiting coroutine (through
``call_soon_threadsafe``), so ``asyncio.gather`` over many calls keeps them all in flight at once.

Why not block the event loop with the synchronous path: a hundred gathered calls would then run one after
another. Why the host validates everything again: this module runs next to the user's code, which can
forge any frame it likes; it is a convenience, not a boundary.

One check is made here as well as on the host: the nesting depth of a tool call's arguments (the policy's
``max_argument_depth``, sent by the bridge with each cell). JSON encoding is recursive, so arguments nested
thousands deep would otherwise end in a ``RecursionError`` from deep inside ``json`` instead of the
``PolicyError`` the host gives anything it can still read.
"""

from __future__ import annotations

import _thread

if __package__ != "mcp":  # imported on the host (tests) as mcp_codemode.guest.mcp._rpc
    from ..protocol import (
        CALL,
        ERROR_KIND_APPROVAL,
        ERROR_KIND_ARGUMENT,
        ERROR_KIND_MCP,
        ERROR_KIND_POLICY,
        ERROR_KIND_SERVER_NOT_FOUND,
        ERROR_KIND_SERVER_UNAVAILABLE,
        ERROR_KIND_TOOL,
        ERROR_KIND_TOOL_NOT_FOUND,
        ERROR_KIND_TOOL_TIMEOUT,
    )
else:  # in the sandbox the guest's folder is on sys.path and this package is the top-level ``mcp``
    from protocol import (  # type: ignore[import-not-found,no-redef]
        CALL,
        ERROR_KIND_APPROVAL,
        ERROR_KIND_ARGUMENT,
        ERROR_KIND_MCP,
        ERROR_KIND_POLICY,
        ERROR_KIND_SERVER_NOT_FOUND,
        ERROR_KIND_SERVER_UNAVAILABLE,
        ERROR_KIND_TOOL,
        ERROR_KIND_TOOL_NOT_FOUND,
        ERROR_KIND_TOOL_TIMEOUT,
    )

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class MCPError(Exception):
    """Base of every error a tool call, a discovery helper or the bridge's policy raises inside the sandbox.

    ``server`` and ``tool`` say where it happened (None when it does not apply); ``details`` holds what the
    bridge sent with it (for example ``suggestions`` for a name that was not found).
    """

    def __init__(
        self, message: str, *, server: str | None = None, tool: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.server = server
        self.tool = tool
        self.details = details or {}

    def __str__(self) -> str:
        return self.message


class ToolError(MCPError):
    """The upstream server ran the tool and reported a failure (``isError``); the message is the server's own."""


class ToolNotFound(MCPError, AttributeError):
    """No tool of that name on that server; ``details["suggestions"]`` holds the closest names."""


class ServerNotFound(MCPError, LookupError):
    """No configured server of that name; ``details["suggestions"]`` holds the closest names."""


class ArgumentError(MCPError, TypeError):
    """The arguments do not match the tool's input schema; checked before the server sees them."""


class ServerUnavailable(MCPError):
    """The server could not be started or reached, or it crashed; the message says why and when it is retried."""


class ToolTimeout(MCPError, TimeoutError):
    """The server did not answer within the call's timeout."""


class PolicyError(MCPError):
    """The bridge's policy refused the call; the message names the rule (``details["rule"]`` holds its key)."""


class ApprovalDenied(PolicyError):
    """A call the policy's ``ask_tools`` names was not approved: the user declined it, or could not be asked
    (the message says which); ``details["rule"]`` is ``"ask_tools"``."""


# The exception class of each error kind of the protocol's table (a kind is its class's name).
ERRORS: dict[str, type[MCPError]] = {
    ERROR_KIND_MCP: MCPError,
    ERROR_KIND_TOOL: ToolError,
    ERROR_KIND_TOOL_NOT_FOUND: ToolNotFound,
    ERROR_KIND_SERVER_NOT_FOUND: ServerNotFound,
    ERROR_KIND_ARGUMENT: ArgumentError,
    ERROR_KIND_SERVER_UNAVAILABLE: ServerUnavailable,
    ERROR_KIND_TOOL_TIMEOUT: ToolTimeout,
    ERROR_KIND_POLICY: PolicyError,
    ERROR_KIND_APPROVAL: ApprovalDenied,
}
for _cls in ERRORS.values():
    _cls.__module__ = "mcp.runtime"  # tracebacks say mcp.runtime.ToolError, the name code catches it by


class _Pending:
    """One request in flight. A blocking caller waits on ``lock``, taken when the request is made and released
    by whoever wakes it: a bare lock costs less than an Event, and its wait is just as interruptible."""

    __slots__ = ("future", "lock", "loop", "reply")

    def __init__(self, loop: Any = None, future: Any = None) -> None:
        self.lock: Any = None
        if loop is None:
            self.lock = _thread.allocate_lock()
            self.lock.acquire()
        self.loop = loop
        self.future = future
        self.reply: dict[str, Any] | None = None


class Rpc:
    """The guest end of request/reply; one per worker."""

    def __init__(self) -> None:
        self._send: Any = None  # the worker's Channel.send, bound when the worker starts
        self._last_id = 0  # a plain counter under the lock: itertools is memory every idle sandbox keeps
        self._lock = _thread.RLock()  # re-entrant: a reply may be delivered while its request is being sent
        self._pending: dict[int, _Pending] = {}
        self._open = False  # between a cell's start and the return of its code: calls are allowed only then
        self.max_depth = 0  # the policy's max_argument_depth (0: not known yet, the host alone checks)
        self.policy_where = "the bridge's policy"

    def bind(self, send: Any) -> None:
        self._send = send

    def limit(self, policy: Any) -> None:
        """Take the argument depth cap from what the bridge sent with a cell (``context["policy"]``)."""
        if isinstance(policy, dict):
            depth = policy.get("max_argument_depth")
            if isinstance(depth, int) and not isinstance(depth, bool) and depth > 0:
                self.max_depth = depth
            if isinstance(policy.get("where"), str):
                self.policy_where = policy["where"]

    def _check_depth(self, op: str, params: dict[str, Any]) -> None:
        if op != "call" or not self.max_depth:
            return
        arguments = params.get("arguments")
        if isinstance(arguments, dict) and not any(isinstance(v, (dict, list, tuple)) for v in arguments.values()):
            return  # flat: one level deep, the usual call
        if _depth_over(arguments, self.max_depth):
            server, tool = params.get("server"), params.get("tool")
            raise PolicyError(
                f"policy refused {server}/{tool}: the arguments are nested more than {self.max_depth} deep "
                f"(max_argument_depth) ({self.policy_where})",
                server=server if isinstance(server, str) else None,
                tool=tool if isinstance(tool, str) else None,
                details={"rule": "max_argument_depth"},
            )

    def open(self) -> None:
        """A cell starts: its code (and the threads and tasks it starts) may call the bridge until ``close``."""
        with self._lock:
            self._open = True

    def close(self) -> None:
        """The cell's code returned: refuse new calls, and wake every caller still waiting with an error.

        A thread or task the cell left running would otherwise reach MCP servers after its run ended (the host
        relays until the result frame arrives, which the output fence delays), or wait forever for a reply the
        host drops when it cancels the run's calls. Forged frames are refused by the host after the result.
        """
        with self._lock:
            self._open = False
            waiting = list(self._pending.values())
            self._pending.clear()
        ended = {"ok": False, "error": {"kind": ERROR_KIND_MCP, "message": _ENDED}}
        for pending in waiting:
            _wake(pending, ended)

    def _post(self, op: str, params: dict[str, Any], pending: _Pending) -> int:
        if self._send is None:
            raise MCPError("calls to the bridge work only inside a run_python call of mcp-codemode")
        self._check_depth(op, params)
        # Checked and sent under the lock, so no call slips out after ``close`` has returned.
        with self._lock:
            self._last_id += 1
            request_id = self._last_id
            if not self._open:
                raise MCPError(_CLOSED, server=_text(params.get("server")), tool=_text(params.get("tool")))
            self._pending[request_id] = pending
            try:
                self._send({"type": CALL, "id": request_id, "op": op, **params})
            except RecursionError:
                self._pending.pop(request_id, None)
                raise ArgumentError(
                    "a value is nested too deeply to be sent to the bridge; flatten it",
                    server=params.get("server"),
                    tool=params.get("tool"),
                ) from None
            except (TypeError, ValueError) as exc:
                self._pending.pop(request_id, None)
                raise ArgumentError(
                    f"a value cannot be sent to the bridge ({exc}); pass JSON values: str, int, float, bool, None, "
                    "and lists or dicts of them",
                    server=params.get("server"),
                    tool=params.get("tool"),
                ) from None
            except BaseException:
                self._pending.pop(request_id, None)
                raise
        return request_id

    def request(self, op: str, **params: Any) -> Any:
        """Send a request and block until its reply (interruptible: a timeout's KeyboardInterrupt ends the wait)."""
        pending = _Pending()
        request_id = self._post(op, params, pending)
        try:
            pending.lock.acquire()  # released by _wake
        finally:
            with self._lock:
                self._pending.pop(request_id, None)
        return _unwrap(pending.reply)

    async def arequest(self, op: str, **params: Any) -> Any:
        """Send a request and await its reply without blocking the event loop."""
        import asyncio

        loop = asyncio.get_running_loop()
        future = loop.create_future()
        request_id = self._post(op, params, _Pending(loop, future))
        try:
            reply = await future
        finally:
            with self._lock:
                self._pending.pop(request_id, None)
        return _unwrap(reply)

    def deliver(self, message: dict[str, Any]) -> None:
        """Called by the worker's control thread for every ``reply`` frame; unknown ids are ignored."""
        request_id = message.get("id")
        if not isinstance(request_id, int):
            return
        with self._lock:
            pending = self._pending.pop(request_id, None)
        if pending is not None:
            _wake(pending, message)


_CLOSED = (
    "calls to MCP servers work only while a run_python call is running; this one came from code its cell left "
    "running (a thread or task) after the cell returned"
)
_ENDED = (
    "the cell returned before the bridge answered, so this call was abandoned: calls to MCP servers work only "
    "while a run_python call is running; await them (or join their threads) before the cell ends"
)


def _wake(pending: _Pending, message: dict[str, Any]) -> None:
    pending.reply = message
    # ``_thread`` and no ``contextlib`` here: ``threading`` and ``contextlib`` import ``functools`` and ``collections``,
    # about 1 MiB every idle sandbox would keep (docs/density.md).
    if pending.lock is not None:
        try:  # noqa: SIM105
            pending.lock.release()
        except RuntimeError:  # woken once already: each pending is popped by one waker only
            pass
        return
    try:  # noqa: SIM105
        pending.loop.call_soon_threadsafe(_resolve, pending.future, message)
    except RuntimeError:  # the loop was closed: nobody is waiting any more
        pass


def _text(value: Any) -> str | None:
    return value[:256] if isinstance(value, str) else None


def _depth_over(value: Any, limit: int) -> bool:
    """Whether dicts and lists nest more than ``limit`` deep in ``value`` (itself counting as 1); no recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, (list, tuple)) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list, tuple)))
    return False


def _resolve(future: Any, message: dict[str, Any]) -> None:
    if not future.done():
        future.set_result(message)


def _unwrap(reply: dict[str, Any] | None) -> Any:
    if reply is None:
        raise MCPError("the bridge did not answer")
    if reply.get("ok"):
        return reply.get("value")
    error = reply.get("error")
    if not isinstance(error, dict):
        raise MCPError("the bridge sent a malformed error")
    cls = ERRORS.get(str(error.get("kind")), MCPError)
    details = error.get("details")
    raise cls(
        str(error.get("message", "unknown error")),
        server=error.get("server") if isinstance(error.get("server"), str) else None,
        tool=error.get("tool") if isinstance(error.get("tool"), str) else None,
        details=details if isinstance(details, dict) else None,
    )


rpc = Rpc()
