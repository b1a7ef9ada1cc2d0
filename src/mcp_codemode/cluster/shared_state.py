"""What face replicas share through the Kubernetes API: sign-ins in one Secret, saved tools in ConfigMaps.

Why the API and not a shared volume: every cluster serves it, where a ReadWriteMany volume is missing from most;
RBAC scopes it to the face's account (the Secret by name: the face reads no other Secret); Secrets are encrypted at
rest where the cluster encrypts them; and ``resourceVersion`` gives the compare-and-swap concurrent writers need,
which files on a network volume do not (``flock`` over NFS is a gamble). Each object holds at most 1 MiB.

* Sign-ins (``SecretRecords``): one data key per server (``upstream/sign_ins.sign_in_key``) in the Secret
  ``naming.SIGN_INS_SECRET``, which the manifests create empty. A swap reads the Secret, compares that key with
  what the writer expects, and patches the key alone naming the ``resourceVersion`` it read: a 409 (someone wrote
  the Secret meanwhile) reads again, and only a change to this key is a lost swap. Every server's tokens fit
  easily (a few KiB each); a write that would pass the limit is refused, naming the servers to log out of.
* Saved tools (``ToolConfigMaps``): one ConfigMap per (principal, tool), named by hashes of both
  (``naming.saved_tool_object``) and selected by the principal's hash, so two replicas saving two tools of one
  principal never touch the same object, and one tool of at most 100,000 characters always fits. The limits and
  the meaning of the data are the run service's (``runs/saved_tools_cluster.py``); this only stores it.

Knows nothing of OAuth or of tools: records and data in, records and data out, API failures explained
(``api.explain``) with the fix.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .api import KubeApiError, api_status, connect, explain, failures, missing_namespace
from .leases import MERGE_PATCH
from .naming import CONFIGMAPS, SECRETS, SIGN_INS_SECRET, saved_tool_labels, saved_tool_object

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient, CoreV1Api

MAX_OBJECT_BYTES = 1 << 20  # what the API server accepts in a Secret's or a ConfigMap's data
CONFLICT_ROUNDS = 10  # 409s (other keys written meanwhile) before a swap reports that it lost


class LazyApi:
    """An API client made on first use (a bridge that never signs in nor saves a tool never connects) and shared by
    the stores of one bridge."""

    def __init__(self, config_file: Path | None, context: str) -> None:
        self.config_file = config_file
        self.context = context
        self._api: ApiClient | None = None
        self._lock = asyncio.Lock()

    async def core(self) -> CoreV1Api:
        from kubernetes_asyncio.client import CoreV1Api

        async with self._lock:
            if self._api is None:
                self._api = await connect(self.config_file, self.context)
        return CoreV1Api(self._api)

    async def aclose(self) -> None:
        if self._api is not None:
            api, self._api = self._api, None
            await api.close()


class SecretRecords:
    """``upstream.sign_ins.SignInStore`` on the keys of one Secret."""

    def __init__(self, api: LazyApi, namespace: str, name: str = SIGN_INS_SECRET) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self._seen: dict[str, dict[str, Any] | None] = {}

    def where(self, key: str) -> str:
        return f"key {key} of Secret {self.namespace}/{self.name}"

    def known(self, key: str) -> dict[str, Any] | None:
        return self._seen.get(key)

    async def read(self, key: str) -> dict[str, Any] | None:
        data, _ = await self._get()
        found = self._seen[key] = _decode(data.get(key))
        return found

    async def swap(self, key: str, expected: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
        for _ in range(CONFLICT_ROUNDS):
            data, version = await self._get()
            current = self._seen[key] = _decode(data.get(key))
            if current != expected:
                return False
            if new is None and key not in data:
                return True
            encoded = _encode(new) if new is not None else None
            if encoded is not None:
                self._check_size(data, key, encoded)
            try:
                await self._patch({"metadata": {"resourceVersion": version}, "data": {key: encoded}})
            except failures() as exc:
                if api_status(exc) == 409:
                    continue  # another key (or this one) was written since the read: look again
                raise self._explain(exc, "patch") from None
            self._seen[key] = new
            return True
        return False

    async def _get(self) -> tuple[dict[str, str], str]:
        core = await self.api.core()
        try:
            secret = await core.read_namespaced_secret(self.name, self.namespace)
        except failures() as exc:
            raise self._explain(exc, "get") from None
        return dict(secret.data or {}), str(secret.metadata.resource_version or "")

    async def _patch(self, patch: dict[str, Any]) -> None:
        core = await self.api.core()
        await _merge_patch(core.patch_namespaced_secret, self.name, self.namespace, patch)

    def _check_size(self, data: dict[str, str], key: str, encoded: str) -> None:
        sizes = {name: len(name) + len(value) * 3 // 4 for name, value in (data | {key: encoded}).items()}
        if sum(sizes.values()) > MAX_OBJECT_BYTES:
            largest = sorted(sizes, key=sizes.__getitem__, reverse=True)[:5]
            raise KubeApiError(
                f"the sign-ins would not fit in Secret {self.namespace}/{self.name} ({sum(sizes.values()):,} bytes; a "
                f"Secret holds at most {MAX_OBJECT_BYTES:,}); the largest are {', '.join(largest)}",
                fix="sign out of servers nobody uses any more (`mcp-codemode logout SERVER`), then sign in again",
            )

    def _explain(self, exc: BaseException, verb: str) -> KubeApiError:
        if api_status(exc) == 404 and not missing_namespace(exc):
            return KubeApiError(
                f"the Secret {self.name!r} that holds the sign-ins every replica shares is not in namespace "
                f"{self.namespace!r}",
                fix=f"apply deploy/kubernetes/base (face-sign-ins.yaml creates it, empty), or `kubectl create secret "
                f"generic {self.name} -n {self.namespace}`",
                status=404,
            )
        return explain(exc, verb=verb, what=SECRETS, namespace=self.namespace)


async def _merge_patch(method: Callable[..., Awaitable[Any]], *args: Any) -> None:
    """A JSON merge patch (``null`` deletes a key; the ``resourceVersion`` it names is a precondition): the client
    would send a dict as a strategic merge patch, and its stubs omit the ``_content_type`` it passes on."""
    await method(*args, _content_type=MERGE_PATCH)


def _encode(record: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps(record, separators=(",", ":")).encode()).decode()


def _decode(value: object) -> dict[str, Any] | None:
    """A record from the Secret; None for a key that is missing or holds something else (someone edited it)."""
    if not isinstance(value, str):
        return None
    try:
        record = json.loads(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        return None
    return record if isinstance(record, dict) else None


class ToolConfigMaps:
    """Saved tools as ConfigMaps, one per (owner, tool): their data is strings, given and returned as they are."""

    def __init__(self, api: LazyApi, namespace: str) -> None:
        self.api = api
        self.namespace = namespace

    async def listed(self, owner: str) -> list[tuple[str, dict[str, str]]]:
        """(object name, data) of every saved tool of ``owner``: the objects that carry its hash."""
        selector = ",".join(f"{key}={value}" for key, value in saved_tool_labels(owner).items())
        core = await self.api.core()
        try:
            found = await core.list_namespaced_config_map(self.namespace, label_selector=selector)
        except failures() as exc:
            raise explain(exc, verb="list", what=CONFIGMAPS, namespace=self.namespace) from None
        return [(str(item.metadata.name), dict(item.data or {})) for item in found.items or []]

    async def put(self, owner: str, tool: str, data: dict[str, str]) -> None:
        """Create the tool's ConfigMap, or replace its data when it exists (the last save wins, as with files)."""
        name = saved_tool_object(owner, tool)
        size = sum(len(key) + len(value.encode()) for key, value in data.items())
        if size > MAX_OBJECT_BYTES:
            raise KubeApiError(f"a saved tool of {size:,} bytes does not fit in a ConfigMap (at most "
                               f"{MAX_OBJECT_BYTES:,})", fix="save a smaller function")  # fmt: skip
        labels = saved_tool_labels(owner)
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": self.namespace, "labels": labels}, "data": data}  # fmt: skip
        core = await self.api.core()
        for _ in range(3):  # created, or patched; deleted between the two: create again
            try:
                await core.create_namespaced_config_map(self.namespace, body)  # type: ignore[arg-type]  # a dict is sent as is
                return
            except failures() as exc:
                if api_status(exc) != 409:
                    raise explain(exc, verb="create", what=CONFIGMAPS, namespace=self.namespace) from None
            try:
                patch = {"metadata": {"labels": labels}, "data": data}
                await _merge_patch(core.patch_namespaced_config_map, name, self.namespace, patch)
                return
            except failures() as exc:
                if api_status(exc) != 404:
                    raise explain(exc, verb="patch", what=CONFIGMAPS, namespace=self.namespace) from None
        raise KubeApiError(f"ConfigMap {self.namespace}/{name} kept appearing and disappearing while saving",
                           fix="save the tool again")  # fmt: skip

    async def remove(self, owner: str, tool: str) -> bool:
        """Delete the tool's ConfigMap; whether there was one."""
        core = await self.api.core()
        try:
            await core.delete_namespaced_config_map(saved_tool_object(owner, tool), self.namespace)
        except failures() as exc:
            if api_status(exc) == 404:
                return False
            raise explain(exc, verb="delete", what=CONFIGMAPS, namespace=self.namespace) from None
        return True
