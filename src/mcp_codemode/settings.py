"""The one settings object.

Settings are read here and nowhere else: defaults, then an optional TOML settings file, then environment
variables, then command-line overrides. Every other module receives a ``Settings`` and never looks at
``os.environ`` itself, so tests can build any configuration without touching the process.

Environment variable names follow the reference bridge (``MCP_BRIDGE_*``) where they mean the same thing,
so existing client configurations keep working.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from .errors import SettingsError
from .policy_rules import MAX_ARGUMENT_DEPTH_CEILING, Policy, check_pattern

T = TypeVar("T", int, float)
RuntimeChoice = Literal["auto", "bubblewrap", "podman", "docker"]
OutputMode = Literal["compact", "toon", "json"]
OUTPUT_MODES: tuple[OutputMode, ...] = ("compact", "toon", "json")
RUNTIME_CHOICES: tuple[RuntimeChoice, ...] = ("auto", "bubblewrap", "podman", "docker")
_RUNTIME_ALIASES: dict[str, RuntimeChoice] = {"bwrap": "bubblewrap"}
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
DEFAULT_IMAGE = "mcp-codemode-sandbox:bookworm"
SETTINGS_FILE_ENV = "MCP_CODEMODE_SETTINGS"

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """Parse ``512m``, ``1g``, ``1.5GiB`` or plain bytes, the way container runtimes do (binary units)."""
    match = _SIZE_RE.match(text)
    if not match:
        raise ValueError(text)
    number, unit, _ = match.groups()
    value = int(float(number) * _SIZE_UNITS[unit.lower()])
    if value <= 0:
        raise ValueError(text)
    return value


def format_size(value: int) -> str:
    for unit, factor in (("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if value % factor == 0:
            return f"{value // factor}{unit}"
    return str(value)


@dataclasses.dataclass(frozen=True)
class Field:
    """How one setting is named outside and checked on the way in."""

    name: str
    env: str
    parse: Callable[[str], Any]
    expect: str
    example: str


def _bounded(parse: Callable[[str], T], low: T, high: T) -> Callable[[str], T]:
    """``parse``, refusing values outside ``low..high`` (inclusive)."""

    def parse_in_range(text: str) -> T:
        value = parse(text.strip())
        if not low <= value <= high:
            raise ValueError(text)
        return value

    return parse_in_range


def _int_in(low: int, high: int) -> Callable[[str], int]:
    return _bounded(int, low, high)


def _float_in(low: float, high: float) -> Callable[[str], float]:
    return _bounded(float, low, high)


def _size_in(low: int, high: int) -> Callable[[str], int]:
    return _bounded(parse_size, low, high)


def _runtime(text: str) -> RuntimeChoice:
    value = text.strip().lower()
    value = _RUNTIME_ALIASES.get(value, value)
    if value not in RUNTIME_CHOICES:
        raise ValueError(text)
    return value


def _log_level(text: str) -> str:
    value = text.strip().upper()
    if value not in LOG_LEVELS:
        raise ValueError(text)
    return value


def _output_mode(text: str) -> OutputMode:
    value = text.strip().lower()
    if value not in OUTPUT_MODES:
        raise ValueError(text)
    return value


def _words(text: str) -> tuple[str, ...]:
    """A comma-separated list; empty items are dropped."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _tokens(text: str) -> tuple[str, ...]:
    tokens = _words(text)
    if any(len(token) < 16 for token in tokens):
        raise ValueError("a bearer token shorter than 16 characters is too easy to guess")
    return tokens


def _user(text: str) -> str:
    if not re.fullmatch(r"\d+(:\d+)?", text.strip()):
        raise ValueError(text)
    return text.strip()


def _nonempty(text: str) -> str:
    if not text.strip():
        raise ValueError(text)
    return text.strip()


def _optional_path(text: str) -> Path | None:
    return Path(text).expanduser() if text.strip() else None


def _args(text: str) -> tuple[str, ...]:
    return tuple(shlex.split(text))


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(text)


def _paths(text: str) -> tuple[Path, ...]:
    """Config file paths separated by the OS path separator (':' here), like PATH."""
    return tuple(Path(item).expanduser() for item in text.split(os.pathsep) if item.strip())


def _optional_float(text: str) -> float | None:
    return _float_in(0.01, 1024)(text) if text.strip() else None


AuditLog = Path | Literal["off"] | None  # None: the default place under the state directory


