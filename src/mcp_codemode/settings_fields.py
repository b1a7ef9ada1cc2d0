"""What each setting is called outside and what it accepts: the catalogue of fields and their parsers.

Why a module apart from ``settings.py``: the ``Settings`` dataclass says what the bridge can be told, this says
how each value is spelled in the environment, a settings file or a flag, and checks it on the way in (with the
variable, what was expected and an example in every error). The table grows one line per setting; keeping it
here leaves ``settings.py`` short enough to read as the list of knobs and the order sources win in.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from .adding_settings import ADDING_FIELDS
from .console_settings import CONSOLE_FIELDS
from .errors import SettingsError
from .hibernation_settings import HIBERNATION_FIELDS
from .mounts import EXAMPLE as MOUNTS_EXAMPLE
from .mounts import MountError, parse_mounts, parse_shared
from .observability_settings import LOG_FORMATS, LOG_LEVELS, log_format, log_level
from .registry_settings import REGISTRY_FIELDS
from .setting_parsers import float_in as _float_in
from .setting_parsers import int_in as _int_in
from .setting_parsers import size_in as _size_in
from .setting_parsers import switch as _bool
from .sizes import parse_size

T = TypeVar("T", int, float)
RuntimeChoice = Literal["auto", "bubblewrap", "podman", "docker", "kubernetes"]
SharedState = Literal["files", "kubernetes"]
SHARED_STATES: tuple[SharedState, ...] = ("files", "kubernetes")
OutputMode = Literal["compact", "toon", "json"]
OUTPUT_MODES: tuple[OutputMode, ...] = ("compact", "toon", "json")
RUNTIME_CHOICES: tuple[RuntimeChoice, ...] = ("auto", "bubblewrap", "podman", "docker", "kubernetes")
_RUNTIME_ALIASES: dict[str, RuntimeChoice] = {"bwrap": "bubblewrap"}
DEFAULT_IMAGE = "mcp-codemode-sandbox:bookworm"


@dataclasses.dataclass(frozen=True)
class Field:
    """How one setting is named outside and checked on the way in."""

    name: str
    env: str
    parse: Callable[[str], Any]
    expect: str
    example: str


def _runtime(text: str) -> RuntimeChoice:
    value = text.strip().lower()
    value = _RUNTIME_ALIASES.get(value, value)
    if value not in RUNTIME_CHOICES:
        raise ValueError(text)
    return value


def _shared_state(text: str) -> SharedState:
    value = text.strip().lower()
    if value not in SHARED_STATES:
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


def _peer_token(text: str) -> str:
    if text.strip() and len(text.strip()) < 32:
        raise ValueError("a token replicas share must be at least 32 characters")
    return text.strip()


def _peer_url(text: str) -> str:
    """Plain http only: the peer channel (face/peer_channel.py) speaks HTTP/1.1 without TLS, so an https:// address
    passed here once and then failed every forwarded call as "ReplicaLost". Requests are signed, never carrying
    the token; for encryption between pods, a service mesh's mTLS goes under the plain address."""
    value = text.strip().rstrip("/")
    if value and not re.fullmatch(r"http://[^/\s]+", value):
        raise ValueError(value)
    return value


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


def _paths(text: str) -> tuple[Path, ...]:
    """Config file paths separated by the OS path separator (':' here), like PATH."""
    return tuple(Path(item).expanduser() for item in text.split(os.pathsep) if item.strip())


def _roots(text: str) -> tuple[Path, ...]:
    """Directories given to upstream servers as roots, separated like PATH; each must be absolute (a root is a
    file:// URI, which a relative path cannot be)."""
    paths = _paths(text)
    relative = [str(path) for path in paths if not path.is_absolute()]
    if relative:
        raise ValueError(f"not absolute: {', '.join(relative)}")
    return paths


def _refresh(text: str) -> float:
    """0 (off), or an interval long enough not to turn the bridge into a busy loop of stat calls."""
    value = float(text.strip() or "0")
    if value != 0 and not 0.1 <= value <= 86400:
        raise ValueError(text)
    return value


def _optional_float(text: str) -> float | None:
    return _float_in(0.01, 1024)(text) if text.strip() else None


def _dns_label(text: str) -> str:
    """A Kubernetes object or namespace name (DNS-1123 label), refused here rather than by the API server."""
    value = text.strip()
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", value):
        raise ValueError(text)
    return value


def _runtime_class(text: str) -> str:
    """A RuntimeClass name (DNS-1123 subdomain), or ``none`` for sandbox pods without one (overlays/no-gvisor)."""
    value = text.strip()
    if len(value) > 253 or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", value):
        raise ValueError(text)
    return value


def _optional_port(text: str) -> int | None:
    return _int_in(0, 65535)(text) if text.strip() else None


_TOKENS = ("one or more bearer tokens of at least 16 characters, comma-separated", "$(openssl rand -hex 24)")
AuditLog = Path | Literal["off"] | None  # None: the default place under the state directory


