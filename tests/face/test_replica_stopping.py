"""A replica that is stopping holds and takes no session: the router's rule, on Leases on the EMULATED API (kmock).

The whole stop (SIGTERM, a running call finishing, the sessions taken over at once by the other replica, the claims
gone) is tests/face/test_replicas.py's, with two real replicas. Here the one rule that test cannot reach without a
race: a call that reaches a stopping replica on a connection it still has never makes it hold or take a session,
whatever the session's Lease says (none, its own, one given up, one held by a replica that does not answer).
"""

from __future__ import annotations

import datetime
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mcp_codemode.cluster.api import connect
from mcp_codemode.cluster.leases import LEASE_GROUP, LEASE_VERSION, LEASES, SessionLeases, lease_signing_key
from mcp_codemode.cluster.naming import ClaimKey
from mcp_codemode.face.placement import Placement
from mcp_codemode.face.replicas import SessionRouter
from mcp_codemode.runs.bridge import RunRequest
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.telemetry.seam import Telemetry
from tests.support.backends import sandbox_settings
from tests.support.clients import text_of
from tests.support.kube_deps import KUBE_TEST_DEPS_PROBLEM, require_kube_test_deps

if not KUBE_TEST_DEPS_PROBLEM:
    from tests.support.kube_emulator import emulated_cluster

pytestmark = [pytest.mark.anyio, pytest.mark.backend]  # a loopback API server
TOKEN = "s" * 40
NAMESPACE = "mcp-codemode"


def closed_address() -> str:
    """An address nothing listens on: a replica that does not answer."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture
async def leases(tmp_path: Path) -> AsyncIterator[tuple[Any, dict[str, SessionLeases]]]:
    require_kube_test_deps()
    async with emulated_cluster(tmp_path) as (emulator, kubeconfig):
        emulator.declare(LEASE_GROUP, LEASE_VERSION, LEASES)
        api = await connect(kubeconfig, "")
        now = datetime.datetime.now(datetime.UTC)
        found = {name: SessionLeases(api, namespace=NAMESPACE, replica=name, url=closed_address(),
                                     key=lease_signing_key(TOKEN), duration=30, now=lambda: now)
                 for name in ("a", "b")}  # fmt: skip
        try:
            yield emulator, found
        finally:
            await api.close()


def holders(emulator: Any) -> dict[str, str]:
    return {o.raw["metadata"]["name"]: o.raw["spec"]["holderIdentity"] for o in emulator.objects.values()
            if not o.deleted and o.get("kind") == "Lease"}  # fmt: skip


async def test_a_stopping_replica_neither_holds_nor_takes_a_session(leases: tuple[Any, dict[str, SessionLeases]]) -> (
    None
):  # fmt: skip
    emulator, by_name = leases
    settings = sandbox_settings(replica="a", peer_token=TOKEN, peer_url=by_name["a"].url)
    bridge = SimpleNamespace(telemetry=Telemetry())  # nothing else of the bridge is reached
    router = SessionRouter(bridge, settings, by_name["a"])  # type: ignore[arg-type]
    router.stopping = True

    def place(session: str) -> Placement:
        return Placement(SessionKey.principal("local", session), session, "local")

    async def call(session: str) -> Any:
        return await router.run(RunRequest("1", session=session), place(session), _never, None)

    free = await call("free")  # no Lease: a running replica would create one and hold the session
    assert holders(emulator) == {}
    await by_name["b"].holder(ClaimKey("local", "elsewhere"))  # held by b, which does not answer
    unreachable = await call("elsewhere")
    await by_name["a"].holder(ClaimKey("local", "given-up"))
    await by_name["a"].hand_over(ClaimKey("local", "given-up"))  # lapsed: a running replica would take it over
    given_up = await call("given-up")
    for answer in (free, unreachable, given_up):
        assert answer.is_error and answer.structured_content["error"]["type"] == "ReplicaStopping", text_of(answer)
        assert "call again" in text_of(answer)
    assert holders(emulator) == {ClaimKey("local", "elsewhere").name: "b", ClaimKey("local", "given-up").name: "a"}
    assert by_name["a"].owned == {}


async def _never(*args: object) -> Any:
    raise AssertionError("a stopping replica ran a call in a shared session")
