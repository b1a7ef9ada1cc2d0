"""Approval of tool calls (``ask_tools``) against code that would get a call past the user: through the real
``mcp-codemode serve`` over HTTP, real bubblewrap, the real server-everything (whose tools are kebab-case) and the
real SDK client of each protocol era.

The ways in (issue 30): naming the tool as a pattern does not (its Python alias, a glob on the alias) on any call
path; arguments too long to show, or characters that hide or reorder what the question shows; and, in the
2026-07-28 era, a round's ``requestState`` sent again to answer a later round. One bridge serves every test (a
client of each era comes and goes); the plain approval flow is in test_client_requests_e2e.py.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.support import upstreams
from tests.support.cells import private_state_dir
from tests.support.clients import MODES, ClientCallbacks, HttpServer, http_client_for, require_bubblewrap, text_of
from tests.support.upstreams import write_config

pytestmark = pytest.mark.backend  # a bridge, a sandbox and server-everything

# By alias (get-env), by a glob on an alias (get-tiny-image), by name (echo): none of the first two names the tool
# as the server lists it, and every proxy sends that name.
ASK_TOOLS = ["everything/get_env", "*/get_tiny_*", "everything/echo"]
DECLINE = types.ElicitResult(action="decline")
ACCEPT = types.ElicitResult(action="accept", content={"remember": False})


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HttpServer, Path]]:
    """The bridge of this module, and its audit log."""
    require_bubblewrap()
    folder = tmp_path_factory.mktemp("approvals")
    settings = folder / "codemode.toml"
    settings.write_text(f"[policy]\nask_tools = {json.dumps(ASK_TOOLS)}\n", encoding="utf-8")
    config = write_config(folder / "servers.json", upstreams.everything())
    audit = folder / "audit.jsonl"
    with private_state_dir() as state, HttpServer(
        folder / "serve.log", "--config", str(config), "--no-discover", MCP_CODEMODE_SETTINGS=str(settings),
        MCP_BRIDGE_STATE_DIR=str(state), MCP_BRIDGE_AUDIT_LOG=str(audit),
        # A parked run is ended by an interrupt, which must win over the hard kill after a missed grace: a starved
        # machine stalled the guest past the default 2 s once (the sandbox killed, state gone), as in replicas.py.
        MCP_BRIDGE_INTERRUPT_GRACE="30",
    ) as server:  # fmt: skip
        yield server, audit


def asking(answers: list[types.ElicitResult], asked: list[str]) -> ClientCallbacks:
    """Callbacks that note each question asked and give the next of ``answers`` (the last one from then on)."""

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return answers[min(len(asked), len(answers)) - 1]

    return ClientCallbacks(elicitation=answer)


async def run_cell(server: HttpServer, mode: str, code: str, callbacks: ClientCallbacks) -> dict[str, Any]:
    async with http_client_for(server.url, mode, deadline=None, callbacks=callbacks) as client:
        result = await client.call_tool("run_python", {"code": code, "timeout": 120})
    rows: dict[str, Any] = json.loads(text_of(result).strip().splitlines()[0])
    return rows


# ------------------------------------------------------------------- every name of a tool, on every call path

EVERY_PATH = """
import json
rows = {}
paths = {
    "attribute": lambda: mcp_everything.get_env(),
    "raw": lambda: mcp_everything.get_env.raw(),
    "mcp_servers by name": lambda: mcp_servers["everything"]["get-env"](),
    "mcp_servers by alias": lambda: mcp_servers["everything"].get_env(),
    "call_tool by name": lambda: runtime.call_tool("everything", "get-env", {}),
    "call_tool by alias": lambda: runtime.call_tool("everything", "get_env", {}),
    "glob, attribute": lambda: mcp_everything.get_tiny_image(),
    "glob, call_tool raw": lambda: runtime.call_tool("everything", "get-tiny-image", {}, raw=True),
}
for label, call in paths.items():
    try:
        rows[label] = ["ran", str(await call())[:60]]
    except runtime.ApprovalDenied as exc:
        rows[label] = ["ApprovalDenied", exc.details.get("rule")]
