"""``runtime.add_server`` as the relay answers it, against code that would get a server in without a person's yes.

Pure logic: a real relay, tool directory and hub (nothing connects: the entries are remote servers, which the hub
reaches only on first use, and no test uses one), entries from a ``StaticSource``, and an elicitation function that
plays the person. The real install and start of npm and PyPI servers through a real client is test_add_server_e2e.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp_types as types
import pytest

from mcp_codemode.adding_settings import add_policy
from mcp_codemode.runs.added_servers import AddedServers
from mcp_codemode.runs.approvals import Approvals, shown_digest
from mcp_codemode.runs.audit import AuditLog
from mcp_codemode.runs.bridge import Bridge
from mcp_codemode.runs.relay import Relay
from mcp_codemode.runs.relay_run import Caller, Run
from mcp_codemode.runs.saved_tools import FileSavedTools, SavedToolStore
from mcp_codemode.runs.server_consent import consent_question
from mcp_codemode.settings import Settings
from mcp_codemode.upstream.model import ServerConfig
from mcp_codemode.upstream.registry.added import AddedServer, AddedStore
from mcp_codemode.upstream.registry.entries import parse_server_json
from mcp_codemode.upstream.registry.plans import LaunchPlan, plan_for
from mcp_codemode.upstream.registry.source import StaticSource
from mcp_codemode.upstream.tools.directory import ToolDirectory

if TYPE_CHECKING:
    from mcp_codemode.guest.protocol import CallFrame

SECRET = "wx-SECRET-0123456789"
WEATHER = {
    "name": "com.example/weather", "description": "Weather \u202eevil\u202c.", "version": "1.0.0",
    "remotes": [{"type": "streamable-http", "url": "https://weather.example.com/mcp",
                 "headers": [{"name": "Authorization", "isSecret": True, "isRequired": True},
                             {"name": "X-Units", "value": "metric"}]}],
}  # fmt: skip
MAPS = {"name": "com.example/maps", "description": "Maps.", "version": "2.0.0",
        "remotes": [{"type": "sse", "url": "https://maps.example.com/sse"}]}  # fmt: skip
ACME = {"name": "io.github.acme/fs", "description": "Files.", "version": "1.0.0",
        "remotes": [{"type": "sse", "url": "https://acme.example.com/sse"}]}  # fmt: skip
DIGITS = {"name": "com.example/1maps", "description": "", "version": "1.0.0",
          "remotes": [{"type": "sse", "url": "https://1maps.example.com/sse"}]}  # fmt: skip
ENTRIES = [parse_server_json(item, "test catalog") for item in (WEATHER, MAPS, ACME, DIGITS)]
ALICE, BOB = "t-aaaaaaaaaaaa", "t-bbbbbbbbbbbb"
Elicit = Callable[[types.ElicitRequestParams], Awaitable[types.ElicitResult]]


@dataclasses.dataclass
class Person:
    """Plays the person behind the client: notes each question and gives ``answer``."""

    answer: str = "accept"
    asked: list[str] = dataclasses.field(default_factory=list)

    async def __call__(self, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params.message)
        return types.ElicitResult(action=self.answer)  # type: ignore[arg-type]


def make_relay(tmp_path: Path, **settings: Any) -> tuple[Relay, Path]:
    secrets = tmp_path / "secrets"
    for folder in (secrets / ALICE, secrets / BOB):  # each token principal's own (the bridge's are not theirs)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "Authorization").write_text(f"Bearer {SECRET}\n")
    settings.setdefault("add_servers", add_policy("ask-all"))  # token holders may propose (ask: the local user only)
    config = Settings(state_dir=tmp_path / "state", secrets_dir=secrets, **settings)
    configured = ServerConfig(name="time", alias="time", transport="stdio", source="test", command="/bin/false")
    directory = ToolDirectory([configured], config)
    added = AddedServers(config, StaticSource(ENTRIES, where="the test catalog"))
    audit = tmp_path / "audit.jsonl"
    relay = Relay(directory, FileSavedTools(SavedToolStore(tmp_path / "saved")), config, AuditLog(audit), added=added)
    return relay, audit


def ask(relay: Relay, owner: str, frame: dict[str, Any], person: Elicit | None) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        run = Run(owner, "s", caller=Caller(elicit=person), call="c1")
        reply = await relay.handle(owner, {"type": "call", "id": 1, **frame}, run)  # type: ignore[typeddict-item]
        relay.guard.audit.flush()
        return dict(reply)

    return asyncio.run(main())


def add(name: str, **more: Any) -> dict[str, Any]:
    return {"op": "add_server", "name": name, **more}


def audit_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_with_the_persons_yes_the_server_joins_the_hub_for_its_principal_only_and_the_audit_says_what_was_shown(
    tmp_path: Path,
) -> None:
    relay, audit = make_relay(tmp_path)
    person = Person()
    reply = ask(relay, ALICE, add("com.example/weather"), person)
    assert reply["ok"], reply
    assert reply["value"]["name"] == f"weather@{ALICE}" and reply["value"]["alias"] == "weather"
    assert f"weather@{ALICE}" in relay.hub.names()
    [question] = person.asked
    assert "https://weather.example.com/mcp" in question and "Header X-Units: metric" in question
    assert "Secret header Authorization" in question and SECRET not in question
    assert "\\u202e" in question and "\u202e" not in question  # a bidi control shown as what it is
    [line] = [line for line in audit_lines(audit) if line["kind"] == "add_server"]
    assert (line["owner"], line["server"], line["outcome"]) == (ALICE, "com.example/weather", "ok")
    assert line["shown"] == question and line["answer"] == "the person accepted it"
    assert line["digest"][:16] in question
    # Alice's proxies, listings and context have it; Bob's have no trace of it, by any name.
    assert any(e["name"] == f"weather@{ALICE}" for e in asyncio.run(relay.context(ALICE, False))["servers"])
    assert all("weather" not in e["name"] for e in asyncio.run(relay.context(BOB, False))["servers"])
    servers = ask(relay, BOB, {"op": "servers"}, None)
    assert "weather" not in json.dumps(servers)
    for name in (f"weather@{ALICE}", "weather"):
        for frame in ({"op": "describe", "server": name}, {"op": "call", "server": name, "tool": "x"}):
            refused = ask(relay, BOB, frame, None)
            assert refused["error"]["kind"] == "ServerNotFound", refused
            assert "weather" not in refused["error"]["message"].replace(repr(name), ""), refused
    assert ask(relay, BOB, {"op": "remove_server", "name": "weather"}, None)["value"] is False
    assert ask(relay, BOB, {"op": "added_servers"}, None)["value"] == []
    assert [s["entry"] for s in ask(relay, ALICE, {"op": "added_servers"}, None)["value"]] == ["com.example/weather"]


def test_no_yes_no_server_and_every_answer_is_asked_afresh(tmp_path: Path) -> None:
    relay, audit = make_relay(tmp_path)
    for answer in ("decline", "cancel"):
        person = Person(answer)
        reply = ask(relay, ALICE, add("com.example/weather"), person)
        assert reply["error"]["kind"] == "ApprovalDenied" and answer in reply["error"]["message"], reply
        assert len(person.asked) == 1
    nobody = ask(relay, ALICE, add("com.example/weather"), None)
    assert nobody["error"]["kind"] == "ApprovalDenied" and "nobody could be asked" in nobody["error"]["message"]
    assert not any("weather" in name for name in relay.hub.names())
    assert not (tmp_path / "state" / "added-servers").exists()
    # A yes for one entry is no yes for another: each add asks about its own plan, in its own question.
    person = Person()
    assert ask(relay, ALICE, add("com.example/maps"), person)["ok"]
    assert ask(relay, ALICE, add("com.example/weather"), person)["ok"]
    assert len(person.asked) == 2 and "maps.example.com" in person.asked[0] and "weather" in person.asked[1]
    answers = [line["answer"] for line in audit_lines(audit) if line["kind"] == "add_server"]
    assert answers[:3] == ["the person declined it", "the person cancelled it", answers[2]]


def test_code_cannot_choose_the_command_arguments_environment_or_url(tmp_path: Path) -> None:
    relay, _ = make_relay(tmp_path)
    person = Person()
    for smuggled in ({"command": "/bin/sh"}, {"args": ["-c", "id"]}, {"env": {"LD_PRELOAD": "/tmp/x.so"}},
                     {"url": "https://evil.example/mcp"}, {"headers": {"X": "y"}}, {"server": "time"}):  # fmt: skip
        reply = ask(relay, ALICE, add("com.example/weather", **smuggled), person)
        assert reply["error"]["kind"] == "ArgumentError", reply
        assert next(iter(smuggled)) in reply["error"]["message"] and "derives the command" in reply["error"]["message"]
    assert person.asked == []


def test_a_lookalike_name_is_not_taken_for_the_real_one_and_nothing_is_asked(tmp_path: Path) -> None:
    relay, _ = make_relay(tmp_path)
    person = Person()
    for lookalike in ("io.github.acrne/fs", "io.github.acme/fs2", "io.github.ACME/fs", "io.github.acme/f\u0455"):
        reply = ask(relay, ALICE, add(lookalike), person)
        assert not reply["ok"] and reply["error"]["kind"] == "ArgumentError", reply
    assert person.asked == [] and not any("fs" in name for name in relay.hub.names())
    assert "did you mean" in ask(relay, ALICE, add("io.github.acrne/fs"), person)["error"]["message"].lower()


def test_the_policy_forbids_or_restricts_before_anything_is_looked_up_or_asked(tmp_path: Path) -> None:
    person = Person()
    off, audit = make_relay(tmp_path / "off", add_servers=add_policy("off"))
    reply = ask(off, ALICE, add("com.example/weather"), person)
    assert reply["error"]["kind"] == "PolicyError" and "MCP_BRIDGE_ADD_SERVERS=off" in reply["error"]["message"]
    assert audit_lines(audit)[-1]["outcome"] == "refused"
    listed, _ = make_relay(tmp_path / "list", add_servers=add_policy("io.github.acme/*"))
    assert ask(listed, ALICE, add("com.example/weather"), person)["error"]["kind"] == "PolicyError"
    assert person.asked == []
    assert ask(listed, ALICE, add("io.github.acme/fs"), person)["ok"] and len(person.asked) == 1


def test_by_default_a_token_holder_cannot_propose_and_his_server_never_gets_the_bridges_secrets(
    tmp_path: Path,
) -> None:
    person = Person()
    default, _ = make_relay(tmp_path / "ask", add_servers=add_policy("ask"))
    refused = ask(default, BOB, add("com.example/maps"), person)
    assert refused["error"]["kind"] == "PolicyError" and "ask-all" in refused["error"]["message"]
    assert person.asked == [] and ask(default, "local", add("com.example/maps"), person)["ok"]
    relay, _ = make_relay(tmp_path / "all")
    (tmp_path / "all" / "secrets" / "Authorization").write_text("Bearer the-operators-own-token-0123\n")
    (tmp_path / "all" / "secrets" / BOB / "Authorization").unlink()  # Bob was given none of his own
    bob = ask(relay, BOB, add("com.example/weather"), person)
    assert f"{BOB}/Authorization" in bob["error"]["message"] and len(person.asked) == 1, bob
    assert f"weather@{BOB}" not in relay.hub.names()


def test_a_missing_secret_is_named_before_the_person_is_asked_and_a_name_taken_is_refused(tmp_path: Path) -> None:
    relay, _ = make_relay(tmp_path)
    (tmp_path / "secrets" / ALICE / "Authorization").unlink()
    person = Person()
    reply = ask(relay, ALICE, add("com.example/weather"), person)
    assert "needs the secret 'Authorization'" in reply["error"]["message"] and person.asked == []
    taken = ask(relay, ALICE, add("com.example/maps", alias="time"), person)  # a configured server's alias
    assert taken["error"]["kind"] == "ArgumentError" and "already called 'time'" in taken["error"]["message"]
    odd = ask(relay, ALICE, add("com.example/maps", alias="_My_Maps_"), person)  # any identifier makes a good name
    assert odd["value"]["name"] == f"my-maps@{ALICE}" and odd["value"]["alias"] == "_My_Maps_", odd
    assert ask(relay, ALICE, add("com.example/maps", alias="_My_Maps_"), person)["ok"]  # the same again: not asked
    assert len(person.asked) == 1
    again = Bridge(relay.settings)  # and it reads back after a restart
    assert f"my-maps@{ALICE}" in again.hub.names()


def test_secrets_reach_only_the_servers_configuration_and_its_answers_are_scrubbed(tmp_path: Path) -> None:
    relay, _ = make_relay(tmp_path)
    assert ask(relay, ALICE, add("com.example/weather"), Person())["ok"]
    name = f"weather@{ALICE}"
    assert relay.hub.config(name).headers["Authorization"] == f"Bearer {SECRET}"
    store = (tmp_path / "state" / "added-servers").glob("*.json")
    assert all(SECRET not in path.read_text() for path in store)
    for frame in ({"op": "servers"}, {"op": "added_servers"}):
        assert SECRET not in json.dumps(ask(relay, ALICE, frame, None))
    echoed = {"content": [{"type": "text", "text": f"env: Authorization=Bearer {SECRET}"}], "more": [SECRET]}
    scrubbed = json.dumps(relay.added.scrub(name, echoed))
    assert SECRET not in scrubbed and "<hidden>" in scrubbed


def test_a_console_answer_counts_only_for_the_question_it_was_shown(tmp_path: Path) -> None:
    """The console path binds the answer to the digest of exactly what its page showed: an answer carrying the
    digest of another entry's question (or of this one with another entry's name) is refused, and the add waits on."""
    relay, _ = make_relay(tmp_path)
    approvals = Approvals("console")
    relay.added.approvals = lambda: approvals

    async def main() -> dict[str, Any]:
        run = Run(ALICE, "s", caller=Caller(), call="c1")
        frame: CallFrame = {"type": "call", "id": 1, "op": "add_server", "name": "com.example/weather"}
        adding = asyncio.create_task(relay.handle(ALICE, frame, run))
        while not approvals.waiting_of(ALICE):
            await asyncio.sleep(0.01)
        [waiting] = approvals.waiting_of(ALICE)
        maps = plan_for(ENTRIES[1], [])
        other = consent_question(AddedServer("maps", "maps", ALICE, maps, maps.digest()), "", "")
        assert not approvals.answer(waiting.id, ALICE, shown_digest("com.example/maps", "add_server", other), True)
        assert not approvals.answer(waiting.id, ALICE, shown_digest("com.example/maps", "add_server", waiting.shown),
                                    True)  # fmt: skip
        assert not approvals.answer(waiting.id, BOB, waiting.digest, True)  # another principal
        assert not adding.done()
        assert approvals.answer(waiting.id, ALICE, waiting.digest, True)
        assert not approvals.answer(waiting.id, ALICE, waiting.digest, True)  # no second answer
        return dict(await adding)

    reply = asyncio.run(main())
    assert reply["ok"], reply


def test_added_servers_come_back_after_a_restart_for_their_principal_only(tmp_path: Path) -> None:
    relay, _ = make_relay(tmp_path)
    assert ask(relay, ALICE, add("com.example/weather"), Person())["ok"]
    settings = relay.settings
    bridge = Bridge(settings)  # a new bridge on the same state directory: nothing started
    assert f"weather@{ALICE}" in bridge.hub.names()
    assert f"weather@{ALICE}" not in bridge.servers  # not in the summary every principal reads
    alice = asyncio.run(bridge.relay.context(ALICE, False))["servers"]
    bob = asyncio.run(bridge.relay.context(BOB, False))["servers"]
    assert [e["name"] for e in alice if "@" in e["name"]] == [f"weather@{ALICE}"]
    assert all("@" not in e["name"] for e in bob)
    assert ask(bridge.relay, ALICE, {"op": "remove_server", "name": "weather"}, None)["value"] is True
    assert f"weather@{ALICE}" not in bridge.hub.names()
    assert f"weather@{ALICE}" not in Bridge(settings).hub.names()


@pytest.mark.backend  # it starts a process (a server that fails), though no sandbox
def test_an_added_server_that_fails_with_its_secret_on_stderr_never_shows_it_to_code(tmp_path: Path) -> None:
    """The hub's redaction covers an added server's secrets as it covers a configured server's ``env``: the error of a
    server that dies printing its token says why it died, with the token hidden, to code and in the log alike."""
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "LEAKY_TOKEN").write_text("leaky-SECRET-9f8e7d6c5b\n")
    plan = LaunchPlan(entry="com.example/leaky", entry_version="1.0.0", source="test", kind="npm", package="leaky",
                      version="1.0.0", arguments=("-c", 'echo "starting with token=$LEAKY_TOKEN" >&2; exit 3'),
                      secrets=("LEAKY_TOKEN",))  # fmt: skip
    state = tmp_path / "state"
    AddedStore(state / "added-servers").save("local", [AddedServer("leaky", "leaky", "local", plan, plan.digest(),
                                                                   "/bin/sh", "now")])  # fmt: skip
    bridge = Bridge(Settings(state_dir=state, secrets_dir=secrets))

    async def main() -> dict[str, Any]:
        async with bridge.directory:
            frame: CallFrame = {"type": "call", "id": 1, "op": "tools", "server": "leaky"}
            return dict(await bridge.relay.handle("local", frame, Run("local", "s")))

    reply = asyncio.run(main())
    assert reply["error"]["kind"] == "ServerUnavailable", reply
    assert "leaky-SECRET" not in json.dumps(reply) and "token=<hidden>" in reply["error"]["message"], reply


def test_the_question_shows_where_each_argument_ends_and_whose_secret_folder_is_read() -> None:
    def question(owner: str, *arguments: str) -> str:
        plan = LaunchPlan("com.example/fs", "1.0.0", "the test catalog", "npm", package="fs-server", version="1.0.0",
                          arguments=arguments, secrets=("GITHUB_TOKEN",))  # fmt: skip
        return consent_question(AddedServer("fs", "fs", owner, plan, plan.digest()), "", "/state/added-packages")

    one, two = question("local", "--root /"), question("local", "--root", "/")
    assert "fs-server '--root /'." in one and "fs-server --root /." in two
    assert "from the file GITHUB_TOKEN in" in one and f"from the file {BOB}/GITHUB_TOKEN in" in question(BOB)


def test_two_servers_of_one_principal_never_share_a_proxy(tmp_path: Path) -> None:
    relay, _ = make_relay(tmp_path)
    first = ask(relay, ALICE, add("com.example/maps", alias="s_1maps"), Person())  # named s-1maps
    assert first["value"]["alias"] == "s_1maps", first
    second = ask(relay, ALICE, add("com.example/1maps"), Person())  # named 1maps, whose proxy would be mcp_s_1maps
    assert second["error"]["kind"] == "ArgumentError" and "already mcp_s_1maps" in second["error"]["message"], second
    assert ask(relay, BOB, add("com.example/1maps"), Person())["ok"]  # another principal's proxies are his own


def test_another_principals_search_neither_starts_nor_counts_my_added_servers(tmp_path: Path) -> None:
    # A search ranks every server's tools: Bob's used to start Alice's added server (with her credentials) to list
    # it, and its total counted her hits before they were filtered out, telling Bob what she had added.
    relay, _ = make_relay(tmp_path)
    assert ask(relay, ALICE, add("com.example/weather"), Person())["ok"]
    ask(relay, BOB, {"op": "search", "query": "weather"}, None)
    assert relay.hub.state(f"weather@{ALICE}").status == "idle", relay.hub.state(f"weather@{ALICE}")
