"""``/healthz`` and ``/readyz`` on a real ``mcp-codemode serve --transport http`` (127.0.0.1, bubblewrap), asked as
the kubelet asks: no token, the pod's address as Host. The rules behind them are tests/runs/test_readiness.py; what
the answer may say to whom is tests/face/test_probe_answers.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.support.clients import (
    CALL_DEADLINE,
    HttpServer,
    assert_no_orphans,
    bearer,
    http_client_for,
    require_bubblewrap,
)
from tests.support.patience import patient

pytestmark = [pytest.mark.anyio, pytest.mark.backend]
TOKEN = "p" * 16 + uuid.uuid4().hex[:16]


@pytest.fixture
def capped(tmp_path: Path) -> Iterator[HttpServer]:
    """A face with room for one session and no warm pool, behind a token, as a pod would run it."""
    require_bubblewrap()
    with HttpServer(tmp_path / "server.log", "--token", TOKEN, MCP_BRIDGE_MAX_SESSIONS="1",
                    MCP_BRIDGE_WARM_POOL="0") as server:  # fmt: skip
        yield server
    assert_no_orphans()


async def _probe(http: httpx2.AsyncClient, server: HttpServer, path: str) -> tuple[int, Any]:
    answer = await http.get(f"http://127.0.0.1:{server.port}{path}", headers={"Host": f"10.1.2.3:{server.port}"})
    return answer.status_code, answer.json()


async def _until(http: httpx2.AsyncClient, server: HttpServer, status: int) -> Any:
    """Ask /readyz until it answers ``status`` (a bounded wait for the call to start or end, not a timing check)."""
    with anyio.fail_after(patient(120)):
        while True:
            found, body = await _probe(http, server, "/readyz")
            if found == status:
                return body
            await anyio.sleep(0.05)


async def test_a_face_whose_only_session_is_busy_is_alive_but_not_ready_until_the_call_ends(
    capped: HttpServer,
) -> None:
    session = f"quarterly-{uuid.uuid4().hex[:8]}"
    async with httpx2.AsyncClient(timeout=patient(30.0)) as http:
        assert await _probe(http, capped, "/healthz") == (200, {"status": "serving"})
        assert await _probe(http, capped, "/readyz") == (200, {"ready": True})
        async with http_client_for(capped.url, "auto", bearer(TOKEN)) as client, anyio.create_task_group() as calls:

            async def busy() -> None:
                code = "import time\nwhile True:\n    time.sleep(0.05)"
                await client.call_tool("run_python", {"code": code, "timeout": 120, "session": session})

            calls.start_soon(busy)
            refused = await _until(http, capped, 503)
            alive = await _probe(http, capped, "/healthz")  # a long call never fails the liveness probe
            calls.cancel_scope.cancel()  # the client cancels: the cell is interrupted, the session stays, idle
        with anyio.fail_after(CALL_DEADLINE):
            again = await _until(http, capped, 200)  # an idle session may be closed for a new one
    assert refused == {"ready": False, "reason": "session-cap-reached"}
    assert alive == (200, {"status": "serving"})
    assert again == {"ready": True}
    log = capped.log_text()
    assert "not ready for new sessions (session-cap-reached)" in log and "ready for new sessions again" in log
    assert session not in log  # the log says why, without the session's name either
