"""The parameters of sandboxed code's requests, type-checked before anything uses them, and the refusal.

Every request arrives from code we do not trust (a ``call`` frame, already size-bounded by the frame
reader), so each parameter is checked here (its type, its length, that it is valid Unicode) and every
failure becomes a ``Refusal``: an error reply whose ``kind`` names the ``runtime`` exception the guest raises.
It is apart from the relay's dispatch (``relay.py``) and the policy's guard (``policy/guard.py``) because both raise
these refusals and neither should need the other to do so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import CodemodeError
from ..guest.protocol import ERROR_KIND_ARGUMENT
from ..upstream.tools import catalog

if TYPE_CHECKING:
    from ..guest.protocol import CallFrame, ErrorInfo, ReplyRefusal
MAX_NAME = 256
MAX_QUERY = 2_000
MAX_URI = 8_192
MAX_LIMIT = 200
MAX_OFFSET = 100_000
# A search request's keys: the frame's own (type, id, op) and the parameters; anything else is refused.
SEARCH_KEYS = frozenset({"type", "id", "op", "query", "limit", "offset", "detail", "server"})


class Refusal(CodemodeError):
    """A request we answer with an error reply; ``kind`` is the runtime exception class the guest raises."""

    def __init__(self, kind: str, message: str, server: str | None = None, tool: str | None = None,
                 **details: Any) -> None:  # fmt: skip
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.server = server
        self.tool = tool
        self.details = details

    def reply(self) -> ReplyRefusal:
        error: ErrorInfo = {"kind": self.kind, "message": self.message}
        if self.server is not None:
            error["server"] = self.server
        if self.tool is not None:
            error["tool"] = self.tool
        if self.details:
            error["details"] = self.details
        return {"ok": False, "error": error}


def checked_detail(message: CallFrame) -> catalog.Detail:
    detail = message.get("detail", "summary")
    for known in catalog.DETAILS:
        if detail == known:
            return known
    raise Refusal(ERROR_KIND_ARGUMENT, f"detail must be one of {', '.join(catalog.DETAILS)}, not {detail!r:.40}")


def clipped_text(message: CallFrame, key: str) -> str | None:
    value = message.get(key)
    return value[:MAX_NAME] if isinstance(value, str) else None


def refuse_unknown(message: CallFrame, known: frozenset[str], call: str, takes: str) -> None:
    """Refuse parameters ``call`` does not take (a typo would otherwise be silently ignored), naming what it takes."""
    unknown = [key for key in message if key not in known]
    if unknown:
        named = ", ".join(f"{key!r:.40}" for key in unknown[:5])
        raise Refusal(ERROR_KIND_ARGUMENT, f"{call}() got unknown parameter(s) {named}; it takes {takes}")


def checked_int(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refusal(ERROR_KIND_ARGUMENT, f"{what} must be a whole number from {low} to {high:,}, not "
                      f"{type(value).__name__} {value!r:.40}")  # fmt: skip
    if not low <= value <= high:
        shown = str(value) if abs(value) < 10**12 else "a number that large"
        raise Refusal(ERROR_KIND_ARGUMENT, f"{what} must be a whole number from {low} to {high:,}, not {shown}")
    return value


def checked_text(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise Refusal(ERROR_KIND_ARGUMENT, f"{what} must be a string, not {type(value).__name__}")
    if not value.strip():
        raise Refusal(ERROR_KIND_ARGUMENT, f"{what} is empty; give a {what}")
    if len(value) > limit:
        raise Refusal(ERROR_KIND_ARGUMENT, f"{what} is {len(value):,} characters long; at most {limit:,} are accepted")
    if not is_unicode(value):
        raise Refusal(ERROR_KIND_ARGUMENT, f"{what} holds a lone surrogate, which is not valid Unicode text")
    return value


def is_unicode(text: str) -> bool:
    """Whether ``text`` can be encoded as UTF-8: a lone surrogate cannot, and handing one to the SDK fails its
    encoder mid-request, which closes the connection to a server every session shares."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
