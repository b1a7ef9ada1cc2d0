"""An emulated Kubernetes API for the claim and Lease tests: kmock's emulator (PyPI), on 127.0.0.1, with shims.

There is no Kubernetes control plane on these machines (no registry ships one; docs/kubernetes.md says what only
a real cluster proves). kmock's ``KubernetesEmulator`` is the most real stand-in a registry offers: an aiohttp
server that stores the objects clients create, patch and delete, and answers reads from them, so the bridge's real
client code (kubernetes_asyncio) runs against a real HTTP API. It is not Kubernetes: no admission, defaults,
conversion, controllers, pods or exec. The shims make it answer as an API server does where our code looks:

* a create answers 201 Created (kubernetes_asyncio decodes a create's body only then);
* a created object gets ``uid``, ``resourceVersion`` and ``creationTimestamp``;
* a resource that was not declared answers 404, as a CRD that is not installed does (kmock would store it);
* a list honours an equality ``labelSelector`` (kmock ignores it);
* a patch that carries ``metadata.resourceVersion`` applies only to that version, else 409 Conflict (the optimistic
  concurrency a Lease takeover and the shared sign-ins rely on), and every patch gets a new ``resourceVersion``;
  patches are applied one at a time, the check with its write (kmock's own lock is taken after the check, so two
  patches of one version could otherwise both pass it);
* discovery answers at ``/apis/`` (the client's path) as at ``/apis``;
* kmock keeps only the latest requests (``KEPT_REQUESTS``): it matched each new one against every one before, so a
  run of a few hundred requests took seconds per request;
* a watch (``?watch=true``, in any spelling an API server accepts) is served as an API server serves it, from a
  history of versioned changes: ``resourceVersion``, ``fieldSelector=metadata.name``, ``timeoutSeconds``, 410 Gone
  for a compacted version, and streams the test can end (kube_watch.py says what is modelled);
* an authorizer, which kmock does not have, that denies by default: every request is checked against ``grants``,
  what the face's account may do by the RENDERED deploy/kubernetes/base (its Role, through the RoleBinding to the
  account its Deployment runs as; kube_manifests.py), and refused with 403 Forbidden as an API server refuses it;
  a request without the kubeconfig's bearer token gets 401; a rule with ``resourceNames`` allows requests that
  name one of them (as RBAC: never a create or a list). Allowed beyond the Role, as on a default cluster to
  every authenticated account: discovery (``system:discovery``) and creating a ``SelfSubjectAccessReview``
  (``system:basic-user``), which is answered from ``grants`` too. An operator's token (``admin_token``, none unless
  a test sets one) may do everything, as a cluster admin's kubectl does. The exec stand-in (exec_endpoint.py) asks
  ``decide`` for its WebSocket GET as an API server from 1.35 does: ``get`` AND ``create`` on ``pods/exec``.
  What it does not model: ClusterRoles and aggregated roles, impersonation, webhooks, and any API server's own
  version of these rules (only a real cluster proves those).

The tests play agent-sandbox's controller by writing ``status`` on the stored objects (``agent_sandbox_controller``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import aiohttp.web
import kmock
import yaml

from mcp_codemode.cluster import naming

from .kube_manifests import FAST_LOADER, Attributes, Grants, base_grants, base_objects
from .kube_watch import WatchStreams, is_watch

TOKEN = "emulator-token"  # the bearer token of write_kubeconfig's user: the face's account
REVIEWS = ("authorization.k8s.io", "selfsubjectaccessreviews")  # every authenticated account may create these
VERBS = {kmock.action.CREATE: "create", kmock.action.FETCH: "get", kmock.action.LIST: "list",
         kmock.action.WATCH: "watch", kmock.action.DELETE: "delete"}  # fmt: skip
KEPT_REQUESTS = 64  # the latest requests kmock keeps (it keeps all: a long run slowed down with every request)
CRDS = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "vendor" / "agent-sandbox-v0.5.6" / "crds"


class ClusterEmulator(kmock.KubernetesEmulator):
    """kmock's emulator with the shims of the module docstring."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self["get /apis/"] << self._serve_apis
        self.watching = WatchStreams()  # versions, the history of changes, and the watch streams
        self._updates = asyncio.Lock()
        self.conflicts = 0  # patches refused with 409 for naming a version that is no longer current
        self.before_patches: list[Callable[[], None]] = []  # each runs once, just before the next patch is checked
        self.declared: set[tuple[str, str, str]] = set()
        self.patch_types: list[str | None] = []  # the Content-Type of every PATCH, in order
        self.address = ""  # http://127.0.0.1:PORT once served
        self.grants: Grants = base_grants()  # what the face's account may do (kube_manifests.face_grants)
        self.token = TOKEN  # the bearer token of the face's account
        self.admin_token = ""  # an operator's, allowed everything (tests/support/kubectl_stand_in.py reads with it)
        self.declare("authorization.k8s.io", "v1", "selfsubjectaccessreviews")  # every API server serves it
        self.decisions: list[tuple[Attributes, bool]] = []  # every request authorized, in order, and the answer

    def decide(
        self, attributes: Attributes, namespace: str | None, authorization: str, name: str | None = None
    ) -> aiohttp.web.Response | None:
        """None when the request may go on, else the 401 or 403 an API server answers (with its Status body)."""
        if self.admin_token and authorization == f"Bearer {self.admin_token}":
            return None
        if authorization != f"Bearer {self.token}":
            return _unauthorized()
        verb, group, resource, subresource = attributes
        ok = (group, resource) == REVIEWS or self.grants.allows(attributes, namespace, name)
        self.decisions.append((attributes, ok))
        if ok:
            return None
        what = f"{resource}/{subresource}" if subresource else resource
        where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
        message = (f'{resource}{"." + group if group else ""} is forbidden: User "{self.grants.account}" cannot '
                   f'{verb} resource "{what}" in API group "{group}"{where}')  # fmt: skip
        return _status(403, "Forbidden", message)

    def used(self) -> set[Attributes]:
        """Every (verb, group, resource, subresource) the bridge was allowed, reviews left out."""
        return {attributes for attributes, ok in self.decisions if ok and attributes[1:3] != REVIEWS}

    def declare(self, group: str, version: str, plural: str) -> kmock.resource:
        self.declared.add((group, version, plural))
        found = kmock.resource(group, version, plural)
        self.resources[found] = kmock.ResourceInfo(namespaced=True)
        return found

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        if len(self._requests) > KEPT_REQUESTS:  # kmock matches each request against all it kept: O(n) each
            del self._requests[:-KEPT_REQUESTS]
        resource = request.resource
        authorization = request.headers.get("Authorization", "")
        if resource is None:  # discovery and other non-resource URLs: any authenticated account
            refused = None if authorization == f"Bearer {self.token}" else _unauthorized()
        else:
            refused = self.decide(_attributes(request, resource), request.namespace, authorization, request.name)
        if refused is not None:
            return refused
        if resource is not None and (resource.group, resource.version, resource.plural) not in self.declared:
            raise kmock.KubernetesResourceNotFoundError()
        if resource is not None and is_watch(request.method.value, request.params):
            live = [obj.raw for (kind, namespace, _), obj in self.objects.items()
                    if kind == resource and not obj.deleted and request.namespace in (None, namespace)]  # fmt: skip
            assert request._raw_request is not None
            return await self.watching.serve(request._raw_request, resource, request.namespace, live)
        if resource is not None and request.action == kmock.action.CREATE and isinstance(request.data, dict):
            meta = request.data.setdefault("metadata", {})
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", "2026-11-26T00:00:00Z")
            meta["resourceVersion"] = self.watching.next_version()
        if resource is not None and resource.plural == "selfsubjectaccessreviews" and isinstance(request.data, dict):
            asked = (request.data.get("spec") or {}).get("resourceAttributes") or {}
            keys = ("verb", "group", "resource", "subresource")
            verb, group, plural, sub = (str(asked.get(key) or "") for key in keys)
            allowed = self.grants.allows((verb, group, plural, sub), asked.get("namespace"), asked.get("name"))
            return aiohttp.web.json_response({**request.data, "status": {"allowed": allowed}}, status=201)
        if resource is not None and request.action == kmock.action.UPDATE:
            self.patch_types.append(request.headers.get("Content-Type"))
            async with self._updates:  # the version check and the write are one step, as etcd's compare-and-swap
                if self.before_patches:
                    self.before_patches.pop(0)()  # another writer's write, landing between a read and this patch
                conflict = self._bump_version(resource, request)
                if conflict:
                    return conflict
                response = await super()._handle(request)
        else:
            response = await super()._handle(request)
        if resource is not None and request.action == kmock.action.CREATE and response.status == 200:
            response.set_status(201)
        if resource is not None and response.status in (200, 201):
            self._record(resource, request)
        selector = request.params.get("labelSelector") if resource is not None else None
        if selector and request.action == kmock.action.LIST and isinstance(response, aiohttp.web.Response):
            listing = json.loads(bytes(response.body)) if isinstance(response.body, bytes | bytearray) else {}
            response.body = json.dumps(_select(listing, selector)).encode()
        return response

    def _bump_version(self, resource: kmock.resource, request: kmock.Request) -> aiohttp.web.Response | None:
        """A patch that names a ``resourceVersion`` applies only to that version (409 otherwise), as on an API
        server; every applied patch gets a new version."""
        if request.name is None or not isinstance(request.data, dict):
            return None
        try:
            current = self.objects[resource, request.namespace, request.name]
        except KeyError:
            return None
        if current.deleted:
            return None
        meta = request.data.setdefault("metadata", {})
        expected = meta.get("resourceVersion")
        if expected is not None and expected != (current.raw.get("metadata") or {}).get("resourceVersion"):
            self.conflicts += 1
            status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409,
                      "message": f"the object has been modified; resourceVersion {expected} is stale"}  # fmt: skip
            return aiohttp.web.json_response(status, status=409)
        meta["resourceVersion"] = self.watching.next_version()
        return None

    def _record(self, resource: kmock.resource, request: kmock.Request) -> None:
        """Keep a change an HTTP request made, for the watches (kube_watch.py); a delete gets a version of its own."""
        name = request.name
        if request.action == kmock.action.CREATE and isinstance(request.data, dict):
            name = (request.data.get("metadata") or {}).get("name")
        kinds = {kmock.action.CREATE: "ADDED", kmock.action.UPDATE: "MODIFIED", kmock.action.DELETE: "DELETED"}
        kind = kinds.get(request.action) if request.action is not None else None
        if kind is None or not name or (resource, request.namespace, name) not in self.objects:
            return
        stored = self.objects[resource, request.namespace, name]
        if kind == "DELETED":
            gone = json.loads(json.dumps(stored.last.raw))
            gone.setdefault("metadata", {})["resourceVersion"] = self.watching.next_version()
            self.watching.record(resource, request.namespace, kind, gone)
        elif not stored.deleted:
            self.watching.record(resource, request.namespace, kind, stored.raw)

    def stored(self, resource: kmock.resource) -> list[dict[str, Any]]:
        """The live objects of one resource, as the emulator holds them."""
        return [obj.raw for (kind, _, _), obj in self.objects.items() if kind == resource and not obj.deleted]

    def write_status(self, resource: kmock.resource, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Play the controller: set an object's ``status`` (a change with a new version, which watches see)."""
        self._change(resource, namespace, name, {"status": status})

    def annotate(self, resource: kmock.resource, namespace: str, name: str, annotations: dict[str, str]) -> None:
        self._change(resource, namespace, name, {"metadata": {"annotations": annotations}})

    def _change(self, resource: kmock.resource, namespace: str, name: str, patch: dict[str, Any]) -> None:
        stored = self.objects[resource, namespace, name]
        stored.patch(patch)
        stored.patch({"metadata": {"resourceVersion": self.watching.next_version()}})
        self.watching.record(resource, namespace, "MODIFIED", stored.raw)

    def write(self, resource: kmock.resource, namespace: str, name: str, changes: dict[str, Any]) -> None:
        """Another client's write: ``changes`` merged into the object, which gets a new ``resourceVersion``."""
        self._change(resource, namespace, name, changes)


def _attributes(request: kmock.Request, resource: kmock.resource) -> Attributes:
    """The request as an authorizer sees it: the verb of its method and path, as an API server's RequestInfo."""
    if is_watch(request.method.value, request.params):  # kmock knows "watch=true" only; the client sends "True"
        verb = "watch"
    elif request.action == kmock.action.UPDATE:
        verb = "update" if request.method == kmock.method.PUT else "patch"
    elif request.action == kmock.action.DELETE and request.name is None:
        verb = "deletecollection"
    else:
        verb = VERBS.get(request.action, str(request.method).lower()) if request.action else "unknown"
    return verb, resource.group or "", resource.plural or "", request.subresource or ""


def _status(code: int, reason: str, message: str) -> aiohttp.web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}  # fmt: skip
    return aiohttp.web.json_response(body, status=code)


