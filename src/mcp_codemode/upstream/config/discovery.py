"""Finding the MCP servers the user already configured for their other clients, and normalising them.

People keep their MCP servers in their clients' config files: Claude Code, Claude Desktop, Cursor, VS Code,
Windsurf, Gemini CLI, Codex. Asking them to copy those entries into yet another file would be one more
place to keep in sync, so the bridge reads the files where they already are and turns every entry into a
``ServerConfig``. Nothing here connects to a server; ``hub.py`` does that with what we return.

Where servers come from, highest precedence first (``default_sources`` gives everything after 1):

1. explicit files: ``--config FILE`` (repeatable) and ``MCP_SERVERS_CONFIG``, in the order given; a
   directory stands for every ``*.json`` file in it;
2. project level, in ``cwd``:
   ``./mcp-servers/*.json`` (our own, one or more servers per file);
   Claude Code's private per-project servers, ``~/.claude.json`` → ``projects[<cwd>].mcpServers``;
   ``./.mcp.json`` (Claude Code, shared with the project);
   ``./.cursor/mcp.json``;
   ``./.vscode/mcp.json`` (key ``servers``; ``${input:...}`` cannot be answered outside VS Code);
   ``./.gemini/settings.json``;
3. user level, in ``home``:
   ``~/MCPs/*.json`` (where the reference bridge keeps servers);
   ``~/.config/mcp/servers/*.json``;
   ``~/.claude.json`` top-level ``mcpServers`` (Claude Code, user scope);
   Claude Desktop (``~/Library/Application Support/Claude/claude_desktop_config.json`` on macOS,
   ``~/.config/Claude/claude_desktop_config.json`` on Linux);
   ``~/.cursor/mcp.json``;
   ``~/.codeium/windsurf/mcp_config.json``;
   ``~/.gemini/settings.json`` (``timeout`` in milliseconds, ``url`` is SSE, ``httpUrl`` streamable HTTP);
   ``~/.codex/config.toml`` (``[mcp_servers.NAME]`` tables).

Claude Code's private per-project servers come before ``.mcp.json`` because Claude Code itself ranks them
that way: a personal override must beat the file the whole team shares.

The highest-precedence definition of a name decides, whatever it says: if it is usable the server is used,
and if it is disabled, launches this bridge, or is broken, the server is not used at all. Falling back to
a lower definition would silently swap in other credentials or another command. Every lower definition
goes to ``skipped`` as shadowed; those are never reported as problems, because the same server copied
into several clients' files is the normal case.

Nothing here reads ``os.environ``, ``Path.home()`` or ``Path.cwd()``: ``home``, ``cwd`` and ``env`` come in
as arguments, so tests (and ``doctor``) can discover against any directory tree and environment.

This module is discovery and precedence; its other concerns have their own modules: ``readers`` (the
sources and their file formats), ``entry`` (a raw entry), ``expand`` (variables), ``parse`` (one entry to a
``ServerConfig``) and ``selfref`` (entries that are a code-mode bridge). ``__all__`` is the public face of
all of them.
"""

from __future__ import annotations

import dataclasses
import keyword
import re
import sys
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from ..model import ConfigProblem, Discovery, ServerConfig, SkippedServer
from .entry import RawEntry, ReadContext
from .parse import EntryError, best_effort, normalise
from .readers import FORMATS, Reader, default_sources, expand_home, guess_format
from .selfref import SELF_SERVER_SETTING, bridge_identity, launches_bridge

__all__ = [
    "FORMATS",
    "SELF_SERVER_SETTING",
    "ConfigSources",
    "bridge_identity",
    "default_sources",
    "derive_alias",
    "discover",
    "guess_format",
    "launches_bridge",
]