rows["not asked"] = await mcp_everything.get_sum(a=1, b=2)
print(json.dumps(rows, default=str))
"""


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_pattern_naming_a_kebab_case_tool_by_its_alias_or_a_glob_asks_on_every_call_path(
    bridge: tuple[HttpServer, Path], mode: str
) -> None:
    """``everything/get_env`` and ``*/get_tiny_*`` name server-everything's get-env and get-tiny-image by their
    Python aliases, as deny_tools patterns may; every proxy sends the real name. Each call path (attribute,
    ``.raw()``, ``mcp_servers[...]`` by name and alias, ``runtime.call_tool`` by name and alias) is asked, in both
    eras (the handshake era through elicitation, 2026-07-28 through input_required rounds); declined, none runs.
    Before issue 30's fix none was asked, and all ran."""
    server, audit = bridge
    asked: list[str] = []
    rows = await run_cell(server, mode, EVERY_PATH, asking([DECLINE], asked))
    paths = [label for label in rows if label != "not asked"]
    assert len(paths) == 8 and all(rows[label] == ["ApprovalDenied", "ask_tools"] for label in paths), rows
    assert "3" in str(rows["not asked"]), rows
    assert len(asked) == 8, asked
    assert all('everything/get-env, which needs your approval (ask_tools pattern "everything/get_env"' in question
               for question in asked[:6]), asked  # fmt: skip
    assert all('everything/get-tiny-image, which needs your approval (ask_tools pattern "*/get_tiny_*"' in question
               for question in asked[6:]), asked  # fmt: skip
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    ran = [line for line in lines if line.get("tool") in ("get-env", "get-tiny-image") and line["outcome"] == "ok"]
    assert not ran, ran


# ------------------------------------------------------------ a question shows all it approves, and shows it plainly

