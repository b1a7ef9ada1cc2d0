"""The MCP face: one tool, ``run_python``, one resource, and nothing that grows with the user's servers.

Built on the SDK's low-level ``Server`` rather than ``MCPServer``: the tool listing must stay a small
constant we write by hand, and arguments must be checked by us so a wrong one comes back as a tool result
the model can read and fix (``isError``), never as a protocol error that some clients swallow.

Which session a call lands in (documented in docs/clients.md, "Sessions"), first rule that applies:

1. The ``session`` argument names it.
2. Over HTTP, an ``Mcp-Codemode-Session`` header names it, the same way: a client (or the user, in the
   client's configuration) gives a connection its own default without the model having to pass anything.
3. stdio: the process serves one client, so its default session is simply its own.
4. HTTP, handshake era (2025-11-25): the default session belongs to the MCP session id of the connection
   and closes when that MCP session ends.
5. HTTP, stateless era (2026-07-28): there is no connection to belong to, so the call runs in its
   principal's session named ``default``, exactly as a call with ``session: "default"`` would.

A name is always scoped by the principal (the bearer token used; without tokens, which only loopback
allows, the local user): two tokens never share a session, and every local tokenless client reaches the
same names. So all stateless clients of one token, or all local tokenless ones, share one default session
unless they send the header; every call has an owner, and none runs in a throwaway sandbox.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError

from .. import __version__
from ..errors import CodemodeError
from ..guest.protocol import USER_SESSION_NAME_PATTERN
from ..runs.bridge import Bridge, RunRequest
from ..runs.relay_run import Caller, News
from ..runs.summary import reference_capabilities
from ..settings import Settings
from .client_requests import learn_roots, learn_roots_in_round, reaching
from .heartbeat import ProgressLine, Report, heartbeat
from .input_rounds import ABANDONED, KEEP, InputRounds, ListRoots
from .principals import PRINCIPAL_STATE_KEY, connection_key
from .render import cut_middle, error_result, render_result
from .workspace_files import (
    FILE_RESOURCE_TEMPLATE,
    BadFiles,
    file_contents,
    listing_contents,
    parse_file_uri,
    parse_files,
    session_folder,
    session_labels,
)

if TYPE_CHECKING:  # the router (httpx, the cluster's API) is imported only where replicas share sessions
    from .replicas import Place, RunHere, SessionRouter

log = logging.getLogger("mcp_codemode.server")  # the name log lines have always shown
Transport = Literal["stdio", "http"]
T = TypeVar("T")
TOOL_NAME = "run_python"
CAPABILITIES_URI = "codemode://capabilities"
# The reference bridge's name for it, for prompts and clients written for that bridge: read, not listed, so a
# client that lists resources sees one capabilities text, not two that say the same.
REFERENCE_CAPABILITIES_URI = "resource://mcp-server-code-execution-mode/capabilities"
_CLOSES_KEY = "mcp_codemode_closes"  # in the SDK connection's state: the session its teardown closes
MAX_CODE_CHARS = 1_000_000
SESSION_PATTERN = USER_SESSION_NAME_PATTERN  # the name a user gives; sessions.py checks the internal key
_SESSION_RE = re.compile(SESSION_PATTERN)
SESSION_HEADER = "Mcp-Codemode-Session"
_SESSION_HEADER_KEY = SESSION_HEADER.lower().encode()  # ASGI gives header names in lower case, as bytes
DEFAULT_NAME = "default"
_ARGUMENTS = ("code", "servers", "timeout", "session", "reset")
# Files for the session's /workspace travel in the request's _meta, from the client program: not an argument, so
# the model pays nothing for them in the listing and strict-schema clients keep a schema they can express.
FILES_META_KEY = "codemode/files"

DESCRIPTION = (
    "Run Python 3 in a sandbox (no network, no host files) and get back what it prints, the value of its "
    "last expression, errors and images. State persists between calls of a session; top-level await works. "
    "The code can call the user's MCP servers: `await mcp_<server>.<tool>(...)`; find tools with "
    "`await runtime.search_tool_docs('...')`. Read runtime.capability_summary() (after `import mcp.runtime as "
    "runtime`) or the codemode://capabilities resource for servers, limits and helpers. Print only what you "
    "need: long output is cut in the middle."
)


def run_python_tool(settings: Settings) -> types.Tool:
    """The whole listing: small and constant whatever the user configures (≤ 1,400 characters as JSON)."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "Python source to run"},
            "servers": {
                "type": "array",
                "items": {"type": "string"},
                "description": "MCP servers to pre-load (optional)",
            },
            "timeout": {
                "type": "integer",
                "minimum": 1,
                "maximum": settings.max_timeout,
                "default": settings.timeout,
                "description": "seconds",
            },
            "session": {"type": "string", "description": "persistent REPL to use (omitted: the default one)"},
            "reset": {"type": "boolean", "description": "start the session fresh"},
        },
        "required": ["code"],
        "additionalProperties": False,
    }
    if settings.shares_sessions:
        # SEP-2243, only where a load balancer in front of replicas may route on it: a 2026-07-28 client mirrors
        # the argument into an Mcp-Param-Session header, and the SDK refuses a call that carries the argument
        # without it, which every client that calls before it lists (fastmcp 4, openai-agents' cached listing)
        # would meet on a bridge that has nothing to route.
        schema["properties"]["session"]["x-mcp-header"] = "Session"
    return types.Tool(
        name=TOOL_NAME,
        title="Run Python",
        description=DESCRIPTION,
        input_schema=schema,
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True),
    )