def discover(
    *,
    home: Path,
    cwd: Path,
    env: Mapping[str, str],
    explicit: Sequence[Path] = (),
    use_defaults: bool = True,
    allow_self: bool = False,
    platform: str = sys.platform,
    secrets_dir: Path | None = None,
    withheld: Collection[str] = (),
) -> Discovery:
    """Read every source and decide, per server name, which definition is used.

    ``explicit`` are the files the user named (``--config``, then ``MCP_SERVERS_CONFIG``), highest
    precedence first; their format is guessed from the path (``.toml`` is Codex, ``.gemini/settings.json``
    is Gemini, ``.vscode/mcp.json`` is VS Code, anything else is ``{"mcpServers": …}`` JSON of our own). With
    ``use_defaults`` false (``MCP_BRIDGE_DISCOVER=0``) only they are read. ``secrets_dir``: where our own files'
    ``${secret:NAME}`` is read; ``withheld``: variables of ``env`` no entry may expand (the bridge's own secrets).
    Never raises for a bad file or entry: those become ``problems``, and everything else still loads.
    """
    hidden = frozenset(withheld)
    visible = {name: value for name, value in env.items() if name not in hidden}
    reader = Reader(ReadContext(home=home, cwd=cwd, env=visible, secrets_dir=secrets_dir, withheld=hidden))
    for path in _explicit(explicit, home, cwd):
        reader.read(path, guess_format(path), explicit=True)
    if use_defaults:
        for path, fmt in default_sources(home, cwd, platform, env=env):
            reader.read(path, fmt, explicit=False)
    return _decide(reader.entries, reader.problems, reader.sources, reader.context, allow_self)


def _explicit(paths: Sequence[Path], home: Path, cwd: Path) -> list[Path]:
    """The files the user named, as absolute paths (``~`` is the home directory, a relative path is from cwd)."""
    absolute = [expand_home(path, home) for path in paths]
    return [path if path.is_absolute() else cwd / path for path in absolute]


@dataclasses.dataclass(frozen=True)
class ConfigSources:
    """Everything ``discover`` reads from, kept so the bridge can read it all again (``MCP_BRIDGE_CONFIG_REFRESH``)
    and knows which files to watch for that; ``env`` is the bridge's environment, fixed for its life."""

    home: Path
    cwd: Path
    env: Mapping[str, str] = dataclasses.field(repr=False)
    explicit: tuple[Path, ...] = ()
    use_defaults: bool = True
    allow_self: bool = False
    secrets_dir: Path | None = None
    withheld: frozenset[str] = frozenset()
    platform: str = sys.platform

    def discover(self) -> Discovery:
        return discover(home=self.home, cwd=self.cwd, env=self.env, explicit=self.explicit,
                        use_defaults=self.use_defaults, allow_self=self.allow_self, platform=self.platform,
                        secrets_dir=self.secrets_dir, withheld=self.withheld)  # fmt: skip

    def watched(self) -> tuple[tuple[Path, bool], ...]:
        """Each file or directory (``True``) a change in which may change what ``discover`` returns: the files
        named, the clients' files when they are read, and the secrets directory. A named path is watched as what it
        is now (a directory's ``*.json`` files), a client's location as a file unless it is a directory of ours."""
        found = [(path, _is_directory(path)) for path in _explicit(self.explicit, self.home, self.cwd)]
        if self.use_defaults:
            sources = default_sources(self.home, self.cwd, self.platform, env=self.env)
            found += [(path, fmt in ("dir", "codemode-dir")) for path, fmt in sources]
        if self.secrets_dir is not None:
            found.append((self.secrets_dir, True))
        return tuple(dict.fromkeys(found))


