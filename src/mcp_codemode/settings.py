"""The one settings object.

Settings are read here and nowhere else: defaults, then an optional TOML settings file, then environment
variables, then command-line overrides. Every other module receives a ``Settings`` and never looks at
``os.environ`` itself, so tests can build any configuration without touching the process.

Environment variable names follow the reference bridge (``MCP_BRIDGE_*``) where they mean the same thing,
so existing client configurations keep working.

The parts live beside it: ``settings_fields.py`` (each setting's names and parser), ``settings_file.py`` (the
TOML file and its policy table) and ``policy/rules.py`` (the policy value); callers import each name from the
module that defines it.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .adding_settings import ASK, AddPolicy
from .errors import SettingsError
from .hibernation_settings import DEFAULT_MAX_AGE, DEFAULT_MAX_BYTES, DEFAULT_MAX_COUNT, store_dir, store_dir_problem
from .mounts import Mount
from .mounts import state_dir_problem as mounts_state_dir_problem
from .observability_settings import LogFormat, OtelProblem, otel_export, otel_variables
from .policy.rules import Policy
from .registry_settings import DEFAULT_REGISTRY_TIMEOUT, DEFAULT_REGISTRY_TTL, OFFICIAL_REGISTRY
from .session_capacity import COMPUTED, backend_kind, session_cap
from .settings_fields import (
    DEFAULT_IMAGE,
    FIELD_BY_NAME,
    FIELDS,
    AuditLog,
    Field,
    OutputMode,
    RuntimeChoice,
    SharedState,
    parse_value,
)
from .settings_file import SETTINGS_FILE_ENV, policy_from_table, read_settings_file
from .sizes import format_size

# Other names of a setting, from the reference bridge, whose configurations should keep working here. Its
# "shutdown delay" of an idle sandbox runtime is what closing an idle session does here.
ENV_ALIASES: dict[str, str] = {"MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT": "session_idle_timeout"}


def default_state_dir(env: Mapping[str, str], is_root: bool) -> Path:
    if is_root:
        return Path("/var/lib/mcp-codemode")
    base = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".local" / "state")
    return Path(base) / "mcp-codemode"


# Where the kubelet mounts a pod's service-account token (and kubernetes_asyncio's in-cluster loader reads it).
SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


def pod_evidence(env: Mapping[str, str], token: Path = SERVICE_ACCOUNT_TOKEN) -> str:
    """Why this process looks like it runs in a Kubernetes pod, or "": a mounted service-account token, or the
    variable the kubelet sets in every container. Either is enough: a pod whose token is not mounted still holds
    whatever else is mounted in it (the secrets of every upstream server, for one)."""
    try:
        if token.exists():
            return f"a service-account token is mounted at {token}"
    except OSError:  # a directory we may not look into: the variable below still tells
        pass
    if env.get("KUBERNETES_SERVICE_HOST"):
        return "KUBERNETES_SERVICE_HOST is set (the kubelet sets it in every container of a pod)"
    return ""


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
    sandbox_nice: int = 10  # the worker's CPU priority (guest/worker_priority.py)
    sandbox_batch: bool = True
    file_read_max: int = 32 << 20  # one session file taken out (runs/session_files.py)
    file_read_budget: int = 64 << 20  # session-file bytes all reads hold at once (runs/read_budget.py)
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
    # Prometheus metrics (telemetry/): kept unless off; served at /metrics on the HTTP face, and on a port of their
    # own when metrics_port is set (face/metrics_endpoint.py says who may read them).
    metrics: bool = True
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    metrics_tokens: tuple[str, ...] = dataclasses.field(default=(), repr=False)
    log_file: Path | None = None
    log_format: LogFormat = "text"  # json: one event per line, with the call, trace and span ids (telemetry/logs.py)
    # OpenTelemetry traces (telemetry/tracing.py): off unless on, then sent where the standard OTEL_* variables say
    # (``otel``, as found in the environment; observability_settings.py reads them). ``trace_digests``: spans hold
    # the size and sha256 of the code, arguments and results (never their text, which no span ever holds).
    tracing: bool = False
    trace_digests: bool = False
    otel: Mapping[str, str] = dataclasses.field(default_factory=dict, repr=False, compare=False)
    servers_config: tuple[Path, ...] = ()
    # Seconds between two looks at the config files and secrets (runs/config_refresh.py); 0: read once at start.
    config_refresh: float = 0.0
    secrets_dir: Path | None = None  # what ${secret:NAME} reads in our own config files (upstream/config/secrets.py)
    roots: tuple[Path, ...] = ()  # given to upstream servers that ask roots/list (else a stdio client's own)
    # Host directories seen inside every sandbox (mounts.py); off unless given.
    mounts: tuple[Mount, ...] = ()
    # Host directories of rw mounts that host-side upstream servers may work in too, accepted knowingly (mounts.py).
    mounts_shared: tuple[Path, ...] = ()
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
    # The kubernetes backend (sandbox/kube/). The claim TTL is the backstop for a bridge that dies without deleting
    # its claims: longer than session_idle_timeout, so the bridge's own idle expiry always comes first.
    kube_namespace: str = "mcp-codemode"
    kube_warm_pool: str = "mcp-codemode-sandbox"
    kube_context: str = ""
    kube_config: Path | None = None
    kube_claim_ttl: float = 1200.0
    # The RuntimeClass a claimed sandbox's pod must run under, checked on its Sandbox before the guest starts:
    # "none" accepts pods without one (the node's runc), which only overlays/no-gvisor sets.
    kube_runtime_class: str = "gvisor"
    # This replica's name, written on the claims it owns; a pod's hostname is its pod name.
    replica: str = dataclasses.field(default_factory=socket.gethostname)
    # Face replicas that share sessions (face/replicas.py): a session belongs to the replica holding its Lease, and
    # the others forward its calls there, authenticated by the shared token. Off while the token is empty.
    peer_token: str = dataclasses.field(default="", repr=False)
    peer_url: str = ""
    # Forwarded calls arrive on a port of their own, so a NetworkPolicy can open it to the face pods alone.
    peer_port: int = 8766
    session_lease: float = 30.0
    # Where sign-ins (the OAuth tokens of `login`) and saved tools are kept: files under state_dir, or, for replicas
    # that must all see them, a Secret and ConfigMaps in kube_namespace (runs/shared_state.py).
    shared_state: SharedState = "files"
    # Sessions written to disk instead of dropped when they idle out, are evicted or the bridge stops, and restored by
    # their next call (runs/hibernation.py); the store's bounds, and its place, which no sandbox may see.
    hibernate: bool = False
    hibernate_dir: Path | None = None  # None: hibernated/ under state_dir
    hibernate_max_bytes: int = DEFAULT_MAX_BYTES
    hibernate_max_age: float = DEFAULT_MAX_AGE
    hibernate_max_count: int = DEFAULT_MAX_COUNT
    # Why this process looks like it runs in a Kubernetes pod ("" when it does not): a fact read by ``load``, not a
    # setting. Stdio upstream servers would run in that pod, beside its service-account token (admission.py).
    pod: str = ""
    # The web console (console/): off unless on; over HTTP at /console, over stdio on 127.0.0.1:console_port.
    console: bool = False
    console_port: int = 0
    console_operators: tuple[str, ...] = ()  # the token names that may restart upstream servers from the console
    add_servers: AddPolicy = ASK  # runtime.add_server: ask (the default), off, or an allow list (adding_settings.py)
    approvals: str = ""  # who answers ask_tools: client, console or either; "": client, or either with the console
    # Where find_servers() looks (registry_settings.py): registries in order, local catalog files, the cache's life.
    registries: tuple[str, ...] = (OFFICIAL_REGISTRY,)
    registry_catalog: tuple[Path, ...] = ()
    registry_ttl: float = DEFAULT_REGISTRY_TTL
    registry_timeout: float = DEFAULT_REGISTRY_TIMEOUT
    # Where the values came from, for `doctor` and for error messages.
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.timeout > self.max_timeout:
            raise SettingsError(
                f"the default timeout ({self.timeout} s, MCP_BRIDGE_TIMEOUT) is above the ceiling "
                f"({self.max_timeout} s, MCP_BRIDGE_MAX_TIMEOUT); lower the first or raise the second"
            )
        if self.file_read_max > self.file_read_budget:
            raise SettingsError(
                f"MCP_BRIDGE_FILE_READ_MAX ({format_size(self.file_read_max)}) is above MCP_BRIDGE_FILE_READ_BUDGET "
                f"({format_size(self.file_read_budget)}), so the largest file could never be read: lower the first or "
                "raise the second"
            )
        if bool(self.peer_token) != bool(self.peer_url):
            given, missing = ("MCP_BRIDGE_PEER_TOKEN", "MCP_BRIDGE_PEER_URL")[:: 1 if self.peer_token else -1]
            raise SettingsError(
                f"{given} is set but {missing} is not: replicas that share sessions need both (the shared secret, "
                "and the address the others reach this replica at, such as http://$(POD_IP):8765); set both, or "
                "neither to serve sessions from this replica alone"
            )

        if self.metrics_port is not None and not self.metrics:
            raise SettingsError(
                f"MCP_BRIDGE_METRICS_PORT is {self.metrics_port} but MCP_BRIDGE_METRICS is off, so there is nothing to "
                "serve there; unset MCP_BRIDGE_METRICS_PORT, or turn MCP_BRIDGE_METRICS on"
            )
        if self.shares_sessions and self.peer_port == self.http_port:
            raise SettingsError(
                f"MCP_BRIDGE_PEER_PORT and the MCP port are both {self.http_port}: forwarded calls need a port of "
                "their own (so that only the face pods may reach it); choose another MCP_BRIDGE_PEER_PORT, such as 8766"
            )
        if self.approvals in ("console", "either") and (not self.console or self.shares_sessions):
            why = "MCP_BRIDGE_CONSOLE is off" if not self.console else "replicas that share sessions serve no console"
            raise SettingsError(
                f"MCP_BRIDGE_APPROVALS is {self.approvals}, but {why}, so no one could answer there and every "
                "ask_tools call would wait until it timed out; set MCP_BRIDGE_APPROVALS=client, or serve the console"
            )
        self._check_mounts()
        if self.hibernate:
            python = [self.sandbox_python.parent.parent] if self.sandbox_python else []
            problem = store_dir_problem(self.snapshot_dir, self.mounts, [self.state_dir / "sandbox-env", *python])
            if problem:
                raise SettingsError(problem)
        if self.tracing:
            try:
                otel_export(self.otel)
            except OtelProblem as exc:
                raise SettingsError(f"MCP_BRIDGE_TRACING is on, but {exc}") from None

    def _check_mounts(self) -> None:
        """What the mounts need of the other settings: no state directory inside one, and a backend that can."""
        problem = mounts_state_dir_problem(self.mounts, self.state_dir)
        if problem:
            raise SettingsError(problem)
        writable = {mount.host for mount in self.mounts if mount.writable}
        stray = [str(path) for path in self.mounts_shared if path not in writable]
        if stray:
            raise SettingsError(
                f"MCP_BRIDGE_MOUNTS_SHARED lists {', '.join(stray)}, which is not the host directory of a :rw mount in "
                "MCP_BRIDGE_MOUNTS; list the HOST_DIR of a writable mount exactly as mounted, or remove it"
            )
        if self.mounts and self.runtime == "kubernetes":
            raise SettingsError(
                "MCP_BRIDGE_MOUNTS is set, but the kubernetes backend cannot bind a host directory into a claimed "
                "sandbox: unset MCP_BRIDGE_MOUNTS and add the directory as a volume of the SandboxTemplate's pod "
                'instead (docs/kubernetes.md, "Host directories")'
            )

    @property
    def shares_sessions(self) -> bool:
        """Whether this replica shares its sessions with others (through Leases; face/replicas.py)."""
        return bool(self.peer_token)

    @property
    def approvers(self) -> str:
        """Who answers ask_tools questions (runs/approvals.py): as set, else either when a console is served."""
        return self.approvals or ("either" if self.console and not self.shares_sessions else "client")

    @property
    def snapshot_dir(self) -> Path:
        """Where hibernated sessions are kept (runs/snapshot_store.py)."""
        return store_dir(self.hibernate_dir, self.state_dir)

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes``. A computed cap (``session_capacity.py``) follows a change of backend, and a cap
        given here is explicit from then on."""
        if self.sources.get("max_sessions") == COMPUTED:
            if "max_sessions" in changes:
                changes.setdefault("sources", {k: v for k, v in self.sources.items() if k != "max_sessions"})
            elif "runtime" in changes or "oci_runtime" in changes:
                runtime, oci = changes.get("runtime", self.runtime), changes.get("oci_runtime", self.oci_runtime)
                changes["max_sessions"] = session_cap(0, "", backend_kind(runtime, oci)).cap
        return dataclasses.replace(self, **changes)

    def sized_for(self, backend: str) -> Settings:
        """These settings for the backend a bridge chose: a cap computed for another one (``auto`` is costed as
        bubblewrap, and may fall back to a container, whose sessions cost ten times more) is computed again."""
        kind = backend_kind(backend, self.oci_runtime)
        if self.sources.get("max_sessions") != COMPUTED or kind == backend_kind(self.runtime, self.oci_runtime):
            return self
        return dataclasses.replace(self, max_sessions=session_cap(0, "", kind).cap)

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
        service_account_token: Path = SERVICE_ACCOUNT_TOKEN,
    ) -> Settings:
        """Build settings from defaults < settings file < environment < overrides (already typed).

        ``service_account_token``: where a pod's token would be mounted (tests point it elsewhere)."""
        env = os.environ if env is None else env
        _refuse_unknown_names(env)
        values: dict[str, Any] = {"state_dir": default_state_dir(env, os.geteuid() == 0)}
        values["pod"] = pod_evidence(env, service_account_token)
        values["otel"] = otel_variables(env)  # the standard variables, read by the tracer only when tracing is on
        sources: dict[str, str] = {}
        file_path = settings_file or (Path(env[SETTINGS_FILE_ENV]) if env.get(SETTINGS_FILE_ENV) else None)
        if file_path is not None:
            flat, policy = read_settings_file(file_path)
            for name, raw in flat.items():
                values[name] = parse_value(FIELD_BY_NAME[name], raw, f"{name} in {file_path}")
                sources[name] = str(file_path)
            if policy is not None:
                values["policy"] = policy_from_table(policy, file_path)
                sources["policy"] = str(file_path)
        for field in FIELDS:
            if field.env in env:
                values[field.name] = parse_value(field, env[field.env], field.env)
                sources[field.name] = field.env
        for alias, name in ENV_ALIASES.items():
            if alias in env:
                _apply_alias(alias, FIELD_BY_NAME[name], env, values, sources)
        for name, value in (overrides or {}).items():
            if value is not None:
                values[name] = value
                sources[name] = "command line"
        if "max_sessions" not in sources:  # follows the memory (session_capacity.py), unless set
            kind = backend_kind(values.get("runtime", "auto"), values.get("oci_runtime", ""))
            values["max_sessions"], sources["max_sessions"] = session_cap(0, "", kind).cap, COMPUTED
        return cls(**values, sources=sources)


