"""Every Kubernetes API permission the kubernetes backend and the session Leases use: one table, read by all.

Why one table: the face's Role (deploy/kubernetes/base/face-rbac.yaml), ``doctor``'s access reviews and the tests'
emulated authorizer must agree on exactly what the bridge does, and three hand-written lists drift. ``doctor`` asks
the cluster about each row (``checks.py``), the error of a refused call names its row's Role line (``api.py``), and
tests/deploy checks that the rendered Role grants these rows and nothing else.

The exec stream is the row that once went wrong: the channel is a WebSocket, an HTTP GET, which the API server
authorizes as ``get`` on ``pods/exec``; from Kubernetes 1.35 it also checks ``create`` (kubernetes/kubernetes#134577,
feature gate AuthorizePodWebsocketUpgradeCreatePermission). kubectl hides this by falling back to SPDY, a POST and so
``create`` alone; this client has no such fallback, so it needs both verbs.

The shared state (``shared_state.py``) reads and writes one Secret, the sign-ins, so those rows name it: the Role
grants them with ``resourceNames`` and the face can read no other Secret of its namespace. Saved tools are ConfigMaps
named after hashes the manifests cannot know, and ``create`` and ``list`` cannot be limited by name in RBAC at all, so
their rows hold for every ConfigMap of the namespace (which holds nothing else secret).

Not listed, because every authenticated account has them on a default cluster (the bootstrap ClusterRoles
``system:basic-user`` and ``system:discovery``): creating a SelfSubjectAccessReview (``doctor``) and reading the
discovery documents (``doctor``'s CRD check).
"""

from __future__ import annotations

import dataclasses
import json

from .naming import (
    CLAIMS,
    CONFIGMAPS,
    GROUP,
    LEASE_GROUP,
    LEASES,
    SANDBOX_GROUP,
    SANDBOXES,
    SECRETS,
    SIGN_INS_SECRET,
    WARM_POOLS,
)

ROLE_FILE = "deploy/kubernetes/base/face-rbac.yaml"


@dataclasses.dataclass(frozen=True)
class Permission:
    """One verb on one resource (``subresource`` empty for the resource itself), and which code needs it; ``names``
    are the only objects it is needed on (the Role's ``resourceNames``; empty: any)."""

    group: str
    resource: str
    subresource: str
    verb: str
    why: str
    names: tuple[str, ...] = ()

    @property
    def what(self) -> str:
        """The resource as a Role names it: ``pods/exec``, ``sandboxclaims``."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource

    def can_i(self, namespace: str) -> str:
        """The kubectl line that asks the same question (``pods/exec`` would be read as the pod named exec)."""
        sub = f" --subresource={self.subresource}" if self.subresource else ""
        name = f"/{self.names[0]}" if self.names else ""
        return f"kubectl auth can-i {self.verb} {self.resource}{name}{sub} -n {namespace}"


PERMISSIONS: tuple[Permission, ...] = (
    Permission(GROUP, CLAIMS, "", "create", "one claim per worker (claims.py acquire)"),
    Permission(GROUP, CLAIMS, "", "get", "read the owner of a claim adopted after a 409; read one afresh (410 Gone)"),
    Permission(GROUP, CLAIMS, "", "watch", "wait for a claim to be bound (claims.py wait_bound)"),
    Permission(GROUP, CLAIMS, "", "patch", "push shutdownTime forward; re-annotate an adopted claim"),
    Permission(GROUP, CLAIMS, "", "delete", "end a worker's claim; sweep orphans and a dead replica's claims"),
    Permission(GROUP, CLAIMS, "", "list", "find the claims of this replica (at start) or of a dead one"),
    Permission(GROUP, WARM_POOLS, "", "get", "doctor reports the warm pool; /readyz sees it answer"),
    Permission(SANDBOX_GROUP, SANDBOXES, "", "get", "find the pod a bound claim's Sandbox adopted"),
    Permission("", "pods", "exec", "get", "the exec WebSocket is an HTTP GET, authorized as get"),
    Permission("", "pods", "exec", "create", "and from Kubernetes 1.35 as create too (kubernetes#134577)"),
    Permission(LEASE_GROUP, LEASES, "", "get", "find who holds a shared session"),
    Permission(LEASE_GROUP, LEASES, "", "create", "hold a session no replica holds"),
    Permission(LEASE_GROUP, LEASES, "", "patch", "renew a held Lease; take a lapsed one over; hand one over at stop"),
    Permission(LEASE_GROUP, LEASES, "", "delete", "end a replica's liveness Lease (its own at stop, a dead one's)"),
    Permission("", SECRETS, "", "get", "read the sign-ins (OAuth tokens) every replica shares", (SIGN_INS_SECRET,)),
    Permission("", SECRETS, "", "patch", "write a sign-in: login, refresh, logout", (SIGN_INS_SECRET,)),
    Permission("", CONFIGMAPS, "", "create", "save a tool (one ConfigMap per principal and tool)"),
    Permission("", CONFIGMAPS, "", "list", "load a principal's saved tools, selected by its hash, for a new session"),
    Permission("", CONFIGMAPS, "", "patch", "save a tool again under the same name"),
    Permission("", CONFIGMAPS, "", "delete", "delete a saved tool"),
)


def needed(what: str, verb: str = "") -> tuple[Permission, ...]:
    """The rows for ``what`` (``pods/exec``, ``sandboxclaims``), only ``verb``'s when given."""
    return tuple(p for p in PERMISSIONS if p.what == what and (not verb or p.verb == verb))


def role_line(what: str) -> str:
    """The rule of the face's Role that grants every verb the bridge uses on ``what``, as a YAML flow line."""
    rows = needed(what)
    if not rows:
        raise KeyError(f"the bridge uses no permission on {what}")
    verbs = ", ".join(json.dumps(p.verb) for p in rows)
    names = ", ".join(json.dumps(name) for name in rows[0].names)
    only = f", resourceNames: [{names}]" if names else ""
    return f'- {{apiGroups: [{json.dumps(rows[0].group)}], resources: ["{what}"]{only}, verbs: [{verbs}]}}'


def grant_fix(what: str, namespace: str, verbs: tuple[str, ...] = ()) -> str:
    """The fix for a refusal on ``what``: the Role line to have, and the kubectl lines that check it."""
    rows = [p for p in needed(what) if not verbs or p.verb in verbs]
    checks = " and ".join(f"`{p.can_i(namespace)}`" for p in rows)
    return (
        f"the face's Role in namespace {namespace!r} needs `{role_line(what)}` ({ROLE_FILE} has it; bind the "
        f"bridge's account to that Role); check with {checks}"
    )
