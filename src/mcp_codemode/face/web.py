"""Serving the MCP face over Streamable HTTP: the ASGI app, bearer tokens, Origin checks, uvicorn.

Guards, outermost first: an Origin check (a web page must not drive the bridge through a victim's browser,
the DNS-rebinding attack), then bearer-token authentication (required whenever the bridge listens beyond
loopback), then the SDK's transport. The token a request used becomes its principal, which scopes sessions:
the bridge's own (``server.place``) and the SDK's handshake-era MCP sessions (``http_sessions.py``).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import socket
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import Any

import anyio
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import SettingsError
from ..settings import Settings
from ..telemetry.seam import Telemetry
from .addresses import is_loopback
from .http_sessions import principal_user, tag_sdk_session_logs
from .metrics_endpoint import METRICS_PATH, MetricsEndpoint
from .principals import PRINCIPAL_STATE_KEY, principal_of

log = logging.getLogger("mcp_codemode.web")  # the name log lines have always shown
MCP_PATH = "/mcp"


def check_exposure(settings: Settings) -> None:
    """Refuse to listen beyond loopback without a token: anyone reaching the port could run code."""
    if not is_loopback(settings.http_host) and not settings.http_tokens:
        raise SettingsError(
            f"listening on {settings.http_host} would let anyone who reaches the port run code; set a bearer "
            "token with --token or MCP_BRIDGE_HTTP_TOKEN (for example MCP_BRIDGE_HTTP_TOKEN=$(openssl rand -hex 24)),"
            " or listen on 127.0.0.1"
        )


def _local_origins() -> list[str]:
    return ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


class Guard:
    """Origin check and bearer-token authentication in front of the MCP endpoint; after the Origin check, ``/metrics``
    goes to its own endpoint, which has token rules of its own."""

    def __init__(self, app: ASGIApp, settings: Settings, metrics: MetricsEndpoint | None = None) -> None:
        self.app = app
        self.metrics = metrics  # GET /metrics, with rules of its own (metrics_endpoint.py)
        self.tokens = [(token.encode(), principal_of(token)) for token in settings.http_tokens]
        # The SDK's user object of each principal, made once: a request only says which one is asking.
        self.users = {principal: principal_user(principal) for _, principal in self.tokens}
        self.origins = list(settings.allowed_origins)
        if is_loopback(settings.http_host):
            self.origins.extend(_local_origins())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        origin = headers.get("origin")
        if origin is not None and not self._origin_allowed(origin, headers.get("host", "")):
            log.warning("refused a request from origin %s", origin)
            refusal = f"origin {origin} is not allowed; add it to MCP_BRIDGE_ALLOWED_ORIGINS"
            await _reply(send, 403, FORBIDDEN_ORIGIN, refusal, {})
            return
        if self.metrics is not None and scope.get("path") == METRICS_PATH:
            await self.metrics.answer(scope, headers, send)
            return
        if self.tokens:
            principal = self._principal(headers.get("authorization", ""))
            if principal is None:
                challenge = {"www-authenticate": 'Bearer realm="mcp-codemode"'}
                hint = "missing or wrong bearer token: send Authorization: Bearer <token>"
                await _reply(send, 401, UNAUTHORIZED, hint, challenge)
                return
            scope.setdefault("state", {})[PRINCIPAL_STATE_KEY] = principal
            scope["user"] = self.users[principal]  # the SDK binds an MCP session to the user that opened it
        await self.app(scope, receive, send)

    def _principal(self, authorization: str) -> str | None:
        scheme, _, credential = authorization.partition(" ")
        if scheme.lower() != "bearer" or not credential:
            return None
        offered = credential.strip().encode()
        found = None
        for token, principal in self.tokens:
            if hmac.compare_digest(offered, token):  # compare against all: no timing hint about which one
                found = principal
        return found

    def _origin_allowed(self, origin: str, host: str) -> bool:
        if origin in (f"http://{host}", f"https://{host}"):
            return True
        for allowed in self.origins:
            if origin == allowed or (allowed.endswith(":*") and origin.startswith(allowed[:-1])):
                return True
        return False


# Codes of the guards' refusals, in JSON-RPC's implementation-defined band (-32000..-32019; the SDK uses -32000 and
# -32001 for its own, never on the wire).
UNAUTHORIZED = -32010  # no bearer token, or a wrong one (HTTP 401)
FORBIDDEN_ORIGIN = -32011  # a web page of another origin (HTTP 403)


async def _reply(send: Send, status: int, code: int, message: str, extra: dict[str, str]) -> None:
    """A refusal as a JSON-RPC error (``id`` null: the request was not read): MCP clients show a JSON-RPC error's
    message from a non-2xx answer, and fall back to "Server returned an error response" for anything else."""
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    await reply_json(send, status, error, extra)


async def reply_json(send: Send, status: int, answer: dict[str, Any], extra: dict[str, str] | None = None) -> None:
    """A whole JSON response, sent by hand: the guards answer before any framework sees the request."""
    body = json.dumps(answer).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers.extend((key.encode(), value.encode()) for key, value in (extra or {}).items())
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def http_app(server: Server[Any], settings: Settings, wrap: Callable[[ASGIApp], ASGIApp] | None = None,
             telemetry: Telemetry | None = None) -> ASGIApp:  # fmt: skip
    """The guarded Streamable HTTP app; the SDK checks Host on loopback (DNS rebinding), we check the rest.

    ``wrap`` puts an app in front of the guards: the replicas' own endpoint, which has its own token. ``telemetry``:
    the bridge's, served at ``/metrics`` (none: that path is the MCP app's, which has nothing there).
    """
    loopback = is_loopback(settings.http_host)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=loopback,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"],
        allowed_origins=[*_local_origins(), *settings.allowed_origins],
    )
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=security,
        host=settings.http_host,
        session_idle_timeout=settings.session_idle_timeout,
    )
    tag_sdk_session_logs()
    metrics = MetricsEndpoint(telemetry, settings, loopback) if telemetry is not None else None
    guarded = Guard(app, settings, metrics)
    return wrap(guarded) if wrap is not None else guarded


def bind_socket(settings: Settings, port: int | None = None, setting: str = "--port (or MCP_BRIDGE_HTTP_PORT)",
                host: str | None = None) -> socket.socket:  # fmt: skip
    """The listening socket (the MCP port, or ``port`` on ``host``), bound before anything else starts, so a busy
    port is a plain error naming the ``setting`` to change.

    Bound here rather than by uvicorn also lets the log name the real port (``--port 0`` picks a free one).
    """
    port = settings.http_port if port is None else port
    host = settings.http_host if host is None else host
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Inherited by accepted connections; without it small SSE replies wait ~40 ms for delayed ACKs.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise SettingsError(
            f"cannot listen on {host}:{port}: {exc.strerror}; choose another {setting}, or stop what is using it"
        ) from None
    return sock


class _Draining(uvicorn.Server):
    """uvicorn, except that its first SIGTERM or SIGINT asks for a drain (``on_signal``) instead of its exit; a second
    signal exits at once, uvicorn's way. uvicorn installs its handlers while it serves, over the bridge's own."""

    def __init__(self, config: uvicorn.Config, on_signal: Callable[[], object]) -> None:
        super().__init__(config)
        self._on_signal = on_signal
        self._asked = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._asked:
            super().handle_exit(sig, frame)
            return
        self._asked = True
        self._on_signal()


AFTER_DRAIN_S = 5  # what may still run once drained: idle event streams, cancelled after this


async def serve_http(
    server: Server[Any],
    settings: Settings,
    sock: socket.socket,
    stop: anyio.Event,
    wrap: Callable[[ASGIApp], ASGIApp] | None = None,
    peer_sock: socket.socket | None = None,
    drain: Callable[[], Awaitable[None]] | None = None,
    telemetry: Telemetry | None = None,
) -> None:
    """Serve until ``stop`` is set or uvicorn sees SIGINT/SIGTERM; either way through uvicorn's graceful exit.

    Cancelling uvicorn from outside would cut its lifespan shutdown short (and log a traceback), so a stop
    request only raises its ``should_exit`` flag. ``peer_sock``, the replicas' own port, is served by the same
    uvicorn (one server, one set of signal handlers); ``wrap``'s endpoint tells the two apart by the port a request
    came in on. With ``drain`` (replicas that share sessions: face/stopping.py), a stop first closes both listening
    sockets (no new connection, so the pod is not ready any more) and awaits ``drain`` while the connections already
    open go on being served; then uvicorn exits, cutting what still runs after ``AFTER_DRAIN_S``.
    """
    config = uvicorn.Config(
        http_app(server, settings, wrap, telemetry),
        log_config=None,
        log_level=settings.log_level.lower(),
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=AFTER_DRAIN_S if drain is not None else None,
    )
    loop = asyncio.get_running_loop()
    listener = (
        uvicorn.Server(config)
        if drain is None
        else _Draining(config, lambda: loop.call_soon_threadsafe(stop.set))  # safe from a signal handler
    )
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if sock.family == socket.AF_INET6 else host
    log.info("serving MCP over HTTP at http://%s:%d%s", shown, port, MCP_PATH)

    async def exit_on_stop() -> None:
        await stop.wait()
        try:
            if drain is not None:
                for accepting in listener.servers:
                    accepting.close()
                await drain()
        finally:
            listener.should_exit = True

    async with anyio.create_task_group() as group:
        group.start_soon(exit_on_stop)
        await listener.serve(sockets=[sock] if peer_sock is None else [sock, peer_sock])
        group.cancel_scope.cancel()
