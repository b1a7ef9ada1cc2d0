"""The policy: its parsing and matching (pure logic), then what sandboxed code sees and may do under it.

The end-to-end tests run real code in bubblewrap through ``Bridge.run`` against the real reference servers of
tests/support/upstreams.py, with the policy read from a real settings file. They prove that a refused server or tool is
nowhere the sandbox can look (servers, describe, docs at every detail, search, proxies, the summary), that a
refused server is never started, and that every way of calling something refused (a proxy attribute,
``runtime.call_tool``, a hand-made request frame) raises ``runtime.PolicyError`` naming the rule, which code can
catch and carry on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import types

from mcp_codemode.cli.servers_report import servers_report
from mcp_codemode.errors import SettingsError
from mcp_codemode.policy.guard import RateLimiter
from mcp_codemode.policy.rules import Policy, ToolNames, canonical_json, nesting_depth
from mcp_codemode.runs.bridge import Bridge
from mcp_codemode.runs.summary import capability_summary
from mcp_codemode.settings import Settings
from mcp_codemode.upstream.model import Discovery
from mcp_codemode.upstream.tools.gate import Refused
from tests.support import upstreams
from tests.support.backends import sandbox_settings
from tests.support.cells import private_state_dir, reported, run
from tests.support.clients import require_bubblewrap

pytestmark = pytest.mark.anyio

# --------------------------------------------------------------------------------------------- pure logic


def load_policy(tmp_path: Path, text: str) -> Policy:
    path = tmp_path / "settings.toml"
    path.write_text(text)
    return Settings.load(env={}, settings_file=path).policy


def test_the_default_policy_allows_everything_with_the_default_caps() -> None:
    policy = Settings.load(env={}).policy
    assert policy == Policy()
    assert not policy.restricts
    assert policy.server_refusal("git", "git") is None
    assert policy.tool_refusal("git", "git", "git_commit", "git_commit", None) is None
    assert (policy.max_calls_per_run, policy.max_argument_bytes, policy.max_argument_depth) == (1000, 1 << 20, 32)
    assert policy.max_calls_per_second == 0


def test_a_policy_table_is_read_from_the_top_level_or_the_mcp_codemode_table(tmp_path: Path) -> None:
    flat = load_policy(tmp_path, '[policy]\ndeny_servers = ["git"]\nmax_argument_bytes = "64k"\n')
    assert flat.deny_servers == ("git",) and flat.max_argument_bytes == 64 << 10
    assert flat.source == str(tmp_path / "settings.toml")
    nested = load_policy(tmp_path, "[mcp-codemode]\ntimeout = 5\n[mcp-codemode.policy]\nread_only = true\n")
    assert nested.read_only
    assert load_policy(tmp_path, "[policy]\nmax_argument_bytes = 4096\n").max_argument_bytes == 4096


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[policy]\nallow_server = []\n", "unknown key(s) allow_server; known keys: allow_prompts, allow_resources,"),
        ('[policy]\ndeny_tools = "git/*"\n', 'policy.deny_tools = "git/*" is not valid (expected a list of strings)'),
        ("[policy]\nread_only = 1\n", "for example read_only = true"),
        ("[policy]\nmax_calls_per_run = -1\n", "expected a whole number from 0 to 1,000,000,000"),
        ("[policy]\nmax_argument_depth = 10000\n", "expected a whole number from 1 to 64"),
        ('[policy]\nmax_argument_bytes = "lots"\n', 'for example max_argument_bytes = "1m"'),
        ("[policy]\nmax_calls_per_second = -2\n", "from 0 (no limit)"),
        ('[policy]\ndeny_tools = ["git/"]\n', 'needs both parts around "/"'),
        ('[policy]\nallow_servers = [" git"]\n', "is empty or has spaces around it"),
        ('[policy]\ndeny_resources = ["docs/"]\n', 'needs both parts around "/": "SERVER/URI"'),
        ('[policy]\ndeny_prompts = ["/x"]\n', '"SERVER/PROMPT", such as "everything/simple-*"'),
        ("[policy]\nallow_prompts = [3]\n", "for example allow_prompts = "),
        ('[policy]\nask_tools = "github/*"\n', 'for example ask_tools = ["github/create_*", "*/delete_*"]'),
        ('[policy]\nask_tools = ["github/"]\n', 'needs both parts around "/"'),
        ('[policy]\ndeny_sampling = "docs"\n', 'for example deny_sampling = ["untrusted-*"]'),
        ("policy = 3\n", "policy must be a table"),
        ("[mcp-codemode]\ntimeout = 5\n[policy]\nread_only = true\n", "rename it [mcp-codemode.policy]"),
    ],
)
def test_a_bad_policy_table_is_a_settings_error_naming_the_key_and_the_file(
    tmp_path: Path, text: str, expected: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        load_policy(tmp_path, text)
    assert expected in str(caught.value)
    assert str(tmp_path / "settings.toml") in str(caught.value)


def test_ask_tools_patterns_read_like_tool_patterns_and_name_the_first_that_matches(tmp_path: Path) -> None:
    policy = load_policy(tmp_path, '[policy]\nask_tools = ["github/create_*", "*/delete_*"]\n')
    assert policy.ask_tools == ("github/create_*", "*/delete_*") and policy.restricts
    assert policy.approval_pattern(ToolNames("github", "github", "create_issue", "create_issue")) == "github/create_*"
    assert policy.approval_pattern(ToolNames("fs", "fs", "delete-file", "delete_file")) == "*/delete_*"  # by alias
    assert policy.approval_pattern(ToolNames("github", "github", "list_issues", "list_issues")) is None
    assert policy.approval_pattern(ToolNames("my-github", "my_github", "create_issue", "create_issue")) is None
    assert not policy.narrows  # asking hides nothing
    assert Policy().approval_pattern(ToolNames("github", "github", "create_issue", "create_issue")) is None


def test_servers_match_by_name_or_alias_and_deny_wins_over_allow() -> None:
    policy = Policy(allow_servers=("git*", "time"), deny_servers=("git_lab",))
    assert policy.server_refusal("git", "git") is None
    assert policy.server_refusal("time", "time") is None
    denied = Refused("deny_servers", 'denied by deny_servers pattern "git_lab"')
    assert policy.server_refusal("git-lab", "git_lab") == denied
    refused = policy.server_refusal("fetch", "fetch")
    assert refused is not None and refused.rule == "allow_servers"
    assert refused.reason == 'matched by no allow_servers pattern ("git*", "time")'
    assert policy.server_refusal("Git", "Git") is not None  # case-sensitive, as fnmatchcase is
    nothing = Policy(allow_servers=())
    empty = nothing.server_refusal("git", "git")
    assert empty is not None and "the list is empty" in empty.reason


def test_tool_patterns_name_server_and_tool_and_a_bare_pattern_means_every_server() -> None:
    policy = Policy(deny_tools=("git/git_commit", "*/delete_*", "write_file"))

    def verdict(server: str, tool: str, alias: str | None = None) -> str | None:
        refused = policy.tool_refusal(server, server.replace("-", "_"), tool, alias or tool, None)
        return None if refused is None else refused.reason

    assert verdict("git", "git_commit") == 'denied by deny_tools pattern "git/git_commit"'
    assert verdict("git", "git_status") is None
    assert verdict("my-git", "git_commit") is None
    assert verdict("memory", "delete_entities") == 'denied by deny_tools pattern "*/delete_*"'
    assert verdict("fs", "delete-file", "delete_file") == 'denied by deny_tools pattern "*/delete_*"'  # by alias
    assert verdict("fs", "write_file") == 'denied by deny_tools pattern "write_file"'
    assert verdict("other", "write_file") is not None
    allow = Policy(allow_tools=("time/*", "everything/echo"))
    assert allow.tool_refusal("time", "time", "convert_time", "convert_time", None) is None
    assert allow.tool_refusal("everything", "everything", "echo", "echo", None) is None
    refused = allow.tool_refusal("everything", "everything", "get-env", "get_env", None)
    assert refused is not None and refused.rule == "allow_tools"
    assert Policy(allow_tools=()).tool_refusal("time", "time", "x", "x", None) is not None
    # A typed name is judged by the deny patterns only: it may be an alias that an allow pattern names otherwise.
    assert allow.name_refusal(ToolNames.typed_only("everything", "everything", "get_env")) is None
    assert Policy(deny_tools=("*/get_*",)).name_refusal(ToolNames.typed_only("time", "time", "get_current_time"))


def test_resource_patterns_name_a_server_and_a_uri_or_a_uri_alone_and_prompt_patterns_read_like_tools() -> None:
    policy = Policy(
        allow_resources=("docs/*", "file:///srv/*", "everything/demo://resource/static/*"),
        deny_resources=("*/*secret*", "file:///srv/private/*"),
        deny_prompts=("*/admin-*",),
        allow_prompts=("everything/*", "simple-*"),
    )

    def resource(server: str, uri: str) -> str | None:
        refused = policy.resource_refusal(server, server.replace("-", "_"), uri)
        return None if refused is None else refused.rule

    assert resource("docs", "https://example.com/a/b") is None  # "*" crosses "/"
    assert resource("any-server", "file:///srv/report.txt") is None  # a scheme before the first "/": every server
    assert resource("fs", "file:///srv/private/key") == "deny_resources"
    assert resource("docs", "https://example.com/secret") == "deny_resources"
    assert resource("everything", "demo://resource/static/document/a.md") is None
    assert resource("everything", "demo://resource/dynamic/text/1") == "allow_resources"
    assert resource("other", "https://example.com/") == "allow_resources"
    assert Policy().resource_refusal("x", "x", "anything://at/all") is None  # the default allows every resource
    # Templates are judged by their URI template, so a hidden template's URIs are hidden as their reads are.
    assert resource("everything", "demo://resource/static/{id}") is None

    def prompt(server: str, name: str) -> str | None:
        refused = policy.prompt_refusal(server, server, name)
        return None if refused is None else refused.rule

    assert prompt("everything", "args-prompt") is None
    assert prompt("other", "simple-prompt") is None  # a bare pattern means every server
    assert prompt("everything", "admin-reset") == "deny_prompts"
    assert prompt("other", "args-prompt") == "allow_prompts"
    assert Policy(deny_prompts=("x",)).narrows and Policy(allow_resources=("docs/*",)).narrows
    assert not Policy().narrows


def test_read_only_lets_through_only_tools_annotated_read_only() -> None:
    policy = Policy(read_only=True)
    read = types.ToolAnnotations(read_only_hint=True)
    write = types.ToolAnnotations(read_only_hint=False, destructive_hint=False)
    assert policy.tool_refusal("m", "m", "read_graph", "read_graph", read) is None
    for hints in (write, None, types.ToolAnnotations(title="no hints")):
        refused = policy.tool_refusal("m", "m", "create_entities", "create_entities", hints)
        assert refused is not None and refused.rule == "read_only"


def test_depth_counts_the_arguments_object_as_one_and_is_measured_without_recursion() -> None:
    assert nesting_depth({}, 32) == 1
    assert nesting_depth({"a": 1, "b": "x"}, 32) == 1
    assert nesting_depth({"a": []}, 32) == 2
    assert nesting_depth({"a": [{"b": [1]}], "c": {}}, 32) == 4
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    assert nesting_depth({"x": deep}, 32) == 33  # stops as soon as the cap is passed
    policy = Policy(max_argument_depth=3, max_argument_bytes=20)
    refused, encoded = policy.argument_refusal({"x": deep})
    assert refused is not None and refused.rule == "max_argument_depth" and encoded is None
    assert policy.argument_refusal({"a": [[1]]}) == (None, b'{"a":[[1]]}')
    refused, encoded = policy.argument_refusal({"a": [[1]], "b": "long enough"})
    assert refused is not None and refused.rule == "max_argument_bytes"
    assert refused.reason == "the arguments are 29 bytes of JSON, more than max_argument_bytes (20)"
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'.encode()


def test_the_rate_limiter_is_a_token_bucket_per_owner() -> None:
    now = [0.0]
    limiter = RateLimiter(2, clock=lambda: now[0])
    assert [limiter.take("a") for _ in range(3)] == [True, True, False]  # a burst of 2, then empty
    assert limiter.take("b")  # another owner has a bucket of its own
    now[0] = 0.5  # one token back
    assert [limiter.take("a"), limiter.take("a")] == [True, False]
    slow = RateLimiter(0.5, clock=lambda: now[0])
    assert [slow.take("a"), slow.take("a")] == [True, False]  # a burst of at least one call
    assert RateLimiter(0).take("a")


def test_the_messages_name_the_rule_and_the_settings_file() -> None:
    policy = Policy(deny_tools=("git/*",), source="/x.toml")
    refused = policy.tool_refusal("git", "git", "git_commit", "git_commit", None)
    assert refused is not None
    assert policy.message("git/git_commit", refused) == (
        'policy refused git/git_commit: denied by deny_tools pattern "git/*" (settings file /x.toml)'
    )
    assert Policy().where == "the default policy"


def test_the_summary_names_the_limits_of_a_restrictive_policy_but_never_its_patterns() -> None:
    plain = capability_summary(sandbox_settings(), "bubblewrap", {"time": "time"})
    assert "Policy" not in plain
    policy = Policy(deny_servers=("secret-server",), read_only=True, max_calls_per_run=5, source="/x.toml")
    text = capability_summary(sandbox_settings(policy=policy), "bubblewrap", {"time": "time"})
    assert (
        "- Policy: only read-only tools are offered; at most 5 calls (tools, resources, prompts) per run_python" in text
    )
    assert "secret-server" not in text and "/x.toml" not in text


# ------------------------------------------------------------------------------------- the sandbox's view


@dataclasses.dataclass
class Policed:
    bridge: Bridge
    settings_file: Path
    state: Path


POLICY = """
[policy]
deny_servers = ["time_hidden"]            # by alias: the server is named "time-hidden"
deny_tools = ["everything/get-env", "*/delete_*"]
max_calls_per_run = 3
max_argument_bytes = 4096
max_argument_depth = 8
"""


@pytest.fixture(scope="module")
async def policed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Policed]:
    require_bubblewrap()
    work = tmp_path_factory.mktemp("policy")
    settings_file = work / "codemode.toml"
    settings_file.write_text(POLICY)
    policy = Settings.load(env={}, settings_file=settings_file).policy
    with private_state_dir() as state:
        servers = (
            upstreams.everything(),
            upstreams.time(),
            upstreams.time(name="time-hidden"),
            upstreams.memory(work / "memory.jsonl"),
        )
        settings = sandbox_settings(runtime="bubblewrap", state_dir=state, policy=policy)
        async with Bridge(settings, Discovery(servers=servers)) as bridge:
            assert bridge.backend_name == "bubblewrap", bridge.backend_error
            yield Policed(bridge, settings_file, state)


ATTEMPT = """
import inspect, mcp._rpc as _r