class InvalidArguments(CodemodeError, ValueError):
    """A ``run_python`` argument we cannot use; the message says what to send instead."""


def parse_arguments(arguments: Mapping[str, Any] | None, settings: Settings) -> RunRequest:
    """Check every argument the model sent; each message names the argument and shows a good value."""
    args = dict(arguments or {})
    unknown = sorted(set(args) - set(_ARGUMENTS))
    if unknown:
        raise InvalidArguments(
            f"run_python has no argument {', '.join(map(repr, unknown))}; it takes code (required), "
            "servers, timeout, session and reset"
        )
    code = args.get("code")
    if not isinstance(code, str) or not code.strip():
        what = "missing" if code is None else ("empty" if isinstance(code, str) else f"a {_json_type(code)}")
        raise InvalidArguments(
            f'`code` is {what}: send the Python source to run as a string, for example {{"code": "print(1 + 1)"}}'
        )
    if len(code) > MAX_CODE_CHARS:
        raise InvalidArguments(
            f"`code` is {len(code):,} characters; the limit is {MAX_CODE_CHARS:,}: send less code and keep data "
            "in files under /workspace or in session variables"
        )
    return RunRequest(
        code=code,
        timeout=_timeout(args.get("timeout"), settings),
        session=_session(args.get("session")),
        reset=_reset(args.get("reset")),
        servers=_servers(args.get("servers")),
    )


def meta_files(ctx: ServerRequestContext[Any, Any]) -> tuple[tuple[str, bytes], ...]:
    """The files the client program sent in the request's ``_meta`` for the session's /workspace."""
    meta: Mapping[str, Any] = ctx.meta or {}
    try:
        return parse_files(meta.get(FILES_META_KEY), f'_meta["{FILES_META_KEY}"]')
    except BadFiles as exc:
        raise InvalidArguments(str(exc)) from None


def _json_type(value: object) -> str:
    names = {bool: "boolean", int: "number", float: "number", str: "string", list: "list", dict: "object"}
    return names.get(type(value), type(value).__name__)


# Strict-schema clients (OpenAI's strict function calling) must send every property, so they send an optional
# one as its "empty" value: null, "" or []. Each means "not given"; anything else still has to be right.