ENV_PREFIX = "MCP_BRIDGE_"


def _refuse_unknown_names(env: Mapping[str, str]) -> None:
    """Refuse ``MCP_BRIDGE_*`` variables that name no setting: ignored, a misspelt token or a policy written as
    a variable (``MCP_BRIDGE_ASK_TOOLS``) would leave the bridge running without what its user asked for, and
    nothing would say so. Every name of ours starts with the prefix, so nothing else of the environment is judged.
    """
    known = {field.env for field in FIELDS} | set(ENV_ALIASES)
    unknown = sorted(name for name in env if name.startswith(ENV_PREFIX) and name not in known)
    if not unknown:
        return
    policy_keys = {field.name for field in dataclasses.fields(Policy)}
    problems = []
    for name in unknown:
        key = name.removeprefix(ENV_PREFIX).lower()
        if key in policy_keys:
            problems.append(f"{name} ({key} is part of the policy: set it in the [policy] table of the settings "
                            f"file, {SETTINGS_FILE_ENV}=PATH)")  # fmt: skip
            continue
        # Compared without the prefix every name shares, which would make any two names look alike.
        suffixes = sorted(known_name.removeprefix(ENV_PREFIX) for known_name in known)
        close = difflib.get_close_matches(name.removeprefix(ENV_PREFIX), suffixes, n=2, cutoff=0.75)
        shown = " or ".join(ENV_PREFIX + suffix for suffix in close)
        problems.append(f"{name} (did you mean {shown}?)" if close else name)
    raise SettingsError(
        f"{'; '.join(problems)}: not {'a setting' if len(unknown) == 1 else 'settings'} of mcp-codemode, so "
        f"{'it' if len(unknown) == 1 else 'they'} would be ignored; fix or unset "
        f"{'it' if len(unknown) == 1 else 'them'} (docs/configuration.md lists every MCP_BRIDGE_ variable)"
    )


def _apply_alias(alias: str, field: Field, env: Mapping[str, str], values: dict[str, Any],
                 sources: dict[str, str]) -> None:  # fmt: skip
    """A setting given by its other name; given by both names, the two must agree, or neither is taken."""
    value = parse_value(dataclasses.replace(field, env=alias), env[alias], alias)
    if field.env not in env:
        values[field.name] = value
        sources[field.name] = alias
    elif values[field.name] != value:
        raise SettingsError(
            f"{alias}={env[alias]!r} and {field.env}={env[field.env]!r} both set {field.name} and disagree: "
            f"remove {alias} (the reference bridge's name for it), or give both the same value"
        )
