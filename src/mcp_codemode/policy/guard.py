"""Enforcing the policy on sandboxed code's uses of servers (tool calls, resource reads, prompt gets): refusals,
the per-run budget, the rate per owner, the user's approval, the audit line.

The rules (``rules.py``) hide refused servers and tools in the directory; the relay still refuses the calls that
name them anyway, with the refusal built here, and here are the caps that cost something to pass: a budget of
calls per ``run_python`` call (counted on the ``Run``) and a rate per owner (``RateLimiter``, a token bucket kept
for the bridge's life). Every tool call, refused or not, gets one line in the audit log, cancelled ones included:
``CallGuard.audited`` wraps the whole call, so no path out of it (an answer, a refusal, a bug, a cancellation)
goes unrecorded. It is apart from ``runs/relay.py`` so that what the policy enforces can be read in one place,
beside the rules, without the parsing of every request around it. Unlike the rules it works on a run of the
bridge (``runs/relay_run.Run``), so it stands in the run service's layer (``tests/test_architecture.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import mcp_types as types

from ..errors import CannotAsk
from ..guest.protocol import ERROR_KIND_APPROVAL, ERROR_KIND_POLICY, ERROR_KIND_TOOL_TIMEOUT
from ..reply_encoding import EncodedReply, encode_value
from ..runs.approval_question import TooLongToShow, approval_question, shown_arguments
from ..runs.approvals import Approvals
from ..runs.audit import AuditLog
from ..runs.relay_params import Refusal
from ..runs.relay_run import MAX_CLIENT_REQUESTS, Run, upstream_log
from ..telemetry.metrics import UPSTREAM_METHODS, ApprovalDecision, UpstreamOutcome
from ..telemetry.seam import Telemetry
from ..telemetry.tracing import APPROVAL, CLIENT_REQUEST, NO_SPAN, Span, digest
from ..upstream.servers.call_links import CallLink
from ..upstream.tools.gate import Refused
from .rules import Policy, ToolNames

if TYPE_CHECKING:
    from ..guest.protocol import ReplyBody
    from ..reply_encoding import Reply


@dataclasses.dataclass
class CallNote:
    """What one tool call turned out to be, for its audit line, filled in as the call is checked."""

    kind: str = "tool"  # or "resource", "prompt"
    server: str | None = None
    tool: str | None = None  # the tool's name; a resource's URI; a prompt's name
    arguments: bytes | None = None  # canonical JSON
    rule: str | None = None
    approval: str | None = None  # for a call ask_tools names: how it was (not) approved
    # What the metrics may name (telemetry/): the server once it is one configured, the tool once its server listed
    # it; never the names the code wrote, which could carry anything.
    configured: str = ""
    listed: str = ""
    span: Span = NO_SPAN  # the use's client span (telemetry/tracing.py), described once the use ended


log = logging.getLogger(__name__)

# What the user is asked for a call that ask_tools names: allow it, and whether to allow the same tool again for
# the rest of the session without asking. The question's text is approval_question.py's.
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "remember": {
            "type": "boolean",
            "title": "Allow this tool for the rest of the session, from this client",
            "description": "Later calls of the same tool in this session, made through this same client, run "
            "without asking again; calls from any other client sharing the session are still asked (or refused "
            "when they cannot be).",
            "default": False,
        }
    },
}
Forward = Callable[[Any], Awaitable[Any]]  # a Caller's elicit or sample
# How a call ask_tools names was (not) approved (``CallNote.approval``), as the metrics count it; the rest: "unasked".
_DECISIONS: dict[str, ApprovalDecision] = {
    "approved": "granted",
    "approved for the session": "granted",
    "declined": "denied",
    "cancelled": "denied",
    "remembered": "remembered",
    "approved in the console": "granted",
    "denied in the console": "denied",
}


class RateLimiter:
    """A token bucket per owner: ``rate`` calls per second on average, bursts of up to ``max(rate, 1)``.

    Owners are HTTP principals (or "local"), few and long-lived, so buckets are kept for the bridge's life.
    """

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = max(rate, 1.0)
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # owner -> (tokens, when)

    def take(self, owner: str) -> bool:
        """Spend one token of ``owner``'s bucket; False (nothing spent) when it is empty."""
        if self.rate <= 0:
            return True
        now = self._clock()
        tokens, then = self._buckets.get(owner, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.rate)
        if tokens < 1:
            self._buckets[owner] = (tokens, now)
            return False
        self._buckets[owner] = (tokens - 1, now)
        return True

    def wait_hint(self) -> str:
        seconds = 1 / self.rate if self.rate > 0 else 0
        return f"about {math.ceil(seconds * 10) / 10:g} s" if seconds >= 0.1 else "a moment"


