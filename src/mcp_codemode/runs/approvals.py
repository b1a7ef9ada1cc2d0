"""The ``ask_tools`` calls waiting for a person in the web console, and the one answer each may get.

Why a registry of its own: a call that ``ask_tools`` names waits (in ``policy/guard.py``) on a question that a
browser answers, much later and from another request; the two meet here. It is the console's only way to let a
call through, so it fails closed on every doubt. An answer counts only when it names a waiting approval by its
random id, comes from the principal whose call it is, carries the digest of exactly what the page showed (the
server, the tool and the arguments as shown), and comes first; once the call ended (answered, timed out,
cancelled) its approval is gone and any answer to it is refused. Whoever asks a question that is not theirs is told
exactly what they are told of one that does not exist.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import secrets
import time
from collections.abc import Callable, Iterator

#: Who may answer an ``ask_tools`` question: the client (elicitation), the console, or either.
APPROVERS = ("client", "console", "either")


def shown_digest(server: str, tool: str, shown: str) -> str:
    """What the page's form carries back: the sha256 of the call as the page showed it."""
    return hashlib.sha256(json.dumps([server, tool, shown]).encode()).hexdigest()


@dataclasses.dataclass
class Waiting:
    """One call waiting for a person: ``shown`` is its arguments exactly as the page shows them."""

    id: str
    owner: str
    session: str
    call: str
    server: str
    tool: str
    why: str
    shown: str
    digest: str
    asked: float  # time.time()
    answer: asyncio.Future[bool] = dataclasses.field(repr=False)


class Approvals:
    """The approvals waiting in one bridge's console; ``mode`` is who may answer (one of ``APPROVERS``)."""

    def __init__(self, mode: str, changed: Callable[[], None] = lambda: None) -> None:
        if mode not in APPROVERS:
            raise ValueError(mode)
        self.mode = mode
        self._changed = changed
        self._waiting: dict[str, Waiting] = {}

    def answers_for(self, client_can_ask: bool) -> bool:
        """Whether this console (not the client) is to answer a call whose client can or cannot elicit: with
        ``either``, the client is asked when it can be, the console otherwise."""
        return self.mode == "console" or (self.mode == "either" and not client_can_ask)

    @contextlib.contextmanager
    def waiting(self, owner: str, session: str, call: str, server: str, tool: str, why: str,
                shown: str) -> Iterator[Waiting]:  # fmt: skip
        """A call's approval, on the page while the ``with`` block runs (it awaits ``answer``) and gone after."""
        entry = Waiting(secrets.token_urlsafe(16), owner, session, call, server, tool, why, shown,
                        shown_digest(server, tool, shown), time.time(),
                        asyncio.get_running_loop().create_future())  # fmt: skip
        self._waiting[entry.id] = entry
        self._changed()
        try:
            yield entry
        finally:
            del self._waiting[entry.id]
            if not entry.answer.done():
                entry.answer.cancel()
            self._changed()

    def answer(self, approval: str, owner: str, digest: str, granted: bool) -> bool:
        """Grant or deny ``owner``'s waiting approval ``approval``, shown with ``digest``; False (nothing done) when
        there is none such (answered, ended, another's) or the digest is not that of what waits."""
        entry = self._waiting.get(approval)
        if entry is None or entry.owner != owner or entry.answer.done():
            return False
        if not secrets.compare_digest(digest.encode(), entry.digest.encode()):
            return False
        entry.answer.set_result(granted)
        return True

    def waiting_of(self, owner: str) -> list[Waiting]:
        return sorted((w for w in self._waiting.values() if w.owner == owner and not w.answer.done()),
                      key=lambda w: w.asked)  # fmt: skip
