"""``GET /metrics``: the bridge's Prometheus metrics, on the HTTP face's port and on a port of their own.

Who may read them. The metrics name the configured upstream servers and the tools called, and count calls,
sessions and failures: less than the MCP endpoint gives (it runs code), more than a stranger should see. So
``/metrics`` asks for a bearer token whenever the bridge has one: a token of ``MCP_BRIDGE_METRICS_TOKEN`` (which
reads the metrics and nothing else, so Prometheus never holds a token that runs code; on ``/mcp`` it is refused)
or a client's ``MCP_BRIDGE_HTTP_TOKEN``. A bridge with no token at all listens on loopback only (both ports refuse
to start beyond it without one), where its metrics are as open as its MCP endpoint. On loopback the ``Host``
header must name loopback too: otherwise a web page could read them through DNS rebinding, as the SDK guards
``/mcp``. On the MCP port the Origin check of ``web.Guard`` comes first; the metrics port refuses any request with
an ``Origin`` (Prometheus sends none, a browser always does).

The metrics port (``serve --metrics-port``, ``MCP_BRIDGE_METRICS_PORT``) is how a stdio bridge is scraped, and lets
an HTTP bridge's metrics be reached where its MCP port is not. It is served by a uvicorn of its own on the bridge's
event loop (scrapes read the sessions and the pool there, where every change to them is made) that leaves signals
to the bridge: over stdio nothing else may decide when the bridge stops.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import socket
from collections.abc import Iterator

import anyio
import uvicorn
from starlette.types import Receive, Scope, Send

from ..errors import SettingsError
from ..settings import Settings
from ..telemetry.seam import CONTENT_TYPE, Telemetry
from .addresses import is_loopback

log = logging.getLogger("mcp_codemode.metrics")
METRICS_PATH = "/metrics"


def check_metrics_exposure(settings: Settings) -> None:
    """Refuse a metrics port beyond loopback that anyone reaching it could read."""
    if not is_loopback(settings.metrics_host) and not (settings.metrics_tokens or settings.http_tokens):
        raise SettingsError(
            f"serving metrics on {settings.metrics_host} would let anyone who reaches the port read them; set "
            "MCP_BRIDGE_METRICS_TOKEN (for example MCP_BRIDGE_METRICS_TOKEN=$(openssl rand -hex 24), given to "
            "Prometheus as its bearer token), or set MCP_BRIDGE_METRICS_HOST=127.0.0.1"
        )


def _host_name(host: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:9464`` is ``[::1]``)."""
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.rpartition(":")[0] if host.count(":") == 1 else host


class MetricsEndpoint:
    """Answers ``GET /metrics`` for one bridge's telemetry, under the rules above."""

    def __init__(self, telemetry: Telemetry, settings: Settings, loopback: bool) -> None:
        self.telemetry = telemetry
        self.tokens = [token.encode() for token in (*settings.metrics_tokens, *settings.http_tokens)]
        self.loopback = loopback

    async def answer(self, scope: Scope, headers: dict[str, str], send: Send) -> None:
        """Answer one request for ``/metrics`` (``headers``: its headers, names in lower case)."""
        if not self.telemetry.enabled:
            await _plain(send, 404, "metrics are off on this bridge (MCP_BRIDGE_METRICS=false)")
        elif scope.get("method") not in ("GET", "HEAD"):
            await _plain(send, 405, "GET only", {"allow": "GET, HEAD"})
        elif self.loopback and not is_loopback(_host_name(headers.get("host", ""))):
            await _plain(send, 403, "this bridge serves metrics to loopback names only (Host: 127.0.0.1:PORT)")
        elif self.tokens and not self._authorized(headers.get("authorization", "")):
            challenge = {"www-authenticate": 'Bearer realm="mcp-codemode metrics"'}
            await _plain(send, 401, "missing or wrong bearer token: send Authorization: Bearer <token>", challenge)
        else:
            body = self.telemetry.exposition() if scope.get("method") == "GET" else b""
            await _reply(send, 200, body, CONTENT_TYPE)

    def _authorized(self, authorization: str) -> bool:
        scheme, _, credential = authorization.partition(" ")
        if scheme.lower() != "bearer" or not credential:
            return False
        offered = credential.strip().encode()
        found = False
        for token in self.tokens:
            found |= hmac.compare_digest(offered, token)  # compare against all: no timing hint about which one
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The metrics port's whole app: ``/metrics`` and nothing else, never for a browser."""
        if scope["type"] != "http":
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        if scope.get("path") != METRICS_PATH:
            await _plain(send, 404, f"this port serves {METRICS_PATH} only")
        elif "origin" in headers:
            await _plain(send, 403, "metrics are not served to web pages")
        else:
            await self.answer(scope, headers, send)


async def _plain(send: Send, status: int, text: str, extra: dict[str, str] | None = None) -> None:
    await _reply(send, status, (text + "\n").encode(), "text/plain; charset=utf-8", extra)


async def _reply(send: Send, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    headers.extend((key.encode(), value.encode()) for key, value in (extra or {}).items())
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _LeavesSignals(uvicorn.Server):
    """uvicorn without its signal handlers: the bridge beside it decides when to stop, and stops this one."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_metrics(endpoint: MetricsEndpoint, sock: socket.socket, stop: anyio.Event) -> None:
    """Serve the metrics port on ``sock`` until ``stop`` is set."""
    config = uvicorn.Config(endpoint, log_config=None, log_level="warning", access_log=False, lifespan="off")
    server = _LeavesSignals(config)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if sock.family == socket.AF_INET6 else host
    log.info("serving metrics at http://%s:%d%s", shown, port, METRICS_PATH)

    async def exit_on_stop() -> None:
        await stop.wait()
        server.should_exit = True

    async with anyio.create_task_group() as group:
        group.start_soon(exit_on_stop)
        await server.serve(sockets=[sock])
        group.cancel_scope.cancel()
