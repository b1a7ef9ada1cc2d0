"""How a ``run_python`` call ended, as the metrics count it, and how much it produced.

Apart from the bridge, which reports both when a call ends, because they are pure rules over a result (tested on
their own) and the bridge's module is near its size bound.
"""

from __future__ import annotations

from ..guest.protocol import ERROR_KIND_APPROVAL, ERROR_KIND_POLICY, ERROR_KIND_TOOL
from ..sandbox.results import ExecutionResult
from ..telemetry.metrics import CallOutcome
from .call_board import CANCELLED


def call_outcome(result: ExecutionResult) -> CallOutcome:
    """How a call ended, as the metrics count it: the code's own failures told apart from the policy's refusals
    and upstream tools' errors it did not catch (by the exception the guest named: a closed set of names here)."""
    if result.status == "error":
        kind = result.error.type if result.error is not None else ""
        return _ERROR_OUTCOMES.get(kind, "code_error")
    return _STATUS_OUTCOMES[result.status]


_STATUS_OUTCOMES: dict[str, CallOutcome] = {"ok": "ok", "timeout": "timeout", "crashed": "crashed"}
_ERROR_OUTCOMES: dict[str, CallOutcome] = {
    ERROR_KIND_POLICY: "refused",
    ERROR_KIND_APPROVAL: "refused",
    ERROR_KIND_TOOL: "tool_error",
    CANCELLED: "cancelled",  # from the web console (call_board.py)
}


def output_bytes(result: ExecutionResult) -> int:
    """What the code produced for its caller: printed output, the value, its error and images, in bytes."""
    texts = (result.stdout, result.stderr, result.value or "", result.error.message if result.error else "")
    return sum(len(text.encode("utf-8", "replace")) for text in texts) + sum(len(i.data) for i in result.images)
