"""How the bridge's log and its traces are configured: the log's level and format, and the standard ``OTEL_*``
variables that point the traces somewhere.

Apart from ``settings_fields.py`` because the OpenTelemetry part is not ours to name: its variables are the
specification's (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_TRACES_SAMPLER``, ...), which the operator may already set
for every service of a cluster. ``Settings.load`` keeps them as they are (``otel_variables``); this module reads them
into what the exporter needs, checked only once tracing is on (``MCP_BRIDGE_TRACING``), so a value meant for another
program never stops a bridge that does not trace. Nothing here imports OpenTelemetry: the settings are read by every
command, and the SDK is imported only by a bridge that traces (``telemetry/otel_tracing.py``).
"""

from __future__ import annotations

import dataclasses
import math
import urllib.parse
from collections.abc import Mapping
from typing import Literal

from .errors import SettingsError

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
OTEL_PREFIX = "OTEL_"
DEFAULT_ENDPOINT = "http://localhost:4318"  # the specification's default for OTLP over HTTP
TRACES_PATH = "/v1/traces"
SAMPLERS = (
    "parentbased_always_on",  # the specification's default: follow the client's decision, sample every root
    "parentbased_always_off",
    "parentbased_traceidratio",
    "always_on",
    "always_off",
    "traceidratio",
)


def log_level(text: str) -> str:
    value = text.strip().upper()
    if value not in LOG_LEVELS:
        raise ValueError(text)
    return value


def log_format(text: str) -> LogFormat:
    value = text.strip().lower()
    if value not in LOG_FORMATS:
        raise ValueError(text)
    return value


def otel_variables(env: Mapping[str, str]) -> dict[str, str]:
    """The standard OpenTelemetry variables of ``env``, as given (read by ``Settings.load`` alone)."""
    return {name: value for name, value in env.items() if name.startswith(OTEL_PREFIX)}


def otel_secrets(variables: Mapping[str, str]) -> list[str]:
    """What of the variables no log line may show: the exporter's header values (an API key, a bearer token), whole
    and word by word, however they are written."""
    found = []
    for name, text in variables.items():
        if name.endswith("_HEADERS"):
            for item in text.split(","):
                value = urllib.parse.unquote(item.partition("=")[2].strip())
                found += [value, *value.split()]
    return found


class OtelProblem(SettingsError):
    """A standard OpenTelemetry variable this bridge cannot trace with; the message names it and the fix."""


@dataclasses.dataclass(frozen=True)
class OtelExport:
    """Where and how spans are sent, and which are kept: the ``OTEL_*`` variables, read and checked."""

    endpoint: str = DEFAULT_ENDPOINT + TRACES_PATH
    headers: tuple[tuple[str, str], ...] = dataclasses.field(default=(), repr=False)  # may hold an API key
    timeout: float = 10.0  # seconds per export
    compression: Literal["none", "gzip", "deflate"] = "none"
    certificate: str | None = None
    client_key: str | None = None
    client_certificate: str | None = None
    sampler: str = "parentbased_always_on"
    ratio: float = 1.0  # for the traceidratio samplers
    service_name: str = "mcp-codemode"
    resource: tuple[tuple[str, str], ...] = ()  # OTEL_RESOURCE_ATTRIBUTES
    exporter: Literal["otlp", "none"] = "otlp"
    schedule_delay: float = 5.0  # seconds between two exports of the batch processor
    max_queue: int = 2048
    max_batch: int = 512
    disabled: bool = False  # OTEL_SDK_DISABLED=true: the standard switch that turns every signal off


