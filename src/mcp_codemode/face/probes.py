"""``GET /healthz`` and ``GET /readyz`` on the HTTP face: what the kubelet, a load balancer or a person asks of it.

``/healthz`` answers 200 whenever the event loop answers at all: the process serves. It asks nothing else, so a long
call, a full session cap or an unreachable cluster never makes it fail (a liveness probe on it restarts only a face
that hangs). ``/readyz`` answers 200 when the bridge could take a new session now, else 503 with the reason
(``runs/readiness.py`` decides; this module only renders).

Both are open: the kubelet sends no bearer token, so they sit in front of the token check, and in front of the Origin
check and the SDK's Host check too (a probe's Host is whatever address it used: the pod's IP for the kubelet). What
that exposes is deliberately nothing: a fixed body, ``{"ready": false, "reason": "<word>"}`` with a word of a closed
set (``runs/readiness.REASONS``), never a session, principal, server, host or path; the detail goes to the log. A web
page that reached a loopback bridge by DNS rebinding, or another token holder, learns only whether this bridge could
take a session now. Any other method gets 405; any other path goes on to the guards.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from ..runs.readiness import Readiness
from .web import reply_json

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
ReadinessSource = Callable[[], Awaitable[Readiness]]


def answer(verdict: Readiness) -> tuple[int, dict[str, Any]]:
    """The status and body of ``/readyz``: the verdict and its reason's word, nothing of its detail."""
    if verdict.ready:
        return 200, {"ready": True}
    return 503, {"ready": False, "reason": verdict.reason}


class Probes:
    """The two probe paths in front of ``app`` (the guarded MCP app)."""

    def __init__(self, app: ASGIApp, ready: ReadinessSource) -> None:
        self.app = app
        self.ready = ready

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path") if scope["type"] == "http" else None
        if path not in (HEALTH_PATH, READY_PATH):
            await self.app(scope, receive, send)
            return
        if scope.get("method") != "GET":
            await reply_json(send, 405, {"error": f"{path} answers GET only"}, {"allow": "GET"})
            return
        if path == HEALTH_PATH:
            await reply_json(send, 200, {"status": "serving"})
            return
        status, body = answer(await self.ready())
        await reply_json(send, status, body, {"cache-control": "no-store"})