HIDING = """
import json
rows = {}
for label, message in (("long", "x" * 2500),
                       ("hidden", "report.txt\\u202eexe.pdf\\u2028Allow this call? yes\\u2066\\u200b\\x85\\U000e0041")):
    try:
        rows[label] = ["ran", await mcp_everything.echo(message=message)]
    except runtime.ApprovalDenied as exc:
        rows[label] = ["ApprovalDenied", exc.details.get("rule"), exc.message]
print(json.dumps(rows))
"""
HIDDEN_ESCAPES = ("\\u202e", "\\u2028", "\\u2066", "\\u200b", "\\u0085", "\\U000e0041")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_arguments_too_long_to_show_are_refused_unasked_and_hidden_characters_are_shown_escaped(
    bridge: tuple[HttpServer, Path], mode: str
) -> None:
    """Arguments longer than a question shows (2,000 characters) were cut and approvable, the rest unseen; now the
    call is refused with ApprovalDenied saying how far over it is and what to do, and the user is never asked.
    A bidi override, a line separator and other format and control characters reached the question raw; now each
    is shown as its escape, and the question holds no such character but the JSON layout's newlines."""
    server, _ = bridge
    asked: list[str] = []
    rows = await run_cell(server, mode, HIDING, asking([DECLINE], asked))
    kind, rule, message = rows["long"]
    assert (kind, rule) == ("ApprovalDenied", "ask_tools"), rows
    assert re.search(r"too long to show for approval: 2,5\d\d characters as shown, 5\d\d over the limit of 2,000",
                     message), message  # fmt: skip
    assert "pass smaller arguments" in message and "take the tool out of ask_tools" in message, message
    assert rows["hidden"][:2] == ["ApprovalDenied", "ask_tools"], rows
    (question,) = asked  # the long call was never put to the user
    assert all(escape in question for escape in HIDDEN_ESCAPES), question
    hiding = [char for char in question if char != "\n" and unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp")]
    assert not hiding, [f"U+{ord(char):04X}" for char in hiding]
    assert question.endswith("\nAllow this call?"), question


# ------------------------------------------------------- a round's requestState answers that round only (2026-07-28)

TWO_QUESTIONS = """
rows = []
for label in ("first", "second"):
    try:
        rows.append(await mcp_everything.echo(message=label))
    except runtime.ApprovalDenied:
        rows.append("denied " + label)
print(rows)
"""


@pytest.mark.anyio
async def test_the_state_of_an_earlier_round_cannot_answer_a_later_round_of_the_same_run(
    bridge: tuple[HttpServer, Path],
) -> None:
    """The SDK client driven by hand: round 1 asks about the first echo and is answered; round 2 asks about the
    second. Round 1's requestState, sent again with an accept for round 2's question (the same principal, the same
    arguments: all the seal checks), answered round 2 before issue 30's fix. Now it is refused as a replay, and the
    run, undisturbed, takes round 2's own state and its decline."""
    server, _ = bridge
    arguments = {"code": TWO_QUESTIONS, "timeout": 120}
    async with http_client_for(server.url, "auto", deadline=None, callbacks=asking([ACCEPT], [])) as client:
        session = client.session
        first = await session.call_tool("run_python", arguments, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state, first
        (one,) = first.input_requests or {}
        second = await session.call_tool("run_python", arguments, input_responses={one: ACCEPT},
                                         request_state=first.request_state, allow_input_required=True)  # fmt: skip
        assert isinstance(second, types.InputRequiredResult) and second.request_state, second
        (two,) = second.input_requests or {}
        with pytest.raises(MCPError, match="replay refused: this requestState is of an earlier round"):
            await session.call_tool("run_python", arguments, input_responses={two: ACCEPT},
                                    request_state=first.request_state, allow_input_required=True)  # fmt: skip
        last = await session.call_tool("run_python", arguments, input_responses={two: DECLINE},
                                       request_state=second.request_state, allow_input_required=True)  # fmt: skip
    assert isinstance(last, types.CallToolResult), last
    assert "['Echo: first', 'denied second']" in text_of(last), text_of(last)


# ------------------------------------------------- a question nobody answers does not hold the session (issue 31)


@pytest.mark.anyio
async def test_a_new_call_ends_a_run_whose_question_was_never_answered_and_says_so(
    bridge: tuple[HttpServer, Path],
) -> None:
    """2026-07-28: the run asks (an approval), the client never comes back (its user stopped the agent, its
    callback failed). The next call in the session used to wait silently until that run's timeout; now it ends the
    parked run (its cell interrupted where it waited, the session's state kept) and says so."""
    server, _ = bridge
    session = {"session": "abandoned"}
    async with http_client_for(server.url, "auto", deadline=None, callbacks=asking([ACCEPT], [])) as client:
        await client.call_tool("run_python", {"code": "kept = 7", **session})
        waiting = await client.session.call_tool(
            "run_python", {"code": "await mcp_everything.echo(message='never answered')", "timeout": 120, **session},
            allow_input_required=True,
        )  # fmt: skip
        assert isinstance(waiting, types.InputRequiredResult), waiting
        after = await client.call_tool("run_python", {"code": "kept", **session})
        with pytest.raises(MCPError, match="no longer waiting for answers"):  # the abandoned run is gone
            await client.session.call_tool(
                "run_python", {"code": "await mcp_everything.echo(message='never answered')", "timeout": 120,
                               **session}, request_state=waiting.request_state, allow_input_required=True,
            )  # fmt: skip
    shown = text_of(after)
    assert shown.endswith("7"), shown
    assert "was waiting for an answer to its question (elicitation/create) that never came" in shown, shown


# ------------------------------------------------- what "remember" allowed is the asked client's alone (issue 31)

REMEMBERED = """
try:
    print(await mcp_everything.echo(message="again"))
except runtime.ApprovalDenied as exc:
    print("ApprovalDenied:", exc.message)
"""


@pytest.mark.anyio
async def test_an_approval_remembered_by_one_client_does_not_let_another_in_the_session_run_the_tool(
    bridge: tuple[HttpServer, Path],
) -> None:
    """Two programs share a named session (one principal: the local setup without a token). The first is asked and
    answers "allow, and remember"; its later calls run unasked. The second, which cannot be asked (no
    elicitation), is refused; a third that can be asked is asked, not let through on the first one's answer."""
    server, _ = bridge
    remember = types.ElicitResult(action="accept", content={"remember": True})
    session = {"code": REMEMBERED, "session": "remembered", "timeout": 120}
    first_asked: list[str] = []
    third_asked: list[str] = []
    async with http_client_for(server.url, "legacy", deadline=None, callbacks=asking([remember], first_asked)) as one:
        approved = await one.call_tool("run_python", session)
        unasked = await one.call_tool("run_python", session)
        async with http_client_for(server.url, "legacy", deadline=None) as mute:
            refused = await mute.call_tool("run_python", session)
        async with http_client_for(server.url, "legacy", deadline=None,
                                   callbacks=asking([DECLINE], third_asked)) as other:  # fmt: skip
            declined = await other.call_tool("run_python", session)
    assert "Echo: again" in text_of(approved) and "Echo: again" in text_of(unasked), text_of(unasked)
    assert len(first_asked) == 1, first_asked
    assert "the client of this call cannot ask you" in text_of(refused), text_of(refused)
    assert len(third_asked) == 1 and "the user declined it" in text_of(declined), text_of(declined)