def _is_directory(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def derive_alias(name: str) -> str:
    """The Python identifier a server name becomes (``mcp_<alias>`` in the sandbox), before collisions."""
    alias = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "server"
    if alias[0].isdigit():
        alias = "s_" + alias
    if keyword.iskeyword(alias):
        alias += "_"
    return alias


# --- reading files -----------------------------------------------------------------------------------------


# --- normalising one entry ---------------------------------------------------------------------------------


# --- self-reference ----------------------------------------------------------------------------------------


# --- deciding ----------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Decision:
    raw: RawEntry
    config: ServerConfig
    used: bool
    reason: str  # why it is skipped ("" when used, or when it is a problem instead)
    problem: ConfigProblem | None = None


def _decide(
    entries: list[RawEntry],
    file_problems: list[tuple[int, ConfigProblem]],
    sources: list[str],
    context: ReadContext,
    allow_self: bool,
) -> Discovery:
    """Per name, the first (highest-precedence) definition decides; later ones are shadowed."""
    winners: dict[str, _Decision] = {}
    decisions: list[_Decision] = []
    problems: list[tuple[float, ConfigProblem]] = list(file_problems)
    for index, raw in enumerate(entries):
        winner = winners.get(raw.name)
        if winner is not None:
            decisions.append(_Decision(raw, _lenient(raw, context), used=False, reason=_shadowed(raw, winner)))
            continue
        decision = _decide_winner(raw, context, allow_self)
        if decision.problem is not None:
            problems.append((index + 0.5, decision.problem))  # after its own file's problems, before the next
        winners[raw.name] = decision
        decisions.append(decision)
    aliases = _assign_aliases([d for d in decisions if d.used])
    servers: list[ServerConfig] = []
    skipped: list[SkippedServer] = []
    for decision in decisions:
        alias = aliases.get(decision.raw.name) or derive_alias(decision.raw.name)
        config = dataclasses.replace(decision.config, alias=alias)
        if decision.used:
            servers.append(config)
        elif decision.problem is None:  # a broken entry is listed once, as a problem
            skipped.append(SkippedServer(config=config, reason=decision.reason))
    problems.sort(key=lambda item: item[0])  # stable: within one position, reading order is kept
    return Discovery(
        servers=tuple(servers),
        skipped=tuple(skipped),
        problems=tuple(problem for _, problem in problems),
        sources=tuple(sources),
    )


def _decide_winner(raw: RawEntry, context: ReadContext, allow_self: bool) -> _Decision:
    if raw.disabled:
        return _Decision(raw, _lenient(raw, context), used=False, reason=f"disabled in {raw.source}")
    try:
        config = normalise(raw, context, strict=True)
    except EntryError as exc:
        problem = ConfigProblem(source=raw.source, server=raw.name, reason=str(exc))
        return _Decision(raw, best_effort(raw), used=False, reason="", problem=problem)  # not a skip
    bridge = None if allow_self else launches_bridge(config)
    if bridge is not None:
        return _Decision(
            raw,
            config,
            used=False,
            reason=f"launches {bridge}, which would nest code mode inside code mode; "
            f"set {SELF_SERVER_SETTING} to use it anyway",
        )
    return _Decision(raw, config, used=True, reason="")


def _lenient(raw: RawEntry, context: ReadContext) -> ServerConfig:
    try:
        return normalise(raw, context, strict=False)
    except EntryError:
        return best_effort(raw)


def _shadowed(raw: RawEntry, winner: _Decision) -> str:
    where = "an earlier entry in the same file" if winner.raw.source == raw.source else winner.raw.source
    if winner.used:
        return f"shadowed by {where}"
    if winner.reason:
        return f"shadowed by {where}, which is not used either ({winner.reason})"
    return f"shadowed by {where}, which cannot be used (see the problem reported there)"


def _assign_aliases(used: list[_Decision]) -> dict[str, str]:
    """Unique aliases for the servers in use, in precedence order: the first keeps the plain alias."""
    taken: set[str] = set()
    aliases: dict[str, str] = {}
    for decision in used:
        base = derive_alias(decision.raw.name)
        alias, n = base, 1
        while alias in taken:
            n += 1
            alias = f"{base}_{n}"
        taken.add(alias)
        aliases[decision.raw.name] = alias
    return aliases
