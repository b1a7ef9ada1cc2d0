"""Which face replica owns a session: one ``coordination.k8s.io`` Lease per (principal, session).

Why Leases: they are the API server's own record of "who holds this, until when" (leader election uses them), every
cluster serves them, and a patch that carries the ``resourceVersion`` it read is applied only if nobody changed the
Lease since, so taking one over is atomic: two replicas never both come away holding a session. The Lease is named
like the session's claim (``naming.ClaimKey``: hashes of principal and session), so any replica finds it with no
database of its own; the holder's address for forwarded calls rides in an annotation.

That address is where a forwarding replica sends the shared peer token and the caller's code, and Leases can be
written by whoever the namespace's RBAC lets, not only by replicas. So the address is signed: a second annotation
holds an HMAC-SHA256 of (holder, address) under a key derived from the peer token (``lease_signing_key``), which
only replicas know. ``holder_of`` gives a holder's address only when its signature verifies; a Lease whose
address does not verify (rewritten by someone without the token, written by a replica with another token, or
by a release that did not sign) has no address, and the caller refuses to forward there (``Holder.unverified``).
Binding the holder's name stops a signature from being moved to another holder; a signature does not expire, so a
replica's old address stays valid for that replica's name (pods get new names when they are replaced).

A replica that stops (SIGTERM: a rollout, a node drain, a scale-down) hands its sessions over (``hand_over``): it
keeps each Lease, names itself in it as having given it up (``HANDED_OVER_ANNOTATION``) and shortens it to a
second, so the next replica to get a call for the session takes it over at once, and can tell the client where it
lived and that its state went with the replica, instead of starting it fresh without a word (a deleted Lease would
say nothing). A replica of an older release reads such a Lease as lapsed a second later.

The owner renews its Leases every third of their duration (``renew``). One not renewed for its whole duration has
lapsed (``lapsed``), and only then may another replica take it over: a live owner renews every Lease it holds, so a
lapse is the owner's own word that it stopped, while a refused connection may be a blip between two live replicas.
The takeover patch names the ``resourceVersion`` it read, so an owner that renewed in between keeps the session.
Lapse compares ``renewTime`` with this replica's clock, so the replicas' clocks must agree to well within a lease
(30 s by default; NTP keeps them within milliseconds).

Each replica also renews a Lease of its own, its liveness (``replica_lease_name``), first in every round. Why a
second Lease: a replica's sandboxes are claimed per worker, not per session, so taking one session over cannot say
which claims went with it; they may be deleted only once their replica is dead, and one session's lapse does not
prove that (a Lease whose release failed lapses on a replica that lives on). The liveness Lease does: renewed
before the session Leases of the same round, it lapses no later than they do when its replica stops.

Lives beside the API client (``api.py``) because the kubernetes backend's claims speak to the same API with the same
client and errors, and the face's replicas (which hold these Leases) import this package and never the backend; it
knows nothing of sandboxes.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import hmac
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .api import api_status, explain, failures
from .naming import LEASE_GROUP as LEASE_GROUP  # defined in naming.py so permissions.py needs no client code
from .naming import LEASE_VERSION as LEASE_VERSION
from .naming import LEASES as LEASES
from .naming import MANAGED_BY, MANAGER, ClaimKey

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

REPLICA_LEASE_PREFIX = "mcp-replica-"  # a session Lease is mcp-<hex>-<hex>: "replica" is not hex, so no clash
PEER_URL_ANNOTATION = "mcp-codemode.dev/peer-url"
PEER_URL_SIGNATURE_ANNOTATION = "mcp-codemode.dev/peer-url-signature"
HANDED_OVER_ANNOTATION = "mcp-codemode.dev/handed-over"  # when its holder gave the session up as it stopped
_SIGNATURE_VERSION = "v1:"
MERGE_PATCH = "application/merge-patch+json"


@dataclasses.dataclass(frozen=True)
class Holder:
    """Who holds a session's Lease, as last read."""

    replica: str
    url: str  # where that replica takes forwarded calls: only ever an address whose signature verified
    resource_version: str
    expired: bool = False
    taken_from: str = ""  # the replica this one just took the Lease from (its state is lost)
    unverified: str = ""  # the address the Lease named when its signature did not verify (for the warning)
    ends: datetime.datetime | None = None  # when the Lease lapses unless renewed (None: unreadable, so lapsed)
    # Read: its holder gave it up as it stopped. Taken over: the replica it was taken from had done so.
    handed_over: bool = False


def lease_signing_key(peer_token: str) -> bytes:
    """The key that signs Lease addresses: derived, so the peer token itself never keys anything but its own use."""
    return hmac.new(peer_token.encode(), b"mcp-codemode/lease-peer-url/v1", hashlib.sha256).digest()


