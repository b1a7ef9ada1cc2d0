"""What sandboxed code may reach: which servers, tools, resources and prompts, how many calls, how large.

The policy is trusted configuration (the ``[policy]`` table of the settings file, parsed in ``settings_file.py``);
everything it judges comes from code we do not trust. It is applied in two ways:

- *Hiding*: a refused server is left out of the tool directory altogether (never started, never listed,
  never searched), and a refused tool is left out of its server's listing, so nothing the sandbox can look
  at names either. An agent that cannot see a tool does not plan around it.
- *Refusing*: a call that names a refused server or tool anyway (typed from memory, forged in a raw
  frame), or that is over a budget or a cap, is answered with a ``PolicyError`` whose message names the
  rule, before anything is sent upstream.

Matching is ``fnmatchcase`` (case-sensitive shell globs: ``*``, ``?``, ``[abc]``). Deny wins over allow,
and an empty allow list allows nothing. Servers match by name or alias; tool patterns are
``SERVER/TOOL`` (split on the first ``/``; a pattern without one means ``*/TOOL``) and their tool part
matches the tool's name, its Python alias or the name the code typed (``ToolNames``), so ``delete_*`` also catches a
tool named ``delete-file``; ``deny_tools``, ``allow_tools`` and ``ask_tools`` all match through ``tool_pattern``.
Prompt patterns are ``SERVER/PROMPT`` the same way. Resource patterns are ``SERVER/URI``, except that a pattern
whose text before the first ``/`` holds a ``:`` (a URI's scheme, as in ``file:///etc/*``) or that has no ``/`` at
all is a URI pattern for every server: a URI has a scheme, a server name has none. The URI part matches a
resource's URI and, in listings, a template's URI template; ``*`` crosses ``/``.

Why a module apart from ``guard.py`` beside it: these rules are a value the settings build and every layer reads,
pure and stateless, so they stay in the core below the bridge; ``guard.py`` enforces them on each use at run time
(the per-owner rate limiter, the run's budget, the user's approval, the audit line), which needs a run.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from fnmatch import fnmatchcase
from typing import Any

from mcp import types

from ..upstream.tools.gate import Refused

DEFAULT_MAX_CALLS_PER_RUN = 1000
DEFAULT_MAX_ARGUMENT_BYTES = 1 << 20
DEFAULT_MAX_ARGUMENT_DEPTH = 32
# Arguments deeper than this would reach recursive code on the host (the JSON encoder, the schema validator,
# the MCP SDK's models), whose recursion limit is about 1,000 frames and several frames per level deep.
MAX_ARGUMENT_DEPTH_CEILING = 64


@dataclasses.dataclass(frozen=True)
class Policy:
    """The ``[policy]`` table; the defaults allow every server and tool, with caps no honest program meets."""

    allow_servers: tuple[str, ...] = ("*",)
    deny_servers: tuple[str, ...] = ()
    allow_tools: tuple[str, ...] = ("*",)
    deny_tools: tuple[str, ...] = ()
    ask_tools: tuple[str, ...] = ()  # calls of these wait for the user's approval, asked through the client
    deny_sampling: tuple[str, ...] = ()  # servers whose sampling requests are not passed on to the client
    allow_resources: tuple[str, ...] = ("*",)
    deny_resources: tuple[str, ...] = ()
    allow_prompts: tuple[str, ...] = ("*",)
    deny_prompts: tuple[str, ...] = ()
    read_only: bool = False
    max_calls_per_run: int = DEFAULT_MAX_CALLS_PER_RUN  # 0: no limit
    max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
    max_argument_depth: int = DEFAULT_MAX_ARGUMENT_DEPTH
    max_calls_per_second: float = 0  # per owner; 0: no limit
    source: str = ""  # the settings file it came from, named in every refusal

    @property
    def where(self) -> str:
        return f"settings file {self.source}" if self.source else "the default policy"

    @property
    def restricts(self) -> bool:
        """Whether anything beyond the default caps applies (the capability summary then says so)."""
        return self.without_source() != Policy()

    @property
    def narrows(self) -> bool:
        """Whether it hides servers, tools, resources or prompts (or all but read-only tools), which `doctor` asks
        of a setup."""
        defaults = Policy()
        lists = (self.allow_servers, self.deny_servers, self.allow_tools, self.deny_tools, self.allow_resources,
                 self.deny_resources, self.allow_prompts, self.deny_prompts)  # fmt: skip
        return self.read_only or lists != (defaults.allow_servers, (), defaults.allow_tools, (),
                                           defaults.allow_resources, (), defaults.allow_prompts, ())  # fmt: skip

    def without_source(self) -> Policy:
        return dataclasses.replace(self, source="")

    # -- servers and tools -------------------------------------------------------------------------------------

    def server_refusal(self, name: str, alias: str) -> Refused | None:
        names = (name, alias)
        for pattern in self.deny_servers:
            if any(fnmatchcase(candidate, pattern) for candidate in names):
                return Refused("deny_servers", f'denied by deny_servers pattern "{pattern}"')
        if not any(fnmatchcase(candidate, pattern) for pattern in self.allow_servers for candidate in names):
            return Refused("allow_servers", f"matched by no allow_servers pattern ({_listed(self.allow_servers)})")
        return None

    def tool_refusal(
        self, server: str, server_alias: str, tool: str, tool_alias: str, annotations: types.ToolAnnotations | None
    ) -> Refused | None:
        """Whether a listed tool is refused: by the patterns, or by ``read_only`` from its annotations."""
        refused = self.name_refusal(ToolNames(server, server_alias, tool, tool_alias), deny_only=False)
        if refused is not None:
            return refused
        if self.read_only and not (annotations is not None and annotations.read_only_hint is True):
            return Refused("read_only", "read_only is on and the tool is not annotated readOnlyHint: true")
        return None

    def name_refusal(self, names: ToolNames, *, deny_only: bool = True) -> Refused | None:
        """The patterns' verdict on a tool by its names; ``deny_only`` for a name the caller typed, which may be an
        alias whose tool an allow pattern names otherwise (the listing decides those)."""
        pattern = self.tool_pattern(self.deny_tools, names)
        if pattern is not None:
            return Refused("deny_tools", f'denied by deny_tools pattern "{pattern}"')
        if not deny_only and self.tool_pattern(self.allow_tools, names) is None:
            return Refused("allow_tools", f"matched by no allow_tools pattern ({_listed(self.allow_tools)})")
        return None

    def approval_pattern(self, names: ToolNames) -> str | None:
        """The first ``ask_tools`` pattern that names this tool (its calls wait for the user's approval), if any."""
        return self.tool_pattern(self.ask_tools, names)

    @staticmethod
    def tool_pattern(patterns: Iterable[str], names: ToolNames) -> str | None:
        """The first of ``patterns`` that names the tool by any of its names: the one matching every tool list
        shares, so a pattern that denies a tool by its alias also asks before it (issue 30 found ``ask_tools``
        comparing real names only, and kebab-case tools called without a question)."""
        servers, tools = names.servers, names.tools
        return next((pattern for pattern in patterns if _tool_match(pattern, servers, tools)), None)

    def sampling_refusal(self, server: str, server_alias: str) -> Refused | None:
        """Whether ``deny_sampling`` keeps this server's sampling requests from the client (a model call each)."""
        for pattern in self.deny_sampling:
            if fnmatchcase(server, pattern) or fnmatchcase(server_alias, pattern):
                return Refused("deny_sampling", f'denied by deny_sampling pattern "{pattern}"')
        return None

    # -- resources and prompts ---------------------------------------------------------------------------------

    def resource_refusal(self, server: str, server_alias: str, uri: str) -> Refused | None:
        """The patterns' verdict on a resource URI (or, in a listing, a URI template) of one server."""
        servers = (server, server_alias)
        for pattern in self.deny_resources:
            if _resource_match(pattern, servers, uri):
                return Refused("deny_resources", f'denied by deny_resources pattern "{pattern}"')
        if not any(_resource_match(pattern, servers, uri) for pattern in self.allow_resources):
            return Refused(
                "allow_resources", f"matched by no allow_resources pattern ({_listed(self.allow_resources)})"
            )
        return None

    def prompt_refusal(self, server: str, server_alias: str, prompt: str) -> Refused | None:
        """The patterns' verdict on one prompt of one server, by its name."""
        names = ToolNames.typed_only(server, server_alias, prompt)  # prompt patterns read like tool patterns
        pattern = self.tool_pattern(self.deny_prompts, names)
        if pattern is not None:
            return Refused("deny_prompts", f'denied by deny_prompts pattern "{pattern}"')
        if self.tool_pattern(self.allow_prompts, names) is None:
            return Refused("allow_prompts", f"matched by no allow_prompts pattern ({_listed(self.allow_prompts)})")
        return None

    # -- arguments ---------------------------------------------------------------------------------------------

    def argument_refusal(self, arguments: dict[str, Any]) -> tuple[Refused | None, bytes | None]:
        """The caps on one call's arguments, and their canonical JSON when they are within the depth cap.

        The depth is measured without recursion before anything recursive touches the value, so a value
        nested ten thousand deep is refused cheaply instead of exhausting the host's stack.
        """
        if nesting_depth(arguments, self.max_argument_depth) > self.max_argument_depth:
            reason = f"the arguments are nested more than {self.max_argument_depth} deep (max_argument_depth)"
            return Refused("max_argument_depth", reason), None
        encoded = canonical_json(arguments)
        if len(encoded) > self.max_argument_bytes:
            reason = (f"the arguments are {len(encoded):,} bytes of JSON, more than max_argument_bytes "
                      f"({self.max_argument_bytes:,})")  # fmt: skip
            return Refused("max_argument_bytes", reason), encoded
        return None, encoded

    def message(self, subject: str, refused: Refused) -> str:
        """The sentence sandboxed code sees: what was refused, the rule, and where the rule was set."""
        return f"policy refused {subject}: {refused.reason} ({self.where})"


@dataclasses.dataclass(frozen=True)
class ToolNames:
    """Every name one tool goes by, for the tool patterns: the code may call it by any of them (a proxy sends the
    real name, ``runtime.call_tool`` what was typed), so a pattern that names it by any one must catch it."""

    server: str
    server_alias: str  # the Python identifier of ``mcp_<alias>``
    tool: str  # as the server lists it, e.g. ``get-env``
    tool_alias: str  # its Python identifier, e.g. ``get_env``
    typed: str = ""  # the name the code sent (once the listing found the tool, one of the two above)

    @classmethod
    def typed_only(cls, server: str, server_alias: str, typed: str) -> ToolNames:
        """A tool known only by the name the code typed (before its server's listing is read)."""
        return cls(server, server_alias, typed, typed, typed)

    @property
    def servers(self) -> tuple[str, str]:
        return self.server, self.server_alias

    @property
    def tools(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(name for name in (self.tool, self.tool_alias, self.typed) if name))


def _listed(patterns: tuple[str, ...]) -> str:
    if not patterns:
        return "the list is empty"
    shown = ", ".join(f'"{pattern}"' for pattern in patterns[:8])
    return f"{shown}, …" if len(patterns) > 8 else shown


def _tool_match(pattern: str, servers: tuple[str, str], tools: tuple[str, ...]) -> bool:
    server_part, slash, tool_part = pattern.partition("/")
    if not slash:
        server_part, tool_part = "*", pattern
    return any(fnmatchcase(s, server_part) for s in servers) and any(fnmatchcase(t, tool_part) for t in tools)


def _resource_parts(pattern: str) -> tuple[str, str]:
    """``(server part, URI part)`` of a resource pattern (the module docstring says how it is split)."""
    server_part, slash, uri_part = pattern.partition("/")
    if not slash or ":" in server_part:
        return "*", pattern
    return server_part, uri_part


def _resource_match(pattern: str, servers: tuple[str, str], uri: str) -> bool:
    server_part, uri_part = _resource_parts(pattern)
    return any(fnmatchcase(s, server_part) for s in servers) and fnmatchcase(uri, uri_part)


# What a pattern of each list names, for the error that shows a user the shape it needs.
_SHAPES = {
    "tools": '"SERVER/TOOL", such as "git/git_*"',
    "prompts": '"SERVER/PROMPT", such as "everything/simple-*"',
    "resources": '"SERVER/URI", such as "github/repo://*", or a URI alone, such as "file:///etc/*"',
}


def check_pattern(pattern: str, kind: str = "servers") -> str:
    """A pattern as the settings file gave it, or ValueError saying what is wrong with it.

    ``kind`` is the list's subject: ``servers``, ``tools``, ``resources`` or ``prompts``."""
    if not pattern.strip() or pattern != pattern.strip():
        raise ValueError(f"pattern {pattern!r} is empty or has spaces around it")
    if kind in ("tools", "prompts"):
        server_part, slash, name_part = pattern.partition("/")
        if slash and (not server_part or not name_part):
            raise ValueError(f'pattern {pattern!r} needs both parts around "/": {_SHAPES[kind]}')
    elif kind == "resources":
        server_part, uri_part = _resource_parts(pattern)
        if not server_part or not uri_part:
            raise ValueError(f'pattern {pattern!r} needs both parts around "/": {_SHAPES[kind]}')
    return pattern


def nesting_depth(value: Any, stop_after: int) -> int:
    """How deep objects and arrays nest in ``value`` (the value itself counts: ``{}`` is 1, ``{"a": []}`` 2),
    computed iteratively; the walk stops as soon as ``stop_after`` is exceeded."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > stop_after:
            return deepest
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def canonical_json(value: Any) -> bytes:
    """The arguments as compact JSON with sorted keys: the size the caps count and the text the audit hashes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
