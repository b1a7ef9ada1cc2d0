"""Resources, resource templates, prompts and resource links from sandboxed code: real code in bubblewrap through
``Bridge.run`` against the real reference server (server-everything from npm), under the policy's resource and
prompt patterns, with the audit line of every read and prompt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_codemode.policy.rules import Policy
from mcp_codemode.runs.bridge import Bridge
from mcp_codemode.upstream.model import Discovery
from tests.support import upstreams
from tests.support.backends import sandbox_settings
from tests.support.cells import private_state_dir, reported, run
from tests.support.clients import require_bubblewrap

pytestmark = [pytest.mark.anyio, pytest.mark.backend]

TEXT_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"
BLOB_TEMPLATE = "demo://resource/dynamic/blob/{resourceId}"

ATTEMPT = """
async def attempt(make):
    # ["ok", the value or its start] or [the runtime exception's name, its message, the policy rule]
    try:
        value = make()
        if hasattr(value, "__await__"):
            value = await value
        return ["ok", value if isinstance(value, (str, int, list, dict)) else str(value)[:60]]
    except runtime.MCPError as exc:
        return [type(exc).__name__, exc.message, exc.details.get("rule")]

async def also(query, wanted=None):
    # The prompts and resources a search names beside its tools, as [kind, name, uri, use]. The server's
    # extras are listed in the background after its tools, so wait (bounded) until the search names ``wanted``.
    import asyncio
    for _ in range(1200):
        found = await runtime.search_tool_docs(query)
        names = [entry["name"] for entry in found.also]
        if wanted is None or wanted in names:
            break
        await asyncio.sleep(0.1)
    return [[entry["kind"], entry["name"], entry.get("uri"), entry["use"]] for entry in found.also]
"""

USE_EVERYTHING = (
    ATTEMPT
    + """
