"""The pure rules of shared sessions: the settings that turn it on, a forwarded call's checks, a Lease's lapse."""

from __future__ import annotations

import datetime
import json

import pytest

from mcp_codemode.errors import SettingsError
from mcp_codemode.face.replicas import _parse
from mcp_codemode.sandbox.kube.leases import PEER_URL_ANNOTATION, holder_of, micro_time
from mcp_codemode.settings import Settings

TOKEN = "t" * 40


def test_sharing_is_off_by_default_and_on_with_a_token_and_an_address() -> None:
    assert Settings.load(env={}).shares_sessions is False
    shared = Settings.load(env={"MCP_BRIDGE_PEER_TOKEN": TOKEN, "MCP_BRIDGE_PEER_URL": "http://10.0.3.7:8765/"})
    assert shared.shares_sessions and shared.peer_url == "http://10.0.3.7:8765"
    assert TOKEN not in repr(shared), "the shared secret must not reach logs through repr"


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"MCP_BRIDGE_PEER_TOKEN": TOKEN}, "MCP_BRIDGE_PEER_URL is not"),
        ({"MCP_BRIDGE_PEER_URL": "http://10.0.3.7:8765"}, "MCP_BRIDGE_PEER_TOKEN is not"),
    ],
)
def test_half_of_the_sharing_settings_is_refused_naming_the_other(env: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        Settings.load(env=env)


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("MCP_BRIDGE_PEER_TOKEN", "short-secret"),
        ("MCP_BRIDGE_PEER_URL", "10.0.3.7:8765"),
        ("MCP_BRIDGE_PEER_URL", "http://10.0.3.7:8765/internal"),
        ("MCP_BRIDGE_SESSION_LEASE", "2"),
    ],
)
def test_bad_sharing_values_are_refused_with_the_rule(name: str, raw: str) -> None:
    with pytest.raises(SettingsError, match=name):
        Settings.load(env={name: raw})


def forwarded(**changes: object) -> bytes:
    body = {"key": "p:local:analysis", "label": "analysis", "owner": "local", "code": "x", "timeout": 30}
    body.update(changes)
    return json.dumps(body).encode()


def test_a_forwarded_call_is_read_into_its_place_and_request() -> None:
    place, request = _parse(forwarded(servers=["time"], reset=True))
    assert (place.key, place.label, place.owner) == ("p:local:analysis", "analysis", "local")
    assert (request.code, request.timeout, request.reset, request.servers) == ("x", 30.0, True, ("time",))


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        forwarded(key="p:someone-else:analysis"),  # a key that does not match its principal and name
        json.dumps({"key": "p:local:a", "label": "a", "owner": "local"}).encode(),  # no code
        forwarded(timeout="soon"),
    ],
)
def test_a_malformed_forwarded_call_is_refused(raw: bytes) -> None:
    with pytest.raises(ValueError, match=r"forwarded call|session key"):
        _parse(raw)


NOW = datetime.datetime(2026, 11, 27, 12, 0, 0, tzinfo=datetime.UTC)


def lease(renewed: datetime.datetime | str, holder: str = "a", duration: int = 30) -> dict[str, object]:
    when = micro_time(renewed) if isinstance(renewed, datetime.datetime) else renewed
    return {
        "metadata": {"resourceVersion": "7", "annotations": {PEER_URL_ANNOTATION: "http://a:8765"}},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": when},
    }


def test_a_lease_lapses_after_its_duration_without_renewal() -> None:
    fresh = holder_of(lease(NOW - datetime.timedelta(seconds=29)), NOW)
    lapsed = holder_of(lease(NOW - datetime.timedelta(seconds=31)), NOW)
    assert (fresh.replica, fresh.url, fresh.resource_version, fresh.expired) == ("a", "http://a:8765", "7", False)
    assert lapsed.expired


@pytest.mark.parametrize("broken", [lease("yesterday"), lease(NOW, holder=""), {"metadata": {}, "spec": {}}])
def test_a_lease_that_cannot_be_read_counts_as_lapsed(broken: dict[str, object]) -> None:
    assert holder_of(broken, NOW).expired
