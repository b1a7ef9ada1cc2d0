"""An upstream server's sampling and elicitation requests, as the bridge passes them on: the policy, the cap per
run, and the audit line of each (pure logic: the client is a function here; the real one is in test_upstream_e2e)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import mcp_types as types
import pytest

from mcp_codemode.errors import CannotAsk
from mcp_codemode.policy.guard import CallGuard
from mcp_codemode.policy.rules import Policy
from mcp_codemode.runs.audit import AuditLog
from mcp_codemode.runs.relay_run import MAX_CLIENT_REQUESTS, Caller, Run

SAMPLE = types.CreateMessageRequestParams(messages=[], max_tokens=5)
FORM = types.ElicitRequestFormParams(message="name?", requested_schema={"type": "object", "properties": {}})


async def sample(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="hi"), model="m")


async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


def audit_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_deny_sampling_refuses_a_servers_sampling_but_not_its_elicitation_and_both_are_audited(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.jsonl")
    guard = CallGuard(Policy(deny_sampling=("untrusted-*",), source="/etc/codemode.toml"), audit)
    run = Run("local", "s", caller=Caller(sample=sample, elicit=elicit))

    async def main() -> types.ElicitResult:
        link = guard.link(run, "untrusted-docs", "untrusted_docs", "lookup")
        assert link.sample is not None and link.elicit is not None
        with pytest.raises(CannotAsk, match='denied by deny_sampling pattern "untrusted-\\*"'):
            await link.sample(SAMPLE)
        trusted = guard.link(run, "docs", "docs", "lookup")
        assert trusted.sample is not None
        assert (await trusted.sample(SAMPLE)).model == "m"
        return await link.elicit(FORM)

    assert asyncio.run(main()).action == "decline"
    audit.flush()
    lines = [(line["kind"], line["server"], line["tool"], line["outcome"], line.get("rule"))
             for line in audit_lines(tmp_path / "audit.jsonl")]  # fmt: skip
    assert lines == [
        ("sampling", "untrusted-docs", "lookup", "refused", "deny_sampling"),
        ("sampling", "docs", "lookup", "ok", None),
        ("elicitation", "untrusted-docs", "lookup", "decline", None),
    ]


def test_a_server_that_asks_in_a_loop_is_cut_off_after_the_cap_per_run(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.jsonl")
    guard = CallGuard(Policy(), audit)
    run = Run("local", "s", caller=Caller(sample=sample))
    outcomes: list[str] = []

    async def main() -> None:
        link = guard.link(run, "flood", "flood", "spin")
        assert link.sample is not None
        for _ in range(MAX_CLIENT_REQUESTS * 3):
            try:
                outcomes.append((await link.sample(SAMPLE)).model)
            except CannotAsk as exc:
                outcomes.append(str(exc))

    asyncio.run(main())
    assert outcomes[:MAX_CLIENT_REQUESTS] == ["m"] * MAX_CLIENT_REQUESTS
    cut_off = f"this run_python call already passed on {MAX_CLIENT_REQUESTS} requests to its client"
    assert outcomes[MAX_CLIENT_REQUESTS:] == [cut_off] * (MAX_CLIENT_REQUESTS * 2)
    # The next run_python call starts with a fresh count.
    fresh = Run("local", "s", caller=Caller(sample=sample))
    link = guard.link(fresh, "flood", "flood", "spin")

    async def once() -> types.CreateMessageResult:
        assert link.sample is not None
        return await link.sample(SAMPLE)

    assert asyncio.run(once()).model == "m"