def _audit_log(text: str) -> AuditLog:
    value = text.strip()
    if value.lower() == "off":
        return "off"
    return Path(value).expanduser() if value else None


FIELDS: tuple[Field, ...] = (
    Field("runtime", "MCP_BRIDGE_RUNTIME", _runtime, "one of auto, bubblewrap, podman, docker", "auto"),
    Field("image", "MCP_BRIDGE_IMAGE", _nonempty, "a container image name", DEFAULT_IMAGE),
    Field("timeout", "MCP_BRIDGE_TIMEOUT", _int_in(1, 86400), "whole seconds from 1 to 86400", "30"),
    Field("max_timeout", "MCP_BRIDGE_MAX_TIMEOUT", _int_in(1, 86400), "whole seconds from 1 to 86400", "120"),
    Field("memory", "MCP_BRIDGE_MEMORY", parse_size, "a size such as 512m or 1g", "512m"),
    Field("pids", "MCP_BRIDGE_PIDS", _int_in(8, 1_000_000), "a whole number of processes, at least 8", "128"),
    Field("cpus", "MCP_BRIDGE_CPUS", _optional_float, "a number of CPUs such as 1 or 0.5 (empty: no limit)", "0.5"),
    Field("container_user", "MCP_BRIDGE_CONTAINER_USER", _user, "UID or UID:GID", "65534:65534"),
    Field(
        "state_dir",
        "MCP_BRIDGE_STATE_DIR",
        lambda t: Path(_nonempty(t)).expanduser(),
        "a directory",
        "/var/lib/mcp-codemode",
    ),
    Field("log_level", "MCP_BRIDGE_LOG_LEVEL", _log_level, "one of " + ", ".join(LOG_LEVELS), "INFO"),
    Field("oci_runtime", "MCP_BRIDGE_OCI_RUNTIME", str.strip, "an OCI runtime such as runc or runsc", "runc"),
    Field("container_args", "MCP_BRIDGE_CONTAINER_ARGS", _args, "extra arguments, shell-quoted", "--cpus 1"),
    Field("sandbox_python", "MCP_BRIDGE_SANDBOX_PYTHON", _optional_path, "a python3 path", "/usr/bin/python3"),
    Field("sandbox_uid", "MCP_BRIDGE_SANDBOX_UID", _int_in(1, 2**31 - 2), "a non-root uid", "65534"),
    Field("tmp_size", "MCP_BRIDGE_TMP_SIZE", parse_size, "a size such as 64m", "64m"),
    Field("workspace_size", "MCP_BRIDGE_WORKSPACE_SIZE", parse_size, "a size such as 128m", "128m"),
    Field("capture_limit", "MCP_BRIDGE_CAPTURE_LIMIT", _size_in(1 << 10, 16 << 20), "a size from 1k to 16m", "1m"),
    Field("max_sessions", "MCP_BRIDGE_MAX_SESSIONS", _int_in(1, 10_000), "a whole number, at least 1", "16"),
    Field(
        "warm_pool",
        "MCP_BRIDGE_WARM_POOL",
        _int_in(0, 64),
        "a whole number of pre-started sandboxes from 0 to 64 (0: none)",
        "2",
    ),
    Field("session_idle_timeout", "MCP_BRIDGE_SESSION_IDLE_TIMEOUT", _float_in(1, 10**7), "seconds", "900"),
    Field("interrupt_grace", "MCP_BRIDGE_INTERRUPT_GRACE", _float_in(0.05, 600), "seconds", "2"),
    Field("startup_timeout", "MCP_BRIDGE_STARTUP_TIMEOUT", _float_in(1, 3600), "seconds", "60"),
    Field("output_mode", "MCP_BRIDGE_OUTPUT_MODE", _output_mode, "one of " + ", ".join(OUTPUT_MODES), "compact"),
    Field("output_limit", "MCP_BRIDGE_OUTPUT_LIMIT", _int_in(500, 10_000_000), "characters, at least 500", "20000"),
    Field("image_limit", "MCP_BRIDGE_IMAGE_LIMIT", _size_in(1 << 10, 16 << 20), "a size from 1k to 16m", "2m"),
    Field("max_images", "MCP_BRIDGE_MAX_IMAGES", _int_in(0, 64), "a whole number from 0 to 64", "8"),
    Field("progress_interval", "MCP_BRIDGE_PROGRESS_INTERVAL", _float_in(0.05, 5), "seconds, at most 5", "2"),
    Field("http_host", "MCP_BRIDGE_HTTP_HOST", _nonempty, "a host name or address to bind", "127.0.0.1"),
    Field("http_port", "MCP_BRIDGE_HTTP_PORT", _int_in(0, 65535), "a TCP port (0: any free port)", "8765"),
    Field(
        "http_tokens",
        "MCP_BRIDGE_HTTP_TOKEN",
        _tokens,
        "one or more bearer tokens of at least 16 characters, comma-separated",
        "$(openssl rand -hex 24)",
    ),
    Field(
        "allowed_origins",
        "MCP_BRIDGE_ALLOWED_ORIGINS",
        _words,
        "comma-separated origins such as https://app.example.com",
        "https://app.example.com",
    ),
    Field("log_file", "MCP_BRIDGE_LOG_FILE", _optional_path, "a file path (empty: standard error)", "/tmp/bridge.log"),
    Field(
        "servers_config",
        "MCP_SERVERS_CONFIG",
        _paths,
        "MCP server config files separated by ':'",
        "~/my-servers.json:/etc/mcp/team.json",
    ),
    Field("discover_servers", "MCP_BRIDGE_DISCOVER", _bool, "true or false", "false"),
    Field("allow_self_server", "MCP_BRIDGE_ALLOW_SELF_SERVER", _bool, "true or false (or 1 / 0)", "1"),
    Field("tool_timeout", "MCP_BRIDGE_TOOL_TIMEOUT", _float_in(0.1, 86400), "seconds per proxied tool call", "60"),
    Field("connect_timeout", "MCP_BRIDGE_CONNECT_TIMEOUT", _float_in(0.1, 3600), "seconds to start a server", "30"),
    Field(
        "catalog_ttl",
        "MCP_BRIDGE_CATALOG_TTL",
        _float_in(0, 10**8),
        "seconds a cached tool listing stays fresh (0: refresh on every use)",
        "86400",
    ),
    Field(
        "search_wait",
        "MCP_BRIDGE_SEARCH_WAIT",
        _float_in(0, 600),
        "seconds a search waits for servers whose tools are not known yet, at most 600 (0: do not wait)",
        "3",
    ),
    Field(
        "audit_log",
        "MCP_BRIDGE_AUDIT_LOG",
        _audit_log,
        "a file path, off, or empty for <state_dir>/audit/audit.jsonl",
        "~/mcp-audit.jsonl",
    ),
    Field("audit_max_bytes", "MCP_BRIDGE_AUDIT_MAX_BYTES", _size_in(4 << 10, 1 << 40), "a size from 4k", "10m"),
    Field("audit_backups", "MCP_BRIDGE_AUDIT_BACKUPS", _int_in(0, 100), "a whole number from 0 to 100", "5"),
)
SECRET_FIELDS = frozenset({"http_tokens"})
_BY_NAME = {f.name: f for f in FIELDS}
# Other names of a setting, from the reference bridge, whose configurations should keep working here. Its
# "shutdown delay" of an idle sandbox runtime is what closing an idle session does here.
ENV_ALIASES: dict[str, str] = {"MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT": "session_idle_timeout"}


