"""What the bridge's objects in the cluster are called and carry (a session's SandboxClaim and Lease, the shared
state's Secret and ConfigMaps): pure functions, no Kubernetes client.

Why derived and not stored: any face replica that receives a session must find its claim with no shared database,
so the name is a function of (principal, session) alone. It is hashed because both are user text (a session name,
a token's principal) that must not leak into object names, labels or audit logs of the cluster, and because a
DNS-1123 name has a 63-character limit and a narrow alphabet.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib

from ..session_keys import BadSessionKey, SessionKey

GROUP = "extensions.agents.x-k8s.io"
VERSION = "v1beta1"  # served and stored by agent-sandbox v0.5.6 (deploy/kubernetes/vendor/)
CLAIMS = "sandboxclaims"
SANDBOX_GROUP = "agents.x-k8s.io"
SANDBOXES = "sandboxes"
WARM_POOLS = "sandboxwarmpools"
LEASE_GROUP = "coordination.k8s.io"  # the session Leases of replicas that share sessions (leases.py)
LEASE_VERSION = "v1"
LEASES = "leases"
AGENT_SANDBOX_VERSION = "v0.5.6"
# Shared state (shared_state.py): the one Secret of sign-ins, which the face's Role names (resourceNames), and the
# ConfigMaps of saved tools, one per (principal, tool).
SECRETS = "secrets"
CONFIGMAPS = "configmaps"
SIGN_INS_SECRET = "mcp-codemode-oauth"  # noqa: S105 - an object's name, not a password
SAVED_TOOL_PREFIX = "mcp-tool-"
COMPONENT_LABEL = "app.kubernetes.io/component"
SAVED_TOOL_COMPONENT = "saved-tool"

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "mcp-codemode"
PRINCIPAL_LABEL = "mcp-codemode.dev/principal-hash"
SESSION_LABEL = "mcp-codemode.dev/session-hash"
OWNER_ANNOTATION = "mcp-codemode.dev/owner-replica"
# agent-sandbox records the pod of a Sandbox that adopted a warm-pool pod here; without it the pod is named after
# the Sandbox (controllers/sandbox_controller.go, resolvePodName, v0.5.6).
POD_NAME_ANNOTATION = "agents.x-k8s.io/pod-name"

CLAIM_PREFIX = "mcp-"
_HASH_CHARS = 16  # 64 bits of SHA-256 per part: a collision between two live sessions is not a practical worry


def _digest(kind: str, text: str) -> str:
    return hashlib.sha256(f"{kind}\0{text}".encode()).hexdigest()[:_HASH_CHARS]


@dataclasses.dataclass(frozen=True)
class ClaimKey:
    """One session of one principal, as the cluster sees it: only hashes of the two."""

    principal: str
    session: str

    @classmethod
    def of(cls, key: SessionKey) -> ClaimKey:
        """The cluster's name of a principal's session, the kind replicas share (its claim's, its Lease's)."""
        if key.kind != "principal":
            raise BadSessionKey(f"only a principal's session is shared between replicas, not {key}")
        return cls(key.owner, key.name)

    @property
    def principal_hash(self) -> str:
        return _digest("principal", self.principal)

    @property
    def session_hash(self) -> str:
        return _digest("session", self.session)

    @property
    def name(self) -> str:
        """``mcp-<principal hash>-<session hash>``: 37 characters, a valid DNS-1123 label and object name."""
        return f"{CLAIM_PREFIX}{self.principal_hash}-{self.session_hash}"

    def labels(self) -> dict[str, str]:
        return {MANAGED_BY: MANAGER, PRINCIPAL_LABEL: self.principal_hash, SESSION_LABEL: self.session_hash}


def saved_tool_object(owner: str, tool: str) -> str:
    """The ConfigMap of ``owner``'s saved tool ``tool``: ``mcp-tool-<principal hash>-<tool hash>``, 42 characters.

    Both parts hashed: an owner is any text (a principal's name, "local") and a tool name any Python identifier
    (capitals, underscores, any script), neither of which a DNS-1123 name can hold; hashing with a kind of its own
    keeps each part's digest apart from the other's, so no owner and tool can name another pair's object."""
    return f"{SAVED_TOOL_PREFIX}{_digest('principal', owner)}-{_digest('saved-tool', tool)}"


def saved_tool_labels(owner: str) -> dict[str, str]:
    """What a saved tool's ConfigMap is selected by: its owner's hash (the claims' label), never the owner."""
    return {MANAGED_BY: MANAGER, COMPONENT_LABEL: SAVED_TOOL_COMPONENT, PRINCIPAL_LABEL: _digest("principal", owner)}


def shutdown_time(now: datetime.datetime, ttl: float) -> str:
    """The claim's ``lifecycle.shutdownTime`` (RFC 3339, UTC, whole seconds) ``ttl`` seconds after ``now``."""
    when = now.astimezone(datetime.UTC) + datetime.timedelta(seconds=ttl)
    return when.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def claim_body(key: ClaimKey, namespace: str, warm_pool: str, owner: str, now: datetime.datetime,
               ttl: float) -> dict[str, object]:  # fmt: skip
    """The SandboxClaim to create. No ``env``: a claim with env cannot adopt a warm pod and always cold-starts."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SandboxClaim",
        "metadata": {
            "name": key.name,
            "namespace": namespace,
            "labels": key.labels(),
            "annotations": {OWNER_ANNOTATION: owner},
        },
        "spec": {
            "warmPoolRef": {"name": warm_pool},
            "lifecycle": {"shutdownTime": shutdown_time(now, ttl), "shutdownPolicy": "Delete"},
        },
    }


def owner_label_selector() -> str:
    return f"{MANAGED_BY}={MANAGER}"


@dataclasses.dataclass
class RefreshClock:
    """Whether a use should push the claim's shutdownTime forward: at most once per ``interval`` seconds.

    Why rate-limited: every cell would otherwise write to the API server; the backstop only needs to stay ahead of
    the bridge's own idle expiry, which holds as long as ttl > idle timeout + interval (checked by the caller).
    Times are monotonic seconds, passed in, so the rule is testable without waiting.
    """

    interval: float
    last: float | None = None

    def due(self, now: float) -> bool:
        return self.last is None or now - self.last >= self.interval

    def mark(self, now: float) -> None:
        self.last = now
