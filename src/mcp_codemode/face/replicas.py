"""Face replicas that serve one set of sessions: the owner runs a session's calls, the others forward them there.

A session's state is a live Python process, so exactly one replica can run it: the one holding the session's
Lease (``cluster/leases.py``). A ``run_python`` call that reaches another replica is sent on to the owner's
internal endpoint (``POST /internal/v1/run`` on ``MCP_BRIDGE_PEER_PORT``, signed with a key derived from
``MCP_BRIDGE_PEER_TOKEN``: ``forwarded_calls.py``), whose answer streams back as lines
of JSON: progress while the cell runs, then the rendered tool result. Cancelling the client's call closes that
stream, and the owner cancels the call as if its own client had (the cell is interrupted; the session survives).

A replica takes a session over only from a dead owner: once the session's Lease lapsed (its owner renews every
Lease it holds, so only a replica that stopped renews none). Then it takes the Lease, atomically, and runs the call
itself; the session's state went with the old replica, and the result says so (the notice sessions give after an
idle expiry). An owner that does not answer a connection is not dead for that: a network blip or a full accept
backlog between two live replicas must not wipe a session. While its Lease is live the call is tried again for
``waiting_for_owner`` (the Lease may lapse meanwhile: then it is taken over), and then answered with a retryable
error that says until when the Lease holds. The dead owner's sandboxes are deleted only once its own liveness Lease
lapsed too (``leases.py`` says why a second Lease): a session Lease can lapse on a replica that lives on.

Only sessions of a principal are shared (named ones and the stateless era's default: ``SessionKey.principal``). A
handshake-era connection's default session belongs to its MCP session, which the SDK keeps in one replica's memory:
a load balancer must keep such a connection on one replica anyway (by ``Mcp-Session-Id``), so it never needs
forwarding.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable
from typing import Any, Protocol

import anyio
import anyio.abc
import mcp_types as types
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..cluster.api import connect
from ..cluster.leases import Holder, SessionLeases, lease_signing_key
from ..cluster.naming import ClaimKey
from ..runs.bridge import Bridge, RunRequest
from ..runs.relay_run import Caller, News
from ..session_keys import SessionKey
from ..settings import Settings
from .forwarded_calls import (
    FORWARD,
    MAX_FORWARDED_BYTES,
    SIGNATURE_HEADER,
    BadForwardedCall,
    Forwarded,
    SignatureCheck,
    forwarded_body,
    parse_forwarded,
    request_signing_key,
    sign_forwarded,
)
from .heartbeat import ProgressLine, Report, heartbeat
from .peer_channel import PeerBroke, PeerChannel, PeerUnreachable
from .render import error_result
from .stopping import InFlight, finish, stopping_result
from .web import reply_json

log = logging.getLogger("mcp_codemode.replicas")
INTERNAL_PATH = "/internal/v1/run"
_HOPS = 3  # a Lease that changes hands while a call is on its way is followed this many times
_FIRST_RETRY = 0.05  # seconds before trying an owner that did not answer again, doubling up to _LAST_RETRY
_LAST_RETRY = 1.0


class Place(Protocol):
    """Where a call runs (``server.Placement``): named here by what the router reads."""

    @property
    def key(self) -> SessionKey: ...
    @property
    def label(self) -> str: ...
    @property
    def owner(self) -> str: ...


class RunHere(Protocol):
    """Runs a placed call in this replica's sandboxes; ``news`` takes upstream progress for the call's client,
    ``client`` reaches its user (approvals, upstream elicitation and sampling); a call forwarded from another
    replica has none: the replica that holds its client is not this one."""

    def __call__(
        self, request: RunRequest, place: Place, news: News | None = None, client: Caller | None = None, /
    ) -> (
        Awaitable[types.CallToolResult]
    ): ...  # fmt: skip


class _PeerGone(Exception):
    """The owner's address refused the connection: its replica is not running."""


class _Moved(Exception):
    def __init__(self, holder: Holder) -> None:
        self.holder = holder