def _unauthorized() -> aiohttp.web.Response:
    return _status(401, "Unauthorized", "Unauthorized")


def _select(listing: dict[str, Any], selector: str) -> dict[str, Any]:
    wanted = dict(term.split("=", 1) for term in selector.split(","))
    items = [item for item in listing.get("items", []) if _labels(item).items() >= wanted.items()]
    return {**listing, "items": items}


def _labels(item: dict[str, Any]) -> dict[str, str]:
    labels = (item.get("metadata") or {}).get("labels") or {}
    return dict(labels)


def write_kubeconfig(path: Path, server: str) -> Path:
    """A kubeconfig whose one context points the real client at ``server`` with a bearer token."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "emulator", "cluster": {"server": server}}],
                "users": [{"name": "bridge", "user": {"token": "emulator-token"}}],
                "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "bridge"}}],
                "current-context": "emulator",
            }
        ),
        encoding="utf-8",
    )
    return path


@contextlib.asynccontextmanager
async def emulated_cluster(tmp: Path) -> AsyncIterator[tuple[ClusterEmulator, Path]]:
    """A running emulator on 127.0.0.1 (its address in ``emulator.address``) and a kubeconfig that points at it."""
    async with ClusterEmulator() as emulator, kmock.Server(emulator, host="127.0.0.1") as server:
        emulator.address = str(server.url).rstrip("/")
        try:
            yield emulator, write_kubeconfig(tmp / "kubeconfig", emulator.address)
        finally:
            emulator.watching.close()  # a watch left open would hold the server's shutdown


def crd_schema(filename: str, version: str) -> dict[str, Any]:
    """The openAPIV3Schema a vendored CRD serves for ``version``."""
    crd = yaml.load((CRDS / filename).read_text(encoding="utf-8"), Loader=FAST_LOADER)
    for served in crd["spec"]["versions"]:
        if served["name"] == version:
            schema: dict[str, Any] = served["schema"]["openAPIV3Schema"]
            return schema
    raise KeyError(f"{filename} does not serve {version}")


def schema_problems(objects: Iterable[dict[str, Any]], schema: dict[str, Any]) -> list[str]:
    """Every way the objects break the CRD's schema (OpenAPI v3 structural schemas read as JSON Schema)."""
    import jsonschema

    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    problems = []
    for obj in objects:
        name = (obj.get("metadata") or {}).get("name")
        for error in validator.iter_errors(obj):
            problems.append(f"{name}: {'/'.join(map(str, error.absolute_path))}: {error.message}")
    return problems


