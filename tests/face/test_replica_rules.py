"""The pure rules of shared sessions: the settings that turn it on, a forwarded call's checks, a Lease's lapse."""

from __future__ import annotations

import datetime
import json

import pytest

from mcp_codemode.cluster.leases import (
    PEER_URL_ANNOTATION,
    PEER_URL_SIGNATURE_ANNOTATION,
    holder_of,
    lapsed,
    lease_end,
    lease_signing_key,
    micro_time,
    peer_url_annotations,
)
from mcp_codemode.errors import SettingsError
from mcp_codemode.face.forwarded_calls import (
    BadForwardedCall,
    SignatureCheck,
    parse_forwarded,
    request_signing_key,
    sign_forwarded,
)
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.settings import Settings

TOKEN = "t" * 40
KEY = lease_signing_key(TOKEN)


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
    place, request = parse_forwarded(forwarded(servers=["time"], reset=True), 120)
    assert (place.key, place.label, place.owner) == (SessionKey.principal("local", "analysis"), "analysis", "local")
    assert (request.code, request.timeout, request.reset, request.servers) == ("x", 30.0, True, ("time",))
    assert parse_forwarded(forwarded(timeout=None, extra="ignored"), 120)[1].timeout is None


def nested(depth: int) -> bytes:
    """A forwarded call whose ``key`` is a list nested ``depth`` deep."""
    return forwarded().replace(b'"p:local:analysis"', b"[" * depth + b"]" * depth)


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        (b"not json", "not JSON"),
        (b"[1]", "JSON object"),
        (forwarded(key="p:someone-else:analysis"), "session key"),  # a key that does not match principal and name
        (json.dumps({"key": "p:local:a", "label": "a", "owner": "local"}).encode(), "`code`"),  # no code
        (forwarded(timeout="soon"), "`timeout`"),
        (forwarded(timeout=float("nan")), "`timeout`"),  # NaN is above nothing: it slipped past the ceiling
        (forwarded(timeout=float("inf")), "`timeout`"),
        (forwarded(timeout=-5), "`timeout`"),
        (forwarded(timeout=0), "`timeout`"),
        (forwarded(timeout=121), "`timeout`"),
        (forwarded(timeout=True), "`timeout`"),
        (forwarded(reset="yes"), "`reset`"),
        (forwarded(label=7), "`label`"),
        (forwarded(owner="a:b", key="p:a:b:analysis"), "`owner`"),
        (forwarded(session=["a"]), "`session`"),
        (forwarded(servers="time"), "`servers`"),
        (forwarded(files={"a.txt": "%%%"}), "base64"),
        (forwarded(files=[["a.txt", "eA=="]]), "`files`"),
        (nested(100), "`key`"),  # within the parser's reach: the type check refuses it
        (nested(200_000), "nested too deeply"),  # beyond it: RecursionError, once a 500
    ],
)
def test_a_malformed_forwarded_call_is_refused_naming_what_is_wrong(raw: bytes, named: str) -> None:
    with pytest.raises(BadForwardedCall) as refused:
        parse_forwarded(raw, 120)
    assert named in str(refused.value)


NOW = datetime.datetime(2026, 11, 27, 12, 0, 0, tzinfo=datetime.UTC)


def lease(renewed: datetime.datetime | str, holder: str = "a", duration: int = 30) -> dict[str, object]:
    when = micro_time(renewed) if isinstance(renewed, datetime.datetime) else renewed
    return {
        "metadata": {"resourceVersion": "7", "annotations": peer_url_annotations(KEY, holder, "http://a:8765")},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": when},
    }


def test_a_lease_lapses_after_its_duration_without_renewal() -> None:
    fresh = holder_of(lease(NOW - datetime.timedelta(seconds=29)), NOW, KEY)
    lapsed = holder_of(lease(NOW - datetime.timedelta(seconds=31)), NOW, KEY)
    assert (fresh.replica, fresh.url, fresh.resource_version, fresh.expired) == ("a", "http://a:8765", "7", False)
    assert lapsed.expired