def _audit_log(text: str) -> AuditLog:
    value = text.strip()
    if value.lower() == "off":
        return "off"
    return Path(value).expanduser() if value else None


FIELDS: tuple[Field, ...] = (
    Field("runtime", "MCP_BRIDGE_RUNTIME", _runtime, "one of auto, bubblewrap, podman, docker, kubernetes", "auto"),
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
    Field("log_level", "MCP_BRIDGE_LOG_LEVEL", log_level, "one of " + ", ".join(LOG_LEVELS), "INFO"),
    Field("log_format", "MCP_BRIDGE_LOG_FORMAT", log_format, "one of " + ", ".join(LOG_FORMATS), "json"),
    Field("oci_runtime", "MCP_BRIDGE_OCI_RUNTIME", str.strip, "an OCI runtime such as runc or runsc", "runc"),
    Field("container_args", "MCP_BRIDGE_CONTAINER_ARGS", _args, "extra arguments, shell-quoted", "--cpus 1"),
    Field("sandbox_python", "MCP_BRIDGE_SANDBOX_PYTHON", _optional_path, "a python3 path", "/usr/bin/python3"),
    Field("sandbox_uid", "MCP_BRIDGE_SANDBOX_UID", _int_in(1, 2**31 - 2), "a non-root uid", "65534"),
    Field("tmp_size", "MCP_BRIDGE_TMP_SIZE", parse_size, "a size such as 64m", "64m"),
    Field("workspace_size", "MCP_BRIDGE_WORKSPACE_SIZE", parse_size, "a size such as 128m", "128m"),
    Field("sandbox_nice", "MCP_BRIDGE_SANDBOX_NICE", _int_in(0, 19), "a nice value from 0 to 19", "10"),
    Field("sandbox_batch", "MCP_BRIDGE_SANDBOX_BATCH", _bool, "on or off (on: SCHED_BATCH, no preempting)", "on"),
    Field("capture_limit", "MCP_BRIDGE_CAPTURE_LIMIT", _size_in(1 << 10, 16 << 20), "a size from 1k to 16m", "1m"),
    Field("file_read_max", "MCP_BRIDGE_FILE_READ_MAX", _size_in(1 << 10, 1 << 30), "a size from 1k to 1g", "32m"),
    Field("file_read_budget", "MCP_BRIDGE_FILE_READ_BUDGET", _size_in(1 << 10, 64 << 30), "a size such as 64m", "64m"),
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
    Field("http_tokens", "MCP_BRIDGE_HTTP_TOKEN", _tokens, *_TOKENS),
    Field(
        "allowed_origins",
        "MCP_BRIDGE_ALLOWED_ORIGINS",
        _words,
        "comma-separated origins such as https://app.example.com",
        "https://app.example.com",
    ),
    Field("metrics", "MCP_BRIDGE_METRICS", _bool, "true or false (false: no metrics kept or served)", "false"),
    Field("metrics_port", "MCP_BRIDGE_METRICS_PORT", _optional_port, "a TCP port for /metrics (empty: none)", "9464"),
    Field("metrics_host", "MCP_BRIDGE_METRICS_HOST", _nonempty, "the address the metrics port binds", "127.0.0.1"),
    Field("metrics_tokens", "MCP_BRIDGE_METRICS_TOKEN", _tokens, *_TOKENS),
    Field("tracing", "MCP_BRIDGE_TRACING", _bool, "on or off (on: spans sent to OTEL_EXPORTER_OTLP_ENDPOINT)", "on"),
    Field("trace_digests", "MCP_BRIDGE_TRACE_DIGESTS", _bool, "on or off (on: spans hold sizes and sha256)", "on"),
    Field("log_file", "MCP_BRIDGE_LOG_FILE", _optional_path, "a file path (empty: standard error)", "/tmp/bridge.log"),
    Field(
        "roots",
        "MCP_BRIDGE_ROOTS",
        _roots,
        "absolute directories separated by ':' (given to upstream servers that ask for roots)",
        "/srv/project:/home/me/notes",
    ),
    Field(
        "servers_config",
        "MCP_SERVERS_CONFIG",
        _paths,
        "MCP server config files separated by ':'",
        "~/my-servers.json:/etc/mcp/team.json",
    ),
    Field(
        "config_refresh",
        "MCP_BRIDGE_CONFIG_REFRESH",
        _refresh,
        "seconds between two looks at the server config files and secrets, 0.1 to 86400 (0: read them once)",
        "10",
    ),
    Field(
        "secrets_dir",
        "MCP_BRIDGE_SECRETS_DIR",
        _optional_path,
        "a directory of secret files that ${secret:NAME} reads (a mounted Secret; empty: none)",
        "/etc/mcp-codemode/secrets",
    ),
    Field(
        "mounts",
        "MCP_BRIDGE_MOUNTS",
        parse_mounts,
        "HOST_DIR:SANDBOX_PATH[:ro|:rw] entries separated by ',' (empty: none)",
        MOUNTS_EXAMPLE,
    ),
    Field(
        "mounts_shared",
        "MCP_BRIDGE_MOUNTS_SHARED",
        parse_shared,
        "absolute host directories of :rw mounts, separated by ',', that upstream servers may also work in",
        "/home/me/repo",
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
    Field("kube_namespace", "MCP_BRIDGE_KUBE_NAMESPACE", _dns_label, "a Kubernetes namespace name", "mcp-codemode"),
    Field(
        "kube_warm_pool",
        "MCP_BRIDGE_KUBE_WARM_POOL",
        _dns_label,
        "the name of a SandboxWarmPool in that namespace",
        "mcp-codemode-sandbox",
    ),
    Field(
        "kube_context", "MCP_BRIDGE_KUBE_CONTEXT", str.strip, "a kubeconfig context (empty: the current one)", "prod"
    ),
    Field(
        "kube_config",
        "MCP_BRIDGE_KUBECONFIG",
        _optional_path,
        "a kubeconfig file (empty: KUBECONFIG, ~/.kube/config, then the pod's service account)",
        "~/.kube/config",
    ),
    Field(
        "kube_claim_ttl",
        "MCP_BRIDGE_KUBE_CLAIM_TTL",
        _float_in(60, 10**7),
        "seconds a claim outlives its last use if the bridge dies, at least 60",
        "1200",
    ),
    Field(
        "kube_runtime_class",
        "MCP_BRIDGE_KUBE_RUNTIME_CLASS",
        _runtime_class,
        "the RuntimeClass every sandbox pod must run under, or none to accept pods without one (the node's runc: "
        "overlays/no-gvisor sets it, knowingly)",
        "gvisor",
    ),
    Field("replica", "MCP_BRIDGE_REPLICA", _nonempty, "this bridge replica's name", "mcp-codemode-0"),
    Field(
        "peer_token",
        "MCP_BRIDGE_PEER_TOKEN",
        _peer_token,
        "a secret of at least 32 characters that every replica shares (empty: sessions are not shared)",
        "$(openssl rand -hex 32)",
    ),
    Field(
        "peer_port",
        "MCP_BRIDGE_PEER_PORT",
        _int_in(1, 65535),
        "the TCP port replicas that share sessions forward calls to, apart from the MCP port",
        "8766",
    ),
    Field(
        "peer_url",
        "MCP_BRIDGE_PEER_URL",
        _peer_url,
        "the http://host:port other replicas reach this one's peer port at, without a path (no https: the peer "
        "channel has no TLS of its own; requests are signed with the peer token, and a mesh's mTLS may go under it)",
        "http://10.0.3.7:8766",
    ),
    Field(
        "session_lease",
        "MCP_BRIDGE_SESSION_LEASE",
        _float_in(5, 3600),
        "seconds a replica's claim on a session lasts without renewal, from 5 to 3600",
        "30",
    ),
    Field(
        "shared_state",
        "MCP_BRIDGE_SHARED_STATE",
        _shared_state,
        "files (under the state directory, this machine's) or kubernetes (a Secret and ConfigMaps every replica "
        "reads and writes through the API)",
        "kubernetes",
    ),
    *(Field(*line) for line in HIBERNATION_FIELDS),
    *(Field(*row) for row in CONSOLE_FIELDS),
    *(Field(*row) for row in REGISTRY_FIELDS),
    *(Field(*row) for row in ADDING_FIELDS),
)
SECRET_FIELDS = frozenset({"http_tokens", "peer_token", "metrics_tokens"})
FIELD_BY_NAME = {f.name: f for f in FIELDS}


def parse_field(name: str, raw: str, where: str) -> Any:
    """Parse one setting given outside the usual places (a command-line flag), with the usual error."""
    return parse_value(FIELD_BY_NAME[name], raw, where)


def parse_value(field: Field, raw: object, where: str) -> Any:
    text = raw if isinstance(raw, str) else ("" if raw is None else str(raw))
    if isinstance(raw, bool):
        text = "true" if raw else "false"
    if isinstance(raw, list) and field.name in ("servers_config", "roots", "registry_catalog"):
        text = os.pathsep.join(str(item) for item in raw)
    listed = ("container_args", "http_tokens", "metrics_tokens", "allowed_origins", "mounts", "mounts_shared",
              "console_operators", "registries")  # fmt: skip
    if isinstance(raw, list) and field.name in listed:
        if field.name == "container_args":
            return tuple(str(item) for item in raw)
        text = ",".join(str(item) for item in raw)
    try:
        return field.parse(text)
    except MountError as exc:  # one entry of several is wrong: say which, and why
        raise SettingsError(f"{where}={text!r} is not valid: {exc} (for example {field.env}={field.example})") from None
    except (ValueError, TypeError):
        if field.name in SECRET_FIELDS:
            text = "<hidden>"
        raise SettingsError(
            f"{where}={text!r} is not valid: expected {field.expect} (for example {field.env}={field.example})"
        ) from None
