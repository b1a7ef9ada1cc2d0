"""The kubernetes backend: each worker is a guest exec'd into the pod of a ``SandboxClaim`` it holds.

A launch claims a sandbox from the cluster's ``SandboxWarmPool`` (``claims.py``), waits until the claim is bound,
and execs the guest's boot in the pod (``exec_channel.py``): the exec stream's stdin, stdout and stderr are the
worker's pipes, so ``worker.py`` drives it as any other. Killing the worker closes the stream and deletes the
claim, which makes agent-sandbox delete the sandbox and its pod. While the worker lives, its claim's
``shutdownTime`` is pushed forward, so the backstop only fires for a bridge that died without deleting it.

Why one claim per worker, named from (replica, worker id): the bridge's own warm pool starts workers before any
session exists, so a launch cannot know the session. Sessions that several face replicas share find their owner
another way (issue 22, item 4); this module does not depend on it.

What the bridge cannot set per claim, the cluster sets: memory, CPU and the runtime class come from the
``SandboxTemplate`` (deploy/kubernetes/base), because a claim that overrides its pod cannot adopt a warm pod.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import ssl
from typing import TYPE_CHECKING, Any

from ...cluster.api import connect, exec_refused, failures, require_client
from ...cluster.naming import ClaimKey
from ...cluster.permissions import needed
from ...errors import SandboxUnavailable
from ...settings import Settings
from ..base import Availability, Backend, EnforcedLimit, Launch, StartCheck, guest_argv
from .checks import allowed
from .claims import ClaimStore
from .exec_channel import ExecChannel, ExecRefused, open_exec_channel
from .exec_protocol import exec_url
from .start_check import CachedStartCheck

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

log = logging.getLogger(__name__)

CONTAINER = "sandbox"  # the container of deploy/kubernetes/base/sandbox-template.yaml
# exec runs with the container's environment, which Kubernetes fills with the addresses of every Service in the
# namespace (KUBERNETES_SERVICE_HOST and the like): the guest starts from an empty one instead.
NO_RUNTIME_CLASS = "none"  # MCP_BRIDGE_KUBE_RUNTIME_CLASS for pods without one: overlays/no-gvisor's choice
GUEST_ENV = ("PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace", "TMPDIR=/tmp", "LANG=C.UTF-8")


@dataclasses.dataclass
class _Cluster:
    api: ApiClient
    claims: ClaimStore
    base_url: str
    ssl_context: ssl.SSLContext | bool


class KubernetesBackend(Backend):
    name = "kubernetes"
    # The kubelet closes an exec stream after streamingConnectionIdleTimeout (4 h by default), and a proxy or load
    # balancer between the bridge and the API server often after a few minutes (350 s on some cloud ones).
    keepalive_interval = 60.0

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._cluster: _Cluster | None = None
        self._lock = asyncio.Lock()
        self._start_check = CachedStartCheck(self._api, settings.kube_namespace, settings.kube_warm_pool)

    def availability(self) -> Availability:
        """Only what can be known without the cluster: the client is installed. ``doctor`` asks the cluster."""
        try:
            require_client()
        except Exception as exc:  # noqa: BLE001 - SandboxUnavailable, reported as unusable
            return Availability(False, str(exc), getattr(exc, "fix", "") or "")
        where = f"namespace {self.settings.kube_namespace}, warm pool {self.settings.kube_warm_pool}"
        return Availability(True, f"sandboxes are claimed from the cluster ({where})")

    def enforced_limits(self) -> list[EnforcedLimit]:
        where = "the SandboxTemplate's pod (deploy/kubernetes)"
        return [
            EnforcedLimit("memory", "as the template sets it", f"container limits of {where}"),
            EnforcedLimit("cpus", "as the template sets it", f"container limits of {where}"),
            EnforcedLimit("processes", str(self.settings.pids), "RLIMIT_NPROC, set by the guest at boot"),
            self._isolation(where),
        ]

    def _isolation(self, where: str) -> EnforcedLimit:
        wanted = self.settings.kube_runtime_class
        if wanted == NO_RUNTIME_CLASS:
            return EnforcedLimit("isolation", "runc", "no runtime class (overlays/no-gvisor): the node's kernel")
        shown = "gVisor" if wanted == "gvisor" else f"RuntimeClass {wanted}"
        return EnforcedLimit("isolation", shown, f"runtimeClassName of {where}, checked on every claim")

    def rlimits(self) -> dict[str, int]:
        """What the guest sets on itself at boot: Kubernetes has no per-pod limit on processes (only the kubelet's
        node-wide podPidsLimit), so MCP_BRIDGE_PIDS becomes RLIMIT_NPROC. Every worker runs as uid 65534 in its own
        pod, so the count is this worker's alone. Memory and CPU are the template's container limits."""
        return {"CORE": 0, "MSGQUEUE": 0, "NOFILE": 1024, "NPROC": self.settings.pids}

    async def start_check(self) -> StartCheck:
        """Whether the API server answers and the warm pool is there, read at most every few seconds
        (``start_check.py`` says why its level does not count)."""
        return await self._start_check()

    async def _api(self) -> ApiClient:
        return (await self._connect()).api

    async def _connect(self) -> _Cluster:
        async with self._lock:
            if self._cluster is None:
                api = await connect(self.settings.kube_config, self.settings.kube_context)
                claims = ClaimStore(
                    api,
                    namespace=self.settings.kube_namespace,
                    warm_pool=self.settings.kube_warm_pool,
                    replica=self.settings.replica,
                    ttl=self.settings.kube_claim_ttl,
                )
                base_url, context = exec_transport(api)
                self._cluster = _Cluster(api, claims, base_url, context)
            return self._cluster

    async def launch(self, worker_id: str, guest_config: dict[str, Any]) -> Launch:
        cluster = await self._connect()
        key = ClaimKey(f"replica:{self.settings.replica}", f"worker:{worker_id}")
        claim = await cluster.claims.acquire(key)
        try:
            bound = await cluster.claims.wait_bound(claim.name, self.settings.startup_timeout, claim.seen)
            self._check_runtime(bound.sandbox, bound.runtime_class)
            config = dict(guest_config, rlimits=self.rlimits())
            argv = ["env", "-i", *GUEST_ENV, *guest_argv("python3", config)]
            url = exec_url(cluster.base_url, self.settings.kube_namespace, bound.pod, CONTAINER, argv)
            channel = await self._open_exec(cluster, url, bound.pod)
        except BaseException:
            with contextlib.suppress(Exception):
                await cluster.claims.release(claim.name)
            raise
        refresher = asyncio.create_task(self._keep_claimed(cluster.claims, claim.name))
        ended = False

        async def end() -> None:
            nonlocal ended
            if ended:
                return
            ended = True
            refresher.cancel()
            await channel.close()
            with contextlib.suppress(asyncio.CancelledError):
                await refresher
            try:
                await cluster.claims.release(claim.name)
            except Exception as exc:  # noqa: BLE001 - the backstop (shutdownTime) and the sweep still remove it
                log.warning("could not delete SandboxClaim %s: %s", claim.name, exc)

        return Launch(channel, end, end, lambda: channel.cause)

    def _check_runtime(self, sandbox: str, runtime_class: str) -> None:
        """Refuse a sandbox whose pod does not run under the runtime class this face was told to require.

        Why here, on each claim, and not once at start: what isolates the guest is the pod the claim got, and the
        template it came from can change while the face runs; the Sandbox (which the face reads anyway, to find
        the pod) carries the pod template it was made from. A template without ``runtimeClassName`` runs the
        guest under the node's runc, its system calls served by the node's kernel: accepted only when
        MCP_BRIDGE_KUBE_RUNTIME_CLASS=none says so (overlays/no-gvisor), never by accident.
        """
        wanted = self.settings.kube_runtime_class
        if (runtime_class or NO_RUNTIME_CLASS) == wanted:
            return
        has = f"RuntimeClass {runtime_class!r}" if runtime_class else "no runtime class (the node's runc)"
        raise SandboxUnavailable(
            f"Sandbox {sandbox} in namespace {self.settings.kube_namespace!r} runs its pod with {has}, and this face "
            f"requires {wanted!r} (MCP_BRIDGE_KUBE_RUNTIME_CLASS): no code was run there",
            fix="set runtimeClassName in the SandboxTemplate (deploy/kubernetes/base has gvisor); to run without "
            "gVisor knowingly, apply deploy/kubernetes/overlays/no-gvisor, which sets MCP_BRIDGE_KUBE_RUNTIME_CLASS"
            "=none (docs/kubernetes.md, 'Clusters without gVisor')",
        )

    async def _open_exec(self, cluster: _Cluster, url: str, pod: str) -> ExecChannel:
        """Open the exec stream; a refused handshake becomes the error that names its cause and fix.

        On 403 the cluster is asked which verb on ``pods/exec`` is missing (the handshake's own answer does not say,
        and which one an API server checks depends on its version), so the message names it.
        """
        try:
            headers = await exec_headers(cluster.api)  # every stream: credentials rotate while the bridge runs
            return await open_exec_channel(url, headers=headers, ssl_context=cluster.ssl_context)
        except ExecRefused as exc:
            namespace = self.settings.kube_namespace
            denied: tuple[str, ...] | None = None
            if exc.status == 403:
                try:
                    denied = tuple(
                        [p.verb for p in needed("pods/exec") if not await allowed(cluster.api, namespace, p)]
                    )
                except failures():
                    denied = None
            raise exec_refused(exc.status, namespace=namespace, pod=pod, denied=denied) from None

    async def _keep_claimed(self, claims: ClaimStore, name: str) -> None:
        """Push the claim's shutdownTime forward while the worker lives (``touch`` limits the rate)."""
        pause = max(1.0, min(60.0, self.settings.kube_claim_ttl / 4))
        while True:
            await asyncio.sleep(pause)
            try:
                await claims.touch(name)
            except Exception as exc:  # noqa: BLE001 - a missed refresh is retried; the ttl has room for three
                log.warning("could not refresh SandboxClaim %s: %s", name, exc)

    async def reap_orphans(self) -> int:
        """Delete the claims this replica left behind (a bridge that was killed); none is live at start."""
        cluster = await self._connect()
        return len(await cluster.claims.sweep(set()))

    async def reap_replica(self, replica: str) -> int:
        """Delete every claim of ``replica``, a face replica found dead (its address refused a forwarded call, or
        its Leases lapsed): its sandboxes would otherwise wait for their shutdownTime backstop."""
        if replica == self.settings.replica:
            return 0
        cluster = await self._connect()
        return len(await cluster.claims.sweep(set(), replica=replica))

    async def close(self) -> None:
        if self._cluster is not None:
            await self._cluster.api.close()
            self._cluster = None


async def exec_headers(api: ApiClient) -> dict[str, str]:
    """The auth headers of one exec stream, asked of the client's configuration each time.

    Why not once, when the bridge connects: credentials rotate while it runs. An exec-plugin kubeconfig (GKE, EKS)
    hands out tokens that expire within the hour, and a pod's projected service-account token is rewritten on
    disk; the configuration's refresh hook, run by ``auth_settings``, fetches the current one, which the API
    client's own requests get too. A header captured at start made every exec stream fail once it expired.
    """
    headers = {}
    for setting in (await api.configuration.auth_settings()).values():
        if setting.get("in") == "header" and setting.get("value"):
            headers[str(setting["key"])] = str(setting["value"])
    return headers


def exec_transport(api: ApiClient) -> tuple[str, ssl.SSLContext | bool]:
    """The API server's URL and the TLS setup the exec streams need, from the client's config (fixed for a run)."""
    configuration = api.configuration
    base_url = str(configuration.host).rstrip("/")
    if not base_url.startswith("https://"):
        return base_url, False
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return base_url, context
