"""One execution end to end, behind every face (MCP server, command line): backend, sessions, upstreams.

The bridge owns the session manager, the tool directory (the upstream hub and the catalog cache of the servers'
tool listings) and the relay between them; it knows nothing of the MCP face. When no sandbox backend can run
here it still starts, and every call gets the reason and the fix: an agent can relay that to its user, whereas
a server that refuses to start shows up in most clients as an unexplained red dot. The same holds for a writable
mount that host-side upstream servers work in (``mounts.shared_with_servers``): decided once, here, where both the
mounts and the servers are known, and no sandbox is started with it.

The servers themselves may change while the bridge runs (``reconfigure``, driven by ``config_refresh.py`` when
``MCP_BRIDGE_CONFIG_REFRESH`` is set): the same admission applies to every new set (``admission.py``), and a new
server that would share a writable mount is left out, since the sandboxes already run with that mount. A writable
mount that holds a path the refresh reads (``mounts.config_in_mounts``) is refused like a shared one: sandboxed code
could otherwise write itself a stdio server, which the host would run within seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from types import TracebackType

import anyio
import mcp_types as types

from .. import __version__
from ..admission import admit
from ..errors import CodemodeError, SandboxStartError, SandboxUnavailable
from ..mounts import config_in_mounts, refusal, shared_with_servers
from ..observability_settings import otel_export
from ..sandbox.results import ExecutionResult, FileLink
from ..sandbox.select import Choice, announce, choose_backend, passed_over_note
from ..sandbox.worker import OutputCallback, Worker
from ..session_keys import BadSessionKey, SessionKey
from ..settings import Settings
from ..telemetry.logs import hide_in_logs
from ..telemetry.metrics import CallOutcome
from ..telemetry.seam import Telemetry, telemetry, tracing
from ..telemetry.snapshot import ServerSnapshot, Snapshot
from ..telemetry.tracing import CALL_ID, new_call_id
from ..upstream.config.discovery import ConfigSources
from ..upstream.config.refresh import Changes
from ..upstream.model import Discovery, ServerConfig
from ..upstream.registry.source import EntrySource, StaticSource
from ..upstream.servers.redaction import secret_values
from ..upstream.tools.directory import ToolDirectory
from .added_servers import AddedServers
from .audit import AuditLog
from .call_board import CallBoard
from .call_outcomes import call_outcome, output_bytes
from .config_refresh import ConfigRefresh
from .readiness import ChangeLog, Readiness, readiness_of
from .relay import Relay
from .relay_run import Caller
from .saved_tools import SavedTools
from .session_files import Listing, SessionFiles
from .sessions import SessionManager
from .shared_state import shared_state
from .summary import capability_summary
from .upstream_view import Upstreams

__all__ = ["Bridge", "ExecutionResult", "FileLink", "RunRequest"]  # what the faces take from the run service
log = logging.getLogger("mcp_codemode.bridge")  # the name log lines have always shown


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """A validated ``run_python`` call."""

    code: str
    timeout: float | None = None
    session: str | None = None
    reset: bool = False
    servers: tuple[str, ...] = ()
    files: tuple[tuple[str, bytes], ...] = ()  # written to the session's /workspace before the code runs


class Bridge:
    """Runs code for any number of clients; use as an async context manager so no sandbox outlives it.

    One door for the faces: they use its public methods and the attributes declared here, nothing it holds
    (``tests/test_architecture.py`` checks it), so a face never learns how sessions, files or upstream roots are
    kept. The parts it builds (sessions, directory, hub, relay) stay reachable for the command line and tests.
    """

    settings: Settings  # as the bridge was built with them
    summary: str  # the capability summary: what the sandbox offers and which servers code can reach
    telemetry: Telemetry  # the bridge's metrics (telemetry/): what /metrics serves, and what the faces count there
    board: CallBoard | None  # the web console's view of sessions and calls (call_board.py); None with it off
    backend_name: str  # the sandbox backend every session runs on ("unavailable" when none can)
    saved_tools: SavedTools  # each owner's saved tools (files, or the cluster's), as sandboxed code keeps them
    upstreams: Upstreams  # the upstream servers' states and tools, restarting one, searching their tools (console)

    def __init__(
        self,
        settings: Settings,
        discovery: Discovery | None = None,
        choice: Choice | None = None,
        sources: ConfigSources | None = None,
        entries: EntrySource | None = None,
    ) -> None:
        """``choice``: a backend already chosen (``run`` chooses first, to fail before anything starts).
        ``sources``: where ``discovery`` was read from, read again while the bridge runs when
        ``MCP_BRIDGE_CONFIG_REFRESH`` is set (``config_refresh.py``)."""
        self.settings = settings
        self.discovery = self._admitted(discovery or Discovery())
        refreshed = sources is not None and settings.config_refresh > 0
        self.backend_error = ""
        self.sessions: SessionManager | None = None
        self.files: SessionFiles | None = None  # the sessions' /workspace, for the client
        self.backend_name = "unavailable"
        self._choice = choice
        self.summary = ""
        # Sign-ins and saved tools: in files here, or in the cluster for replicas that share them (shared_state.py).
        self.shared = shared_state(settings)
        self.saved_tools = self.shared.saved_tools
        # The directory owns the hub (one connection per server) and the catalog cache of their listings; it
        # leaves out the servers the policy refuses, which nothing here may name to the agent either.
        self.added = AddedServers(settings, entries or StaticSource((), where="no registry"))  # add_server's, per owner
        servers = [*self.discovery.servers, *self.added.configs()]
        self.directory = ToolDirectory(servers, settings, sign_ins=self.shared.sign_ins)
        self.hub = self.directory.hub
        self.upstreams = Upstreams(self.directory, self.shared.sign_ins, lambda: self.discovery, settings.search_wait)
        allowed = self._learn_servers()
        shared = shared_with_servers(settings.mounts, allowed, settings.roots, settings.mounts_shared, Path.cwd())
        watched = [path for path, _ in sources.watched()] if refreshed and sources is not None else []
        rewritable = config_in_mounts(settings.mounts, watched)  # the sandbox must not write what is read again
        self.mount_refusal = "; and ".join(problem for problem in (refusal(shared), rewritable) if problem)
        self.audit = AuditLog(settings.audit_path, settings.audit_max_bytes, settings.audit_backups)
        self.board = CallBoard(self.audit, self.has_session, approvers=settings.approvers) if settings.console else None
        # What /metrics serves and the spans sent over OTLP (telemetry/); nothing of either when they are off.
        traced = tracing(settings.tracing, otel_export(settings.otel) if settings.tracing else None,
                         settings.trace_digests, settings.replica)  # fmt: skip
        self.telemetry = telemetry(settings.metrics, traced)
        self.relay = Relay(self.directory, self.shared.saved_tools, settings, self.audit, self.telemetry, self.added)
        self.added.source = entries or self.relay.finding.source  # the registries and catalogs find_servers reads
        self.added.approvals = lambda: self.relay.guard.approvals
        self.upstreams.visible = self.added.visible  # the console's pages show a principal only its own added servers
        self.added.configured = lambda: [s for s in self.discovery.servers if s.name in self.hub.names()
                                         or s.name in self.directory.refused]  # fmt: skip
        self.relay.guard.approvals = self.board.approvals if self.board is not None else None  # ask_tools answers
        self.relay.finding.discovery, self.relay.finding.sources = (lambda: self.discovery), sources  # find_servers
        self._note = ""  # what the summary says after the backend's name (auto passed over a better one)
        self.refresh: ConfigRefresh | None = None
        if refreshed and sources is not None:
            self.refresh = ConfigRefresh(sources, settings.config_refresh, self.reconfigure, self.discovery.problems)
        self._refreshing: asyncio.Task[None] | None = None
        self._readiness = ChangeLog()

    def _admitted(self, discovery: Discovery) -> Discovery:
        """``discovery`` without the servers this bridge may not run (``admission.py``), each refusal logged once."""
        admitted = admit(self.settings, discovery)
        for problem in admitted.problems[len(discovery.problems) :]:
            log.warning("MCP server config: %s", problem)
        return admitted

    def _learn_servers(self) -> list[ServerConfig]:
        """The hub's servers, by name and alias, for the ``servers`` hint and the summary; their secrets never reach
        a log line (telemetry/logs.py)."""
        allowed = [self.hub.config(name) for name in self.hub.names() if not self.added.is_added(name)]
        hide_in_logs(value for server in allowed for value in secret_values(server))
        self.servers: tuple[str, ...] = tuple(server.name for server in allowed)
        self._by_name_or_alias = {server.alias: server.name for server in allowed}
        self._by_name_or_alias.update((name, name) for name in self.servers)
        return allowed

    async def __aenter__(self) -> Bridge:
        await self.directory.__aenter__()
        choice: Choice | None = None
        if self.mount_refusal:
            self._choice = None  # no sandbox starts with a mount the servers work in
            self.backend_error = f"The bridge runs no code: {self.mount_refusal}"
        else:
            try:
                choice = self._choice or choose_backend(self.settings)
            except CodemodeError as exc:
                self.backend_error = f"No sandbox can run code on this machine: {exc}"
        if choice is None:
            log.error("%s", self.backend_error)
        else:
            announce(choice)
            self._choice = choice
            self.settings = self.settings.sized_for(choice.backend.name)  # a cap follows the backend's cost
            self.backend_name = choice.backend.name
            self._note = passed_over_note(choice)
        self.summary = self._summary()
        if self._choice is not None:
            # The summary and the relay are the bridge's, the same for every call: handed down once, not with each run.
            sessions = SessionManager(self._choice.backend, self.settings, summary=self.summary, services=self.relay,
                                      telemetry=self.telemetry)  # fmt: skip
            self.sessions = await sessions.__aenter__()
            self.files = SessionFiles(self.sessions, self.settings)
        self.telemetry.watch(self._snapshot)
        if self.refresh is not None:
            self._refreshing = asyncio.get_running_loop().create_task(self.refresh.run(), name="mcp-codemode refresh")
        return self

    def _snapshot(self) -> Snapshot:
        """What /metrics reads by looking, each time it is scraped (telemetry/snapshot.py)."""
        servers = tuple(ServerSnapshot(name, (state := self.hub.state(name)).status, state.restarts)
                        for name in self.hub.names())  # fmt: skip
        now = Snapshot(__version__, self.backend_name, servers=servers)
        if self.sessions is None:
            return now
        pool = self.sessions.pool
        return dataclasses.replace(now, sessions=len(self.sessions.names()), sessions_max=self.settings.max_sessions,
                                   sandboxes=pool.live, pool_ready=pool.ready, pool_target=pool.size)  # fmt: skip

    def _summary(self) -> str:
        servers = {name: self.hub.config(name).alias for name in self.servers}
        return capability_summary(self.settings, self.backend_name, servers, self.backend_error, self._note)

    async def reconfigure(self, discovery: Discovery) -> Changes:
        """Run the servers of ``discovery`` from now on, admitted as at start: new ones become reachable from the
        next call (listing, search, proxies), removed ones are closed and disappear, changed ones are restarted from
        their new entry, and the rest keep running untouched (``ToolDirectory.reconfigure``)."""
        admitted = self._admitted(discovery)
        running = {name: self.hub.config(name) for name in self.hub.names()}
        wanted = [server for server in admitted.servers if running.get(server.name) == server or self._may_add(server)]
        found = self.directory.reconfigure([*wanted, *self.added.configs()])
        self.discovery = admitted
        if found:
            self._learn_servers()
            self.summary = self._summary()
            if self.sessions is not None:
                self.sessions.summary = self.summary  # every session's guest is sent it with its next call
            log.info("MCP server config changed: %s", found.describe())
        return found

    def _may_add(self, server: ServerConfig) -> bool:
        """Whether a server new to this bridge (or with a new entry) may run beside its sandboxes' mounts: one that
        would work in a writable mount the sandboxes already have is left out, and the log says why."""
        settings = self.settings
        shared = shared_with_servers(settings.mounts, [server], settings.roots, settings.mounts_shared, Path.cwd())
        problem = refusal(shared)
        if problem:
            log.warning("MCP server config: server %r is left out: %s", server.name, problem)
        return not problem

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            with anyio.CancelScope(shield=True):
                try:
                    if self._refreshing is not None:
                        self._refreshing.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await self._refreshing
                    if self.sessions is not None:
                        await self.sessions.close()
                    await self.directory.__aexit__(exc_type, exc, tb)
                finally:
                    await self.shared.aclose()  # the cluster's API client, when the state is kept there
        finally:
            self.audit.flush()  # the lines of calls that ended while closing
            self.telemetry.tracing.close()  # the spans still queued are sent (at most the exporter's timeout)

    async def run(
        self,
        request: RunRequest,
        key: SessionKey,
        on_output: OutputCallback | None = None,
        owner: str = "local",
        caller: Caller | None = None,
    ) -> ExecutionResult:
        """Run ``request`` in the session ``key`` (created on first use; the caller names every call's session).

        ``owner`` is who is asking (an HTTP principal, or "local"): saved tools are kept per owner. ``caller`` is
        the call's client: it receives, as lines of text, the progress upstream servers report on the tools the
        code calls, and its user is asked to approve the calls the policy's ``ask_tools`` names.

        Every call is counted here, where it runs (a call forwarded from another replica too), by how it ended, and
        gets its call id here: its audit lines, log lines and cell span carry it (telemetry/tracing.py).
        """
        began = time.perf_counter()
        call = CALL_ID.set(new_call_id())
        outcome: CallOutcome = "bridge_error"  # what raises here is the bridge's, not the code's
        result = None
        try:
            board = self.board
            if board is not None:  # seen on the console's board: running, its latest progress, then ended
                seen, caller = board.begin(CALL_ID.get(), key, owner, request.code, caller)
            work = self._run(request, key, on_output, owner, caller)
            result = await (work if board is None else board.track(work, seen))
            outcome = call_outcome(result)
            return result
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            size = output_bytes(result) if result is not None else None
            self.telemetry.call_ended(outcome, time.perf_counter() - began, size)
            CALL_ID.reset(call)

    async def _run(self, request: RunRequest, key: SessionKey, on_output: OutputCallback | None, owner: str,
                   caller: Caller | None) -> ExecutionResult:  # fmt: skip
        if self.sessions is None:
            raise CodemodeError(self.why_not_running)
        hinted = [self._by_name_or_alias.get(name) for name in request.servers]
        self.hub.warm(name for name in hinted if name is not None)
        prepare = None
        if request.files and self.files is not None:
            files, given = self.files, request.files

            async def prepare(worker: Worker) -> None:
                for path, content in given:
                    await files.write(worker, path, content)

        try:
            result = await self.sessions.execute(
                request.code,
                session=str(key),  # the form workers and audit lines are named by
                timeout=request.timeout,
                reset=request.reset,
                on_output=on_output,
                owner=owner,
                caller=caller,
                prepare=prepare,
            )
        except (SandboxStartError, SandboxUnavailable) as exc:
            raise type(exc)(f"{str(exc).rstrip('. ')}. {self._no_switch()}") from exc
        unknown = [name for name in request.servers if name not in self._by_name_or_alias]
        if unknown:
            configured = ", ".join(self.servers) or "none"
            result = _with_note(
                result,
                f"Note: servers= named {', '.join(unknown)}, which is not configured (configured: {configured}).",
            )
        return result

    def _no_switch(self) -> str:
        """What a sandbox that fails to start must add: this bridge stays on its backend, and why it has that one."""
        assert self._choice is not None
        name = self._choice.backend.name
        how = "was requested" if self.settings.runtime != "auto" else "was chosen by auto when the bridge started"
        return (
            f"The bridge runs every sandbox on {name}, which {how}; it does not switch to another backend by itself. "
            f"Fix the cause above, or set MCP_BRIDGE_RUNTIME to another backend and restart (`mcp-codemode doctor` "
            "shows which can run here)"
        )

    async def readiness(self, *, stopping: bool = False) -> Readiness:
        """Whether a new session could be taken now, and if not why (``readiness.py``: from what is known, never by
        starting a sandbox). ``stopping``: the face that asks is shutting down."""
        verdict = await readiness_of(self.sessions, self.backend_error, self.settings.max_sessions, stopping)
        return self._readiness.note(verdict)

    @property
    def why_not_running(self) -> str:
        """Why no code runs here ("" when it does): the backend's problem, or a bridge not entered."""
        return "" if self.sessions is not None else (self.backend_error or "the bridge is not running")

    async def discard(self, key: SessionKey) -> None:
        """Close a client's session when its connection ends (the sandbox would otherwise idle until expiry)."""
        if self.sessions is not None:
            await self.sessions.discard(str(key))

    async def lose(self, key: SessionKey, why: str, keep: bool = False) -> None:
        """Close ``key`` here, or mark it, so its next call here starts it fresh and says ``why`` (a session that
        moved to another replica, or came from one that is gone); a running call in it ends first. ``keep``: this
        replica hands the session over as it stops: it is hibernated first when hibernation is on."""
        if self.sessions is not None:
            await self.sessions.lose(str(key), why, keep)

    def live_sessions(self) -> list[SessionKey]:
        """The sessions whose sandbox runs now (their files can be read); listing them is no use of them."""
        if self.sessions is None:
            return []
        return [key for key in _keys(self.sessions.names()) if self.session_running(key)]

    def has_session(self, key: SessionKey) -> bool:
        """Whether ``key`` has a sandbox here, running or not."""
        return self.sessions is not None and self.sessions.worker(str(key)) is not None

    def session_hibernated(self, key: SessionKey) -> bool:
        """Whether ``key`` sleeps on disk here (``hibernation.py``), or is being written there (``Sessions.asleep``),
        to be restored by its next call."""
        return self.sessions is not None and self.sessions.asleep(str(key))

    def session_memory(self, key: SessionKey) -> int | None:
        """The bytes ``key`` takes here now (``Sessions.memory``: blocking, so in a thread), None when unknown."""
        return self.sessions.memory(str(key)) if self.sessions is not None else None

    def session_running(self, key: SessionKey) -> bool:
        """Whether ``key``'s sandbox runs here now (without counting this as use of the session)."""
        return self.sessions is not None and self.sessions.live_worker(str(key), use=False) is not None

    async def file_listing(self, key: SessionKey, label: str, folder: str = "") -> Listing:
        """The files under ``folder`` of ``key``'s /workspace; ``label`` names the session in messages."""
        return await self._files().listing(str(key), label, folder)

    def reading_file(self, key: SessionKey, label: str, path: str) -> AbstractAsyncContextManager[bytearray]:
        """A file of ``key``'s /workspace, held in the bridge-wide read budget while the context is open."""
        return self._files().reading(str(key), label, path)

    def _files(self) -> SessionFiles:
        if self.files is None:
            raise CodemodeError(self.why_not_running or "the bridge is not running")
        return self.files

    async def reap_replica(self, replica: str) -> int:
        """Delete the sandboxes another replica left (it is dead); how many there were."""
        return await self.sessions.backend.reap_replica(replica) if self.sessions is not None else 0

    async def settle(self) -> None:
        """Wait for the calls running in every session to end; none is closed."""
        if self.sessions is not None:
            await self.sessions.settle()

    async def close_sessions(self) -> None:
        """Close every session and sandbox now (a replica that stops); the bridge itself stays open."""
        if self.sessions is not None:
            await self.sessions.close()

    def wants_client_roots(self, again: bool = False) -> bool:
        """Whether the upstream servers' roots are the client's (none configured) and still to be learned:
        not yet, or ``again`` because the client said they changed."""
        roots = self.hub.roots
        return roots.follows_client and (again or not roots.known)

    async def client_gave_roots(self, roots: Sequence[types.Root]) -> None:
        """The client's roots, which the upstream servers that ask for roots are given from now on."""
        await self.hub.roots.client_gave(roots)


def _keys(names: list[str]) -> list[SessionKey]:
    """The keys of the sessions the bridge ran (the session manager names them by the keys' string form)."""
    found = []
    for name in names:
        try:
            found.append(SessionKey.parse(name))
        except BadSessionKey:  # a session the manager was given directly (tests), which no face placed
            continue
    return found


def _with_note(result: ExecutionResult, note: str) -> ExecutionResult:
    return dataclasses.replace(result, notice=f"{result.notice} {note}".strip())
