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
"""

from __future__ import annotations

import dataclasses
import json
import keyword
import re
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from .model import DEFAULT_PROTOCOL, ConfigProblem, Discovery, ServerConfig, SkippedServer, Transport

__all__ = [
    "FORMATS",
    "SELF_SERVER_SETTING",
    "bridge_identity",
    "default_sources",
    "derive_alias",
    "discover",
    "guess_format",
    "launches_bridge",
]

# How a source is read. "dir": every *.json in a directory, each read as "json".
FORMATS: Final = (
    "json",
    "dir",
    "claude-code-project",
    "claude-code",
    "claude-desktop",
    "vscode",
    "gemini",
    "codex",
)

SELF_SERVER_SETTING: Final = "MCP_BRIDGE_ALLOW_SELF_SERVER=1"
# Program names (normalised by _program_name) that start a code-mode bridge: this one and the reference one.
_SELF_NAMES: Final = {
    "mcp-codemode": "mcp-codemode itself",
    "mcp-server-code-execution-mode": "mcp-server-code-execution-mode, the reference code-mode bridge",
}
# Options whose value is a directory, not a program: `uv run --directory ~/src/mcp-codemode other-server`
# must not look like the bridge just because of where it runs.
_DIRECTORY_OPTIONS: Final = frozenset({"--directory", "--project", "--cwd", "--prefix"})

_TRANSPORTS: Final[Mapping[str, Transport]] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamablehttp": "http",
    "sse": "sse",
}
_MODERN_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}")
LAST_HANDSHAKE_VERSION: Final = "2025-11-25"  # protocol versions up to this one use the initialize handshake
_VARIABLE = re.compile(r"\$\{([^{}]*)\}")
_VARIABLE_OR_BARE = re.compile(r"\$\{([^{}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")  # Gemini CLI also reads $VAR
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def default_sources(
    home: Path, cwd: Path, platform: str, *, env: Mapping[str, str] | None = None
) -> list[tuple[Path, str]]:
    """Every place a client keeps MCP servers, as (path, format), highest precedence first.

    ``env`` only moves a client's own directory the way that client does (``CODEX_HOME``,
    ``XDG_CONFIG_HOME``); without it the documented default locations are used.
    """
    env = env or {}
    config_home = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    codex_home = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex"
    if platform == "darwin":
        claude_desktop = home / "Library" / "Application Support" / "Claude"
    elif platform == "win32":
        claude_desktop = home / "AppData" / "Roaming" / "Claude"
    else:
        claude_desktop = config_home / "Claude"
    return [
        (cwd / "mcp-servers", "dir"),
        (home / ".claude.json", "claude-code-project"),
        (cwd / ".mcp.json", "json"),
        (cwd / ".cursor" / "mcp.json", "json"),
        (cwd / ".vscode" / "mcp.json", "vscode"),
        (cwd / ".gemini" / "settings.json", "gemini"),
        (home / "MCPs", "dir"),
        (config_home / "mcp" / "servers", "dir"),
        (home / ".claude.json", "claude-code"),
        (claude_desktop / "claude_desktop_config.json", "claude-desktop"),
        (home / ".cursor" / "mcp.json", "json"),
        (home / ".codeium" / "windsurf" / "mcp_config.json", "json"),
        (home / ".gemini" / "settings.json", "gemini"),
        (codex_home / "config.toml", "codex"),
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
) -> Discovery:
    """Read every source and decide, per server name, which definition is used.

    ``explicit`` are the files the user named (``--config``, then ``MCP_SERVERS_CONFIG``), highest
    precedence first; their format is guessed from the path (``.toml`` is Codex, ``.gemini/settings.json``
    is Gemini, ``.vscode/mcp.json`` is VS Code, anything else is ``{"mcpServers": …}`` JSON). With
    ``use_defaults`` false (``MCP_BRIDGE_DISCOVER=0``) only they are read. Never raises for a bad file or
    entry: those become ``problems``, and everything else still loads.
    """
    reader = _Reader(home=home, cwd=cwd, env=env)
    for path in explicit:
        path = _expand_home(path, home)
        if not path.is_absolute():
            path = cwd / path
        reader.read(path, guess_format(path), explicit=True)
    if use_defaults:
        for path, fmt in default_sources(home, cwd, platform, env=env):
            reader.read(path, fmt, explicit=False)
    return _decide(reader.entries, reader.problems, reader.sources, reader.context, allow_self)


def guess_format(path: Path) -> str:
    """The format of a file the user named, from its path: a client's own file keeps that client's quirks."""
    if path.suffix.lower() == ".toml":
        return "codex"
    if path.name == "settings.json" and path.parent.name == ".gemini":
        return "gemini"
    if path.name == "mcp.json" and path.parent.name == ".vscode":
        return "vscode"
    if path.name == ".claude.json":
        return "claude-code"
    if path.name == "claude_desktop_config.json":
        return "claude-desktop"
    return "json"


def derive_alias(name: str) -> str:
    """The Python identifier a server name becomes (``mcp_<alias>`` in the sandbox), before collisions."""
    alias = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "server"
    if alias[0].isdigit():
        alias = "s_" + alias
    if keyword.iskeyword(alias):
        alias += "_"
    return alias


# --- reading files -----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Context:
    home: Path
    cwd: Path
    env: Mapping[str, str]


@dataclasses.dataclass
class _Raw:
    """One server entry as written, mapped onto common slots. Values are unchecked (``None`` = absent).

    The ``*_key`` fields keep the key the user wrote, so a message can say ``httpUrl`` or
    ``tool_timeout_sec`` rather than our internal name.
    """

    name: str
    source: str
    base: Path  # what a relative cwd is relative to: the config file's directory
    fmt: str = "json"  # the client format it was read in, which decides how its variables are filled in
    command: object = None
    args: object = None
    env: object = None
    cwd: object = None
    url: object = None
    url_key: str = "url"
    url_transport: Transport | None = None  # the transport the url key implies (Gemini, Codex); None: guess
    type: object = None
    type_key: str = "type"
    headers: object = None
    headers_key: str = "headers"
    env_headers: object = None  # Codex env_http_headers: header name → environment variable name
    bearer_env: object = None  # Codex bearer_token_env_var
    disabled: bool = False
    description: object = None
    protocol: object = None
    timeout: object = None
    timeout_key: str = "timeout"
    timeout_scale: float = 1.0  # Gemini's timeout is milliseconds
    errors: list[str] = dataclasses.field(default_factory=list)  # found while mapping; the first is reported


class _FileProblem(Exception):
    """A whole file cannot be used; the message is the fix-oriented reason."""


class _Missing(Exception):
    """The file does not exist, which for a default location is normal and not worth a word."""


class _Reader:
    """Reads sources in precedence order into raw entries, remembering each file it opened."""

    def __init__(self, *, home: Path, cwd: Path, env: Mapping[str, str]) -> None:
        self.context = _Context(home=home, cwd=cwd, env=env)
        self.entries: list[_Raw] = []
        # A file's problem is keyed by how many entries were read before it, so that once entry problems
        # join in (_decide), every problem can be listed in precedence order.
        self.problems: list[tuple[int, ConfigProblem]] = []
        self.sources: list[str] = []
        self._seen: set[tuple[Path, str]] = set()
        # ~/.claude.json is read twice (project and user sections) and can be megabytes: parse it once,
        # and report it once if it is broken.
        self._parsed: dict[Path, dict[str, object]] = {}
        self._failed: set[Path] = set()

    def read(self, path: Path, fmt: str, *, explicit: bool) -> None:
        key = (_identity(path), fmt)
        if key in self._seen:  # the same file named twice, or cwd == home: read it where it ranks first
            return
        self._seen.add(key)
        if fmt == "dir" or (explicit and _is_dir(path)):
            self._read_directory(path, explicit=explicit)
        else:
            self._read_file(path, fmt, explicit=explicit)

    def _read_directory(self, path: Path, *, explicit: bool) -> None:
        try:
            names = sorted(child.name for child in path.iterdir())
        except (FileNotFoundError, NotADirectoryError):
            if path.exists():
                self._problem(str(path), "is not a directory; MCP server files go in a directory of *.json files")
            elif explicit:
                self._problem(str(path), _EXPLICIT_MISSING)
            return
        except OSError as exc:
            self._problem(str(path), f"cannot be listed ({exc.strerror}); check its permissions")
            return
        for name in names:
            child = path / name
            if name.endswith(".json") and not name.startswith(".") and not _is_dir(child):
                key = (_identity(child), "json")
                if key not in self._seen:
                    self._seen.add(key)
                    self._read_file(child, "json", explicit=True)

    def _read_file(self, path: Path, fmt: str, *, explicit: bool) -> None:
        label = str(path)
        identity = _identity(path)
        if identity in self._failed:
            return
        document = self._parsed.get(identity)
        if document is None:
            try:
                loaded = _load(path, toml=fmt == "codex")
            except _Missing:
                if explicit:
                    self._problem(label, _EXPLICIT_MISSING)
                return
            except _FileProblem as exc:
                self._fail(identity, label, str(exc))
                return
            if not isinstance(loaded, dict):
                what = "a TOML table" if fmt == "codex" else 'a JSON object such as {"mcpServers": {...}}'
                self._fail(identity, label, f"is not {what}: its top level is {_kind(loaded)}")
                return
            document = self._parsed[identity] = loaded
        self._note_source(label)
        try:
            for name, entry, source in _sections(document, fmt, label, self.context.cwd, required=explicit):
                self.entries.append(_map_entry(name, entry, source, path.parent, fmt))
        except _FileProblem as exc:
            self._problem(label, str(exc))

    def _fail(self, identity: Path, label: str, reason: str) -> None:
        self._failed.add(identity)
        self._note_source(label)
        self._problem(label, reason)

    def _note_source(self, label: str) -> None:
        if label not in self.sources:
            self.sources.append(label)

    def _problem(self, source: str, reason: str) -> None:
        self.problems.append((len(self.entries), ConfigProblem(source=source, server=None, reason=reason)))


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a directory we may not look into: let reading it report why
        return False


_EXPLICIT_MISSING: Final = "does not exist; check the path given with --config or MCP_SERVERS_CONFIG"


def _identity(path: Path) -> Path:
    """The same file however it was named (a symlink, ``cwd`` equal to ``home``), so it is read once."""
    try:
        return path.resolve()
    except OSError:
        return path


def _expand_home(path: Path, home: Path) -> Path:
    text = str(path)
    if text == "~" or text.startswith("~/"):
        return home / text[2:]
    return path


def _load(path: Path, *, toml: bool) -> object:
    """The parsed file, or why it cannot be used (with line and column for syntax errors)."""
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        raise _Missing from None
    except IsADirectoryError:
        raise _FileProblem("is a directory, not a file") from None
    except OSError as exc:
        raise _FileProblem(f"cannot be read ({exc.strerror}); check its permissions") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise _FileProblem(f"is not UTF-8 text (line {line} has a byte that is not); save it as UTF-8") from None
    if toml:
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise _FileProblem(f"is not valid TOML: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    # VS Code and Cursor accept comments and trailing commas (JSONC); so do we. The blanking keeps every
    # offset, so an error in what remains still points at the right line and column.
    try:
        return json.loads(_strip_jsonc(text))
    except json.JSONDecodeError as exc:
        raise _FileProblem(
            f"is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}; fix it there"
        ) from None


def _strip_jsonc(text: str) -> str:
    """``text`` with comments and trailing commas blanked out (same length, same line breaks)."""
    out = list(text)
    i, n = 0, len(text)
    in_string = False
    last_comma = -1  # the position of a comma outside strings not yet followed by anything but space
    while i < n:
        char = text[i]
        if in_string:
            if char == "\\":
                i += 2
                continue
            if char == '"':
                in_string = False
            i += 1
            continue
        if char == '"':
            in_string, last_comma = True, -1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out[i:end] = ["\n" if c == "\n" else " " for c in text[i:end]]
            i = end
            continue
        elif char == ",":
            last_comma = i
        elif char in "}]":
            if last_comma >= 0:
                out[last_comma] = " "
            last_comma = -1
        elif not char.isspace():
            last_comma = -1
        i += 1
    return "".join(out)


def _sections(
    document: dict[str, object], fmt: str, label: str, cwd: Path, *, required: bool
) -> Iterable[tuple[str, object, str]]:
    """(name, entry, source label) for every server entry in a parsed file, in file order."""
    if fmt == "codex":
        table = document.get("mcp_servers")
        if table is None:
            if required:
                raise _FileProblem("has no [mcp_servers.NAME] tables, so it defines no servers")
            return
        if not isinstance(table, dict):
            raise _FileProblem("mcp_servers must be a table of [mcp_servers.NAME] tables")
        for name, entry in table.items():
            yield name, entry, label
        return
    if fmt == "claude-code-project":
        projects = document.get("projects")
        if projects is None:
            return
        if not isinstance(projects, dict):
            raise _FileProblem('"projects" must be an object keyed by project directory')
        project = projects.get(str(cwd))
        if project is None:
            return
        if not isinstance(project, dict):
            raise _FileProblem(f'"projects" → {str(cwd)!r} must be an object')
        servers = project.get("mcpServers")
        if servers is None:
            return
        if not isinstance(servers, dict):
            raise _FileProblem(f'"projects" → {str(cwd)!r} → "mcpServers" must be an object keyed by server name')
        for name, entry in servers.items():
            yield name, entry, f"{label} (project {cwd})"
        return
    keys = ("mcpServers",) if fmt in ("claude-code", "gemini") else ("mcpServers", "servers")
    found = False
    for key in keys:
        servers = document.get(key)
        if servers is None:
            continue
        if not isinstance(servers, dict):
            raise _FileProblem(f'"{key}" must be an object keyed by server name')
        found = True
        for name, entry in servers.items():
            yield name, entry, label
    if required and not found:
        raise _FileProblem('has no "mcpServers" (or "servers") object; put the servers in {"mcpServers": {...}}')


def _map_entry(name: str, entry: object, source: str, base: Path, fmt: str) -> _Raw:
    """Put one entry's values into the common slots, under each format's own key names."""
    raw = _Raw(name=name, source=source, base=base, fmt=fmt)
    if not name.strip():
        raw.errors.append("has an empty name; give the server a name")
    if not isinstance(entry, dict):
        raw.errors.append(f"must be an object with command or url, not {_kind(entry)}")
        return raw
    raw.command, raw.args, raw.env, raw.cwd = (entry.get(k) for k in ("command", "args", "env", "cwd"))
    raw.description, raw.protocol = entry.get("description"), entry.get("protocol")
    for key in ("disabled", "enabled"):
        flag = entry.get(key)
        if flag is not None and not isinstance(flag, bool):
            raw.errors.append(f"{key} must be true or false, not {_kind(flag)}")
    raw.disabled = entry.get("disabled") is True or entry.get("enabled") is False
    if fmt == "codex":
        raw.url, raw.url_transport = entry.get("url"), "http"  # Codex speaks streamable HTTP only
        raw.headers, raw.headers_key = entry.get("http_headers"), "http_headers"
        raw.env_headers, raw.bearer_env = entry.get("env_http_headers"), entry.get("bearer_token_env_var")
        raw.timeout, raw.timeout_key = entry.get("tool_timeout_sec"), "tool_timeout_sec"
        return raw
    _map_type(raw, entry)
    raw.headers = entry.get("headers")
    if "envFile" in entry:
        raw.errors.append("uses envFile, which mcp-codemode does not read; copy those variables into env")
    urls = {key: entry[key] for key in ("url", "serverUrl", "httpUrl") if entry.get(key) is not None}
    if fmt != "gemini":
        urls.pop("httpUrl", None)
    if len(urls) > 1:
        raw.errors.append(f"has both {' and '.join(urls)}; keep one")
    elif urls:
        ((raw.url_key, raw.url),) = urls.items()
        if fmt == "gemini":
            raw.url_transport = "http" if raw.url_key == "httpUrl" else "sse"
    raw.timeout = entry.get("timeout")
    if fmt == "gemini":
        raw.timeout_scale = 0.001
    return raw


def _map_type(raw: _Raw, entry: Mapping[str, object]) -> None:
    declared = {key: entry[key] for key in ("type", "transport") if entry.get(key) is not None}
    if len(declared) == 2 and _transport_of(declared["type"]) != _transport_of(declared["transport"]):
        raw.errors.append("has both type and transport, and they disagree; keep one")
    for key, value in declared.items():
        raw.type, raw.type_key = value, key
        break


def _transport_of(value: object) -> Transport | None:
    return _TRANSPORTS.get(value.strip().lower()) if isinstance(value, str) else None


def _kind(value: object) -> str:
    """What a JSON/TOML value is, in words, without echoing it (it may be a secret)."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    if value is None:
        return "null"
    return type(value).__name__


