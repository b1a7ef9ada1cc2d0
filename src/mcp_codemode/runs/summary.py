"""The capability summary: one text that tells a model what the sandbox offers and how to use it.

It is served twice, identically: as the ``codemode://capabilities`` resource and, inside the sandbox, as
``runtime.capability_summary()``. The reference bridge's URI for the resource serves it too, followed by
``REFERENCE_CHECKLIST``: what a model that learnt that bridge should know here. It is built from the settings
alone, so it costs nothing per call. The servers it names are those the policy allows; a restrictive policy
gets a line of its own, so the model knows the limits before it runs into them, but never which servers or
tools are hidden."""

from __future__ import annotations

from collections.abc import Mapping

from .. import __version__
from ..mounts import Mount
from ..policy.rules import Policy
from ..settings import Settings
from ..sizes import format_size


def capability_summary(settings: Settings, backend: str, servers: Mapping[str, str] | None = None,
                       problem: str = "", backend_note: str = "") -> str:  # fmt: skip
    """The summary; ``problem`` (no usable sandbox) comes first, because nothing else works until it is fixed.

    ``backend_note`` follows the backend's name: ``auto`` passed over a better backend (the model can tell its
    user; the reasons, which name host paths, stay in the bridge's log and ``doctor``).
    """
    cpus = f"{settings.cpus:g} CPU" if settings.cpus else "a shared CPU"
    if problem:
        first = f"mcp-codemode {__version__}: run_python cannot run code right now. {problem}"
    else:
        first = f"mcp-codemode {__version__}: run_python runs Python 3 in a {backend} sandbox."
        first += f" {backend_note}" if backend_note else ""
    lines = [
        first,
        f"- Limits: {settings.timeout} s per call by default (timeout= up to {settings.max_timeout} s); "
        f"memory {format_size(settings.memory)}; {settings.pids} processes; {cpus}.",
        "- No network. Host files, secrets and environment variables are out of reach"
        + (" (but for the host directories below)" if settings.mounts else "")
        + ". Writable: "
        f"/workspace ({format_size(settings.workspace_size)}, the working directory), /tmp "
        f"({format_size(settings.tmp_size)}) and /dev/shm ({format_size(settings.tmp_size)}); all belong to the "
        "session.",
        "- Files: runtime.share_file(path) hands a file of /workspace to the user as a link in the result (read "
        "through the bridge, not through your context); files the user's client sends with a call are in "
        "/workspace before the code runs.",
        *_mounts_line(settings.mounts),
        "- Sessions: variables, imports and functions persist between calls of one session (by default each "
        'client has its own; session="name" picks another, reset=true starts it fresh). Idle sessions end '
        f"after {settings.session_idle_timeout:g} s.",
        "- Output: what the code prints, the value of a last bare expression, stderr and errors. Over "
        f"{settings.output_limit:,} characters the middle is cut, so print only what you need. Top-level await works.",
        "- Images: `import mcp.runtime as runtime; runtime.show(obj)` sends PNG/JPEG/GIF/WebP bytes, a file "
        "path, a PIL image or a matplotlib figure; figures left open and images in the last value (alone or in a "
        "list, tuple or dict) are sent too "
        f"(each up to {format_size(settings.image_limit)}, {settings.max_images} per call).",
        _servers_line(servers or {}),
        *_policy_line(settings.policy),
        "- Saved tools: runtime.save_tool(func) keeps a function's source on the host; every new session starts "
        "with it defined (runtime.list_saved_tools(), runtime.delete_saved_tool(name)).",
    ]
    return "\n".join(lines)


def _mounts_line(mounts: tuple[Mount, ...]) -> list[str]:
    """Where the user's data is, by its path in the sandbox alone (the host's paths stay on the host)."""
    if not mounts:
        return []
    places = ", ".join(
        f"{m.target} ({'writable: what is written there stays on the host' if m.writable else 'read-only'})"
        for m in mounts
    )
    return [f"- Host directories mounted in every session: {places}."]


_FIND = (
    'No server for the job? `await runtime.find_servers("what you need")` lists servers to add (MCP registries, '
    "local catalogs, the user's other clients), each with what it needs."
)


def _servers_line(servers: Mapping[str, str]) -> str:
    """How to reach the user's MCP servers; the names only, never their tools (those are found in code)."""
    if not servers:
        return f"- MCP servers: none are configured (see `mcp-codemode servers`). {_FIND}"
    names = ", ".join(name if alias == name else f"{name} (mcp_{alias})" for name, alias in servers.items())
    return (
        f"- MCP servers ({len(servers)}): {names}. They start on first use. Find tools with "
        '`await runtime.search_tool_docs("what you need")` (ranked, all servers; offset= pages) or '
        '`runtime.query_tool_docs_sync(server, detail="stub")` (a Python module of typed signatures; detail= '
        '"name", "summary", "full" for less or more); call them as '
        "`await mcp_<alias>.<tool>(arg=...)` (typed: help() shows parameters) or `runtime.call_tool(server, tool, "
        "{...})`. Results are Python values; failures raise runtime.ToolError, ToolNotFound, ArgumentError (all "
        "runtime.MCPError). asyncio.gather runs calls concurrently. Resources and prompts: "
        "`runtime.list_resources(server)`, `list_resource_templates`, `read_resource(server, uri)`, "
        "`list_prompts(server)`, `get_prompt(server, name, {...})` (each with a _sync twin). "
        f"{_FIND}"
    )


def _policy_line(policy: Policy) -> list[str]:
    """The limits a policy sets, when it sets more than the defaults; the patterns stay on the host."""
    if not policy.restricts:
        return []
    limits = []
    if policy.read_only:
        limits.append("only read-only tools are offered")
    if policy.max_calls_per_run:
        limits.append(f"at most {policy.max_calls_per_run:,} calls (tools, resources, prompts) per run_python call")
    if policy.max_calls_per_second:
        limits.append(f"at most {policy.max_calls_per_second:g} calls per second")
    limits.append(f"arguments up to {format_size(policy.max_argument_bytes)} of JSON, nested up to "
                  f"{policy.max_argument_depth} deep")  # fmt: skip
    return [f"- Policy: {'; '.join(limits)}. A refused call raises runtime.PolicyError (an MCPError) naming the rule."]


REFERENCE_CHECKLIST = """\
Coming from mcp-server-code-execution-mode:
- Nothing has to be loaded first: every server above is reachable from code, listed in run_python's `servers` or \
not. `servers` only starts the named ones early.
- `runtime.discovered_servers()` and `await runtime.list_servers()` name every server; \
`runtime.list_loaded_server_metadata()` describes the ones already running (those named in `servers` included), \
with each tool's `input_schema`; `runtime.describe_server(name)` does the same for any server (and shows its `cwd`).
- `await runtime.query_tool_docs(server)` gives each tool's `alias` (also as `toolAlias`); pass it as `tool=` with \
`detail="full"` for the schemas, or `detail="stub"` for typed Python signatures."""


def reference_capabilities(summary: str) -> str:
    """The text of the reference bridge's capabilities resource here: the summary and the checklist."""
    return f"{summary}\n\n{REFERENCE_CHECKLIST}"