class CallGuard:
    """The policy's refusals, caps and audit log for the tool calls of every session of one bridge."""

    def __init__(self, policy: Policy, audit: AuditLog, telemetry: Telemetry | None = None) -> None:
        self.policy = policy
        self.audit = audit
        self.telemetry = telemetry or Telemetry()
        self.rate = RateLimiter(policy.max_calls_per_second)
        # The web console's waiting approvals (runs/approvals.py), when a console is served; None: the client only.
        self.approvals: Approvals | None = None

    async def audited(self, run: Run, answer: Callable[[CallNote], Awaitable[ReplyBody]], kind: str = "tool") -> Reply:
        """``answer``'s reply to one use of a server, with its audit line written whatever becomes of it; a value
        comes back encoded (``EncodedReply``) when it can be.

        ``kind`` is what was used: ``tool`` (``note.tool`` is its name), ``resource`` (the URI) or ``prompt``."""
        note = CallNote(kind=kind)
        started = time.monotonic()
        method = UPSTREAM_METHODS.get(kind, kind)
        # The client span of the MCP conventions: the hub's request carries its traceparent in _meta (the SDK writes
        # the current context there), so the upstream server's span is its child.
        with self.telemetry.tracing.span(method, "client", {"mcp.method.name": method}) as span:
            note.span = span
            try:
                reply = await answer(note)
            except asyncio.CancelledError:
                self._audit(run, note, started, "cancelled")
                raise
            except Exception as exc:  # a bug of ours; the worker turns it into an error reply
                self._audit(run, note, started, "error", error=type(exc).__name__)
                raise
            if reply["ok"]:
                value = reply["value"]
                outcome: UpstreamOutcome = "tool_error" if isinstance(value, dict) and value.get("isError") else "ok"
                try:  # encoded once: the audit counts these bytes and the reply frame reuses them
                    encoded = EncodedReply(reply, encode_value(value))
                except (TypeError, ValueError, RecursionError):  # the worker tells the code it could not be sent
                    self._audit(run, note, started, outcome)
                else:
                    self._audit(run, note, started, outcome, result_bytes=len(encoded.value_json),
                                result=encoded.value_json)  # fmt: skip
                    return encoded
            else:
                kind = str(reply["error"].get("kind"))
                if kind in (ERROR_KIND_POLICY, ERROR_KIND_APPROVAL):
                    self._audit(run, note, started, "refused")
                elif kind == ERROR_KIND_TOOL_TIMEOUT:
                    self._audit(run, note, started, "timeout")
                else:
                    self._audit(run, note, started, "error", error=kind)
            return reply

    def _audit(self, run: Run, note: CallNote, started: float, outcome: UpstreamOutcome, *, error: str | None = None,
               result_bytes: int | None = None, result: bytes | None = None) -> None:  # fmt: skip
        duration = time.monotonic() - started
        span = note.span
        if span.recording:
            _describe(span, note, run, outcome, error, self.telemetry.tracing.digests, result)
        self.telemetry.upstream_used(note.kind, note.configured, note.listed, outcome, duration)
        if note.approval is not None:
            self.telemetry.approval(_DECISIONS.get(note.approval, "unasked"))
        self.audit.record(
            session=run.session,
            owner=run.owner,
            server=note.server,
            tool=note.tool,
            arguments=note.arguments,
            outcome=outcome,
            duration=duration,
            result_bytes=result_bytes,
            rule=note.rule if outcome == "refused" else None,
            error=error,
            kind=note.kind,
            approval=note.approval,
            call=run.call,
            trace=(span.trace_id, span.span_id),
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

    async def approve(self, run: Run, names: ToolNames, arguments: dict[str, Any], note: CallNote) -> None:
        """Let a call that ``ask_tools`` names (by any of the tool's names) go only when the user approves it (or
        approved its tool for the rest of the session); otherwise raise the ``ApprovalDenied`` refusal saying why.
        Never passes silently, and never asks a question that does not show the whole call."""
        pattern = self.policy.approval_pattern(names)
        if pattern is None:
            return
        server, tool = names.server, names.tool
        subject = f"{server}/{tool}"
        remembered = f"{run.caller.asker}|{subject}"  # what "remember" allowed is the asked client's alone
        if run.caller.asker and run.caller.elicit is not None and remembered in run.caller.approved:
            note.approval = "remembered"
            return
        why = f'ask_tools pattern "{pattern}" ({self.policy.where})'
        elicit = run.caller.elicit
        approvals = self.approvals
        if approvals is not None and approvals.answers_for(elicit is not None):
            await self._ask_console(approvals, run, server, tool, why, arguments, note)
            return
        if elicit is None:
            note.approval = "unavailable"
            raise self._not_approved(subject, f"it needs your approval ({why}), and the client of this call cannot "
                                     "ask you: it did not declare the MCP elicitation capability, or the call came "
                                     "through another replica; use a client that supports elicitation, let the web "
                                     "console answer (MCP_BRIDGE_CONSOLE, MCP_BRIDGE_APPROVALS), or take the tool "
                                     "out of ask_tools", note, server, tool)  # fmt: skip
        try:
            message = approval_question(server, tool, why, arguments)
        except TooLongToShow as exc:
            note.approval = "too long to show"
            raise self._not_approved(subject, f"it needs your approval ({why}), and {exc}", note, server,
                                     tool) from None  # fmt: skip
        with self.telemetry.tracing.span(APPROVAL, attributes={"mcp_codemode.server": server}) as asking:
            try:
                answer = await elicit(types.ElicitRequestFormParams(message=message, requested_schema=APPROVAL_SCHEMA))
            except asyncio.CancelledError:
                raise
            except CannotAsk as exc:
                note.approval = "unavailable"
                raise self._not_approved(subject, f"it needs your approval ({why}), and {exc}; or take the tool out of "
                                         "ask_tools", note, server, tool) from None  # fmt: skip
            except Exception as exc:  # noqa: BLE001 - the client failed to ask, or has no channel to: refused, saying why
                log.info("asking to approve %s failed: %s", subject, exc)
                note.approval = "unavailable"
                raise self._not_approved(subject, f"it needs your approval ({why}), and asking the client of this "
                                         f"call failed ({type(exc).__name__}: {exc!s:.200})", note, server,
                                         tool) from None  # fmt: skip
            asking.set("mcp_codemode.approval", answer.action)  # accept, decline or cancel
        if answer.action != "accept":
            note.approval = "declined" if answer.action == "decline" else "cancelled"
            raise self._not_approved(subject, f"the user {note.approval} it when asked ({why})", note, server, tool)
        note.approval = "approved"
        if answer.content is not None and answer.content.get("remember") is True and run.caller.asker:
            run.caller.approved.add(remembered)
            note.approval = "approved for the session"

    async def _ask_console(self, approvals: Approvals, run: Run, server: str, tool: str, why: str,
                           arguments: dict[str, Any], note: CallNote) -> None:  # fmt: skip
        """Wait for the call's owner to approve it in the web console, for as long as the call runs (its timeout or
        a cancel ends the wait, and the approval with it); a denial raises the ``ApprovalDenied`` refusal."""
        subject = f"{server}/{tool}"
        try:
            shown = shown_arguments(arguments)
        except TooLongToShow as exc:
            note.approval = "too long to show"
            raise self._not_approved(subject, f"it needs your approval ({why}), and {exc}", note, server,
                                     tool) from None  # fmt: skip
        note.approval = "unanswered in the console"  # what the audit line says if the call ends while it waits
        with approvals.waiting(run.owner, run.session, run.call, server, tool, why, shown) as waiting:
            log.info("call %s waits for approval of %s in the web console", run.call, subject)
            if run.caller.news is not None:
                await run.caller.news(f"{subject}: waiting for approval in the web console (Approvals page)")
            with self.telemetry.tracing.span(APPROVAL, attributes={"mcp_codemode.server": server}) as asking:
                granted = await waiting.answer
                asking.set("mcp_codemode.approval", "accept" if granted else "decline")
        if not granted:
            note.approval = "denied in the console"
            raise self._not_approved(subject, f"denied in the console ({why})", note, server, tool)
        note.approval = "approved in the console"

    def link(self, run: Run, server: str, alias: str, tool: str) -> CallLink:
        """How the server of one tool call reaches the run's client while it runs: its log messages as news, its
        elicitation and sampling requests passed on (each audited, at most ``MAX_CLIENT_REQUESTS`` per run, and
        sampling only where the policy's ``deny_sampling`` allows)."""
        caller = run.caller
        listener = upstream_log(run, caller.news, server, tool) if caller.news is not None else None

        async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
            result = await self._pass_on(run, server, tool, "elicitation", caller.elicit, params, None)
            assert isinstance(result, types.ElicitResult)
            return result

        async def sample(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
            refused = self.policy.sampling_refusal(server, alias)  # asked only when a server asks: not on every call
            result = await self._pass_on(run, server, tool, "sampling", caller.sample, params, refused)
            assert isinstance(result, types.CreateMessageResult)
            return result

        return CallLink(log=listener, elicit=elicit, sample=sample)

    async def _pass_on(self, run: Run, server: str, tool: str, what: str, forward: Forward | None, params: Any,
                       refused: Refused | None) -> Any:  # fmt: skip
        """One elicitation or sampling request of ``server`` (serving ``tool``), passed on to the run's client and
        audited (kind ``elicitation`` or ``sampling``, the tool it came during, the outcome); ``CannotAsk`` when it
        cannot be, saying why."""
        started = time.monotonic()
        outcome, reason = "refused", ""
        try:
            if refused is not None:
                reason = self.policy.message(f"{what} for {server}", refused)
            elif forward is None:
                reason = (f"the client of this run_python call did not declare the MCP {what} capability, so it "
                          f"cannot be asked")  # fmt: skip
            elif run.client_requests >= MAX_CLIENT_REQUESTS:
                reason = f"this run_python call already passed on {MAX_CLIENT_REQUESTS} requests to its client"
            if reason:
                raise CannotAsk(reason)
            run.client_requests += 1
            assert forward is not None
            try:
                with self.telemetry.tracing.span(
                    CLIENT_REQUEST, attributes={"mcp_codemode.request": what, "mcp_codemode.server": server}
                ):
                    result = await forward(params)
            except CannotAsk:
                outcome = "error"
                raise
            except asyncio.CancelledError:
                outcome = "cancelled"
                raise
            except Exception as exc:  # noqa: BLE001 - the client failed to answer: the server is told, not the bridge
                outcome = "error"
                raise CannotAsk(f"the client failed to answer ({type(exc).__name__}: {exc!s:.200})") from None
            outcome = str(getattr(result, "action", "ok"))  # an elicitation's accept/decline/cancel, else ok
            return result
        finally:
            self.audit.record(session=run.session, owner=run.owner, server=server, tool=tool, arguments=None,
                              outcome=outcome, duration=time.monotonic() - started,
                              rule=refused.rule if refused is not None else None, kind=what,
                              call=run.call)  # fmt: skip

    def _not_approved(self, subject: str, reason: str, note: CallNote, server: str, tool: str) -> Refusal:
        note.rule = "ask_tools"
        return Refusal(ERROR_KIND_APPROVAL, f"not approved: {subject}: {reason}", server, tool, rule="ask_tools")

    def refused(self, subject: str, refused: Refused, note: CallNote | None = None, server: str | None = None,
                tool: str | None = None) -> Refusal:  # fmt: skip
        if note is not None:
            note.rule = refused.rule
        return Refusal(ERROR_KIND_POLICY, self.policy.message(subject, refused), server, tool, rule=refused.rule)


def _describe(span: Span, note: CallNote, run: Run, outcome: UpstreamOutcome, error: str | None, digests: bool,
              result: bytes | None) -> None:  # fmt: skip
    """A use's client span once it ended: named for the tool only once its server listed it (a name the code made up
    could carry anything), failed on any outcome but ok (an ``isError`` result is a failure the protocol calls a
    success), and never holding arguments or results: with ``MCP_BRIDGE_TRACE_DIGESTS`` (``digests``), their sizes
    and sha256."""
    if note.kind == "tool" and note.listed:
        span.rename(f"tools/call {note.listed}")
        span.set("gen_ai.tool.name", note.listed)
        span.set("gen_ai.operation.name", "execute_tool")
    if note.configured:
        span.set("mcp_codemode.server", note.configured)
    span.set("mcp_codemode.call.id", run.call)
    span.set("mcp_codemode.outcome", outcome)
    if outcome != "ok":
        span.fail(error if outcome == "error" and error else outcome)
    if digests:
        digest(span, "mcp_codemode.arguments", note.arguments)
        digest(span, "mcp_codemode.result", result)