def sign_peer_url(key: bytes, holder: str, url: str) -> str:
    """The signature of ``url`` as ``holder``'s address (JSON of the pair: no two pairs encode alike)."""
    message = json.dumps([holder, url], separators=(",", ":")).encode()
    return _SIGNATURE_VERSION + hmac.new(key, message, hashlib.sha256).hexdigest()


def peer_url_annotations(key: bytes, holder: str, url: str) -> dict[str, str]:
    """The two annotations a Lease carries for its holder: the address and its signature."""
    return {PEER_URL_ANNOTATION: url, PEER_URL_SIGNATURE_ANNOTATION: sign_peer_url(key, holder, url)}


def micro_time(when: datetime.datetime) -> str:
    """A Kubernetes ``MicroTime``: RFC 3339 in UTC with microseconds."""
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_end(renew_time: object, duration: object) -> datetime.datetime | None:
    """When a Lease renewed at ``renew_time`` (its ``MicroTime`` text) for ``duration`` seconds lapses; None when
    either cannot be read (no time zone, not a number, out of range): nobody can show such a Lease is held."""
    try:
        renewed = datetime.datetime.fromisoformat(str(renew_time).replace("Z", "+00:00"))
        if duration is None:  # no duration: the Lease lapses as it is renewed
            duration = 0
        if isinstance(duration, bool) or not isinstance(duration, int | float | str) or renewed.tzinfo is None:
            return None
        return renewed + datetime.timedelta(seconds=float(duration))
    except (TypeError, ValueError, OverflowError):
        return None


def lapsed(renew_time: object, duration: object, now: datetime.datetime) -> bool:
    """The takeover rule: a Lease has lapsed once ``duration`` seconds passed since ``renew_time`` without renewal
    (its holder renews every third of that while it lives), or when it cannot be read."""
    end = lease_end(renew_time, duration)
    return end is None or end < now


def replica_lease_name(replica: str) -> str:
    """The name of ``replica``'s liveness Lease: hashed, as a replica's name may be any text and long."""
    return REPLICA_LEASE_PREFIX + hashlib.sha256(f"replica\0{replica}".encode()).hexdigest()[:16]


def holder_of(lease: dict[str, Any], now: datetime.datetime, key: bytes) -> Holder:
    """Read a Lease: its holder, address (if signed with ``key``), version, and whether it lapsed (unparseable times
    count as lapsed)."""
    meta = lease.get("metadata") or {}
    spec = lease.get("spec") or {}
    annotations = meta.get("annotations") or {}
    url = str(annotations.get(PEER_URL_ANNOTATION) or "")
    signature = str(annotations.get(PEER_URL_SIGNATURE_ANNOTATION) or "")
    ends = lease_end(spec.get("renewTime"), spec.get("leaseDurationSeconds"))
    holder = str(spec.get("holderIdentity") or "")
    handed_over = bool(annotations.get(HANDED_OVER_ANNOTATION))
    expired = lapsed(spec.get("renewTime"), spec.get("leaseDurationSeconds"), now) or not holder or handed_over
    signed = hmac.compare_digest(signature.encode(), sign_peer_url(key, holder, url).encode())
    version = str(meta.get("resourceVersion") or "")
    if signed and url:
        return Holder(holder, url, version, expired, ends=ends, handed_over=handed_over)
    return Holder(holder, "", version, expired, unverified=url or "(none)", ends=ends, handed_over=handed_over)


