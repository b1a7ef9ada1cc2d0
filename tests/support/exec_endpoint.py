"""A stand-in for a kubelet's ``pods/exec`` endpoint, with a REAL bubblewrap worker behind each stream.

No Kubernetes runs on these machines (no registry ships a control plane), so the kubernetes backend's exec
channel is tested against this: an aiohttp WebSocket server on 127.0.0.1 that speaks ``v5.channel.k8s.io`` and
``v4.channel.k8s.io`` (the client's offer decides, as on an apiserver), runs the command given in the URL's
``command=`` parameters (the guest's boot with its JSON config, as the backend execs it in a pod) as a bubblewrap
worker, pumps its stdin, stdout and stderr over the socket and sends the channel-3 ``Status`` with its real exit
code when it ends. A socket that closes kills the worker behind it, as the end of an exec session does.

Each worker's hostname is its pod's name, as a container's is in a pod (the UTS name the kubelet sets): smoke.sh
finds the claim a session runs in by the hostname its code reads.

``LoopbackExecBackend`` is a test-only ``Backend`` whose launch opens an ``ExecChannel`` to it: the same client
code the kubernetes backend uses. Its kill closes the stream and kills the worker behind it, as deleting the
claim would. What it does not model: the apiserver's authentication and proxying, a kubelet's own limits, and
whether a real kubelet closes the process's stdin when the client disconnects (to be checked on a cluster).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import json
from collections.abc import Callable
from typing import Any

from aiohttp import WSMsgType, web

from mcp_codemode.sandbox.base import Availability, Backend, EnforcedLimit, Launch
from mcp_codemode.sandbox.bubblewrap import BubblewrapBackend
from mcp_codemode.sandbox.kube.exec_channel import ExecChannel, open_exec_channel
from mcp_codemode.sandbox.kube.exec_protocol import (
    CLOSE,
    ERROR,
    STDERR,
    STDIN,
    STDOUT,
    SUBPROTOCOLS,
    V5,
    encode_message,
    exec_url,
)
from mcp_codemode.settings import Settings

from .processes import Proc, descendants

_CHUNK = 64 * 1024
# An API server's decision on one request: (verb, group, resource, subresource), namespace, Authorization header ->
# None to go on, or the refusal to answer with (kube_emulator.ClusterEmulator.decide).
Authorize = Callable[[tuple[str, str, str, str], str, str], web.Response | None]
# What an API server from 1.35 checks for a pods/exec WebSocket (a GET): get, and create as well (kubernetes#134577).
EXEC_VERBS = ("get", "create")


def status_json(code: int) -> bytes:
    """The ``Status`` a kubelet sends on channel 3 when the command exits with ``code``."""
    if code == 0:
        return json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Success"}).encode()
    return json.dumps({
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NonZeroExitCode",
        "message": f"command terminated with non-zero exit code: {code}",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }).encode()  # fmt: skip


_POD: contextvars.ContextVar[str] = contextvars.ContextVar("pod", default="")


class _PodNamedBubblewrap(BubblewrapBackend):
    """bubblewrap workers named like their pod: the hostname of the launch's task's pod (``_POD``), not "sandbox"."""

    def _argv(self, seccomp_fd: int, command: list[str]) -> list[str]:
        argv = super()._argv(seccomp_fd, command)
        if _POD.get():
            argv[argv.index("--hostname") + 1] = _POD.get()
        return argv


@dataclasses.dataclass
class Session:
    """One exec stream and the real worker behind it."""

    launch: Launch
    processes: list[Proc] = dataclasses.field(default_factory=list)  # bwrap and its tree, once it has started


class ExecEndpoint:
    """The stand-in server. ``sessions`` by pod name (each connection names a fresh one)."""

    def __init__(
        self,
        settings: Settings,
        protocols: tuple[str, ...] = SUBPROTOCOLS,
        api_url: str = "",
        authorize: Authorize | None = None,
    ) -> None:
        """``api_url``: an emulated API server (tests/support/kube_emulator.py) that every other request is passed
        to, so one address serves the API and exec, as an apiserver does. ``authorize``: that server's authorizer,
        asked about each exec handshake before it upgrades (``EXEC_VERBS``); without it every handshake is let in."""
        self.backend: BubblewrapBackend = _PodNamedBubblewrap(settings)
        self.api_url = api_url
        self.authorize = authorize
        self.protocols = protocols
        self.sessions: dict[str, Session] = {}
        self.chosen: list[str] = []  # the subprotocol of each connection, in order
        self.commands: list[list[str]] = []  # the command of each connection, in order
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> ExecEndpoint:
        app = web.Application()
        app.router.add_get("/api/v1/namespaces/{namespace}/pods/{pod}/exec", self._handle)
        if self.api_url:
            app.router.add_route("*", "/{rest:.*}", self._pass_to_api)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        for pod in list(self.sessions):
            await self.kill(pod)
        if self._runner is not None:
            await self._runner.cleanup()

    def every_process(self) -> list[Proc]:
        return [proc for session in self.sessions.values() for proc in session.processes]

    async def kill(self, pod: str) -> None:
        """What deleting the pod does: the worker dies, whatever its stream is doing."""
        session = self.sessions.get(pod)
        if session is not None:
            await session.launch.kill()

    async def _pass_to_api(self, request: web.Request) -> web.StreamResponse:
        """Pass a request on to the API server and its answer back as it comes: a watch streams (a whole-body read
        would wait for the watch to end). A caller that hung up ends it at the next chunk, or within 0.2 s."""
        import aiohttp

        headers = {k: v for k, v in request.headers.items() if k.lower() in ("content-type", "accept", "authorization")}
        async with (
            aiohttp.ClientSession() as client,
            client.request(
                request.method, self.api_url + request.rel_url.path_qs, data=await request.read(), headers=headers
            ) as answer,
        ):
            response = web.StreamResponse(status=answer.status, headers={"Content-Type": "application/json"})
            await response.prepare(request)
            with contextlib.suppress(ConnectionError):
                while request.transport is not None and not request.transport.is_closing():
                    try:
                        chunk = await asyncio.wait_for(answer.content.readany(), 0.2)
                    except TimeoutError:
                        continue
                    if not chunk:
                        break
                    await response.write(chunk)
                await response.write_eof()
            return response

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self.authorize is not None:
            for verb in EXEC_VERBS:
                attributes = (verb, "", "pods", "exec")
                refused = self.authorize(
                    attributes, request.match_info["namespace"], request.headers.get("Authorization", "")
                )
                if refused is not None:
                    return refused
        ws = web.WebSocketResponse(protocols=self.protocols, max_msg_size=16 * 1024 * 1024)
        await ws.prepare(request)
        self.chosen.append(ws.ws_protocol or "")
        pod = request.match_info["pod"]
        argv = request.query.getall("command")
        self.commands.append(list(argv))
        config = json.loads(argv[-1])  # the guest's boot config, as guest_argv put it last
        _POD.set(pod)  # this request's own task: concurrent launches each see their own pod
        launch = await self.backend.launch(pod, config)
        channel = launch.channel
        process = getattr(channel, "process")  # noqa: B009 - PipeChannel's child, for its tree and its stdin
        session = self.sessions[pod] = Session(launch, [])
        send_lock = asyncio.Lock()

        async def send(data: bytes) -> None:
            async with send_lock:
                await ws.send_bytes(data)

        async def pump(reader: asyncio.StreamReader, number: int) -> None:
            first = True
            while chunk := await reader.read(_CHUNK):
                if first and number == STDOUT:
                    session.processes = [*descendants(process.pid)]
                    first = False
                await send(encode_message(number, chunk))
            if ws.ws_protocol == V5:
                await send(bytes((CLOSE, number)))

        async def relay_stdin() -> None:
            async for message in ws:
                if message.type != WSMsgType.BINARY or not message.data:
                    continue
                if message.data[0] == STDIN:
                    channel.write(message.data[1:])
                    with contextlib.suppress(ConnectionError):
                        await channel.drain()  # a guest that stops reading stops us reading the socket
                elif message.data[0] == CLOSE and message.data[1:] == bytes((STDIN,)):
                    process.stdin.close()

        outputs = asyncio.gather(pump(channel.stdout, STDOUT), pump(channel.stderr, STDERR))
        stdin = asyncio.create_task(relay_stdin())
        try:
            waiting: set[asyncio.Future[Any]] = {outputs, stdin}
            done, _ = await asyncio.wait(waiting, return_when="FIRST_COMPLETED")
            if outputs in done:
                code = await channel.wait()
                await send(encode_message(ERROR, status_json(code if code >= 0 else 128 - code)))
                await ws.close()
        finally:
            stdin.cancel()
            outputs.cancel()
            await asyncio.gather(stdin, outputs, return_exceptions=True)
            await launch.cleanup()  # the socket closed or the worker ended: nothing of it may stay
        return ws


class LoopbackExecBackend(Backend):
    """A test-only backend: each worker is a real bubblewrap worker behind the loopback exec stand-in."""

    name = "loopback-exec"

    def __init__(self, endpoint: ExecEndpoint, protocols: tuple[str, ...] = SUBPROTOCOLS) -> None:
        self.endpoint = endpoint
        self.protocols = protocols
        self.channels: list[ExecChannel] = []
        self._count = 0

    def availability(self) -> Availability:
        return Availability(True, "loopback exec stand-in")

    def enforced_limits(self) -> list[EnforcedLimit]:
        return self.endpoint.backend.enforced_limits()

    async def launch(self, worker_id: str, guest_config: dict[str, Any]) -> Launch:
        self._count += 1
        pod = f"sandbox-{self._count}"
        argv = ["python3", "-I", "boot.py", json.dumps(guest_config, separators=(",", ":"))]
        url = exec_url(self.endpoint.url, "codemode", pod, "guest", argv)
        channel = await open_exec_channel(url, ssl_context=False, protocols=self.protocols)
        self.channels.append(channel)

        async def kill() -> None:
            await channel.close()
            await self.endpoint.kill(pod)

        return Launch(channel, kill, kill, lambda: channel.cause)
