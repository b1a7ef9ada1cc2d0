"""Normalising one raw entry into a ``ServerConfig``: the transport, command or URL, env, headers, protocol, timeout.

Apart from the readers (which only find entries) and from precedence (which only chooses among them): every
rule about what a valid entry is lives here, and each broken one raises ``EntryError`` naming the field.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Final
from urllib.parse import urlsplit

from ...errors import CodemodeError
from ..model import DEFAULT_PROTOCOL, ServerConfig, Transport
from .entry import RawEntry, ReadContext, kind_of, transport_of
from .expand import VARIABLE_NAME, VARIABLE_RULES, Expander, expand_tilde

_MODERN_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}")


LAST_HANDSHAKE_VERSION: Final = "2025-11-25"  # protocol versions up to this one use the initialize handshake


class EntryError(CodemodeError):
    """One entry cannot be used; the message says how to fix it."""


def normalise(raw: RawEntry, context: ReadContext, *, strict: bool) -> ServerConfig:
    """The entry as a ``ServerConfig`` (alias not yet assigned), or ``EntryError`` saying what to fix."""
    if raw.errors:
        raise EntryError(raw.errors[0])
    declared: Transport | None = None
    if raw.type is not None:
        declared = transport_of(raw.type)
        if declared is None:
            shown = repr(raw.type)[:40] if isinstance(raw.type, str) else kind_of(raw.type)
            raise EntryError(f"{raw.type_key} {shown} is not known; use stdio, http (streamable HTTP) or sse")
    has_command, has_url = raw.command is not None, raw.url is not None
    if has_command and has_url:
        raise EntryError(
            f"has both command and {raw.url_key}; a server is either started (command) or reached over the "
            f"network ({raw.url_key}): keep one"
        )
    if not has_command and not has_url:
        raise EntryError(
            'has neither command nor url; add "command" (and "args") to start a local server, '
            'or "url" to reach a remote one'
        )
    if declared == "stdio" and has_url:
        raise EntryError(f"{raw.type_key} is stdio but the entry has {raw.url_key} and no command; fix one")
    if declared in ("http", "sse") and has_command:
        raise EntryError(f"{raw.type_key} is {declared} but the entry has command and no url; fix one")
    description = _optional_string(raw.description, "description")
    protocol = _protocol(raw.protocol)
    timeout = _timeout(raw)
    expand = Expander(context, VARIABLE_RULES[raw.fmt], strict=strict)
    config = _stdio(raw, expand, context) if has_command else _remote(raw, expand, context, declared)
    if strict:
        complaints = expand.complaints()
        if complaints:
            raise EntryError("; ".join(complaints))
    if config.transport != "stdio" and urlsplit(config.url).scheme.lower() not in ("http", "https"):
        raise EntryError(f"{raw.url_key} must start with http:// or https://")
    return dataclasses.replace(config, description=description, protocol=protocol, timeout=timeout)


def _stdio(raw: RawEntry, expand: Expander, context: ReadContext) -> ServerConfig:
    if not isinstance(raw.command, str) or not raw.command.strip():
        raise EntryError("command must be a non-empty string naming the program to start; its arguments go in args")
    args = _string_list(raw.args, "args")
    env = _string_map(raw.env, "env")
    cwd = _optional_string(raw.cwd, "cwd") or None
    # The env block first, from the bridge's environment: the command line may use what it defines.
    expanded_env = {key: expand(value, f"env[{key!r}]") for key, value in env.items()}
    expand.local = expanded_env
    command = expand_tilde(expand(raw.command, "command"), context.home)
    expanded_args = tuple(expand(arg, f"args[{i}]") for i, arg in enumerate(args))
    if cwd is not None:
        cwd = str(raw.base / expand_tilde(expand(cwd, "cwd"), context.home))
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


def _remote(raw: RawEntry, expand: Expander, context: ReadContext, declared: Transport | None) -> ServerConfig:
    if not isinstance(raw.url, str) or not raw.url.strip():
        raise EntryError(f"{raw.url_key} must be a non-empty string such as https://example.com/mcp")
    headers = {
        key: expand(value, f"{raw.headers_key}[{key!r}]")
        for key, value in _string_map(raw.headers, raw.headers_key).items()
    }
    for header, variable in _string_map(raw.env_headers, "env_http_headers").items():
        value = context.env.get(variable)
        if value is None:
            if expand.strict:
                raise EntryError(
                    f"needs environment variable {variable} (env_http_headers[{header!r}]), which is not set; set it"
                )
            value = ""
        headers[header] = value
    if raw.bearer_env is not None:
        if not isinstance(raw.bearer_env, str) or not VARIABLE_NAME.fullmatch(raw.bearer_env):
            raise EntryError("bearer_token_env_var must be the name of an environment variable")
        token = context.env.get(raw.bearer_env)
        if token is None and expand.strict:
            raise EntryError(
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
        raise EntryError(f'{key} must be a list of strings such as ["-y", "some-package"], not {kind_of(value)}')
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise EntryError(f"{key}[{i}] must be a string, not {kind_of(item)}; put it in quotes")
    return list(value)


def _string_map(value: object, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise EntryError(f"{key} must be an object of names to string values, not {kind_of(value)}")
    for name, item in value.items():
        if not isinstance(item, str):
            raise EntryError(f"{key}[{name!r}] must be a string, not {kind_of(item)}; put it in quotes")
    return dict(value)


def _optional_string(value: object, key: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise EntryError(f"{key} must be a string, not {kind_of(value)}")
    return value


def _protocol(value: object) -> str:
    if value is None:
        return DEFAULT_PROTOCOL
    if not isinstance(value, str):
        raise EntryError('protocol must be a string ("legacy", "auto" or a version such as "2026-07-28")')
    text = value.strip().lower()
    if text in ("legacy", "auto"):
        return text
    if _MODERN_VERSION.fullmatch(text):
        if text <= LAST_HANDSHAKE_VERSION:
            raise EntryError(
                f'protocol {text!r} is a handshake-era version; write "legacy" for it (the server picks the version)'
            )
        return text
    raise EntryError(
        f'protocol {value[:40]!r} is not known; use "legacy" (the default), "auto", or a version such as "2026-07-28"'
    )


def _timeout(raw: RawEntry) -> float | None:
    value = raw.timeout
    if value is None:
        return None
    unit = "milliseconds" if raw.timeout_scale != 1.0 else "seconds"
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise EntryError(f"{raw.timeout_key} must be a positive number of {unit}")
    return float(value) * raw.timeout_scale


def best_effort(raw: RawEntry) -> ServerConfig:
    """Something to list for an entry that is skipped anyway (disabled or shadowed) but does not normalise.

    Such an entry is never used, so its faults are not reported; it is still shown, with what we could
    read of it, so ``servers`` can say where it went.
    """
    command = raw.command if isinstance(raw.command, str) else ""
    url = raw.url if isinstance(raw.url, str) else ""
    transport: Transport = "stdio" if command or not url else (raw.url_transport or "http")
    return ServerConfig(name=raw.name, alias="", transport=transport, source=raw.source, command=command, url=url)
