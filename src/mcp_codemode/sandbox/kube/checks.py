"""What ``doctor`` asks the cluster when the kubernetes backend is selected: one ``Check`` per question, with a fix.

Why these questions: they are what a first claim fails on, in the order it would fail (credentials, the CRDs, the
warm pool, each verb the backend uses: the rows of ``permissions.py``), asked before any session so the user meets
them in ``doctor`` rather than in an agent's first cell. The runtime class cannot be asked: RuntimeClass is
cluster-scoped and the face's Role is namespaced on purpose, so the check says what each claim must run under
(the backend refuses any other) and names ``smoke.sh``, which checks gVisor inside a real sandbox.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ...cluster.api import CRDS_FIX, connect, explain, failures
from ...cluster.naming import GROUP, SANDBOX_GROUP, VERSION, WARM_POOLS
from ...cluster.permissions import PERMISSIONS, Permission, grant_fix
from ...errors import CodemodeError

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

    from ...settings import Settings

__all__ = ["WARM_POOLS", "Check", "allowed", "cluster_checks"]  # WARM_POOLS: tests read it here


@dataclasses.dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None  # None: could not be checked from here
    detail: str
    fix: str = ""


async def cluster_checks(settings: Settings) -> list[Check]:
    """Every check, stopping after credentials when there are none (nothing else can be asked then)."""
    try:
        api = await connect(settings.kube_config, settings.kube_context)
    except CodemodeError as exc:
        return [Check("credentials", False, str(exc).split("; ")[0], exc.fix or "")]
    try:
        checks = [Check("credentials", True, f"the API server at {api.configuration.host}")]
        checks.append(await _crds(api))
        checks.append(await _warm_pool(api, settings.kube_namespace, settings.kube_warm_pool))
        checks += await _access(api, settings.kube_namespace)
        checks.append(_runtime_class(settings.kube_runtime_class))
        return checks
    finally:
        await api.close()


def _runtime_class(wanted: str) -> Check:
    """What the face requires of each claim's pod (checked on its Sandbox before the guest starts); whether the
    RuntimeClass exists cannot be asked, since it is cluster-scoped and the face's Role is namespaced on purpose."""
    if wanted == "none":
        return Check(
            "runtime class",
            None,
            "none required (MCP_BRIDGE_KUBE_RUNTIME_CLASS=none, overlays/no-gvisor): sandbox pods run under the "
            "node's runc, without gVisor (see the weak spots above)",
            "install gVisor on the nodes and drop overlays/no-gvisor (docs/kubernetes.md, 'Clusters without gVisor')",
        )
    return Check(
        "runtime class",
        None,
        f"each claimed sandbox must run under RuntimeClass {wanted!r} (MCP_BRIDGE_KUBE_RUNTIME_CLASS) or it is "
        "refused; that the RuntimeClass exists cannot be asked: it is cluster-scoped and the face's Role is not",
        "run deploy/kubernetes/smoke.sh, which checks that a sandbox runs under gVisor",
    )


async def _crds(api: ApiClient) -> Check:
    from kubernetes_asyncio.client import ApisApi

    try:
        groups = await ApisApi(api).get_api_versions()
    except failures() as exc:
        error = explain(exc, verb="list", what="API groups", namespace="")
        return Check("agent-sandbox CRDs", False, str(error).split("; ")[0], error.fix or "")
    served = {group.name: [v.version for v in group.versions or []] for group in groups.groups or []}
    missing = [g for g in (SANDBOX_GROUP, GROUP) if VERSION not in served.get(g, [])]
    if missing:
        have = "; ".join(f"{g} serves {', '.join(served[g]) or 'nothing'}" for g in missing if g in served)
        return Check(
            "agent-sandbox CRDs",
            False,
            f"{VERSION} of {', '.join(missing)} is not served" + (f" ({have})" if have else ""),
            CRDS_FIX,
        )
    return Check("agent-sandbox CRDs", True, f"{SANDBOX_GROUP} and {GROUP} serve {VERSION}")


async def _warm_pool(api: ApiClient, namespace: str, name: str) -> Check:
    from kubernetes_asyncio.client import CustomObjectsApi

    try:
        pool: dict[str, Any] = await CustomObjectsApi(api).get_namespaced_custom_object(
            GROUP, VERSION, namespace, WARM_POOLS, name
        )
    except failures() as exc:
        error = explain(exc, verb="get", what=WARM_POOLS, namespace=namespace)
        if error.status == 404:
            return Check(
                "warm pool",
                False,
                f"SandboxWarmPool {name!r} is not in namespace {namespace!r}",
                "apply deploy/kubernetes/base (it creates it) or set MCP_BRIDGE_KUBE_WARM_POOL to yours",
            )
        return Check("warm pool", False, str(error).split("; ")[0], error.fix or "")
    wanted = (pool.get("spec") or {}).get("replicas", 0)
    ready = (pool.get("status") or {}).get("readyReplicas", 0)
    if not ready:
        return Check(
            "warm pool",
            False,
            f"SandboxWarmPool {name!r} has no ready sandbox (0 of {wanted}): every claim will wait or cold-start",
            f"see why its pods do not start: `kubectl get pods -n {namespace}` and `kubectl describe "
            f"sandboxwarmpool {name} -n {namespace}`",
        )
    return Check("warm pool", True, f"SandboxWarmPool {name!r}: {ready} of {wanted} sandboxes ready")


async def allowed(api: ApiClient, namespace: str, permission: Permission) -> bool:
    """Whether the cluster lets this bridge do ``permission`` in ``namespace`` (a SelfSubjectAccessReview, which
    every authenticated account may create; for a row limited to named objects, on each of them: a Role with
    ``resourceNames`` answers no to the question about any object). Raises what the client raises when the review
    cannot be asked."""
    from kubernetes_asyncio.client import (
        AuthorizationV1Api,
        V1ResourceAttributes,
        V1SelfSubjectAccessReview,
        V1SelfSubjectAccessReviewSpec,
    )

    for name in permission.names or (None,):  # a row limited to named objects is asked about each of them
        attributes = V1ResourceAttributes(
            namespace=namespace,
            verb=permission.verb,
            group=permission.group,
            resource=permission.resource,
            subresource=permission.subresource or None,
            name=name,
        )
        body = V1SelfSubjectAccessReview(
            api_version="authorization.k8s.io/v1",
            kind="SelfSubjectAccessReview",
            spec=V1SelfSubjectAccessReviewSpec(resource_attributes=attributes),
        )
        review = await AuthorizationV1Api(api).create_self_subject_access_review(body)
        if not (review.status and review.status.allowed):
            return False
    return True


async def _access(api: ApiClient, namespace: str) -> list[Check]:
    """One check per row of the permissions table: exactly what the backend and the Leases use."""
    checks = []
    for permission in PERMISSIONS:
        name = f"may {permission.verb} {permission.what}"
        try:
            ok = await allowed(api, namespace, permission)
        except failures() as exc:
            error = explain(exc, verb="create", what="selfsubjectaccessreviews", namespace=namespace)
            checks.append(Check(name, None, str(error).split("; ")[0], error.fix or ""))
            continue
        if ok:
            checks.append(Check(name, True, f"allowed ({permission.why})"))
        else:
            fix = grant_fix(permission.what, namespace, (permission.verb,))
            checks.append(Check(name, False, f"denied by RBAC (needed: {permission.why})", fix))
    return checks