def otel_export(variables: Mapping[str, str]) -> OtelExport:
    """The export the variables describe; ``OtelProblem`` names the first one that is wrong and how to fix it."""
    get = _Reader(variables)
    protocol = get.signal("PROTOCOL") or "http/protobuf"
    if protocol != "http/protobuf":
        raise OtelProblem(f"{get.named('PROTOCOL')}={protocol!r}: mcp-codemode exports traces over OTLP/HTTP with "
                          "protobuf bodies only; set it to http/protobuf (or unset it) and point the endpoint at the "
                          "collector's HTTP port (4318)")  # fmt: skip
    exporters = [item.strip() for item in variables.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if item.strip()]
    if not set(exporters) <= {"otlp", "none"} or not exporters:
        raise OtelProblem(f"OTEL_TRACES_EXPORTER={variables.get('OTEL_TRACES_EXPORTER')!r}: mcp-codemode exports "
                          "traces with otlp (or none); set it to otlp, or unset it")  # fmt: skip
    sampler = (variables.get("OTEL_TRACES_SAMPLER") or SAMPLERS[0]).strip().lower()
    if sampler not in SAMPLERS:
        raise OtelProblem(f"OTEL_TRACES_SAMPLER={sampler!r} is not a sampler mcp-codemode knows; use one of "
                          f"{', '.join(SAMPLERS)}")  # fmt: skip
    compression = (get.signal("COMPRESSION") or "none").strip().lower()
    if compression not in ("none", "gzip", "deflate"):
        raise OtelProblem(f"{get.named('COMPRESSION')}={compression!r}: use gzip, deflate or none")
    return OtelExport(
        endpoint=_endpoint(variables),
        headers=_pairs(get.signal("HEADERS") or "", get.named("HEADERS"), secret=True),
        timeout=get.number(get.named("TIMEOUT"), 10_000, 1, 600_000) / 1000,
        compression=compression,  # type: ignore[arg-type]  # checked just above
        certificate=get.signal("CERTIFICATE") or None,
        client_key=get.signal("CLIENT_KEY") or None,
        client_certificate=get.signal("CLIENT_CERTIFICATE") or None,
        sampler=sampler,
        ratio=get.number("OTEL_TRACES_SAMPLER_ARG", 1.0, 0.0, 1.0) if sampler.endswith("traceidratio") else 1.0,
        service_name=(variables.get("OTEL_SERVICE_NAME") or "").strip() or "mcp-codemode",
        resource=_pairs(variables.get("OTEL_RESOURCE_ATTRIBUTES", ""), "OTEL_RESOURCE_ATTRIBUTES"),
        exporter="none" if exporters == ["none"] else "otlp",
        schedule_delay=get.number("OTEL_BSP_SCHEDULE_DELAY", 5000, 1, 3_600_000) / 1000,
        max_queue=int(get.number("OTEL_BSP_MAX_QUEUE_SIZE", 2048, 1, 10**7)),
        max_batch=int(get.number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, 1, 10**7)),
        disabled=variables.get("OTEL_SDK_DISABLED", "").strip().lower() == "true",
    )


class _Reader:
    """Reads a variable of the traces signal (``OTEL_EXPORTER_OTLP_TRACES_X``), else its general form."""

    def __init__(self, variables: Mapping[str, str]) -> None:
        self.variables = variables

    def named(self, suffix: str) -> str:
        specific = f"OTEL_EXPORTER_OTLP_TRACES_{suffix}"
        return specific if specific in self.variables else f"OTEL_EXPORTER_OTLP_{suffix}"

    def signal(self, suffix: str) -> str | None:
        return self.variables.get(self.named(suffix))

    def number(self, name: str, default: float, low: float, high: float) -> float:
        raw = self.variables.get(name, "").strip()
        if not raw:
            return default
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not low <= value <= high:  # NaN fails too
            raise OtelProblem(f"{name}={raw!r} is not a number from {low:g} to {high:g}")
        return value


def _endpoint(variables: Mapping[str, str]) -> str:
    """The traces URL: the signal's own endpoint as given, else the general one with ``/v1/traces`` appended."""
    specific = variables.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    general = variables.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    url = specific or general
    name = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" if specific else "OTEL_EXPORTER_OTLP_ENDPOINT"
    if not url:
        return DEFAULT_ENDPOINT + TRACES_PATH
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise OtelProblem(f"{name}={url!r} is not an http:// or https:// address (for example http://collector:4318)")
    return url if specific else url.rstrip("/") + TRACES_PATH


def _pairs(text: str, name: str, secret: bool = False) -> tuple[tuple[str, str], ...]:
    """``key=value,key=value`` with percent-encoded values, as the specification writes headers and attributes."""
    pairs = []
    for item in text.split(","):
        if not item.strip():
            continue
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            shown = "<hidden>" if secret else repr(item.strip()[:60])
            raise OtelProblem(f"{name} holds {shown}, which is not key=value; write key1=value1,key2=value2")
        pairs.append((urllib.parse.unquote(key.strip()), urllib.parse.unquote(value.strip())))
    return tuple(pairs)