templates = await runtime.list_resource_templates("everything")
prompts = runtime.list_prompts_sync("everything")
weather = await runtime.get_prompt("everything", "args-prompt", {"city": "Paris", "state": "TX"})
embedded = runtime.get_prompt_sync("everything", "resource-prompt", {"resourceType": "Text", "resourceId": "2"})
raw = await runtime.get_prompt("everything", "simple-prompt", raw=True)
links = await mcp_everything.get_resource_links(count=2)
link = links[2]
report({
    "templates": sorted(t["uriTemplate"] for t in templates),
    "prompts": {p["name"]: [a["name"] for a in p.get("arguments", [])] for p in prompts},
    "weather": weather,
    "embedded": [[m["role"], type(m["content"]).__name__, str(m["content"])[:60]] for m in embedded["messages"]],
    "embedded_is": [isinstance(embedded["messages"][1]["content"], str), embedded["messages"][1]["content"].uri,
                    embedded["messages"][1]["content"].mime_type, embedded["messages"][1]["content"].server,
                    (await embedded["messages"][1]["content"].read())[:40]],
    "raw": raw["messages"][0]["content"],
    "link": [type(link).__name__, isinstance(link, dict), link["uri"], link.uri, link.server],
    "read": (await link.read())[:40],
    "read_sync": links[1].read_sync()[:30].decode(),
    "time_prompts": await runtime.list_prompts("time"),
    "typo": await attempt(lambda: runtime.get_prompt("everything", "simple-promt")),
    "not_text": await attempt(lambda: runtime.get_prompt("everything", "args-prompt", {"city": 3})),
    "not_dict": await attempt(lambda: runtime.get_prompt_sync("everything", "args-prompt", ["Paris"])),
    "missing_argument": await attempt(lambda: runtime.get_prompt("everything", "args-prompt")),
    "search_document": await also("architecture document", "architecture.md"),
    "search_prompt": await also("prompt with arguments", "args-prompt"),
    "search_template": await also("dynamic blob resource", "Dynamic Blob Resource"),
    "printed": repr(await runtime.search_tool_docs("architecture document", limit=1)),
})
"""
)


async def test_code_lists_templates_and_prompts_gets_prompts_and_reads_a_link_in_one_call(tmp_path: Path) -> None:
    require_bubblewrap()
    with private_state_dir() as state:
        settings = sandbox_settings(runtime="bubblewrap", state_dir=state)
        async with Bridge(settings, Discovery(servers=(upstreams.everything(), upstreams.time()))) as bridge:
            seen = reported(await run(bridge, USE_EVERYTHING, "prompts"))
    assert seen["templates"] == sorted([TEXT_TEMPLATE, BLOB_TEMPLATE])
    assert seen["prompts"]["simple-prompt"] == []
    assert seen["prompts"]["args-prompt"] == ["city", "state"]
    assert seen["weather"] == {
        "description": None,
        "messages": [{"role": "user", "content": "What's weather in Paris, TX?"}],
    }
    assert seen["embedded"][0][:2] == ["user", "str"]
    # The embedded resource becomes its contents, as in a tool result: a str that knows its resource.
    assert seen["embedded"][1][:2] == ["user", "EmbeddedText"]
    assert seen["embedded"][1][2].startswith("Resource 2: This is a plaintext resource")
    is_text, uri, mime, server, again = seen["embedded_is"]
    assert (is_text, uri, mime, server) == (True, "demo://resource/dynamic/text/2", "text/plain", "everything")
    assert again.startswith("Resource 2: This is a plaintext resource")  # read again in one call
    assert seen["raw"] == {"type": "text", "text": "This is a simple prompt without arguments."}
    # A link is still the dict it was, and reads itself from the server whose tool returned it.
    assert seen["link"] == ["ResourceLink", True, "demo://resource/dynamic/text/2", "demo://resource/dynamic/text/2",
                            "everything"]  # fmt: skip
    assert seen["read"].startswith("Resource 2: This is a plaintext resource")
    assert seen["read_sync"].startswith("Resource 1: This is a base64")  # a blob arrives as bytes
    assert seen["time_prompts"] == []  # a server without the prompts capability has none, and that is no error
    typo_kind, typo, _rule = seen["typo"]
    assert typo_kind == "ArgumentError"
    assert "no prompt 'simple-promt'" in typo and "did you mean 'simple-prompt'" in typo.lower()
    assert seen["not_text"][0] == "ArgumentError" and "dict of strings" in seen["not_text"][1]
    assert seen["not_dict"][0] == "ArgumentError" and "not list" in seen["not_dict"][1]
    assert seen["missing_argument"][0] == "MCPError" and "city" in seen["missing_argument"][1]
    # Search names the prompts and resources that fit beside the tools, with the call that uses each.
    assert seen["search_document"][0] == [
        "resource", "architecture.md", "demo://resource/static/document/architecture.md",
        "await runtime.read_resource('everything', 'demo://resource/static/document/architecture.md')",
    ]  # fmt: skip
    assert seen["search_prompt"][0][:2] == ["prompt", "args-prompt"]
    assert (
        seen["search_prompt"][0][3]
        == "await runtime.get_prompt('everything', 'args-prompt', {'city': ..., 'state': ...})"
    )
    assert seen["search_template"][0][:3] == ["template", "Dynamic Blob Resource", BLOB_TEMPLATE]
    assert "\nalso (prompts and resources):\n" in seen["printed"]
    assert "  resource everything/architecture.md — Static document file exposed from /docs" in seen["printed"]


POLICED = (
    ATTEMPT
    + """