# --- normalising one entry ---------------------------------------------------------------------------------


class _EntryError(Exception):
    """One entry cannot be used; the message says how to fix it."""


@dataclasses.dataclass(frozen=True)
class _Variables:
    """How one client fills in the variables of a server entry, which the bridge copies so a server gets the same.

    Every client that expands reads the *client's* environment; the bridge, which a client starts, reads its
    own. ``bare``: ``$VAR`` counts too (Gemini CLI), not only the braced forms. ``keeps``: a reference the
    client cannot resolve is passed to the server as written (Claude Desktop and Codex expand nothing; Gemini
    CLI keeps what it cannot resolve), so a program that expands its own arguments, such as ``mcp-remote``,
    still gets it; elsewhere the client refuses the entry (Claude Code) or starts it broken (Cursor, VS Code),
    and the bridge reports it instead.
    """

    bare: bool = False
    keeps: bool = False


_VARIABLE_RULES: Final[Mapping[str, _Variables]] = {
    "json": _Variables(),  # Claude Code's .mcp.json, Cursor, Windsurf, our own files
    "claude-code-project": _Variables(),
    "claude-code": _Variables(),
    "claude-desktop": _Variables(keeps=True),
    "vscode": _Variables(),
    "gemini": _Variables(bare=True, keeps=True),
    "codex": _Variables(keeps=True),
}