class SessionLeases:
    """This replica's view of the session Leases of one namespace; ``owned`` are those it holds."""

    def __init__(
        self,
        api: ApiClient,
        *,
        namespace: str,
        replica: str,
        url: str,
        key: bytes,
        duration: float,
        now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
        on_takeover: Callable[[], object] = lambda: None,
    ) -> None:
        """``on_takeover`` is called each time this replica takes a session's Lease from another (the metrics)."""
        from kubernetes_asyncio.client import CustomObjectsApi

        self._objects = CustomObjectsApi(api)
        self._failures = failures()
        self.namespace = namespace
        self.replica = replica
        self.url = url
        self._key = key  # signs this replica's address and checks the others' (lease_signing_key)
        self.duration = duration
        self._now = now
        self._on_takeover = on_takeover
        self.owned: dict[str, ClaimKey] = {}

    def _mine(self, version: str = "") -> Holder:
        return Holder(self.replica, self.url, version)

    async def holder(self, key: ClaimKey) -> Holder:
        """Who holds the session now: this replica when the Lease was free, lapsed or already ours.

        A Lease this replica holds is answered without asking the API: ``renew`` finds out within a third of the
        lease if another replica took it (which it only does once this one stopped renewing it).
        """
        if key.name in self.owned:
            return self._mine()
        for _attempt in range(3):  # a Lease deleted between our create and our read: create again
            created = await self._create(key)
            if created is not None:
                return created
            current = await self._get(key.name)
            if current is None:
                continue
            found = self._read(current)
            if found.replica == self.replica:
                self.owned[key.name] = key
                return found
            if found.expired:
                return await self.take_over(key, found)
            return found
        raise explain(RuntimeError("the Lease kept disappearing"), verb="create", what=LEASES, namespace=self.namespace)

    async def peek(self, key: ClaimKey) -> Holder | None:
        """Who holds the session, only read: never created nor taken (a stopping replica must hold none); None when
        it has no Lease."""
        if key.name in self.owned:
            return self._mine()
        current = await self._get(key.name)
        return self._read(current) if current is not None else None

    async def take_over(self, key: ClaimKey, previous: Holder) -> Holder:
        """Take the Lease from ``previous``, read lapsed (the only case callers may take one); who holds it then.

        The patch carries the version ``previous`` was read at: if another replica took it meanwhile, the API
        refuses (409) and that replica is the answer.
        """
        now = micro_time(self._now())
        annotations = {**self._annotations(), HANDED_OVER_ANNOTATION: None}  # null: a merge patch removes it
        patch = {
            "metadata": {"resourceVersion": previous.resource_version, "annotations": annotations},
            "spec": {"holderIdentity": self.replica, "acquireTime": now, "renewTime": now,
                     "leaseDurationSeconds": round(self.duration)},
        }  # fmt: skip
        try:
            updated = await self._patch(key.name, patch)
        except self._failures as exc:
            if api_status(exc) == 404:
                return await self.holder(key)
            if api_status(exc) != 409:
                raise explain(exc, verb="patch", what=LEASES, namespace=self.namespace) from None
            current = await self._get(key.name)
            return self._read(current) if current is not None else await self.holder(key)
        self.owned[key.name] = key
        self._on_takeover()
        version = str((updated.get("metadata") or {}).get("resourceVersion") or "")
        return Holder(self.replica, self.url, version, taken_from=previous.replica, handed_over=previous.handed_over)

    async def renew(self) -> list[ClaimKey]:
        """Renew this replica's liveness Lease, then every session Lease it holds; returns the sessions another
        replica has taken meanwhile.

        Liveness first: its ``renewTime`` is then no later than the sessions' of the same round, so when this replica
        stops, it lapses no later than they do, and whoever takes a session over finds this replica dead.
        Each renewal writes the signed address again: a Lease written by a release that did not sign gets its
        signature, and one whose address someone rewrote points back here within a third of the lease.
        """
        await self.beat()
        lost = []
        for name, key in list(self.owned.items()):
            current = await self._get(name)
            found = self._read(current) if current is not None else None
            if found is None or found.replica != self.replica:
                self.owned.pop(name, None)
                lost.append(key)
                continue
            patch = {"metadata": {"resourceVersion": found.resource_version, "annotations": self._annotations()},
                     "spec": {"renewTime": micro_time(self._now())}}  # fmt: skip
            try:
                await self._patch(name, patch)
            except self._failures as exc:
                if api_status(exc) not in (404, 409):  # changed under us: the next round reads who holds it
                    raise explain(exc, verb="patch", what=LEASES, namespace=self.namespace) from None
        return lost

    async def hand_over(self, key: ClaimKey) -> None:
        """Give the session up because this replica stops: the Lease stays, marked as given up and lapsing within a
        second, so the next replica to get a call for it holds it at once and says where it lived (module docstring).
        """
        if self.owned.pop(key.name, None) is None:
            return
        for _attempt in range(3):  # 409: changed since read (this replica's own renewal in flight): read again
            current = await self._get(key.name)
            found = self._read(current) if current is not None else None
            if found is None or found.replica != self.replica:
                return  # gone, or taken meanwhile: nothing of ours to give up
            patch = {"metadata": {"resourceVersion": found.resource_version,
                                  "annotations": {HANDED_OVER_ANNOTATION: micro_time(self._now())}},
                     "spec": {"leaseDurationSeconds": 1}}  # fmt: skip
            try:
                await self._patch(key.name, patch)
                return
            except self._failures as exc:
                if api_status(exc) == 404:
                    return
                if api_status(exc) != 409:
                    raise explain(exc, verb="patch", what=LEASES, namespace=self.namespace) from None

    async def hand_over_all(self) -> None:
        """Hand over every session this replica still holds (it is stopping)."""
        for key in list(self.owned.values()):
            await self.hand_over(key)

    async def end_liveness(self) -> None:
        """Delete this replica's liveness Lease: the last thing a replica that stops does, once its sandboxes are
        gone (until then, a replica killed midway is found dead by its lapse, and its sandboxes are deleted)."""
        await self._delete(replica_lease_name(self.replica))

    async def release_all(self) -> None:
        """Hand every session over, then end the liveness Lease: a whole stop, for a replica with no sandboxes of
        its own to end between the two."""
        await self.hand_over_all()
        await self.end_liveness()

    async def beat(self) -> None:
        """Renew this replica's liveness Lease, creating it the first time (or after someone deleted it)."""
        name = replica_lease_name(self.replica)
        now = micro_time(self._now())
        spec = {"holderIdentity": self.replica, "leaseDurationSeconds": round(self.duration), "renewTime": now}
        try:
            await self._patch(name, {"spec": spec})
            return
        except self._failures as exc:
            if api_status(exc) != 404:
                raise explain(exc, verb="patch", what=LEASES, namespace=self.namespace) from None
        body = {
            "apiVersion": f"{LEASE_GROUP}/{LEASE_VERSION}",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": self.namespace, "labels": {MANAGED_BY: MANAGER}},
            "spec": {**spec, "acquireTime": now},
        }
        try:
            await self._objects.create_namespaced_custom_object(
                LEASE_GROUP, LEASE_VERSION, self.namespace, LEASES, body
            )
        except self._failures as exc:
            if api_status(exc) != 409:  # created meanwhile (a restart under the same name): the next round renews
                raise explain(exc, verb="create", what=LEASES, namespace=self.namespace) from None

    async def replica_lapsed(self, replica: str) -> bool:
        """Whether ``replica`` is dead: its liveness Lease exists and lapsed. A missing one proves nothing (a replica
        that stopped cleanly deleted it, having ended its own sandboxes), so it counts as alive."""
        found = await self._get(replica_lease_name(replica))
        if found is None:
            return False
        spec = found.get("spec") or {}
        return lapsed(spec.get("renewTime"), spec.get("leaseDurationSeconds"), self._now())

    async def forget_replica(self, replica: str) -> None:
        """Delete a dead replica's liveness Lease once its sandboxes are gone: pods get new names, so nobody would."""
        if replica != self.replica:
            await self._delete(replica_lease_name(replica))

    async def _create(self, key: ClaimKey) -> Holder | None:
        now = micro_time(self._now())
        body = {
            "apiVersion": f"{LEASE_GROUP}/{LEASE_VERSION}",
            "kind": "Lease",
            "metadata": {"name": key.name, "namespace": self.namespace, "labels": key.labels(),
                         "annotations": self._annotations()},
            "spec": {"holderIdentity": self.replica, "leaseDurationSeconds": round(self.duration),
                     "acquireTime": now, "renewTime": now},
        }  # fmt: skip
        try:
            created = await self._objects.create_namespaced_custom_object(
                LEASE_GROUP, LEASE_VERSION, self.namespace, LEASES, body
            )
        except self._failures as exc:
            if api_status(exc) == 409:
                return None
            raise explain(exc, verb="create", what=LEASES, namespace=self.namespace) from None
        self.owned[key.name] = key
        return self._mine(str((dict(created).get("metadata") or {}).get("resourceVersion") or ""))

    def _annotations(self) -> dict[str, str]:
        return peer_url_annotations(self._key, self.replica, self.url)

    def _read(self, lease: dict[str, Any]) -> Holder:
        return holder_of(lease, self._now(), self._key)

    async def _get(self, name: str) -> dict[str, Any] | None:
        try:
            found = await self._objects.get_namespaced_custom_object(
                LEASE_GROUP, LEASE_VERSION, self.namespace, LEASES, name
            )
        except self._failures as exc:
            if api_status(exc) == 404:
                return None
            raise explain(exc, verb="get", what=LEASES, namespace=self.namespace) from None
        return dict(found)

    async def _delete(self, name: str) -> None:
        try:
            await self._objects.delete_namespaced_custom_object(
                LEASE_GROUP, LEASE_VERSION, self.namespace, LEASES, name
            )
        except self._failures as exc:
            if api_status(exc) != 404:
                raise explain(exc, verb="delete", what=LEASES, namespace=self.namespace) from None

    async def _patch(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        found = await self._objects.patch_namespaced_custom_object(
            LEASE_GROUP, LEASE_VERSION, self.namespace, LEASES, name, patch, _content_type=MERGE_PATCH
        )  # type: ignore[call-arg]  # the stub omits it; the method passes **kwargs on (JSON patch otherwise)
        return dict(found)