@pytest.mark.parametrize(
    ("renew_time", "duration", "gone"),
    [
        ("2026-11-27T11:59:31.000000Z", 30, False),  # 29 s ago, for 30 s: the owner may renew it yet
        ("2026-11-27T12:00:00.000000Z", 30, False),  # renewed just now
        ("2026-11-27T11:59:30.000000Z", 30, False),  # ends this very instant: not yet past
        ("2026-11-27T11:59:29.999999Z", 30, True),  # a microsecond past its end
        ("2026-11-27T11:59:00.000000Z", 30, True),
        ("2026-11-27T11:55:00.000000Z", 3600, False),  # a long lease holds whatever a short one would do
        ("2026-11-27T12:00:10.000000Z", 5, False),  # renewed by a clock a little ahead of ours
        ("2026-11-27T13:00:00+01:00", 30, False),  # the same instant written in another zone
        ("2026-11-27T11:59:31.000000Z", "30", False),  # a number as text, as some writers send it
        ("2026-11-27T11:59:59.000000Z", None, True),  # no duration: lapsed once renewed
        ("2026-11-27T11:59:59.000000Z", 0, True),
        ("2026-11-27T11:59:59.000000Z", -30, True),
        (None, 30, True),  # never renewed
        ("yesterday", 30, True),
        ("2026-11-27T11:59:59", 30, True),  # no zone: whose noon? Unreadable, so lapsed
        ("2026-11-27T11:59:59.000000Z", "soon", True),
        ("2026-11-27T11:59:59.000000Z", float("nan"), True),
        ("2026-11-27T11:59:59.000000Z", float("inf"), True),
        ("2026-11-27T11:59:59.000000Z", 1e300, True),  # beyond any date
        ("2026-11-27T11:59:59.000000Z", True, True),  # a boolean is no number of seconds
        ("2026-11-27T11:59:59.000000Z", [30], True),
    ],
)
def test_a_lease_lapses_only_once_its_duration_passed_since_its_renewal(
    renew_time: object, duration: object, gone: bool
) -> None:
    """The takeover rule alone: another replica may take a session only when this says its Lease lapsed."""
    assert lapsed(renew_time, duration, NOW) is gone


def test_a_lease_ends_its_duration_after_its_renewal() -> None:
    assert lease_end("2026-11-27T11:59:31.5Z", 30) == NOW + datetime.timedelta(seconds=1.5)
    assert lease_end("yesterday", 30) is None
    read = holder_of(lease(NOW - datetime.timedelta(seconds=10)), NOW, KEY)
    assert read.ends == NOW + datetime.timedelta(seconds=20), "the forwarding replica tells until when it holds"


@pytest.mark.parametrize("broken", [lease("yesterday"), lease(NOW, holder=""), {"metadata": {}, "spec": {}}])
def test_a_lease_that_cannot_be_read_counts_as_lapsed(broken: dict[str, object]) -> None:
    assert holder_of(broken, NOW, KEY).expired


def rewritten(**annotations: str) -> dict[str, object]:
    """A fresh Lease of replica a whose annotations someone changed."""
    changed = lease(NOW)
    changed["metadata"]["annotations"].update(annotations)  # type: ignore[index]
    return changed


@pytest.mark.parametrize(
    "forged",
    [
        rewritten(**{PEER_URL_ANNOTATION: "http://attacker:80"}),  # the address changed, the signature kept
        rewritten(**peer_url_annotations(lease_signing_key("x" * 40), "a", "http://attacker:80")),  # another key
        rewritten(**peer_url_annotations(KEY, "b", "http://a:8765")),  # signed for another holder
        rewritten(**{PEER_URL_SIGNATURE_ANNOTATION: ""}),  # unsigned, as a release before signing wrote it
        rewritten(**{PEER_URL_SIGNATURE_ANNOTATION: "v1:" + "0" * 64}),
    ],
)
def test_a_lease_address_not_signed_with_the_peer_token_is_no_address(forged: dict[str, object]) -> None:
    found = holder_of(forged, NOW, KEY)
    assert (found.replica, found.url, found.expired) == ("a", "", False)
    assert found.unverified, "the warning names what the Lease said"


def test_a_forwarded_call_is_taken_once_with_a_fresh_signature_over_its_own_body() -> None:
    """The owner's check, pure: the MAC covers time, nonce and body; a minute either side; each nonce once."""
    key = request_signing_key("p" * 40)
    now = [1_800_000_000.0]
    check = SignatureCheck(key, clock=lambda: now[0])
    body = b'{"owner": "local"}'
    fresh = sign_forwarded(key, body, now[0])
    assert check.refusal(fresh, body) is None
    assert "already taken once" in (check.refusal(fresh, body) or "")
    assert "does not match" in (check.refusal(sign_forwarded(key, body, now[0]), b'{"owner": "t-x"}') or "")
    other_token = sign_forwarded(request_signing_key("q" * 40), body, now[0])
    assert "does not match" in (check.refusal(other_token, body) or "")
    assert "outside" in (check.refusal(sign_forwarded(key, body, now[0] - 61), body) or "")
    assert "outside" in (check.refusal(sign_forwarded(key, body, now[0] + 61), body) or "")
    for malformed in (None, "", "Bearer " + "p" * 40, fresh.replace("v1:", "v2:"), fresh + "0"):
        assert "must carry" in (check.refusal(malformed, body) or ""), malformed
    late = sign_forwarded(key, body, now[0])
    now[0] += 200  # long after: the nonce of a call that could never pass the window again is forgotten
    assert "outside" in (check.refusal(late, body) or "")


def test_an_https_peer_address_is_refused_at_start_saying_why() -> None:
    """The peer channel has no TLS: an https:// address used to pass and then fail every forwarded call."""
    with pytest.raises(SettingsError, match="no https: the peer channel has no TLS of its own"):
        Settings.load(env={"MCP_BRIDGE_PEER_URL": "https://10.0.3.7:8765", "MCP_BRIDGE_PEER_TOKEN": "p" * 40})
