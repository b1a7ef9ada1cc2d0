"""The per-client readers: where each client keeps its servers, and how each file format is read into raw entries.

One job: turn files (JSON, JSONC, TOML; one server per file, a ``mcpServers`` map, VS Code's ``servers``,
Claude Code's per-project table) into ``RawEntry`` entries with where they came from. Nothing here decides which
entry wins or what its fields mean; ``discovery`` and ``parse`` do that. The list of sources and their order is in
``discovery``'s docstring.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from ..model import ConfigProblem
from .entry import RawEntry, ReadContext, kind_of, transport_of

# How a source is read. "dir": every *.json in a directory, each read as "json". "codemode" is the same JSON in a
# file of our own (where ${secret:NAME} is read), "codemode-dir" a directory of them.
FORMATS: Final = (
    "codemode",
    "codemode-dir",
    "json",
    "dir",
    "claude-code-project",
    "claude-code",
    "claude-desktop",
    "vscode",
    "gemini",
    "codex",
)


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
        (cwd / "mcp-servers", "codemode-dir"),
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
    return "codemode"  # a file named for us is ours (a directory too: "read" reads its files as ours)


class _FileProblem(Exception):
    """A whole file cannot be used; the message is the fix-oriented reason."""


class _Missing(Exception):
    """The file does not exist, which for a default location is normal and not worth a word."""


class Reader:
    """Reads sources in precedence order into raw entries, remembering each file it opened."""

    def __init__(self, context: ReadContext) -> None:
        self.context = context
        self.entries: list[RawEntry] = []
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
        key = (_identity(path), _SAME_FILE.get(fmt, fmt))
        if key in self._seen:  # the same file named twice, or cwd == home: read it where it ranks first
            return
        self._seen.add(key)
        if fmt in ("dir", "codemode-dir") or (explicit and _is_dir(path)):
            self._read_directory(path, "json" if fmt == "dir" else "codemode", explicit=explicit)
        else:
            self._read_file(path, fmt, explicit=explicit)

    def _read_directory(self, path: Path, fmt: str, *, explicit: bool) -> None:
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
                key = (_identity(child), _SAME_FILE.get(fmt, fmt))
                if key not in self._seen:
                    self._seen.add(key)
                    self._read_file(child, fmt, explicit=True)

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
                self._fail(identity, label, f"is not {what}: its top level is {kind_of(loaded)}")
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


# Our own JSON is every client's JSON: a file that is both (named with --config and found in ~/MCPs) is read once,
# where it ranks first.
_SAME_FILE: Final = {"codemode": "json", "codemode-dir": "dir"}


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


def expand_home(path: Path, home: Path) -> Path:
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


def _map_entry(name: str, entry: object, source: str, base: Path, fmt: str) -> RawEntry:
    """Put one entry's values into the common slots, under each format's own key names."""
    raw = RawEntry(name=name, source=source, base=base, fmt=fmt)
    if not name.strip():
        raw.errors.append("has an empty name; give the server a name")
    if not isinstance(entry, dict):
        raw.errors.append(f"must be an object with command or url, not {kind_of(entry)}")
        return raw
    raw.command, raw.args, raw.env, raw.cwd = (entry.get(k) for k in ("command", "args", "env", "cwd"))
    raw.description, raw.protocol = entry.get("description"), entry.get("protocol")
    for key in ("disabled", "enabled"):
        flag = entry.get(key)
        if flag is not None and not isinstance(flag, bool):
            raw.errors.append(f"{key} must be true or false, not {kind_of(flag)}")
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


def _map_type(raw: RawEntry, entry: Mapping[str, object]) -> None:
    declared = {key: entry[key] for key in ("type", "transport") if entry.get(key) is not None}
    if len(declared) == 2 and transport_of(declared["type"]) != transport_of(declared["transport"]):
        raw.errors.append("has both type and transport, and they disagree; keep one")
    for key, value in declared.items():
        raw.type, raw.type_key = value, key
        break