class SessionRouter:
    """Decides where a shared session's call runs, forwards it there, and keeps this replica's Leases."""

    def __init__(self, bridge: Bridge, settings: Settings, leases: SessionLeases) -> None:
        self.bridge, self.settings, self.leases = bridge, settings, leases
        self._keys: dict[str, SessionKey] = {}  # Lease name -> session key, for sessions this replica ran
        # Lease name -> the replica that answered its last forwarded call: asked again without reading the Lease.
        self._elsewhere: dict[str, Holder] = {}
        # The owner sends progress every progress_interval while a call runs: ten of them missed means it hangs.
        self._peers = PeerChannel(connect_timeout=10.0, read_timeout=max(30.0, 10 * settings.progress_interval))
        self._request_key = request_signing_key(settings.peer_token)
        self.stopping = False  # set by stopping.drain: this replica holds and takes no session any more
        self.forwarding = InFlight(bridge.telemetry.call_forwarded)  # calls of this replica's clients run elsewhere

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, bridge: Bridge, settings: Settings) -> AsyncIterator[SessionRouter]:
        """Connect to the cluster's API, renew this replica's Leases while serving, give them up at the end."""
        api = await connect(settings.kube_config, settings.kube_context)
        leases = SessionLeases(
            api,
            namespace=settings.kube_namespace,
            replica=settings.replica,
            url=settings.peer_url,
            key=lease_signing_key(settings.peer_token),
            duration=settings.session_lease, on_takeover=bridge.telemetry.session_taken_over,
        )  # fmt: skip
        router = cls(bridge, settings, leases)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(router._renew_forever)
                try:
                    yield router
                finally:
                    group.cancel_scope.cancel()
        finally:
            await finish(router)
            await router._peers.close()
            await api.close()

    @property
    def waiting_for_owner(self) -> float:
        """How long a call waits for an owner whose Lease is live but who does not answer: one renewal interval, as
        long as a live owner may go without proving it lives, and long enough for a blip or a backlog to clear."""
        return self.settings.session_lease / 3

    @staticmethod
    def shares(place: Place) -> bool:
        """Whether this call's session is shared between replicas (see the module docstring)."""
        return place.key.kind == "principal"

    async def run(self, request: RunRequest, place: Place, run_here: RunHere, report: Report | None) -> (
        types.CallToolResult
    ):  # fmt: skip
        """Run the call where its session lives: here, at the owner, or here after taking the session over."""
        if self.stopping:
            return await self._run_while_stopping(request, place, report)
        key = ClaimKey.of(place.key)
        holder = self._elsewhere.get(key.name) or await self.leases.holder(key)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.waiting_for_owner
        pause = _FIRST_RETRY
        hops = 0
        while hops < _HOPS:
            if holder.replica == self.settings.replica:
                self._elsewhere.pop(key.name, None)
                return await self.run_owned(request, place, holder, run_here)
            if not holder.url:
                return self._unverified(key, holder)
            try:
                answer = await self._forward(holder, request, place, report)
            except _PeerGone as exc:
                self._elsewhere.pop(key.name, None)
                current = await self.leases.holder(key)  # takes the session over if its Lease lapsed meanwhile
                if current.replica == holder.replica:  # alive by its Lease, unreachable from here: wait, never take
                    if loop.time() + pause > give_up:
                        return _owner_unreachable(place, current, str(exc))
                    if pause == _FIRST_RETRY:
                        log.warning("replica %s does not answer (%s); its Lease %s is live, so it is not taken over: "
                                    "trying again", holder.replica, exc, key.name)  # fmt: skip
                    await anyio.sleep(pause)
                    pause = min(2 * pause, _LAST_RETRY)
                    holder = current
                    continue
                holder = current
            except _Moved:
                self._elsewhere.pop(key.name, None)
                holder = await self.leases.holder(key)
            else:
                self._elsewhere[key.name] = holder
                return answer
            hops += 1
        return error_result(
            f"this session's owner changed {_HOPS} times while the call was on its way; call again",
            "SessionMoved",
        )

    async def _run_while_stopping(self, request: RunRequest, place: Place, report: Report | None) -> (
        types.CallToolResult
    ):  # fmt: skip
        """Forward the call to a live replica that holds its session; never hold or take one (stopping.py)."""
        holder = await self.leases.peek(ClaimKey.of(place.key))
        if holder is None or holder.expired or not holder.url or holder.replica == self.settings.replica:
            return stopping_result()
        try:
            return await self._forward(holder, request, place, report)
        except (_PeerGone, _Moved):
            return stopping_result()

    def held_sessions(self) -> list[tuple[ClaimKey, SessionKey | None]]:
        """The sessions whose Leases this replica holds, each with its session key here (None if it never ran here)."""
        return [(key, self._keys.get(name)) for name, key in list(self.leases.owned.items())]

    def _unverified(self, key: ClaimKey, holder: Holder) -> types.CallToolResult:
        """A Lease whose address is not signed with the peer token: the call is refused, the token is never sent.

        Who wrote it cannot be known here: someone who can write Leases in the namespace and wants the token, a
        replica configured with another MCP_BRIDGE_PEER_TOKEN, or a release that did not sign (renewal signs it).
        """
        log.warning(
            "not forwarding a call to replica %s: the address in Lease %s/%s (%.200r) is not signed with this "
            "replica's MCP_BRIDGE_PEER_TOKEN; someone who can write Leases there changed it, or the replicas' "
            "tokens differ",
            holder.replica, self.settings.kube_namespace, key.name, holder.unverified,
        )  # fmt: skip
        return error_result(
            f"this session is held by replica {holder.replica}, but its Lease ({key.name}) names an address that "
            "is not signed with the replicas' shared token, so the call was not forwarded there; the operator must "
            "check who can write Leases in the namespace and that every replica has the same MCP_BRIDGE_PEER_TOKEN",
            "ForwardingRefused",
        )

    async def run_owned(
        self, request: RunRequest, place: Place, holder: Holder, run_here: RunHere, news: News | None = None
    ) -> types.CallToolResult:
        self._keys[ClaimKey.of(place.key).name] = place.key
        if holder.taken_from:
            how = "shut down (a rollout, a drain or a scale-down)" if holder.handed_over else "stopped answering"
            await self.bridge.lose(
                place.key, f"lived on replica {holder.taken_from}, which {how}, so its state was lost"
            )
            await self._reap(holder.taken_from)
        return await run_here(request, place, news)

    async def _reap(self, replica: str) -> None:
        """Delete the sandboxes of ``replica``, whose session this one took, if it is dead: only its liveness Lease
        says so. Its claims are per worker, so which ones served the session taken cannot be told; a replica that
        lives on ends them itself when it learns at renewal that it lost the session."""
        try:
            if not await self.leases.replica_lapsed(replica):
                log.info("replica %s lost session Lease(s), but its liveness Lease did not lapse (it lives, or "
                         "stopped cleanly): its sandboxes are left to it", replica)  # fmt: skip
                return
            reaped = await self.bridge.reap_replica(replica)
            await self.leases.forget_replica(replica)
        except Exception as exc:  # noqa: BLE001 - the claims' shutdownTime backstop still removes them
            log.warning("could not delete the sandboxes of replica %s: %s", replica, exc)
        else:
            if reaped:
                log.info("deleted %d sandbox(es) of replica %s, whose liveness Lease lapsed", reaped, replica)

    async def accept(self, forwarded: Forwarded) -> Holder:
        """A call another replica forwarded: who holds its session now (this replica, unless it moved on)."""
        return await self.leases.holder(ClaimKey.of(forwarded.key))

    async def _forward(self, holder: Holder, request: RunRequest, place: Place, report: Report | None) -> (
        types.CallToolResult
    ):  # fmt: skip
        target, tracing, url = Forwarded(place.key, place.label, place.owner), self.bridge.telemetry.tracing, holder.url
        try:
            with self.forwarding.track(), tracing.span(FORWARD, "client", {"server.address": url}):
                body = forwarded_body(target, request, tracing)  # with the forwarding span's traceparent
                headers = {SIGNATURE_HEADER: sign_forwarded(self._request_key, body)}
                return await self._exchange(holder, url + INTERNAL_PATH, body, headers, report)
        except PeerUnreachable as exc:
            raise _PeerGone(str(exc)) from None
        except (PeerBroke, ValueError, KeyError) as exc:
            return _owner_lost(holder, str(exc) or type(exc).__name__)

    async def _exchange(self, holder: Holder, url: str, body: bytes, headers: dict[str, str],
                        report: Report | None) -> types.CallToolResult:  # fmt: skip
        async with self._peers.post(url, body, headers) as answer:
            if answer.status == 503:  # it is stopping: as if it did not answer, so the wait for its Lease goes on
                raise PeerUnreachable(f"replica {holder.replica} is shutting down")
            if answer.status == 409:
                moved = json.loads(await answer.body())
                raise _Moved(Holder(str(moved["replica"]), str(moved["url"]), ""))
            if answer.status != 200:
                text = (await answer.body()).decode("utf-8", "replace")[:500]
                return error_result(
                    f"replica {holder.replica} refused the forwarded call (HTTP {answer.status}: {text}); "
                    "every replica needs the same MCP_BRIDGE_PEER_TOKEN",
                    "ForwardingFailed",
                )
            async for line in answer.lines:
                if not line.strip():
                    continue
                message = json.loads(line)
                if "result" in message:
                    return types.CallToolResult.model_validate(message["result"])
                if report is not None and "progress" in message:
                    await report(float(message["progress"]), message.get("total"), message.get("message"))
        return _owner_lost(holder, "the answer ended without a result")

    async def _renew_forever(self) -> None:
        """Renew at once (the liveness Lease exists from the start), then every third of a lease."""
        while True:
            try:
                lost = await self.leases.renew()
            except Exception as exc:  # noqa: BLE001 - the API may be down a moment; the Lease has room for two misses
                log.warning("could not renew this replica's Leases: %s", exc)
                lost = []
            for key in lost:
                session = self._keys.pop(key.name, None)
                if session is not None:
                    log.warning("session %s was taken over by another replica; closing it here", key.name)
                    await self.bridge.lose(session, "was taken over by another replica")
            await anyio.sleep(self.settings.session_lease / 3)


