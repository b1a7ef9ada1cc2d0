"""Reaching the Kubernetes API: the optional client, credentials, and API errors turned into errors with a fix.

Why a module of its own: the client (``kubernetes_asyncio``) is an optional extra, so it is imported here and only
when a kubernetes session starts; every other module of the bridge imports without it
(tests/kube/test_core_without_client.py). And every API failure a user can meet (no credentials, a CRD not
installed, RBAC refusing a verb) is translated in one place, into a message that names the object and the fix,
instead of an ``ApiException`` with a JSON body.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import SandboxStartError, SandboxUnavailable
from .permissions import grant_fix, needed

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

EXTRA_FIX = "install the client with `pip install 'mcp-codemode[kubernetes]'` (or `uv add 'mcp-codemode[kubernetes]'`)"
CREDENTIALS_FIX = "refresh the kubeconfig's credentials (or the pod's service account token) and start again"
QUOTA_MARKS = ("exceeded quota", "failed quota")  # what ResourceQuota admission says in its 403 (not RBAC's)
CRDS_FIX = (
    "install agent-sandbox's CRDs and controller (`kubectl apply -k deploy/kubernetes/base`, which pins "
    "agent-sandbox v0.5.6; deploy/kubernetes/README.md)"
)


class KubeApiError(SandboxStartError):
    """A call to the Kubernetes API failed in a way the bridge cannot fix by retrying; the message says how to."""

    def __init__(self, message: str, *, fix: str | None = None, status: int | None = None) -> None:
        super().__init__(message, fix=fix)
        self.status = status


def require_client() -> None:
    """Import the optional client, or fail with the command that installs it."""
    try:
        import kubernetes_asyncio  # noqa: F401
    except ImportError:
        raise SandboxUnavailable(
            "the kubernetes backend needs the optional Kubernetes client, which is not installed", fix=EXTRA_FIX
        ) from None


async def connect(config_file: Path | None, context: str) -> ApiClient:
    """An API client from a kubeconfig (the given file, else KUBECONFIG / ~/.kube/config) or the pod's account.

    Why this order: a replica in a cluster has no kubeconfig and uses its service account; a developer's bridge
    has one. A named file or context that does not load is an error (never a silent fall back to the pod's
    account, which would act with other rights than the user asked for).
    """
    require_client()
    from kubernetes_asyncio import config
    from kubernetes_asyncio.client import ApiClient, Configuration
    from kubernetes_asyncio.config import ConfigException

    configuration = Configuration()
    explicit = config_file is not None or bool(context)
    try:
        loader = await config.load_kube_config(
            config_file=str(config_file) if config_file is not None else None,
            context=context or None,
            client_configuration=configuration,
            persist_config=False,
        )
        configuration.refresh_api_key_hook = _refresher(loader)
    except (ConfigException, OSError, TypeError, ValueError) as exc:
        if explicit:
            where = f"kubeconfig {config_file}" if config_file is not None else "the default kubeconfig"
            what = f" (context {context!r})" if context else ""
            raise SandboxUnavailable(
                f"cannot load {where}{what}: {exc}",
                fix="set MCP_BRIDGE_KUBECONFIG to a readable kubeconfig and MCP_BRIDGE_KUBE_CONTEXT to one of its "
                "contexts (`kubectl config get-contexts`), or leave both empty inside a cluster",
            ) from None
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except ConfigException as incluster:
            raise SandboxUnavailable(
                f"no Kubernetes credentials: no kubeconfig ({exc}) and not in a pod ({incluster})",
                fix="set MCP_BRIDGE_KUBECONFIG (or KUBECONFIG) to a kubeconfig file, or run the bridge in the "
                "cluster with the service account of deploy/kubernetes/base",
            ) from None
    client = ApiClient(configuration=configuration)
    # kubernetes_asyncio's session trusts the environment, so aiohttp read the user's ~/.netrc before every request
    # that carried no auth of its own: the bridge's credentials for the API server are the kubeconfig's or the pod's
    # alone (a netrc entry for the same host beside a bearer token fails the request). A proxy to the API server goes
    # in the kubeconfig (proxy-url), which the configuration carries.
    client.rest_client.pool_manager._trust_env = False
    return client


REFRESH_INTERVAL = 1.0  # seconds between two looks at a kubeconfig's credentials (asked before every request)


def _refresher(loader: Any) -> Callable[[Any], Awaitable[None]]:
    """A hook that loads the kubeconfig's credentials again before a request, at most once a second.

    kubernetes_asyncio reads a kubeconfig's credentials once: an exec plugin's token (GKE, EKS: it expires within
    the hour) and a ``tokenFile`` that something rotates went stale, and every request after was refused. Loading
    again runs the plugin only when its token is near expiry (the library's own rule) and reads a token file
    afresh. The in-cluster loader has its own hook for the pod's rotated token.
    """
    last = -math.inf

    async def refresh(configuration: Any) -> None:
        nonlocal last
        if time.monotonic() - last < REFRESH_INTERVAL:
            return
        last = time.monotonic()
        await loader.load_and_set(configuration)

    return refresh


def failures() -> tuple[type[Exception], ...]:
    """What a client call raises when the API answers with an error or cannot be reached (after require_client)."""
    import aiohttp
    from kubernetes_asyncio.client.exceptions import ApiException

    return (ApiException, aiohttp.ClientError, TimeoutError)


def api_status(exc: BaseException) -> int | None:
    """The HTTP status of a client ``ApiException`` (None for anything else, such as a network error)."""
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) and type(exc).__name__ == "ApiException" else None


def _body(exc: BaseException) -> dict[str, Any]:
    try:
        body = json.loads(getattr(exc, "body", None) or "{}")
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def missing_namespace(exc: BaseException) -> bool:
    """Whether a 404 is about the namespace (its Status's ``details.kind``), not the object asked for."""
    details = _body(exc).get("details")
    return api_status(exc) == 404 and isinstance(details, dict) and details.get("kind") == "namespaces"


def explain(exc: BaseException, *, verb: str, what: str, namespace: str) -> KubeApiError:
    """The error to raise for a failed call: ``verb`` on ``what`` (e.g. "create", "sandboxclaims") in ``namespace``.

    404 on a collection means the resource type or the namespace is missing: the Status's ``details.kind`` says
    which (a namespace that does not exist answers with kind "namespaces"). 403 is RBAC, unless ResourceQuota
    admission refused a create (its message says "exceeded quota"): then waiting or a larger quota helps, and a Role
    would not. 401 is credentials.
    """
    status = api_status(exc)
    body = _body(exc)
    message = str(body.get("message") or getattr(exc, "reason", "") or exc)
    found = body.get("details")
    details: dict[str, Any] = found if isinstance(found, dict) else {}
    if status == 404 and details.get("kind") == "namespaces":
        return KubeApiError(
            f"namespace {namespace!r} does not exist ({message})",
            fix="create it (`kubectl apply -k deploy/kubernetes/base` does) or set MCP_BRIDGE_KUBE_NAMESPACE",
            status=status,
        )
    if status == 404:
        return KubeApiError(
            f"the cluster does not serve {what} in {namespace!r} ({message})", fix=CRDS_FIX, status=status
        )
    if status == 403 and any(mark in message for mark in QUOTA_MARKS):
        return KubeApiError(
            f"the namespace's ResourceQuota refuses to {verb} another of {what} in {namespace!r} ({message})",
            fix="every sandbox the quota allows is in use: wait for sessions to end, lower MCP_BRIDGE_MAX_SESSIONS "
            "or MCP_BRIDGE_WARM_POOL, or raise the quota (deploy/kubernetes/base/resourcequota.yaml) with the "
            f"cluster's room for sandboxes; `kubectl describe resourcequota -n {namespace}` shows used and hard",
            status=status,
        )
    if status == 403:
        fix = (
            grant_fix(what, namespace, (verb,))
            if needed(what, verb)
            else f"check with `kubectl auth can-i {verb} {what} -n {namespace}`"
        )
        return KubeApiError(
            f"RBAC forbids this bridge to {verb} {what} in namespace {namespace!r} ({message})", fix=fix, status=status
        )
    if status == 401:
        return KubeApiError(
            f"the Kubernetes API refused the bridge's credentials ({message})", fix=CREDENTIALS_FIX, status=status
        )
    if status is None:
        return KubeApiError(
            f"cannot reach the Kubernetes API to {verb} {what} ({type(exc).__name__}: {exc})",
            fix="check the kubeconfig's server address and that the API server answers (`kubectl get --raw /version`)",
        )
    return KubeApiError(f"cannot {verb} {what} in namespace {namespace!r}: {message}", status=status)


def exec_refused(status: int, *, namespace: str, pod: str, denied: tuple[str, ...] | None) -> KubeApiError:
    """The error for an exec WebSocket handshake the API server refused with ``status``.

    ``denied``: the verbs on ``pods/exec`` an access review says are missing (None when it could not be asked). The
    handshake's body is not readable here, so a 403 with every verb allowed is named for what else refuses exec
    (an admission policy, or an API server older than the review's answer).
    """
    where = f"pod {pod!r} in namespace {namespace!r}"
    if status == 401:
        return KubeApiError(
            f"the Kubernetes API refused the bridge's credentials when opening the exec stream into {where} (401: "
            "expired or revoked)",
            fix=CREDENTIALS_FIX,
            status=status,
        )
    if status != 403:
        return KubeApiError(f"the API server refused the exec stream into {where} (HTTP {status})", status=status)
    why = (
        "the exec stream is a WebSocket, an HTTP GET, which the API server authorizes as get on pods/exec, and from "
        "Kubernetes 1.35 also as create"
    )
    if denied == ():
        return KubeApiError(
            f"the API server refused the exec stream into {where} (403) though RBAC allows get and create on "
            "pods/exec: an admission policy (a webhook, ValidatingAdmissionPolicy) refuses exec there",
            fix=f"see the API server's audit log or `kubectl exec -n {namespace} {pod} -- true` for the refusal",
            status=status,
        )
    verbs = denied or tuple(p.verb for p in needed("pods/exec"))
    missing = " and ".join(verbs) if denied else "get and create (which one could not be asked)"
    return KubeApiError(
        f"RBAC forbids this bridge to open the exec stream into {where}: it lacks {missing} on pods/exec ({why})",
        fix=grant_fix("pods/exec", namespace, verbs),
        status=status,
    )