class _Expander:
    """``${VAR}``, ``${VAR:-default}`` and the client-specific forms, filled in as the entry's client would.

    A variable the entry's own ``env`` defines takes that value first: it is what the server will find in its
    environment, and what a program that expands its own arguments (``mcp-remote --header
    Authorization:${AUTH_HEADER}`` with ``AUTH_HEADER`` in ``env``) uses, whatever the bridge's environment
    holds under that name. ``${env:VAR}`` names the client's environment explicitly, so only the bridge's own
    environment answers it. Only braced forms are expanded (and ``$VAR`` where the client does it, Gemini
    CLI), so a bare ``$`` (in a regex argument, a price, a password) stays as written. When ``strict`` is
    false (skipped entries, which are only listed) nothing is reported and an unresolvable expression is
    left as it was.
    """

    def __init__(self, context: _Context, rules: _Variables, *, strict: bool) -> None:
        self.context = context
        self.rules = rules
        self.strict = strict
        self.local: Mapping[str, str] = {}  # the entry's own env, once expanded
        self.missing: list[str] = []
        self.inputs: list[str] = []
        self.unknown: list[str] = []

    def __call__(self, text: str, where: str) -> str:
        pattern = _VARIABLE_OR_BARE if self.rules.bare else _VARIABLE
        return pattern.sub(lambda match: self._one(match, where), text)

    def _lookup(self, name: str, *, local: bool) -> str | None:
        if local and name in self.local:
            return self.local[name]
        return self.context.env.get(name)

    def _one(self, match: re.Match[str], where: str) -> str:
        written = match.group(0)
        if match.group(1) is None:  # a bare $VAR: filled in when it is set, else kept, as Gemini CLI does
            value = self._lookup(match.group(2), local=True)
            return written if value is None else value
        body = match.group(1)
        builtin = {
            "workspaceFolder": str(self.context.cwd),
            "workspaceFolderBasename": self.context.cwd.name,
            "userHome": str(self.context.home),
            "pathSeparator": "/",
            "/": "/",
        }.get(body)
        if builtin is not None:
            return builtin
        if body.startswith("input:"):
            if not self.rules.keeps:
                _add(self.inputs, body.removeprefix("input:"))
            return written
        explicit = body.startswith("env:")
        name, separator, default = body.removeprefix("env:").partition(":-")
        if not _NAME.fullmatch(name):
            if not self.rules.keeps:
                _add(self.unknown, where)
            return written
        value = self._lookup(name, local=not explicit)
        if separator:  # like the shell's ${VAR:-default}: unset or empty both take the default
            return value if value else default
        if value is None:
            if not self.rules.keeps:
                _add(self.missing, name)
            return written
        return value

    def complaints(self) -> list[str]:
        found = []
        if self.missing:
            names = ", ".join(self.missing)
            if len(self.missing) == 1:
                found.append(
                    f"needs environment variable {names}, which is not set; "
                    f"set it or give a default with ${{{names}:-value}}"
                )
            else:
                found.append(
                    f"needs environment variables {names}, which are not set; "
                    f"set them or give defaults with ${{{self.missing[0]}:-value}}"
                )
        for input_id in self.inputs:
            found.append(
                f"uses ${{input:{input_id}}}, which only VS Code can ask for; put the value in an "
                f"environment variable and write ${{env:NAME}} instead"
            )
        if self.unknown:
            found.append(
                f"has a ${{...}} expression mcp-codemode cannot resolve in {', '.join(self.unknown)}; "
                f"use ${{VAR}} or ${{VAR:-default}} for environment variables"
            )
        return found