def _timeout(value: object, settings: Settings) -> int | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= settings.max_timeout:
        raise InvalidArguments(
            f"`timeout` must be a whole number of seconds from 1 to {settings.max_timeout}, not {value!r}; "
            f'for example {{"timeout": {min(60, settings.max_timeout)}}}, or leave it out for '
            f"{settings.timeout} s"
        )
    return value


def _session(value: object) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _SESSION_RE.fullmatch(value):
        raise InvalidArguments(
            f"`session` {value!r} is not a valid session name: use 1-64 letters, digits, '_', '.', '@' or '-', "
            'starting with a letter or digit, for example {"session": "analysis-1"}; or leave it out for your '
            "own default session"
        )
    return value


def _reset(value: object) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidArguments(f'`reset` must be true or false, not {value!r}; for example {{"reset": true}}')
    return value


def _servers(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) and 0 < len(item) <= 128 for item in value):
        raise InvalidArguments(
            f"`servers` must be a list of server names, not {value!r}; for example "
            '{"servers": ["github"]}, or leave it out (every configured server is reachable anyway)'
        )
    return tuple(dict.fromkeys(value))


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where one call runs: the bridge's session key, the name the caller is shown, and who owns it."""

    key: str
    label: str  # the session's name as the client knows it ("default" when it named none)
    owner: str  # the principal: a token's, or "local"
    per_connection: bool = False  # a handshake-era default, closed when its MCP session ends


def place(ctx: ServerRequestContext[Any, Any], transport: Transport, named: str | None) -> Placement:
    """The session a call runs in, by the rules of the module docstring.

    Raises ``InvalidArguments`` for a session header that is not a valid name: the call is refused with a
    message the model can pass on (the header is the user's configuration, so only the user can fix it).
    """
    if transport == "stdio":
        return Placement(f"stdio:{named or DEFAULT_NAME}", named or DEFAULT_NAME, "local")
    owner = _principal(ctx) or "local"
    name = named or session_header(ctx)
    if name is not None:
        return Placement(f"p:{owner}:{name}", name, owner)
    session_id = getattr(_connection(ctx), "session_id", None)
    if isinstance(session_id, str) and session_id:
        return Placement(connection_key(session_id), DEFAULT_NAME, owner, per_connection=True)
    return Placement(f"p:{owner}:{DEFAULT_NAME}", DEFAULT_NAME, owner)


