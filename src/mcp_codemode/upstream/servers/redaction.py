"""What of one upstream server's texts stays on the host: its secrets and its host paths.

Apart from the connection because it is a pure rule over a server's configuration (tested on its own) and the
safety of every message a sandbox sees depends on it; the ``Redaction`` it builds lives in ``errors``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from mcp.client.stdio import get_default_environment

from ..errors import HIDDEN, Redaction, secret_args
from ..model import ServerConfig
from .oauth import StoredSecrets
from .sign_ins import SignInStore, sign_in_key


def secret_values(config: ServerConfig) -> list[str]:
    """The secrets of one server's entry: its ``env`` and ``headers`` values (each word of a header value too, so a
    quoted ``Bearer`` token is caught alone), credentials in its URL (user, password, query values) and in its args
    (``--token X``). What the hub hides from everyone, and what the bridge's log never shows (telemetry/logs.py)."""
    hidden = [*config.env.values(), *config.headers.values(), *secret_args(config.args)]
    hidden += [word for value in config.headers.values() for word in value.split()]
    if config.url:
        parts = urlsplit(config.url)
        hidden += [parts.username or "", parts.password or ""]
        hidden += [value for _, value in parse_qsl(parts.query, keep_blank_values=True)]
    return hidden


def redaction_for(
    config: ServerConfig, log_file: Path | None, secrets: Iterable[str] = (), sign_ins: SignInStore | None = None
) -> Redaction:
    """What of one server's texts stays on the host.

    Hidden from everyone: its ``secret_values``, ``secrets``, and, for a remote server, the OAuth tokens and client
    secret that ``mcp-codemode login`` stored for it in ``sign_ins`` (looked at again whenever the store changes, so
    a refreshed token is hidden too). Hidden from sandboxed code only: its log file, its config file,
    its URL and the bridge's ``PATH``, which say where things are on the host and help nobody in the sandbox.
    """
    hidden = [*secret_values(config), *secrets]
    secret = Redaction.of(hidden)
    host_only: list[tuple[str, str]] = []
    if log_file is not None:
        host_only.append((str(log_file), "its log file"))
    if "/" in config.source:  # a path, or "--config PATH"; a bare label (tests) would garble other words
        host_only.append((config.source, "its config file"))
    if config.url:
        host_only += [(config.url, "its URL"), (secret.for_host(config.url), "its URL")]
    path = get_default_environment().get("PATH")
    if path:
        host_only.append((path, HIDDEN))
    signed_in = config.transport in ("http", "sse") and config.url and sign_ins is not None
    live = StoredSecrets(sign_ins, sign_in_key(config)) if signed_in and sign_ins is not None else None
    return Redaction.of(hidden, host_only, live)