def _add(items: list[str], item: str) -> None:
    if item not in items:
        items.append(item)


def _normalise(raw: _Raw, context: _Context, *, strict: bool) -> ServerConfig:
    """The entry as a ``ServerConfig`` (alias not yet assigned), or ``_EntryError`` saying what to fix."""
    if raw.errors:
        raise _EntryError(raw.errors[0])
    declared: Transport | None = None
    if raw.type is not None:
        declared = _transport_of(raw.type)
        if declared is None:
            shown = repr(raw.type)[:40] if isinstance(raw.type, str) else _kind(raw.type)
            raise _EntryError(f"{raw.type_key} {shown} is not known; use stdio, http (streamable HTTP) or sse")
    has_command, has_url = raw.command is not None, raw.url is not None
    if has_command and has_url:
        raise _EntryError(
            f"has both command and {raw.url_key}; a server is either started (command) or reached over the "
            f"network ({raw.url_key}): keep one"
        )
    if not has_command and not has_url:
        raise _EntryError(
            'has neither command nor url; add "command" (and "args") to start a local server, '
            'or "url" to reach a remote one'
        )
    if declared == "stdio" and has_url:
        raise _EntryError(f"{raw.type_key} is stdio but the entry has {raw.url_key} and no command; fix one")
    if declared in ("http", "sse") and has_command:
        raise _EntryError(f"{raw.type_key} is {declared} but the entry has command and no url; fix one")
    description = _optional_string(raw.description, "description")
    protocol = _protocol(raw.protocol)
    timeout = _timeout(raw)
    expand = _Expander(context, _VARIABLE_RULES[raw.fmt], strict=strict)
    config = _stdio(raw, expand, context) if has_command else _remote(raw, expand, context, declared)
    if strict:
        complaints = expand.complaints()
        if complaints:
            raise _EntryError("; ".join(complaints))
    if config.transport != "stdio" and urlsplit(config.url).scheme.lower() not in ("http", "https"):
        raise _EntryError(f"{raw.url_key} must start with http:// or https://")
    return dataclasses.replace(config, description=description, protocol=protocol, timeout=timeout)