def default_state_dir(env: Mapping[str, str], is_root: bool) -> Path:
    if is_root:
        return Path("/var/lib/mcp-codemode")
    base = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".local" / "state")
    return Path(base) / "mcp-codemode"


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything the bridge can be told. Field docs live in docs/configuration.md."""

    runtime: RuntimeChoice = "auto"
    image: str = DEFAULT_IMAGE
    timeout: int = 30
    max_timeout: int = 120
    memory: int = 512 << 20
    pids: int = 128
    cpus: float | None = None
    container_user: str = "65534:65534"
    state_dir: Path = Path("/var/lib/mcp-codemode")
    log_level: str = "INFO"
    oci_runtime: str = ""
    container_args: tuple[str, ...] = ()
    sandbox_python: Path | None = None
    sandbox_uid: int = 65534
    tmp_size: int = 64 << 20
    workspace_size: int = 128 << 20
    capture_limit: int = 1 << 20
    max_sessions: int = 16
    warm_pool: int = 2
    session_idle_timeout: float = 900.0
    interrupt_grace: float = 2.0
    startup_timeout: float = 60.0
    output_mode: OutputMode = "compact"
    output_limit: int = 20_000
    image_limit: int = 2 << 20
    max_images: int = 8
    progress_interval: float = 2.0
    http_host: str = "127.0.0.1"
    http_port: int = 8765
    http_tokens: tuple[str, ...] = dataclasses.field(default=(), repr=False)
    allowed_origins: tuple[str, ...] = ()
    log_file: Path | None = None
    servers_config: tuple[Path, ...] = ()
    discover_servers: bool = True
    allow_self_server: bool = False
    tool_timeout: float = 60.0
    connect_timeout: float = 30.0
    catalog_ttl: float = 86400.0
    search_wait: float = 3.0
    audit_log: AuditLog = None
    audit_max_bytes: int = 10 << 20
    audit_backups: int = 5
    policy: Policy = dataclasses.field(default_factory=Policy)
    # Where the values came from, for `doctor` and for error messages.
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.timeout > self.max_timeout:
            raise SettingsError(
                f"the default timeout ({self.timeout} s, MCP_BRIDGE_TIMEOUT) is above the ceiling "
                f"({self.max_timeout} s, MCP_BRIDGE_MAX_TIMEOUT); lower the first or raise the second"
            )

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    @property
    def audit_path(self) -> Path | None:
        """Where the audit log goes; None when it is off."""
        if self.audit_log == "off":
            return None
        return self.audit_log if self.audit_log is not None else self.state_dir / "audit" / "audit.jsonl"

    def clamp_timeout(self, requested: float | None) -> float:
        """The timeout a call really gets: the default when absent, never above the ceiling."""
        if requested is None:
            return float(self.timeout)
        return float(min(max(requested, 0.001), self.max_timeout))

    @classmethod
    def load(
        cls,
        env: Mapping[str, str] | None = None,
        settings_file: Path | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> Settings:
        """Build settings from defaults < settings file < environment < overrides (already typed)."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {"state_dir": default_state_dir(env, os.geteuid() == 0)}
        sources: dict[str, str] = {}
        file_path = settings_file or (Path(env[SETTINGS_FILE_ENV]) if env.get(SETTINGS_FILE_ENV) else None)
        if file_path is not None:
            flat, policy = _read_settings_file(file_path)
            for name, raw in flat.items():
                values[name] = _parse(_BY_NAME[name], raw, f"{name} in {file_path}")
                sources[name] = str(file_path)
            if policy is not None:
                values["policy"] = _policy(policy, file_path)
                sources["policy"] = str(file_path)
        for field in FIELDS:
            if field.env in env:
                values[field.name] = _parse(field, env[field.env], field.env)
                sources[field.name] = field.env
        for alias, name in ENV_ALIASES.items():
            if alias in env:
                _apply_alias(alias, _BY_NAME[name], env, values, sources)
        for name, value in (overrides or {}).items():
            if value is not None:
                values[name] = value
                sources[name] = "command line"
        return cls(**values, sources=sources)