async def attempt(label, make):
    try:
        value = make()
        if inspect.isawaitable(value):
            value = await value
        return [label, "no error", repr(value)[:200]]
    except runtime.MCPError as exc:
        return [label, type(exc).__name__, exc.message, exc.details.get("rule")]

def forged(**frame):
    # A request frame written by hand, past every check of the in-sandbox runtime.
    pending = _r._Pending()
    request_id = 10**9 + len(repr(frame))
    with runtime.rpc._lock:
        runtime.rpc._pending[request_id] = pending
    runtime.rpc._send({"type": "call", "id": request_id, **frame})
    pending.lock.acquire(timeout=60)
    return _r._unwrap(pending.reply)
"""


def with_attempt(code: str) -> str:
    return ATTEMPT + textwrap.dedent(code)


def rows_of(result: Any) -> dict[str, list[Any]]:
    return {row[0]: row[1:] for row in reported(result)}


@pytest.mark.backend
async def test_a_refused_server_is_nowhere_the_sandbox_looks_and_is_never_started(policed: Policed) -> None:
    bridge = policed.bridge
    assert "time-hidden" not in bridge.hub.names() and "time-hidden" not in bridge.servers
    result = await run(
        bridge,
        with_attempt("""
        listed = list(runtime.list_servers_sync())
        # The stubs first: they load every listing, so the search below waits for none (on a loaded machine a
        # listing could take longer than the search waits, and show up as pending).
        stubs = {name: runtime.query_tool_docs_sync(name, detail="stub") for name in runtime.discovered_servers()}
        found = await runtime.search_tool_docs("current time timezone", limit=20)
        rows = [
            ["listed", listed, list(runtime.discovered_servers()), list(mcp_servers),
             "mcp_time_hidden" in globals(), "time-hidden" in mcp_servers],
            ["search", sorted({hit["server"] for hit in found}), found.total, found.pending, found.unavailable],
            ["stubs", any("hidden" in stub for stub in stubs.values())],
            ["summary", "hidden" in runtime.capability_summary()],
            await attempt("describe", lambda: runtime.describe_server("time-hidden")),
            await attempt("docs", lambda: runtime.query_tool_docs_sync("time_hidden", detail="stub")),
            await attempt("search one", lambda: runtime.search_tool_docs("time", server="time-hidden")),
            await attempt("mcp_servers", lambda: mcp_servers["time_hidden"]),
            await attempt("call", lambda: runtime.call_tool("time-hidden", "get_current_time", {"timezone": "UTC"})),
            await attempt("call by alias", lambda: runtime.call_tool_sync("time_hidden", "get_current_time", {})),
            await attempt("import", lambda: __import__("mcp.servers.time_hidden")),
            await attempt("resources", lambda: runtime.list_resources_sync("time-hidden")),
            await attempt("allowed", lambda: mcp_time.get_current_time(timezone="UTC")),
        ]
        report(rows)
        """),
        "hidden-server",
        servers=("time_hidden",),
    )
    rows = rows_of(result)
    assert "servers= named time_hidden, which is not configured (configured: everything, time, memory)" in (
        result.notice
    )
    assert rows["listed"] == [["everything", "time", "memory"]] * 3 + [False, False]
    servers, total, pending, unavailable = rows["search"]
    assert "time-hidden" not in servers and total > 0 and pending == [] and unavailable == []
    assert rows["stubs"] == [False] and rows["summary"] == [False]
    where = f"(settings file {policed.settings_file})"
    for label in ("describe", "docs", "search one", "mcp_servers", "resources"):
        kind, message, rule = rows[label]
        assert (kind, rule) == ("PolicyError", "deny_servers"), rows[label]
        assert message == f"policy refused server 'time-hidden': denied by deny_servers pattern \"time_hidden\" {where}"
    for label in ("call", "call by alias", "import"):
        kind, message, rule = rows[label]
        assert (kind, rule) == ("PolicyError", "deny_servers"), rows[label]
        assert 'denied by deny_servers pattern "time_hidden"' in message and where in message
    assert rows["call"][1].startswith("policy refused time-hidden/get_current_time: ")
    assert rows["allowed"][0] == "no error"
    # Never started: the hub has no connection for it, and no server log was ever opened.
    assert not (policed.state / "logs" / "time_hidden.log").exists()
    assert (policed.state / "logs" / "time.log").exists()


@pytest.mark.backend
async def test_a_refused_tool_is_hidden_and_every_way_of_calling_it_raises_policy_error(policed: Policed) -> None:
    result = await run(
        policed.bridge,
        with_attempt("""
        everything = [tool["tool"] for tool in runtime.list_tools_sync("everything")]
        memory = [tool["tool"] for tool in runtime.list_tools_sync("memory")]
        stub = runtime.query_tool_docs_sync("everything", detail="stub")
        full = runtime.query_tool_docs_sync("everything", detail="full")
        found = runtime.search_tool_docs_sync("environment variables delete entities", limit=50)
        rows = [
            ["listed", "get-env" in everything, "echo" in everything, [n for n in memory if n.startswith("delete")]],
            ["docs", "get_env" in stub, "get-env" in str(full), "get_env" in dir(mcp_everything),
             "delete_entities" in dir(mcp_memory)],
            ["search", [hit["tool"] for hit in found if hit["tool"] in ("get-env", "delete_entities")], found.total],
            await attempt("attribute", lambda: mcp_everything.get_env),
            await attempt("item", lambda: mcp_everything["get-env"]),
            await attempt("call_tool", lambda: runtime.call_tool("everything", "get-env", {})),
            await attempt("call_tool alias", lambda: runtime.call_tool_sync("everything", "get_env", {})),
            await attempt("forged", lambda: forged(op="call", server="everything", tool="get-env", arguments={})),
            await attempt("doc of it", lambda: runtime.query_tool_docs_sync("everything", "get-env")),
            await attempt("bare pattern", lambda: mcp_memory.delete_entities),
            await attempt("forged bare", lambda: forged(op="call", server="memory", tool="delete_entities",
                                                          arguments={"entityNames": ["x"]})),
            await attempt("unknown", lambda: mcp_everything.no_such_tool),
            await attempt("after", lambda: mcp_everything.echo(message="still here")),
        ]
        report(rows)
        """),
        "hidden-tool",
    )
    rows = rows_of(result)
    assert rows["listed"] == [False, True, []]
    assert rows["docs"] == [False, False, False, False]
    assert rows["search"][0] == []
    where = f"(settings file {policed.settings_file})"
    for label in ("attribute", "item", "call_tool", "call_tool alias", "forged", "doc of it"):
        kind, message, rule = rows[label]
        assert (kind, rule) == ("PolicyError", "deny_tools"), (label, rows[label])
        assert 'denied by deny_tools pattern "everything/get-env"' in message and where in message, rows[label]
        assert message.startswith("policy refused everything/get"), rows[label]
    for label in ("bare pattern", "forged bare"):
        kind, message, rule = rows[label]
        assert (kind, rule) == ("PolicyError", "deny_tools"), rows[label]
        assert message == f'policy refused memory/delete_entities: denied by deny_tools pattern "*/delete_*" {where}'
    assert rows["unknown"][0] == "ToolNotFound"
    assert rows["after"] == ["no error", "'Echo: still here'"]


@pytest.mark.backend
async def test_the_call_budget_is_per_run_and_refused_calls_do_not_spend_it(policed: Policed) -> None:
    code = with_attempt("""
        rows = [await attempt("refused", lambda: runtime.call_tool("everything", "get-env", {}))]
        rows += [await attempt(f"call {n}", lambda: mcp_everything.echo(message=str(n))) for n in (1, 2, 3, 4)]
        rows.append(await attempt("discovery", lambda: runtime.list_tools_sync("time")))
        report(rows)
        """)
    rows = rows_of(await run(policed.bridge, code, "budget"))
    assert rows["refused"][0] == "PolicyError"
    assert [rows[f"call {n}"][0] for n in (1, 2, 3)] == ["no error"] * 3
    kind, message, rule = rows["call 4"]
    assert (kind, rule) == ("PolicyError", "max_calls_per_run")
    assert message == (
        "policy refused everything/echo: the per-run call budget of 3 calls (tools, resource reads, prompts) "
        "is used up (max_calls_per_run); "
        f"the next run_python call starts with a fresh budget (settings file {policed.settings_file})"
    )
    assert rows["discovery"][0] == "no error"  # discovery is not a tool call
    again = rows_of(await run(policed.bridge, code, "budget"))
    assert [again[f"call {n}"][0] for n in (1, 2, 3, 4)] == ["no error"] * 3 + ["PolicyError"]


@pytest.mark.backend
async def test_arguments_over_the_size_or_depth_cap_are_refused_and_the_bridge_goes_on(policed: Policed) -> None:
    result = await run(
        policed.bridge,
        with_attempt("""
        deep = "leaf"
        for _ in range(10_000):
            deep = [deep]
        nine = "leaf"
        for _ in range(9):
            nine = {"x": nine}
        rows = [
            await attempt("bytes", lambda: mcp_everything.echo(message="x" * 5000)),
            await attempt("deep", lambda: mcp_everything.echo(message=deep)),
            await attempt("deep by name", lambda: runtime.call_tool("everything", "echo", {"message": deep})),
            await attempt("forged deep", lambda: forged(op="call", server="everything", tool="echo",
                                                          arguments={"message": nine})),
            await attempt("after", lambda: mcp_everything.echo(message="fine")),
        ]
        report(rows)
        """),
        "caps",
    )
    rows = rows_of(result)
    kind, message, rule = rows["bytes"]
    assert (kind, rule) == ("PolicyError", "max_argument_bytes")
    assert "the arguments are 5,014 bytes of JSON, more than max_argument_bytes (4,096)" in message
    for label in ("deep", "deep by name", "forged deep"):  # the last one is checked by the host
        kind, message, rule = rows[label]
        assert (kind, rule) == ("PolicyError", "max_argument_depth"), rows[label]
        assert message == (
            "policy refused everything/echo: the arguments are nested more than 8 deep (max_argument_depth) "
            f"(settings file {policed.settings_file})"
        )
    assert rows["after"] == ["no error", "'Echo: fine'"]


@pytest.mark.backend
async def test_read_only_offers_and_lets_through_only_tools_annotated_read_only(tmp_path: Path) -> None:
    require_bubblewrap()
    settings_file = tmp_path / "read-only.toml"
    settings_file.write_text("[mcp-codemode]\n[mcp-codemode.policy]\nread_only = true\n")
    policy = Settings.load(env={}, settings_file=settings_file).policy
    with private_state_dir() as state:
        servers = (upstreams.memory(tmp_path / "memory.jsonl"), upstreams.everything())
        settings = sandbox_settings(runtime="bubblewrap", state_dir=state, policy=policy)
        async with Bridge(settings, Discovery(servers=servers)) as bridge:
            result = await run(
                bridge,
                with_attempt("""
                found = runtime.search_tool_docs_sync("create entities toggle logging", limit=50)
                rows = [
                    ["memory", sorted(tool["tool"] for tool in runtime.list_tools_sync("memory"))],
                    ["everything", sorted(dir(mcp_everything))],
                    ["search", sorted(hit["tool"] for hit in found)],
                    await attempt("write", lambda: runtime.call_tool("memory", "create_entities", {"entities": []})),
                    await attempt("forged", lambda: forged(op="call", server="everything",
                                                           tool="toggle-simulated-logging", arguments={})),
                    await attempt("read", lambda: mcp_memory.read_graph()),
                ]
                report(rows)
                """),
                "read-only",
            )
    rows = rows_of(result)
    assert rows["memory"] == [["open_nodes", "read_graph", "search_nodes"]]
    everything = rows["everything"][0]
    assert "echo" in everything and "get_sum" in everything
    assert not {"toggle_simulated_logging", "gzip_file_as_resource", "simulate_research_query"} & set(everything)
    assert not {"create_entities", "toggle-simulated-logging"} & set(rows["search"][0])
    for label in ("write", "forged"):
        kind, message, rule = rows[label]
        assert (kind, rule) == ("PolicyError", "read_only"), rows[label]
        assert "read_only is on and the tool is not annotated readOnlyHint: true" in message
        assert f"(settings file {settings_file})" in message
    assert rows["read"][0] == "no error"


@pytest.mark.backend
async def test_the_rate_cap_is_per_owner_across_sessions(tmp_path: Path) -> None:
    require_bubblewrap()
    # One call per 100 s on average, in bursts of one: the second call is over the cap however slow the machine.
    policy = Policy(max_calls_per_second=0.01)
    with private_state_dir() as state:
        settings = sandbox_settings(runtime="bubblewrap", state_dir=state, policy=policy)
        async with Bridge(settings, Discovery(servers=(upstreams.time(),))) as bridge:
            code = with_attempt("""
                report([await attempt("call", lambda: mcp_time.get_current_time(timezone="UTC"))])
                """)
            first = rows_of(await run(bridge, code, "rate-1", owner="alice"))
            second = rows_of(await run(bridge, code, "rate-2", owner="alice"))
            other = rows_of(await run(bridge, code, "rate-3", owner="bob"))
    assert first["call"][0] == "no error"
    kind, message, rule = second["call"]
    assert (kind, rule) == ("PolicyError", "max_calls_per_second")
    assert message.startswith("policy refused time/get_current_time: the rate cap of 0.01 calls per second (tools,")
    assert message.endswith("(the default policy)")
    assert other["call"][0] == "no error"


@pytest.mark.backend
async def test_the_servers_report_shows_a_refused_server_as_refused_without_starting_it(tmp_path: Path) -> None:
    policy = Policy(deny_servers=("time",), deny_tools=("everything/get-env",), source="/x.toml")
    settings = sandbox_settings(state_dir=tmp_path / "state", policy=policy)
    discovery = Discovery(servers=(upstreams.time(), upstreams.everything()))
    report = await asyncio.wait_for(servers_report(settings, discovery), 120)
    rows = {row.name: row for row in report.rows}
    assert rows["time"].state == "refused"
    assert rows["time"].detail == 'denied by deny_servers pattern "time" (settings file /x.toml)'
    assert rows["everything"].state == "ready" and rows["everything"].hidden_tools == 1
    text = report.as_text()
    assert "time is refused by the policy, hidden from sandboxed code" in text
    assert "(+1 refused)" in text
    assert not (tmp_path / "state" / "logs" / "time.log").exists()
