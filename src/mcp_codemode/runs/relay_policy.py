"""The policy's side of sandboxed code's uses of servers (tool calls, resource reads, prompt gets): refusals, the
per-run budget, the rate, the audit line.

The policy hides refused servers and tools in the directory; the relay still refuses the calls that name
them anyway, with the refusal built here, and here are the caps that cost something to pass: a budget of
calls per ``run_python`` call (counted on the ``Run``) and a rate per owner. Every tool call, refused or not,
gets one line in the audit log, cancelled ones included: ``CallGuard.audited`` wraps the whole call, so no
path out of it (an answer, a refusal, a bug, a cancellation) goes unrecorded. It is apart from ``relay.py``
so that what the policy enforces can be read in one place, without the parsing of every request around it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable

from ..guest.protocol import ERROR_KIND_POLICY, ERROR_KIND_TOOL_TIMEOUT
from ..policy_rules import Policy
from ..reply_encoding import EncodedReply, encode_value
from .audit import AuditLog
from .policy import RateLimiter, Refused
from .relay_params import Refusal, Reply
from .relay_run import Run


@dataclasses.dataclass
class CallNote:
    """What one tool call turned out to be, for its audit line, filled in as the call is checked."""

    kind: str = "tool"  # or "resource", "prompt"
    server: str | None = None
    tool: str | None = None  # the tool's name; a resource's URI; a prompt's name
    arguments: bytes | None = None  # canonical JSON
    rule: str | None = None


class CallGuard:
    """The policy's refusals, caps and audit log for the tool calls of every session of one bridge."""

    def __init__(self, policy: Policy, audit: AuditLog) -> None:
        self.policy = policy
        self.audit = audit
        self.rate = RateLimiter(policy.max_calls_per_second)

    async def audited(self, run: Run, answer: Callable[[CallNote], Awaitable[Reply]], kind: str = "tool") -> Reply:
        """``answer``'s reply to one use of a server, with its audit line written whatever becomes of it.

        ``kind`` is what was used: ``tool`` (``note.tool`` is its name), ``resource`` (the URI) or ``prompt``."""
        note = CallNote(kind=kind)
        started = time.monotonic()
        try:
            reply = await answer(note)
        except asyncio.CancelledError:
            self._audit(run, note, started, "cancelled")
            raise
        except Exception as exc:  # a bug of ours; the worker turns it into an error reply
            self._audit(run, note, started, "error", error=type(exc).__name__)
            raise
        if reply.get("ok"):
            value = reply.get("value")
            outcome = "tool_error" if isinstance(value, dict) and value.get("isError") else "ok"
            try:  # encoded once: the audit counts these bytes and the reply frame reuses them
                reply = EncodedReply(reply, encode_value(value))
            except (TypeError, ValueError, RecursionError):  # the worker tells the code it could not be sent
                self._audit(run, note, started, outcome)
            else:
                self._audit(run, note, started, outcome, result_bytes=len(reply.value_json))
        else:
            kind = str(reply.get("error", {}).get("kind"))
            if kind == ERROR_KIND_POLICY:
                self._audit(run, note, started, "refused")
            elif kind == ERROR_KIND_TOOL_TIMEOUT:
                self._audit(run, note, started, "timeout")
            else:
                self._audit(run, note, started, "error", error=kind)
        return reply

    def _audit(self, run: Run, note: CallNote, started: float, outcome: str, *, result_bytes: int | None = None,
               error: str | None = None) -> None:  # fmt: skip
        self.audit.record(
            session=run.session,
            owner=run.owner,
            server=note.server,
            tool=note.tool,
            arguments=note.arguments,
            outcome=outcome,
            duration=time.monotonic() - started,
            result_bytes=result_bytes,
            rule=note.rule if outcome == "refused" else None,
            error=error,
            kind=note.kind,
        )

    def spend(self, run: Run, subject: str, note: CallNote) -> None:
        """Take one call from the run's budget and the owner's rate; a call refused here costs neither."""
        policy = self.policy
        if policy.max_calls_per_run and run.calls >= policy.max_calls_per_run:
            reason = (f"the per-run call budget of {policy.max_calls_per_run:,} calls (tools, resource reads, prompts) "
                      "is used up "
                      "(max_calls_per_run); the next run_python call starts with a fresh budget")  # fmt: skip
            raise self.refused(subject, Refused("max_calls_per_run", reason), note)
        if not self.rate.take(run.owner):
            reason = (f"the rate cap of {policy.max_calls_per_second:g} calls per second (tools, resources, prompts) "
                      f"is reached (max_calls_per_second); wait {self.rate.wait_hint()} and call again")  # fmt: skip
            raise self.refused(subject, Refused("max_calls_per_second", reason), note)
        run.calls += 1

    def refused(self, subject: str, refused: Refused, note: CallNote | None = None, server: str | None = None,
                tool: str | None = None) -> Refusal:  # fmt: skip
        if note is not None:
            note.rule = refused.rule
        return Refusal(ERROR_KIND_POLICY, self.policy.message(subject, refused), server, tool, rule=refused.rule)