def _apply_alias(alias: str, field: Field, env: Mapping[str, str], values: dict[str, Any],
                 sources: dict[str, str]) -> None:  # fmt: skip
    """A setting given by its other name; given by both names, the two must agree, or neither is taken."""
    value = _parse(dataclasses.replace(field, env=alias), env[alias], alias)
    if field.env not in env:
        values[field.name] = value
        sources[field.name] = alias
    elif values[field.name] != value:
        raise SettingsError(
            f"{alias}={env[alias]!r} and {field.env}={env[field.env]!r} both set {field.name} and disagree: "
            f"remove {alias} (the reference bridge's name for it), or give both the same value"
        )


def parse_field(name: str, raw: str, where: str) -> Any:
    """Parse one setting given outside the usual places (a command-line flag), with the usual error."""
    return _parse(_BY_NAME[name], raw, where)


def _parse(field: Field, raw: object, where: str) -> Any:
    text = raw if isinstance(raw, str) else ("" if raw is None else str(raw))
    if isinstance(raw, bool):
        text = "true" if raw else "false"
    if isinstance(raw, list) and field.name == "servers_config":
        text = os.pathsep.join(str(item) for item in raw)
    if isinstance(raw, list) and field.name in ("container_args", "http_tokens", "allowed_origins"):
        if field.name == "container_args":
            return tuple(str(item) for item in raw)
        text = ",".join(str(item) for item in raw)
    try:
        return field.parse(text)
    except (ValueError, TypeError):
        if field.name in SECRET_FIELDS:
            text = "<hidden>"
        raise SettingsError(
            f"{where}={text!r} is not valid: expected {field.expect} (for example {field.env}={field.example})"
        ) from None


