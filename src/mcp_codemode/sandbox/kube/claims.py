"""One session's ``SandboxClaim``: create or adopt it, wait until it is bound, find its pod, keep it alive, end it.

Why the API server and nothing else: any face replica must find a session's sandbox with no database of its own,
so the claim's name is derived from (principal, session) (``naming.py``) and the claim itself records the replica
that owns it (an annotation). Creating is therefore also the lock: the first replica's create wins, a second one
gets 409 and adopts the claim (re-annotating it), which is what a takeover after the owner died needs.

Waiting is a watch on the one claim (``object_watch.py``), from the version the create (or the adoption) answered
with: a warm claim binds in 0.1-1 s, and a poll (we had 0, 0.1, 0.3, 0.7, 1.5 s...) saw a claim bound at 0.8 s
only at 1.5 s. The watch hears of the status when the controller writes it.

Failures a user can meet end with a fix (``api.explain``); a claim that cannot become ready for a reason the
controller states as final (no such warm pool or template, expired) fails at once instead of at the deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...cluster.api import KubeApiError, api_status, explain, failures
from ...cluster.naming import (
    CLAIMS,
    GROUP,
    MANAGED_BY,
    MANAGER,
    OWNER_ANNOTATION,
    POD_NAME_ANNOTATION,
    SANDBOX_GROUP,
    SANDBOXES,
    VERSION,
    ClaimKey,
    RefreshClock,
    claim_body,
    owner_label_selector,
    shutdown_time,
)
from .object_watch import changes, resource_version

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

# Ready=False reasons agent-sandbox v0.5.6 gives for what no wait will fix (sandboxclaim_controller.go,
# computeReadyCondition). Others (SandboxNotReady, SandboxMissing, AdoptionConflict, ReconcilerError, ...) pass.
FINAL_REASONS = {
    "WarmPoolNotFound": "create the SandboxWarmPool (deploy/kubernetes/base) or set MCP_BRIDGE_KUBE_WARM_POOL",
    "TemplateNotFound": "create the SandboxTemplate the warm pool names (deploy/kubernetes/base)",
    "InvalidMetadata": "report it: the bridge wrote metadata the controller refuses",
    "EnvVarsInjectionRejected": "report it: the bridge's claims carry no env",
    "VolumeClaimTemplatesError": "remove volumeClaimTemplates from the SandboxTemplate",
    "ClaimExpired": "the claim's shutdownTime passed; start the session again",
    "SandboxExpired": "the sandbox's shutdownTime passed; start the session again",
}
MERGE_PATCH = "application/merge-patch+json"


@dataclasses.dataclass(frozen=True)
class Claim:
    """A claim this replica holds: its name, the replica that held it before (None when we created it), and the
    claim as the API answered the create or the adoption (its version is where waiting for it starts)."""

    name: str
    adopted_from: str | None = None
    seen: dict[str, Any] | None = dataclasses.field(default=None, compare=False, repr=False)


@dataclasses.dataclass(frozen=True)
class BoundSandbox:
    """Where a ready claim's guest runs: the Sandbox's name, the pod to exec into, and the RuntimeClass its pod
    template names ("" for none: the node's default runtime, runc), which the backend checks before it execs."""

    sandbox: str
    pod: str
    runtime_class: str = ""


class ClaimNotReady(KubeApiError):
    """The claim did not become ready: the controller gave a final reason, or the deadline passed."""


class ClaimStore:
    """The claims of one namespace, as this replica sees them.

    ``now`` and ``monotonic`` are passed in so the shutdownTime arithmetic and the refresh rate are testable.
    """

    def __init__(
        self,
        api: ApiClient,
        *,
        namespace: str,
        warm_pool: str,
        replica: str,
        ttl: float,
        refresh_interval: float = 60.0,
        now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        from kubernetes_asyncio.client import CustomObjectsApi

        self._objects = CustomObjectsApi(api)
        self._failures = failures()
        self.namespace = namespace
        self.warm_pool = warm_pool
        self.replica = replica
        self.ttl = ttl
        self._now = now
        self._monotonic = monotonic
        self._refresh_interval = refresh_interval
        self._clocks: dict[str, RefreshClock] = {}

    async def acquire(self, key: ClaimKey) -> Claim:
        """Create the session's claim, or adopt it when it exists (another replica's, or ours from before)."""
        body = claim_body(key, self.namespace, self.warm_pool, self.replica, self._now(), self.ttl)
        try:
            created = await self._objects.create_namespaced_custom_object(GROUP, VERSION, self.namespace, CLAIMS, body)
        except self._failures as exc:
            if api_status(exc) != 409:
                raise explain(exc, verb="create", what=CLAIMS, namespace=self.namespace) from None
        else:
            self._clock(key.name).mark(self._monotonic())
            return Claim(key.name, seen=dict(created))
        current = await self.get(key.name)
        previous = (current.get("metadata", {}).get("annotations") or {}).get(OWNER_ANNOTATION)
        adopted = await self._patch(
            key.name,
            {
                "metadata": {"annotations": {OWNER_ANNOTATION: self.replica}},
                "spec": {"lifecycle": {"shutdownTime": shutdown_time(self._now(), self.ttl)}},
            },
        )
        self._clock(key.name).mark(self._monotonic())
        return Claim(key.name, adopted_from=previous if isinstance(previous, str) else "", seen=adopted)

    async def get(self, name: str) -> dict[str, Any]:
        try:
            found = await self._objects.get_namespaced_custom_object(GROUP, VERSION, self.namespace, CLAIMS, name)
        except self._failures as exc:
            raise explain(exc, verb="get", what=CLAIMS, namespace=self.namespace) from None
        return dict(found)

    async def wait_bound(self, name: str, deadline: float, seen: dict[str, Any] | None = None) -> BoundSandbox:
        """Wait until the claim is Ready with a sandbox, then find that sandbox's pod.

        ``deadline`` is in seconds from now; ``seen``: the claim as last read (``Claim.seen``), whose version the
        watch starts from (without it, the claim is read first). Raises ``ClaimNotReady`` on a final reason, when
        the claim is deleted meanwhile, or at the deadline, saying what the claim's status was then.
        """
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline
        state = ["the claim has no status yet"]
        try:
            async with asyncio.timeout_at(end):
                claim = seen if seen is not None else await self.get(name)
                sandbox = self._readiness(name, claim, state)
                if sandbox is None:
                    watched = changes(
                        self._objects, group=GROUP, version=VERSION, namespace=self.namespace, plural=CLAIMS,
                        name=name, since=resource_version(claim), read=lambda: self.get(name), deadline=end,
                    )  # fmt: skip
                    async with contextlib.aclosing(watched):
                        async for kind, claim in watched:
                            if kind == "DELETED":
                                raise ClaimNotReady(
                                    f"SandboxClaim {name} was deleted while the bridge waited for it ({state[0]})",
                                    fix="start the session again; if it recurs, see who deletes claims "
                                    f"(`kubectl get events -n {self.namespace}`)",
                                )
                            sandbox = self._readiness(name, claim, state)
                            if sandbox is not None:
                                break
                if sandbox is None:
                    raise ClaimNotReady(f"SandboxClaim {name}: the watch ended without the claim ({state[0]})")
                return await self._bound(sandbox)
        except TimeoutError:
            raise ClaimNotReady(
                f"SandboxClaim {name} was not ready within {deadline:g} s: {state[0]}",
                fix=f"check the warm pool (`kubectl get sandboxwarmpool {self.warm_pool} -n {self.namespace}`) "
                "and the claim's events (`kubectl describe sandboxclaim "
                f"{name} -n {self.namespace}`)",
            ) from None

    @staticmethod
    def _readiness(name: str, claim: dict[str, Any], state: list[str]) -> str | None:
        """The sandbox of a Ready claim (None while it is not); ``state[0]`` becomes what its status says. Raises
        ``ClaimNotReady`` on a reason the controller gives as final."""
        status = claim.get("status") or {}
        sandbox = (status.get("sandbox") or {}).get("name")
        ready = _condition(status, "Ready")
        if ready is None:
            return None
        reason = str(ready.get("reason") or "")
        state[0] = f"Ready={ready.get('status')} ({reason}: {ready.get('message', '')})"
        if reason in FINAL_REASONS and ready.get("status") != "True":
            raise ClaimNotReady(f"SandboxClaim {name} cannot become ready: {state[0]}", fix=FINAL_REASONS[reason])
        if ready.get("status") == "True" and isinstance(sandbox, str) and sandbox:
            return sandbox
        return None

    async def _bound(self, sandbox: str) -> BoundSandbox:
        """The pod of a Sandbox (named in its annotation when adopted from the warm pool, else the Sandbox's name)
        and the runtime class of the pod template it was made from (agent-sandbox copies the SandboxTemplate's)."""
        try:
            found = await self._objects.get_namespaced_custom_object(
                SANDBOX_GROUP, VERSION, self.namespace, SANDBOXES, sandbox
            )
        except self._failures as exc:
            raise explain(exc, verb="get", what=SANDBOXES, namespace=self.namespace) from None
        pod = ((found.get("metadata") or {}).get("annotations") or {}).get(POD_NAME_ANNOTATION)
        spec = (((found.get("spec") or {}).get("podTemplate") or {}).get("spec")) or {}
        runtime_class = spec.get("runtimeClassName") if isinstance(spec, dict) else None
        return BoundSandbox(
            sandbox,
            pod if isinstance(pod, str) and pod else sandbox,
            runtime_class if isinstance(runtime_class, str) else "",
        )

    async def touch(self, name: str) -> bool:
        """Push the claim's shutdownTime forward, at most once per refresh interval; whether it wrote."""
        clock = self._clock(name)
        now = self._monotonic()
        if not clock.due(now):
            return False
        await self._patch(name, {"spec": {"lifecycle": {"shutdownTime": shutdown_time(self._now(), self.ttl)}}})
        clock.mark(now)
        return True

    async def release(self, name: str) -> bool:
        """Delete the claim (the controller deletes its sandbox and pod); False when it was already gone."""
        self._clocks.pop(name, None)
        try:
            await self._objects.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, CLAIMS, name)
        except self._failures as exc:
            if api_status(exc) == 404:
                return False
            raise explain(exc, verb="delete", what=CLAIMS, namespace=self.namespace) from None
        return True

    async def owned(self, replica: str = "") -> list[str]:
        """The names of the claims this replica owns (the bridge's label, and our name in the owner annotation);
        ``replica``: another replica's instead (one found dead).

        Both are checked here too, not only by the label selector: what is deleted from this list must be ours.
        """
        try:
            found = await self._objects.list_namespaced_custom_object(
                GROUP, VERSION, self.namespace, CLAIMS, label_selector=owner_label_selector()
            )
        except self._failures as exc:
            raise explain(exc, verb="list", what=CLAIMS, namespace=self.namespace) from None
        names = []
        for item in found.get("items") or []:
            meta = item.get("metadata") or {}
            if (meta.get("labels") or {}).get(MANAGED_BY) != MANAGER:
                continue
            if (meta.get("annotations") or {}).get(OWNER_ANNOTATION) == (replica or self.replica) and meta.get("name"):
                names.append(str(meta["name"]))
        return sorted(names)

    async def sweep(self, live: set[str], replica: str = "") -> list[str]:
        """Delete this replica's claims that no live session holds (left by a crash), or every claim of a dead
        ``replica``; the names deleted."""
        deleted = []
        for name in await self.owned(replica):
            if name not in live and await self.release(name):
                deleted.append(name)
        return deleted

    async def _patch(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        try:
            patched = await self._objects.patch_namespaced_custom_object(
                GROUP, VERSION, self.namespace, CLAIMS, name, patch, _content_type=MERGE_PATCH
            )  # type: ignore[call-arg]  # the stub omits it; the method passes **kwargs on (JSON patch otherwise)
        except self._failures as exc:
            raise explain(exc, verb="patch", what=CLAIMS, namespace=self.namespace) from None
        return dict(patched)

    def _clock(self, name: str) -> RefreshClock:
        return self._clocks.setdefault(name, RefreshClock(self._refresh_interval))


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == kind:
            return condition
    return None
