"""``/healthz`` and ``/readyz`` (face/probes.py) as an ASGI app driven by hand: what they answer, to whom, and that the
answer carries nothing but a fixed word. The real face serving them is tests/face/test_probes_e2e.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from mcp_codemode.face.probes import Probes
from mcp_codemode.face.web import Guard
from mcp_codemode.runs.readiness import REASONS, Readiness
from mcp_codemode.settings import Settings

pytestmark = pytest.mark.anyio
TOKEN = "t" * 32
# What a not-ready bridge knows and its log says: a session key with a principal, a server, a host and a path.
SECRET_DETAIL = (
    "session p:7f3a9c:quarterly-numbers of principal 7f3a9c is busy; server github-enterprise at "
    "https://10.20.30.40:6443 and /home/alice/.config/mcp.json"
)


class _Behind:
    """The app behind the probes: records what reached it, answers 299."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.paths.append(scope["path"])
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})


async def _get(app: Any, path: str, method: str = "GET", headers: dict[str, str] | None = None) -> (
    tuple[int, dict[str, str], bytes]
):  # fmt: skip
    scope = {
        "type": "http", "method": method, "path": path, "server": ("10.0.0.7", 8765),
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {"host": "10.0.0.7:8765"}).items()],
    }  # fmt: skip
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = sent[0]
    found = {k.decode(): v.decode() for k, v in start.get("headers", [])}
    return start["status"], found, b"".join(m.get("body", b"") for m in sent[1:])


def _probes(verdict: Readiness, behind: Any = None) -> Probes:
    async def ready() -> Readiness:
        return verdict

    return Probes(behind or _Behind(), ready)


async def test_healthz_answers_200_whatever_the_readiness() -> None:
    status, _, body = await _get(_probes(Readiness(False, "session-cap-reached", SECRET_DETAIL)), "/healthz")
    assert (status, json.loads(body)) == (200, {"status": "serving"})


async def test_readyz_answers_200_when_ready_and_503_with_the_reason_when_not() -> None:
    ready = await _get(_probes(Readiness(True, detail=SECRET_DETAIL)), "/readyz")
    busy = await _get(_probes(Readiness(False, "session-cap-reached", SECRET_DETAIL)), "/readyz")
    assert (ready[0], json.loads(ready[2])) == (200, {"ready": True})
    assert (busy[0], json.loads(busy[2])) == (503, {"ready": False, "reason": "session-cap-reached"})
    assert busy[1]["cache-control"] == "no-store"  # a cache in between must not hold an old verdict


@pytest.mark.parametrize("reason", sorted(REASONS))
async def test_readyz_without_a_token_learns_one_word_and_nothing_the_bridge_knows(reason: Any) -> None:
    """The probes are open (the kubelet has no token): whoever asks, a second token holder or nobody at all, must not
    learn which sessions, principals, servers, hosts or paths the bridge has, only whether it is ready and why."""
    guarded = Guard(_Behind(), Settings(http_tokens=(TOKEN,)))
    status, headers, body = await _get(_probes(Readiness(False, reason, SECRET_DETAIL), guarded), "/readyz")
    answer = json.loads(body)
    assert status == 503 and answer == {"ready": False, "reason": reason}
    for piece in ("quarterly", "7f3a9c", "github", "10.20.30.40", "/home/alice", "busy"):
        assert piece not in body.decode() and piece not in json.dumps(headers), piece


async def test_the_probes_stand_before_the_token_and_host_checks_and_every_other_path_goes_through_them() -> None:
    behind = _Behind()
    app = _probes(Readiness(True), Guard(behind, Settings(http_tokens=(TOKEN,))))
    kubelet = {"host": "10.0.0.7:8765", "user-agent": "kube-probe/1.35"}  # no token, the pod's address as Host
    assert (await _get(app, "/readyz", headers=kubelet))[0] == 200
    assert (await _get(app, "/healthz", headers=kubelet))[0] == 200
    assert (await _get(app, "/mcp", headers=kubelet))[0] == 401  # the MCP endpoint keeps its guard
    assert (await _get(app, "/mcp", headers={**kubelet, "authorization": f"Bearer {TOKEN}"}))[0] == 299
    assert (await _get(app, "/readyz/x", headers={"authorization": f"Bearer {TOKEN}"}))[0] == 299
    assert behind.paths == ["/mcp", "/readyz/x"]


async def test_other_methods_on_the_probe_paths_get_405_and_reach_nothing_behind() -> None:
    behind = _Behind()
    status, headers, _ = await _get(_probes(Readiness(True), behind), "/readyz", method="POST")
    assert (status, headers["allow"], behind.paths) == (405, "GET", [])