links = await mcp_everything.get_resource_links(count=2)
report({
    "resources": [r["uri"] for r in await runtime.list_resources("everything")],
    "templates": [t["uriTemplate"] for t in runtime.list_resource_templates_sync("everything")],
    "prompts": [p["name"] for p in await runtime.list_prompts("everything")],
    "text": await attempt(lambda: runtime.read_resource("everything", "demo://resource/dynamic/text/2")),
    "blob": await attempt(lambda: runtime.read_resource_sync("everything", "demo://resource/dynamic/blob/1")),
    "blob_link": await attempt(links[1].read),
    "prompt": await attempt(lambda: runtime.get_prompt("everything", "simple-prompt")),
    "hidden_prompt": await attempt(lambda: runtime.get_prompt("everything", "args-prompt", {"city": "Oslo"})),
    "search_allowed": await also("simple prompt", "simple-prompt"),
    "search_blob": await also("dynamic blob resource"),
    "search_prompt": await also("prompt with arguments"),
})
"""
)


def audit_lines(state: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (state / "audit" / "audit.jsonl").read_text().splitlines()]


async def test_the_policy_hides_and_refuses_resources_and_prompts_and_every_use_is_audited(tmp_path: Path) -> None:
    require_bubblewrap()
    policy = Policy(deny_resources=("everything/demo://resource/dynamic/blob/*",), allow_prompts=("*/simple-*",))
    with private_state_dir() as state:
        settings = sandbox_settings(runtime="bubblewrap", state_dir=state, policy=policy)
        async with Bridge(settings, Discovery(servers=(upstreams.everything(),))) as bridge:
            seen = reported(await run(bridge, POLICED, "policed", owner="alice"))
        lines = audit_lines(state)
    assert seen["resources"] and not any("/dynamic/blob/" in uri for uri in seen["resources"])
    assert seen["templates"] == [TEXT_TEMPLATE]
    assert seen["prompts"] == ["simple-prompt"]
    assert seen["text"][0] == "ok" and seen["text"][1].startswith("Resource 2:")
    for refused in (seen["blob"], seen["blob_link"]):
        assert refused[0] == "PolicyError" and refused[2] == "deny_resources", refused
        assert "demo://resource/dynamic/blob/1" in refused[1]
        assert 'deny_resources pattern "everything/demo://resource/dynamic/blob/*"' in refused[1]
    assert seen["prompt"][0] == "ok"
    assert seen["hidden_prompt"][0] == "PolicyError" and seen["hidden_prompt"][2] == "allow_prompts"
    assert "args-prompt" in seen["hidden_prompt"][1]
    # Search never names what the policy refuses (the allowed prompt proves the extras were listed by then).
    assert seen["search_allowed"][0][:2] == ["prompt", "simple-prompt"]
    assert "Dynamic Blob Resource" not in [entry[1] for entry in seen["search_blob"]]
    assert [entry[1] for entry in seen["search_blob"]][:1] == ["Dynamic Text Resource"]
    assert not {"args-prompt", "resource-prompt", "completable-prompt"} & {entry[1] for entry in seen["search_prompt"]}

    uses = [line for line in lines if line.get("kind") in ("resource", "prompt")]
    summary = [(line["kind"], line.get("uri", line.get("prompt")), line["outcome"], line.get("rule")) for line in uses]
    assert summary == [
        ("resource", "demo://resource/dynamic/text/2", "ok", None),
        ("resource", "demo://resource/dynamic/blob/1", "refused", "deny_resources"),
        ("resource", "demo://resource/dynamic/blob/1", "refused", "deny_resources"),
        ("prompt", "simple-prompt", "ok", None),
        ("prompt", "args-prompt", "refused", "allow_prompts"),
    ]
    for line in uses:
        assert (line["session"], line["owner"], line["server"]) == ("cli:policed", "alice", "everything")
        assert "tool" not in line
    ok_read, ok_prompt = uses[0], uses[3]
    assert ok_read["result_bytes"] > 0 and ok_read["args_sha256"] is None
    assert ok_prompt["args_bytes"] == 2  # "{}": a prompt's arguments are hashed like a tool's, never written
    # The tool call that made the links has its usual line, without a kind.
    assert [line["tool"] for line in lines if "kind" not in line] == ["get-resource-links"]