def _read_settings_file(path: Path) -> tuple[dict[str, object], dict[str, object] | None]:
    """The flat settings of the file, and its ``[policy]`` table (None when it has none)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SettingsError(
            f"settings file {path} does not exist; create it, or point --settings / {SETTINGS_FILE_ENV} elsewhere"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"settings file {path} cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"settings file {path} is not valid TOML: {exc}") from None
    section = data.get("mcp-codemode", data)
    if not isinstance(section, dict):
        raise SettingsError(f"settings file {path}: [mcp-codemode] must be a table")
    if section is not data and "policy" in data and "policy" not in section:
        # The rest of such a file is ignored; a policy silently ignored would be worse than none.
        raise SettingsError(
            f"settings file {path} has an [mcp-codemode] table, so its top-level [policy] table would be "
            "ignored: rename it [mcp-codemode.policy]"
        )
    section = dict(section)
    policy = section.pop("policy", None)
    unknown = sorted(set(section) - set(_BY_NAME))
    if unknown:
        raise SettingsError(
            f"settings file {path} has unknown key(s) {', '.join(unknown)}; known keys: "
            f"{', '.join(sorted([*_BY_NAME, 'policy']))}"
        )
    if policy is not None and not isinstance(policy, dict):
        raise SettingsError(f"settings file {path}: policy must be a table, written [policy] (docs/configuration.md)")
    return section, policy


_POLICY_EXAMPLES = {
    "allow_servers": 'allow_servers = ["github", "git*"]',
    "deny_servers": 'deny_servers = ["shell"]',
    "allow_tools": 'allow_tools = ["git/git_status", "*/read_*"]',
    "deny_tools": 'deny_tools = ["git/git_commit", "*/delete_*"]',
    "read_only": "read_only = true",
    "max_calls_per_run": "max_calls_per_run = 1000   # 0: no limit",
    "max_argument_bytes": 'max_argument_bytes = "1m"   # or a number of bytes',
    "max_argument_depth": f"max_argument_depth = 32   # 1 to {MAX_ARGUMENT_DEPTH_CEILING}",
    "max_calls_per_second": "max_calls_per_second = 10   # 0: no limit",
}


def _policy(table: Mapping[str, object], path: Path) -> Policy:
    """The ``[policy]`` table as a ``Policy``; every wrong key or value is a SettingsError with an example."""
    unknown = sorted(set(table) - set(_POLICY_EXAMPLES))
    if unknown:
        raise SettingsError(
            f"settings file {path}: [policy] has unknown key(s) {', '.join(unknown)}; known keys: "
            f"{', '.join(sorted(_POLICY_EXAMPLES))}"
        )
    values: dict[str, Any] = {"source": str(path)}
    for key, raw in table.items():
        try:
            values[key] = _policy_value(key, raw)
        except (ValueError, TypeError) as exc:
            detail = f" ({exc})" if str(exc) else ""
            raise SettingsError(
                f"settings file {path}: policy.{key} = {_toml_text(raw)} is not valid{detail}; for example "
                f"{_POLICY_EXAMPLES[key]}"
            ) from None
    return Policy(**values)


def _policy_value(key: str, raw: object) -> Any:
    if key in ("allow_servers", "deny_servers", "allow_tools", "deny_tools"):
        if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
            raise TypeError("expected a list of strings")
        return tuple(check_pattern(item, tools=key.endswith("_tools")) for item in raw)
    if key == "read_only":
        if not isinstance(raw, bool):
            raise TypeError("expected true or false")
        return raw
    if key == "max_argument_bytes":
        if isinstance(raw, bool) or not isinstance(raw, (int, str)):
            raise TypeError('expected a size such as "1m" or a whole number of bytes')
        size = parse_size(raw) if isinstance(raw, str) else raw
        if size < 2:
            raise ValueError("at least 2 bytes, the size of {}")
        return size
    if key == "max_calls_per_second":
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 <= raw <= 1_000_000:
            raise ValueError("expected a number of calls per second from 0 (no limit) to 1,000,000")
        return float(raw)
    low, high = (1, MAX_ARGUMENT_DEPTH_CEILING) if key == "max_argument_depth" else (0, 10**9)
    if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
        raise ValueError(f"expected a whole number from {low} to {high:,}")
    return raw


def _toml_text(raw: object) -> str:
    text = json.dumps(raw, ensure_ascii=False) if isinstance(raw, (str, list, int, float)) else repr(raw)
    if isinstance(raw, bool):
        text = "true" if raw else "false"
    return text if len(text) <= 80 else text[:77] + "..."