def shared_state_objects(emulator: ClusterEmulator) -> tuple[kmock.resource, kmock.resource]:
    """Serve Secrets and ConfigMaps, and hold the objects of them the rendered base applies (the sign-ins Secret,
    empty), as a cluster does after ``kubectl apply -k deploy/kubernetes/base``; (secrets, configmaps)."""
    secrets = emulator.declare("", "v1", naming.SECRETS)
    configmaps = emulator.declare("", "v1", naming.CONFIGMAPS)
    for obj in base_objects():
        if obj["kind"] in ("Secret", "ConfigMap"):
            resource = secrets if obj["kind"] == "Secret" else configmaps
            meta = obj["metadata"]
            stamped = {**meta, "uid": str(uuid.uuid4()), "resourceVersion": emulator.watching.next_version()}
            emulator.objects[resource, meta["namespace"], meta["name"]] = {**obj, "metadata": stamped}
    return secrets, configmaps


@contextlib.asynccontextmanager
async def agent_sandbox_controller(
    emulator: ClusterEmulator, namespace: str, runtime_class: str | None = "gvisor"
) -> AsyncIterator[list[str]]:
    """Play agent-sandbox's controller: bind every new claim to a fresh Sandbox whose pod was adopted from the warm
    pool, its pod template naming ``runtime_class`` as deploy/kubernetes/base's template does (None: a template
    without one, as overlays/no-gvisor renders it); yields the pods bound, in order."""
    runtime = {"runtimeClassName": runtime_class} if runtime_class is not None else {}
    claims = emulator.declare(naming.GROUP, naming.VERSION, naming.CLAIMS)
    sandboxes = emulator.declare(naming.SANDBOX_GROUP, naming.VERSION, naming.SANDBOXES)
    pods: list[str] = []

    async def loop() -> None:
        while True:
            for claim in emulator.stored(claims):
                name = claim["metadata"]["name"]
                if claim.get("status"):
                    continue
                sandbox, pod = f"sbx-{len(pods) + 1}", f"warm-pod-{len(pods) + 1}"
                emulator.objects[sandboxes, namespace, sandbox] = {
                    "apiVersion": f"{naming.SANDBOX_GROUP}/{naming.VERSION}", "kind": "Sandbox",
                    "metadata": {"name": sandbox, "namespace": namespace,
                                 "annotations": {naming.POD_NAME_ANNOTATION: pod}},
                    "spec": {"podTemplate": {"spec": {**runtime, "containers": [{"name": "sandbox", "image": "x"}]}}},
                }  # fmt: skip
                emulator.write_status(claims, namespace, name, {
                    "sandbox": {"name": sandbox},
                    "conditions": [{"type": "Ready", "status": "True", "reason": "DependenciesReady", "message": "",
                                    "lastTransitionTime": "2026-11-26T12:00:01Z"}],
                })  # fmt: skip
                pods.append(pod)
            await asyncio.sleep(0.02)

    task = asyncio.create_task(loop())
    try:
        yield pods
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