def session_header(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The session the ``Mcp-Codemode-Session`` header names, if the request has one (HTTP only)."""
    scope = getattr(ctx.request, "scope", None) or {}
    raw: list[tuple[bytes, bytes]] = scope.get("headers") or []
    values = sorted(
        {value.decode("latin-1").strip() for key, value in raw if key.lower() == _SESSION_HEADER_KEY} - {""}
    )
    if not values:
        return None
    if len(values) > 1:
        raise InvalidArguments(
            f"the request has {len(values)} different {SESSION_HEADER} headers "
            f"({', '.join(repr(cut_middle(value, 40)) for value in values[:3])}); send one, in the client's "
            "configuration of this server"
        )
    value = values[0]
    if not _SESSION_RE.fullmatch(value):
        raise InvalidArguments(
            f"the {SESSION_HEADER} header {cut_middle(value, 80)!r} is not a valid session name: use 1-64 "
            "letters, digits, '_', '.', '@' or '-', starting with a letter or digit (for example analysis-1), in "
            "the client's configuration of this server; a call can also name its session with the `session` "
            "argument"
        )
    return value


def _principal(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The bearer-token principal the HTTP guard put in the request's scope (None without a token)."""
    scope = getattr(ctx.request, "scope", None) or {}
    principal = (scope.get("state") or {}).get(PRINCIPAL_STATE_KEY)
    return principal if isinstance(principal, str) and principal else None


def _connection(ctx: ServerRequestContext[Any, Any]) -> Any:
    """The SDK's per-client Connection (its id, its teardown stack); reached through the request's session."""
    return getattr(ctx.session, "_connection", None)


def close_with_connection(ctx: ServerRequestContext[Any, Any], bridge: Bridge, key: str) -> None:
    """Close the client's default sandbox when its MCP session ends, not only when it idles out."""
    connection = _connection(ctx)
    state = getattr(connection, "state", None)
    stack = getattr(connection, "exit_stack", None)
    if not isinstance(state, dict) or stack is None or state.get(_CLOSES_KEY) == key:
        return
    state[_CLOSES_KEY] = key
    stack.push_async_callback(bridge.discard, key)


def _progress_token(ctx: ServerRequestContext[Any, Any]) -> object:
    meta: Mapping[str, Any] = ctx.meta or {}
    return meta.get("progress_token", meta.get("progressToken"))


async def _report_progress(line: ProgressLine, interval: float) -> None:
    """Tell the client we are alive: many drop a call that stays silent for a while."""
    try:
        await heartbeat(line.timeout, interval, line)
    except Exception:  # a client that went away is noticed by the call itself
        log.debug("progress notification failed", exc_info=True)


def local_runner(bridge: Bridge) -> RunHere:
    """Run a placed call in this replica's sandboxes and render it: what every call comes down to."""
    settings = bridge.settings

    async def run_here(
        request: RunRequest, where: Place, news: News | None = None, client: Caller | None = None
    ) -> types.CallToolResult:
        try:
            caller = dataclasses.replace(client or Caller(), news=news)
            result = await bridge.run(request, where.key, owner=where.owner, caller=caller)
        except CodemodeError as exc:
            return error_result(str(exc), type(exc).__name__)
        return render_result(result, settings.output_mode, settings.output_limit, where.label)

    return run_here


async def _beating(line: ProgressLine, interval: float, work: Awaitable[T]) -> T:
    """``work`` with the heartbeat on ``line`` beside it. What ``work`` raises comes out as itself: raised inside the
    task group it would come out wrapped, and an MCPError would reach the client as an internal error."""
    failure: Exception | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(_report_progress, line, interval)
        try:
            result = await work
        except Exception as exc:  # noqa: BLE001 - re-raised below, outside the group
            failure = exc
        group.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return result


def _asks_in_rounds(ctx: ServerRequestContext[Any, Any], wants_roots: bool) -> bool:
    """Whether a call asks its client through input_required rounds: it has no channel to send requests on (the
    2026-07-28 era) and its client declared something it can be asked (elicitation or sampling, or its roots when
    a stdio bridge ``wants_roots``)."""
    if ctx.session.can_send_request:
        return False
    capabilities = ctx.session.client_capabilities
    if capabilities is None:
        return False
    return (
        capabilities.elicitation is not None
        or capabilities.sampling is not None
        or (wants_roots and capabilities.roots is not None)
    )


def _progress_reporter(ctx: ServerRequestContext[Any, Any]) -> Report:
    """Progress another replica reports for a forwarded call, passed on to this call's client."""

    async def report(progress: float, total: float | None, message: str | None) -> None:
        try:
            await ctx.session.report_progress(progress, total, message)
        except Exception:  # a client that went away is noticed by the call itself
            log.debug("progress notification failed", exc_info=True)

    return report


def build_server(
    bridge: Bridge, transport: Transport, tracing: bool = False, router: SessionRouter | None = None
) -> Server[Any]:
    """The MCP server for one bridge; the same object serves stdio, HTTP and both protocol eras.

    ``router``: replicas share sessions (face/replicas.py), so a call may run at another replica.
    """
    settings = bridge.settings
    tool = run_python_tool(settings)
    run_here = local_runner(bridge)
    rounds = InputRounds()

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        if params.name != TOOL_NAME:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool {params.name!r}: this server has one tool, {TOOL_NAME}")
        try:
            request = dataclasses.replace(parse_arguments(params.arguments, settings), files=meta_files(ctx))
            where = place(ctx, transport, request.session)
        except InvalidArguments as exc:
            return error_result(str(exc))
        if where.per_connection:
            close_with_connection(ctx, bridge, where.key)
        timeout = settings.clamp_timeout(request.timeout)
        wants_progress = _progress_token(ctx) is not None
        reached = reaching(ctx)
        if transport == "stdio":  # one client: its roots are the upstream servers' (unless some are configured)
            await learn_roots(ctx, bridge.hub.roots)

        async def run(
            request: RunRequest, where: Place, news: News | None = None, given: Caller | None = None
        ) -> types.CallToolResult:
            client = given or reached
            if not wants_progress:
                return await run_here(request, where, None, client)
            # The heartbeat and upstream servers' progress on the code's tool calls, on one increasing line.
            line = ProgressLine(timeout, ctx.session.report_progress)
            return await _beating(line, settings.progress_interval, run_here(request, where, line.news, client))

        if router is not None and router.shares(where):
            return await router.run(request, where, run, _progress_reporter(ctx) if wants_progress else None)
        abandoned = rounds.abandon_waiting(where.key) if params.request_state is None else None
        roots = bridge.hub.roots
        wants_roots = transport == "stdio" and roots.follows_client and not roots.known
        if params.request_state is not None or _asks_in_rounds(ctx, wants_roots):
            result = await in_rounds(ctx, params, request, where, timeout, wants_progress)
        else:
            result = await run(request, where)
        if abandoned is not None and isinstance(result, types.CallToolResult):
            result.content.insert(0, types.TextContent(type="text", text=ABANDONED.format(what=abandoned)))
        return result

    async def in_rounds(
        ctx: ServerRequestContext[Any, Any],
        params: types.CallToolRequestParams,
        request: RunRequest,
        where: Placement,
        timeout: float,
        wants_progress: bool,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """A 2026-07-28 call whose client can be asked: the run may answer input_required (face/input_rounds.py)."""
        line = ProgressLine(timeout, ctx.session.report_progress) if wants_progress else None
        news = line.news if line is not None else None
        capabilities = ctx.session.client_capabilities or types.ClientCapabilities()

        async def go(caller: Caller, round_news: News, list_roots: ListRoots | None) -> types.CallToolResult:
            if transport == "stdio" and list_roots is not None:  # the one client's roots, asked in a round
                await learn_roots_in_round(list_roots, bridge.hub.roots)
            return await run_here(request, where, round_news if wants_progress else None, caller)

        if params.request_state is not None:
            work = rounds.resume(params.request_state, where.owner, params.arguments, params.input_responses, news)
        else:
            work = rounds.start(where.owner, where.key, params.arguments, capabilities, go, news)
        return await (work if line is None else _beating(line, settings.progress_interval, work))

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        capabilities = types.Resource(
            uri=CAPABILITIES_URI,
            name="capabilities",
            title="What the run_python sandbox offers",
            description="Limits, sessions, output, images and the MCP servers reachable from code",
            mime_type="text/markdown",
        )
        folders = [session_folder(label) for label in sorted(_own_sessions(ctx))]
        return types.ListResourcesResult(resources=[capabilities, *folders])

    def _own_sessions(ctx: ServerRequestContext[Any, Any]) -> set[str]:
        """The names of the caller's sessions that have a running sandbox (whose files can be read)."""
        if bridge.sessions is None:
            return set()
        keys = [key for key in bridge.sessions.names() if bridge.sessions.live_worker(key, use=False) is not None]
        if transport == "stdio":
            return session_labels(keys, "stdio:")
        labels = session_labels(keys, f"p:{_principal(ctx) or 'local'}:")
        session_id = getattr(_connection(ctx), "session_id", None)
        if isinstance(session_id, str) and connection_key(session_id) in keys:
            labels.add(DEFAULT_NAME)
        return labels

    def _files_place(ctx: ServerRequestContext[Any, Any], name: str) -> Placement:
        """The session a files URI names, for this caller: as a call's ``session`` argument would place it, except
        that ``default`` over handshake-era HTTP is the connection's own default while it has one."""
        if transport == "http" and name == DEFAULT_NAME and bridge.sessions is not None:
            connection = place(ctx, transport, None)
            if connection.per_connection and bridge.sessions.worker(connection.key) is not None:
                return connection
        return place(ctx, transport, name)

    async def read_session_file(ctx: ServerRequestContext[Any, Any], uri: str, name: str, path: str,
                                declared: str | None) -> types.ReadResourceResult:  # fmt: skip
        if bridge.files is None or bridge.sessions is None:
            raise MCPError(types.INVALID_PARAMS, bridge.backend_error or "the bridge is not running", data={"uri": uri})
        where = _files_place(ctx, name)
        if router is not None and router.shares(where) and bridge.sessions.live_worker(where.key, use=False) is None:
            raise MCPError(
                types.INVALID_PARAMS,
                f"the session {name!r} does not run on this replica; read its files through the replica that "
                "runs it, or hand the data back in the call's result",
                data={"uri": uri},
            )
        try:
            if path == "" or path.endswith("/"):
                listing = await bridge.files.listing(where.key, name, path.rstrip("/"))
                return types.ReadResourceResult(contents=[listing_contents(uri, name, listing)])
            async with bridge.files.reading(where.key, name, path) as data:  # held in the read budget while encoded
                return types.ReadResourceResult(contents=[file_contents(uri, path, data, declared)])
        except CodemodeError as exc:
            raise MCPError(types.INVALID_PARAMS, f"{exc}", data={"uri": uri}) from None

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            session_file = parse_file_uri(uri)
        except UnicodeDecodeError:
            raise MCPError(
                types.INVALID_PARAMS, f"the path in {uri} is not UTF-8 once decoded", data={"uri": uri}
            ) from None
        if session_file is not None:
            return await read_session_file(ctx, uri, *session_file)
        if uri == CAPABILITIES_URI:
            text = bridge.summary
        elif uri == REFERENCE_CAPABILITIES_URI:
            text = reference_capabilities(bridge.summary)
        else:
            raise MCPError(
                types.INVALID_PARAMS,
                f"Resource not found: {params.uri}; this server has {CAPABILITIES_URI} and the files of your sessions, "
                "codemode://sessions/{session}/files/{path} (files/ alone lists them)",
                data={"uri": uri},
            )
        contents = types.TextResourceContents(uri=uri, mime_type="text/markdown", text=text)
        return types.ReadResourceResult(contents=[contents])

    async def list_prompts(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[])

    async def list_resource_templates(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[FILE_RESOURCE_TEMPLATE])

    async def set_logging_level(
        ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        # Handshake-era clients send this unasked; we send no log notifications, so there is nothing to change.
        return types.EmptyResult()

    # Empty lists rather than "method not found": generic clients (and the conformance suite) list prompts and
    # templates of every server, and an error there reads as a broken server.
    server: Server[Any] = Server(
        "mcp-codemode",
        version=__version__,
        title="mcp-codemode",
        instructions=("Use run_python to compute, transform data and call tools in code; state persists per session."),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_list_resource_templates=list_resource_templates,
    )
    # Registered directly: passing it to the constructor warns that logging is deprecated in 2026-07-28.
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_logging_level)
    if transport == "stdio":  # the one client's roots are the upstream servers' roots: ask again when they change

        async def roots_changed(ctx: ServerRequestContext[Any, Any], params: types.NotificationParams) -> None:
            await learn_roots(ctx, bridge.hub.roots, again=True)

        server.add_notification_handler("notifications/roots/list_changed", types.NotificationParams, roots_changed)
    # input_required rounds carry the key of a parked run and round as requestState: sealed (AES-GCM, a process key),
    # bound to the caller's principal and expiring with the parked run's entry.
    security = RequestStateSecurity(keys=[os.urandom(32)], ttl=KEEP, bind_principal=_principal)
    server.middleware.append(RequestStateBoundary(security, default_audience="mcp-codemode"))
    if not tracing:
        # The SDK's OpenTelemetry middleware costs a few per cent of every request even with no exporter.
        server.middleware = [m for m in server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"]
    return server