def _owner_unreachable(place: Place, holder: Holder, why: str) -> types.CallToolResult:
    """The owner did not answer while its Lease was live: it may be alive, with the session's state, so nothing is
    taken; the caller is told until when the Lease holds (after that, a call takes the session over)."""
    until = f"until {holder.ends.isoformat(timespec='seconds')}" if holder.ends else "for now"
    return error_result(
        f"the replica that holds session {place.label!r} ({holder.replica}) did not answer ({why}); its lease is "
        f"live {until}, so the session stays there with its state. Try again: the call goes through once it "
        "answers, or, if that replica is gone, takes the session over once its lease lapsed",
        "ReplicaUnreachable",
    )


def _owner_lost(holder: Holder, why: str) -> types.CallToolResult:
    return error_result(
        f"replica {holder.replica}, which runs this session, stopped during the call ({why}); the call's outcome "
        "is unknown. Call again: another replica takes the session over if that one is gone",
        "ReplicaLost",
    )


class PeerEndpoint:
    """``POST /internal/v1/run`` in front of the MCP app: calls other replicas forward to this one.

    Only a call signed with the shared token's key opens it (``forwarded_calls.SignatureCheck``: fresh, matching
    its body, never seen before); clients' tokens do not, and any other request gets 401 and learns nothing.
    """

    def __init__(self, app: ASGIApp, router: SessionRouter, run_here: RunHere) -> None:
        self.app = app
        self.router = router
        self.run_here = run_here
        self.signatures = SignatureCheck(request_signing_key(router.settings.peer_token))
        self.port = router.settings.peer_port
        self.interval = router.settings.progress_interval

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        server = scope.get("server") or (None, None)
        if scope["type"] != "http" or server[1] != self.port:  # the MCP port: clients, never forwarded calls
            await self.app(scope, receive, send)
            return
        if scope.get("path") != INTERNAL_PATH:  # the peer port serves nothing else
            await reply_json(send, 404, {"error": f"this port serves {INTERNAL_PATH} to the other replicas only"})
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        signature = headers.get(SIGNATURE_HEADER.lower())
        refused = self.signatures.early_refusal(signature)  # before reading a body nobody signed
        if refused is None and scope.get("method") != "POST":
            await reply_json(send, 405, {"error": "POST only"})
            return
        try:
            body = await _read_body(receive) if refused is None else b""
            refused = refused or self.signatures.refusal(signature, body)
            if refused is not None:
                log.warning("refused a call at the peer endpoint: %s", refused)
                await reply_json(send, 401, {"error": f"this endpoint is for the bridge's own replicas: {refused}"})
                return
            forwarded, request = parse_forwarded(body, self.router.settings.max_timeout)
        except BadForwardedCall as exc:
            await reply_json(send, 400, {"error": str(exc)})
            return
        if self.router.stopping:  # never hold a session now: the caller waits until it was handed over
            await reply_json(send, 503, {"error": "this replica is shutting down"})
            return
        holder = await self.router.accept(forwarded)
        if holder.replica != self.router.settings.replica:
            await reply_json(send, 409, {"replica": holder.replica, "url": holder.url})
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/x-ndjson")]})  # fmt: skip
        timeout = self.router.settings.clamp_timeout(request.timeout)

        async def line(message: dict[str, Any]) -> None:
            with contextlib.suppress(OSError):  # the forwarding replica hung up: until_disconnect ends the call
                body = json.dumps(message).encode() + b"\n"
                await send({"type": "http.response.body", "body": body, "more_body": True})

        async def progress(elapsed: float, total: float | None, message: str | None) -> None:
            await line({"progress": elapsed, "total": total, "message": message})

        # Two helpers beside the call, as plain tasks: an anyio task group cost 0.1 ms of every forwarded call,
        # a tenth of what forwarding may add (issue 22). The call itself runs in this task.
        call = asyncio.current_task()
        assert call is not None
        hung_up = False

        async def until_disconnect() -> None:
            nonlocal hung_up
            while (await receive())["type"] != "http.disconnect":
                pass
            hung_up = True
            call.cancel()  # the forwarding replica's client cancelled: so do we

        told = ProgressLine(timeout, progress)  # upstream news rides the same line to the forwarding replica
        helpers = (
            asyncio.create_task(until_disconnect()),
            asyncio.create_task(heartbeat(timeout, self.interval, told)),
        )
        try:
            result = await self.router.run_owned(request, forwarded, holder, self.run_here, told.news)
            await line({"result": result.model_dump(mode="json", by_alias=True, exclude_none=True)})
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not hung_up:
                raise
            call.uncancel()  # ours, not the server's: the exchange simply ends
        finally:
            for helper in helpers:
                helper.cancel()


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            raise BadForwardedCall("the forwarding replica hung up")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_FORWARDED_BYTES:
            raise BadForwardedCall(f"a forwarded call is at most {MAX_FORWARDED_BYTES} bytes")
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)