def _stdio(raw: _Raw, expand: _Expander, context: _Context) -> ServerConfig:
    if not isinstance(raw.command, str) or not raw.command.strip():
        raise _EntryError("command must be a non-empty string naming the program to start; its arguments go in args")
    args = _string_list(raw.args, "args")
    env = _string_map(raw.env, "env")
    cwd = _optional_string(raw.cwd, "cwd") or None
    # The env block first, from the bridge's environment: the command line may use what it defines.
    expanded_env = {key: expand(value, f"env[{key!r}]") for key, value in env.items()}
    expand.local = expanded_env
    command = _expand_tilde(expand(raw.command, "command"), context.home)
    expanded_args = tuple(expand(arg, f"args[{i}]") for i, arg in enumerate(args))
    if cwd is not None:
        cwd = str(raw.base / _expand_tilde(expand(cwd, "cwd"), context.home))
    return ServerConfig(
        name=raw.name,
        alias="",
        transport="stdio",
        source=raw.source,
        command=command,
        args=expanded_args,
        env=expanded_env,
        cwd=cwd,
    )


def _remote(raw: _Raw, expand: _Expander, context: _Context, declared: Transport | None) -> ServerConfig:
    if not isinstance(raw.url, str) or not raw.url.strip():
        raise _EntryError(f"{raw.url_key} must be a non-empty string such as https://example.com/mcp")
    headers = {
        key: expand(value, f"{raw.headers_key}[{key!r}]")
        for key, value in _string_map(raw.headers, raw.headers_key).items()
    }
    for header, variable in _string_map(raw.env_headers, "env_http_headers").items():
        value = context.env.get(variable)
        if value is None:
            if expand.strict:
                raise _EntryError(
                    f"needs environment variable {variable} (env_http_headers[{header!r}]), which is not set; set it"
                )
            value = ""
        headers[header] = value
    if raw.bearer_env is not None:
        if not isinstance(raw.bearer_env, str) or not _NAME.fullmatch(raw.bearer_env):
            raise _EntryError("bearer_token_env_var must be the name of an environment variable")
        token = context.env.get(raw.bearer_env)
        if token is None and expand.strict:
            raise _EntryError(
                f"needs environment variable {raw.bearer_env} (bearer_token_env_var), which is not set; set it"
            )
        headers["Authorization"] = f"Bearer {token or ''}"
    url = expand(raw.url.strip(), raw.url_key)
    transport = declared or raw.url_transport
    if transport is None:
        transport = "sse" if urlsplit(url).path.rstrip("/").endswith("/sse") else "http"
    return ServerConfig(name=raw.name, alias="", transport=transport, source=raw.source, url=url, headers=headers)


