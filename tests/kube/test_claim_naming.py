"""The pure parts of the claim side of the kubernetes backend: names, labels, the claim body, TTL arithmetic.

No emulator here: these run without a Kubernetes client and without a network. The body is checked against the
vendored CRD schema of the pinned agent-sandbox release, as the emulator tests check what the emulator stored.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from mcp_codemode.cluster.naming import (
    MANAGED_BY,
    OWNER_ANNOTATION,
    ClaimKey,
    RefreshClock,
    claim_body,
    shutdown_time,
)

CRDS = Path(__file__).resolve().parents[2] / "deploy/kubernetes/vendor/agent-sandbox-v0.5.6/crds"
DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
NOW = datetime.datetime(2026, 11, 26, 18, 0, 0, 250_000, tzinfo=datetime.UTC)


def claim_schema() -> dict[str, Any]:
    yaml = pytest.importorskip("yaml")
    crd = yaml.safe_load((CRDS / "extensions.agents.x-k8s.io_sandboxclaims.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


@pytest.mark.parametrize(
    ("principal", "session"),
    [("t-0123456789ab", "default"), ("local", "Ünïcode session/../x" * 20), ("", ""), ("x" * 5000, "my session")],
)
def test_claim_name_is_a_dns_label_and_leaks_nothing(principal: str, session: str) -> None:
    key = ClaimKey(principal, session)
    assert DNS_1123_LABEL.match(key.name) and len(key.name) <= 63
    assert key.name == ClaimKey(principal, session).name  # any replica derives the same name
    for value in [key.name, *key.labels().values()]:
        for text in (principal, session):
            assert not text or text[:6] not in value  # none of the texts is made of hex digits
        assert DNS_1123_LABEL.match(value)  # label values: 63 characters of the same alphabet


def test_claim_names_differ_per_principal_and_session() -> None:
    names = {ClaimKey(p, s).name for p in ("alice", "bob") for s in ("one", "two")}
    assert len(names) == 4
    # The two parts are hashed apart: moving text from one to the other gives another name.
    assert ClaimKey("ab", "c").name != ClaimKey("a", "bc").name


def test_labels_carry_the_hashes_and_the_manager() -> None:
    key = ClaimKey("alice", "s1")
    labels = key.labels()
    assert labels[MANAGED_BY] == "mcp-codemode"
    assert key.principal_hash in labels.values() and key.session_hash in labels.values()
    assert key.name.endswith(f"{key.principal_hash}-{key.session_hash}")


def test_shutdown_time_is_utc_rfc3339_ttl_later() -> None:
    assert shutdown_time(NOW, 1200) == "2026-11-26T18:20:00Z"
    eastern = NOW.astimezone(datetime.timezone(datetime.timedelta(hours=-5)))
    assert shutdown_time(eastern, 60) == "2026-11-26T18:01:00Z"


def test_claim_body_is_valid_against_the_vendored_crd_and_has_no_env() -> None:
    body = claim_body(ClaimKey("alice", "s1"), "mcp-codemode", "pool", "replica-a", NOW, 1200)
    jsonschema.validate(body, claim_schema())
    spec: Any = body["spec"]
    assert "env" not in spec  # a claim with env always cold-starts
    assert spec["warmPoolRef"] == {"name": "pool"}
    assert spec["lifecycle"] == {"shutdownTime": "2026-11-26T18:20:00Z", "shutdownPolicy": "Delete"}
    metadata: Any = body["metadata"]
    assert metadata["annotations"] == {OWNER_ANNOTATION: "replica-a"}


def test_refresh_clock_pushes_at_most_once_per_interval() -> None:
    clock = RefreshClock(interval=60)
    assert clock.due(1000.0)
    clock.mark(1000.0)
    assert not clock.due(1000.0) and not clock.due(1059.9)
    assert clock.due(1060.0)
