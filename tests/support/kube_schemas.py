"""Kubernetes objects checked against their schemas offline: built-in kinds against Kubernetes' own OpenAPI schemas
(kubernetes-validate, strict: an unknown field fails), custom kinds against the CRDs vendored under
deploy/kubernetes/vendor with unknown fields refused too (an apiserver would silently prune them, and a pruned typo
in a security setting would go unnoticed). Shared by tests/deploy's modules.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from referencing import Registry, Resource

from .kube_manifests import DEPLOY

Obj = dict[str, Any]
# agent-sandbox v0.5.6's CRDs, and KEDA's ScaledObject and the Prometheus Operator's PodMonitor (overlays/autoscale).
VENDORED_CRDS = sorted(DEPLOY.glob("vendor/*/crds/*.yaml"))
# The Kubernetes release whose schemas judge the built-in kinds. kubernetes-validate 1.37 ships 1.25 to 1.37; an
# older one than the newest catches a field a still-common cluster would not know.
KUBERNETES_VERSION = "1.34"


def _closed(schema: Any) -> Any:
    """The CRD schema with unknown fields refused wherever it lists the known ones, as pruning would drop them."""
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {key: _closed(value) for key, value in schema.items()}
    open_ended = "additionalProperties" in schema or schema.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in schema and not open_ended:
        closed["additionalProperties"] = False
    return closed


@cache
def crd_schemas() -> dict[tuple[str, str], Any]:
    """(apiVersion, kind) -> the closed openAPIV3Schema of every served version of the vendored CRDs."""
    found = {}
    for path in VENDORED_CRDS:
        crd = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)  # libyaml: the CRDs are megabytes
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version["served"]:
                found[(f"{group}/{version['name']}", kind)] = _closed(version["schema"]["openAPIV3Schema"])
    return found


def schema_errors(obj: Obj) -> list[str]:
    """Every schema violation of one object, against its CRD or against Kubernetes' own schema."""
    key = (obj["apiVersion"], obj["kind"])
    where = f"{obj['kind']} {obj['metadata']['name']}"
    if key in crd_schemas():
        metadata_free = dict(obj, metadata={})  # the CRD schema says only "object" for metadata; check it below
        errors = jsonschema.Draft7Validator(crd_schemas()[key]).iter_errors(metadata_free)
        found = [f"{where}: {'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors]
        meta = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj["metadata"]}
        found += [f"{where} metadata: {e}" for e in _builtin_errors(meta)]
        template = obj.get("spec", {}).get("podTemplate")
        if template is not None:  # the pod inside, against the real PodTemplateSpec, strictly
            pod = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": template}
            found += [f"{where} podTemplate: {e}" for e in _builtin_errors(pod)]
        return found
    return [f"{where}: {e}" for e in _builtin_errors(obj)]


def _builtin_errors(obj: Obj) -> list[str]:
    validator = _builtin_validator(obj["apiVersion"], obj["kind"])
    if validator is None:
        return [f"no schema for {obj['apiVersion']} {obj['kind']} in Kubernetes {KUBERNETES_VERSION}"]
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)]


@cache
def _builtin_validator(api_version: str, kind: str) -> jsonschema.protocols.Validator | None:
    """kubernetes-validate's strict schema for the kind, loaded once (its own validate() rereads megabytes per call)."""
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)  # rbac.authorization.k8s.io/v1 -> rbac-v1
    folder = f"kubernetes-json-schema/v{KUBERNETES_VERSION}.0-local-strict"
    try:
        schema = kubernetes_validate.utils.schema_contents(f"{folder}/{kind.lower()}-{group_version}.json", "")
    except FileNotFoundError:
        return None
    definitions = kubernetes_validate.utils.schema_contents(f"{folder}/_definitions.json", "")
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)