def _string_list(value: object, key: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _EntryError(f'{key} must be a list of strings such as ["-y", "some-package"], not {_kind(value)}')
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise _EntryError(f"{key}[{i}] must be a string, not {_kind(item)}; put it in quotes")
    return list(value)


def _string_map(value: object, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _EntryError(f"{key} must be an object of names to string values, not {_kind(value)}")
    for name, item in value.items():
        if not isinstance(item, str):
            raise _EntryError(f"{key}[{name!r}] must be a string, not {_kind(item)}; put it in quotes")
    return dict(value)


def _optional_string(value: object, key: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _EntryError(f"{key} must be a string, not {_kind(value)}")
    return value


def _protocol(value: object) -> str:
    if value is None:
        return DEFAULT_PROTOCOL
    if not isinstance(value, str):
        raise _EntryError('protocol must be a string ("legacy", "auto" or a version such as "2026-07-28")')
    text = value.strip().lower()
    if text in ("legacy", "auto"):
        return text
    if _MODERN_VERSION.fullmatch(text):
        if text <= LAST_HANDSHAKE_VERSION:
            raise _EntryError(
                f'protocol {text!r} is a handshake-era version; write "legacy" for it (the server picks the version)'
            )
        return text
    raise _EntryError(
        f'protocol {value[:40]!r} is not known; use "legacy" (the default), "auto", or a version such as "2026-07-28"'
    )


def _timeout(raw: _Raw) -> float | None:
    value = raw.timeout
    if value is None:
        return None
    unit = "milliseconds" if raw.timeout_scale != 1.0 else "seconds"
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise _EntryError(f"{raw.timeout_key} must be a positive number of {unit}")
    return float(value) * raw.timeout_scale


def _expand_tilde(text: str, home: Path) -> str:
    if text == "~":
        return str(home)
    if text.startswith("~/"):
        return str(home / text[2:])
    return text


def _best_effort(raw: _Raw) -> ServerConfig:
    """Something to list for an entry that is skipped anyway (disabled or shadowed) but does not normalise.

    Such an entry is never used, so its faults are not reported; it is still shown, with what we could
    read of it, so ``servers`` can say where it went.
    """
    command = raw.command if isinstance(raw.command, str) else ""
    url = raw.url if isinstance(raw.url, str) else ""
    transport: Transport = "stdio" if command or not url else (raw.url_transport or "http")
    return ServerConfig(name=raw.name, alias="", transport=transport, source=raw.source, command=command, url=url)


# --- self-reference ----------------------------------------------------------------------------------------


def launches_bridge(config: ServerConfig) -> str | None:
    """Which code-mode bridge this entry would start, if it would start one; None otherwise.

    The bridge is usually configured in the very client files it reads, and proxying itself would start
    another bridge per session, each one proxying itself again. Only whole program names count, so
    ``uvx mcp-server-time`` or a server living in a directory called ``mcp-codemode`` are not mistaken.
    """
    if config.transport != "stdio":
        return None
    previous = ""
    for token in (config.command, *config.args):
        program: str | None
        if previous in _DIRECTORY_OPTIONS:
            program = None
        elif previous == "-m":
            program = token.split(".")[0]
        elif token.startswith("-m") and not token.startswith("--") and len(token) > 2:  # python -mmcp_codemode
            program = token[2:].split(".")[0]
        elif token.startswith("-"):  # --from=mcp-codemode counts; --directory=~/src/mcp-codemode does not
            option, equals, value = token.partition("=")
            program = value if equals and option not in _DIRECTORY_OPTIONS else None
        else:
            program = token
        previous = token
        bridge = _SELF_NAMES.get(_program_name(program)) if program is not None else None
        if bridge is not None:
            return bridge
    return None


def bridge_identity(server_name: str) -> str | None:
    """Which code-mode bridge a server is by the name it gives itself (``serverInfo``), if it is one.

    The command line cannot tell every time: a wrapper script with another name, or the bridge's own HTTP
    URL, start or reach the bridge all the same. Its ``serverInfo`` name can: the hub checks it on connecting.
    """
    return _SELF_NAMES.get(server_name.strip().lower())


def _program_name(token: str) -> str:
    """``/x/mcp_codemode.py``, ``mcp-codemode@latest``, ``git+https://…/mcp-codemode.git`` → ``mcp-codemode``."""
    name = re.split(r"[/\\]", token.rstrip("/\\"))[-1].lower()
    name = re.split(r"[@=<>!~\[ ]", name, maxsplit=1)[0]
    for suffix in (".exe", ".cmd", ".py", ".pyz", ".git"):
        name = name.removesuffix(suffix)
    return name.replace("_", "-")


# --- deciding ----------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Decision:
    raw: _Raw
    config: ServerConfig
    used: bool
    reason: str  # why it is skipped ("" when used, or when it is a problem instead)
    problem: ConfigProblem | None = None


def _decide(
    entries: list[_Raw],
    file_problems: list[tuple[int, ConfigProblem]],
    sources: list[str],
    context: _Context,
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


def _decide_winner(raw: _Raw, context: _Context, allow_self: bool) -> _Decision:
    if raw.disabled:
        return _Decision(raw, _lenient(raw, context), used=False, reason=f"disabled in {raw.source}")
    try:
        config = _normalise(raw, context, strict=True)
    except _EntryError as exc:
        problem = ConfigProblem(source=raw.source, server=raw.name, reason=str(exc))
        return _Decision(raw, _best_effort(raw), used=False, reason="", problem=problem)  # not a skip
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


def _lenient(raw: _Raw, context: _Context) -> ServerConfig:
    try:
        return _normalise(raw, context, strict=False)
    except _EntryError:
        return _best_effort(raw)


def _shadowed(raw: _Raw, winner: _Decision) -> str:
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
