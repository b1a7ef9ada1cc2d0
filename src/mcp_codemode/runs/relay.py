"""The host end of sandboxed code's requests: discovery, tool calls, resources, prompts and saved tools.

This is the request API: it dispatches each ``call`` frame by its ``op`` and answers it. Every request
arrives from code we do not trust, so each parameter is type-checked before use (``relay_params.py``) and
every failure becomes an error reply whose ``kind`` names the ``runtime`` exception the guest raises.
Arguments are validated against the tool's schema before the upstream server sees them.

Listings come from the tool directory: docs, proxies and search may be answered from the catalog cache
without starting a server, but a call is always checked against the listing of the running server.

The policy's refusals of servers and tools the calls name, its caps (argument size and depth, measured
before anything recursive touches the arguments, the per-run budget and the rate) and the audit line of
every tool call are in ``policy/guard.py``; whose run a request belongs to is ``relay_run.Run``. Reading a
resource and getting a prompt are uses of a server like a tool call: they pass the same policy (its resource and
prompt patterns), spend from the same budget and rate, and get an audit line each. Listings are filtered by the
same patterns, so code never sees a resource or prompt it may not use.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mcp import types

from ..guest.protocol import (
    ERROR_KIND_ARGUMENT,
    ERROR_KIND_MCP,
    ERROR_KIND_SERVER_NOT_FOUND,
    ERROR_KIND_SERVER_UNAVAILABLE,
    ERROR_KIND_TOOL_NOT_FOUND,
    ERROR_KIND_TOOL_TIMEOUT,
)
from ..policy.guard import CallGuard, CallNote
from ..policy.rules import ToolNames
from ..settings import Settings
from ..telemetry.seam import Telemetry
from ..telemetry.tracing import CALL_ID
from ..upstream.errors import ServerUnavailable, UnknownServer, UpstreamCallError, UpstreamTimeout
from ..upstream.model import ServerConfig
from ..upstream.suggest import close_matches, did_you_mean
from ..upstream.tools import catalog
from ..upstream.tools.directory import ToolDirectory
from ..upstream.tools.listing import Listing
from ..upstream.tools.validate import ArgumentProblem, check_arguments
from .added_servers import AddedServers
from .audit import AuditLog
from .relay_params import (
    MAX_LIMIT,
    MAX_NAME,
    MAX_OFFSET,
    MAX_QUERY,
    MAX_URI,
    SEARCH_KEYS,
    Refusal,
    checked_detail,
    checked_int,
    checked_text,
    clipped_text,
    is_unicode,
    refuse_unknown,
)
from .relay_run import Caller, Run, upstream_progress
from .saved_tools import SavedToolProblem, SavedTools, SavedToolsUnavailable, saved_tool_requests
from .server_finding import ServerFinding

if TYPE_CHECKING:
    from ..guest.protocol import CallFrame, CellContext, ReplyBody, ServerEntry
    from ..reply_encoding import GuestRequestHandler, Reply

log = logging.getLogger("mcp_codemode.relay")  # the name log lines have always shown


class Relay:
    """Answers the requests of every session of one bridge; ``for_run`` binds one client and one run."""

    def __init__(self, directory: ToolDirectory, store: SavedTools, settings: Settings, audit: AuditLog | None = None,
                 telemetry: Telemetry | None = None, added: AddedServers | None = None) -> None:  # fmt: skip
        self.directory = directory
        self.hub = directory.hub
        self.store = store
        self.settings = settings
        self.policy = settings.policy
        self.guard = CallGuard(self.policy, audit if audit is not None else AuditLog(None), telemetry or Telemetry())
        # Built again only when the configured servers change (a refresh); a worker sends them when they differ.
        self._entries, self._entries_of = self._server_entries(), self.hub.generation
        self.finding = ServerFinding(directory, settings)  # find_servers: registries, catalogs, other clients' servers
        # Servers code added with a person's consent (added_servers.py), from where find_servers looks: each principal
        # sees only its own.
        self.added = added or AddedServers(settings, self.finding.source)
        self.added.directory, self.added.audit = directory, self.guard.audit
        self._ops: dict[str, Callable[[str, CallFrame], Awaitable[Any]]] = {
            "servers": self._servers,
            "describe": self._describe,
            "loaded": self._loaded,
            "tools": self._tools,
            "docs": self._docs,
            "search": self._search,
            "resources": self._resources,
            "resource_templates": self._resource_templates,
            "prompts": self._prompts,
            **saved_tool_requests(store),
            "find_servers": self.finding.answer,
        }
        # Uses of a server: policed, budgeted and audited as one kind each (CallGuard.audited).
        self._uses: dict[str, tuple[str, Callable[[Run, CallFrame, CallNote], Awaitable[Any]]]] = {
            "call": ("tool", self._call),
            "read_resource": ("resource", self._read_resource),
            "get_prompt": ("prompt", self._get_prompt),
        }

    # ------------------------------------------------------------------------------------ the guest's side

    async def context(self, owner: str, fresh: bool) -> CellContext:
        """What a call sends the guest: the servers, their catalog versions, and for a new sandbox the saved tools
        (read from the store each time: another replica may have saved or deleted one)."""
        if self._entries_of != self.hub.generation:
            self._entries, self._entries_of = self._server_entries(), self.hub.generation
        mine = [entry for entry in self._entries if self.added.visible(owner, entry["name"])]
        context: CellContext = {"servers": mine, "versions": dict(self.directory.versions)}
        # The guest checks the depth too, because its own JSON encoder fails on what is too deep to send.
        context["policy"] = {"max_argument_depth": self.policy.max_argument_depth, "where": self.policy.where}
        if fresh:
            tools, problems = await self.store.load(owner)
            context["saved"] = [{"name": tool.name, "source": tool.source} for tool in tools]
            if problems:
                context["saved_problems"] = problems
        return context

    def _server_entries(self) -> list[ServerEntry]:
        entries = []
        for name in self.hub.names():
            config = self.hub.config(name)
            entry: ServerEntry = {"name": name, "alias": config.alias, "transport": config.transport}
            if config.description:
                entry["description"] = config.description
            entries.append(entry)
        return entries

    def for_run(self, owner: str, session: str, caller: Caller | None = None) -> GuestRequestHandler:
        """The relay of one ``run_python`` call: ``owner``'s identity, a fresh call budget, and the call's client
        (``caller``: where upstream progress goes, how to ask its user to approve a tool call)."""
        tracing = self.guard.telemetry.tracing
        run = Run(owner, session, caller=caller or Caller(), call=CALL_ID.get(), trace=tracing.captured())

        async def relay(message: CallFrame) -> Reply:
            # Served in a task of the sandbox's reader: the call's id and trace are made current again, for the
            # spans of upstream calls (the cell's children) and the log lines written meanwhile.
            call = CALL_ID.set(run.call)
            try:
                with tracing.resumed(run.trace):
                    return await self.handle(owner, message, run)
            finally:
                CALL_ID.reset(call)

        return relay

    async def handle(self, owner: str, message: CallFrame, run: Run | None = None) -> Reply:
        op = message.get("op")
        try:
            message = self.added.door(owner, message)  # a name of another principal's added server: not found
        except UnknownServer as exc:
            return self._unknown_server(exc.server, owner).reply()
        if isinstance(op, str) and op in self.added.ops:
            return await self._answer(self.added.handle(str(op), run or Run(owner, ""), message), message, owner)
        use = self._uses.get(op) if isinstance(op, str) else None
        if use is not None:
            kind, answer = use
            used = run if run is not None else Run(owner, "")
            return await self.guard.audited(
                used, lambda note: self._answer(answer(used, message, note), message, owner), kind=kind
            )
        handler = self._ops.get(op) if isinstance(op, str) else None
        if handler is None:
            return Refusal(ERROR_KIND_MCP, f"unknown request {op!r:.40}").reply()
        return await self._answer(handler(owner, message), message, owner)

    async def _answer(self, work: Awaitable[Any], message: CallFrame, owner: str) -> ReplyBody:
        """The reply to one request: its value, or the error the guest raises as a runtime exception."""
        try:
            return {"ok": True, "value": await work}
        except Refusal as refusal:
            return refusal.reply()
        except UnknownServer as exc:
            return self._unknown_server(exc.server, owner).reply()
        except ServerUnavailable as exc:
            return Refusal(ERROR_KIND_SERVER_UNAVAILABLE, str(exc), clipped_text(message, "server")).reply()
        except UpstreamTimeout as exc:
            return Refusal(
                ERROR_KIND_TOOL_TIMEOUT, str(exc), clipped_text(message, "server"), clipped_text(message, "tool")
            ).reply()
        except UpstreamCallError as exc:  # the server's code and data too: a -32042's URL is in its data
            details = {"code": exc.code} if exc.code is not None else {}
            if exc.sandbox_data is not None:
                details["data"] = exc.sandbox_data
            server, tool = clipped_text(message, "server"), clipped_text(message, "tool")
            return Refusal(ERROR_KIND_MCP, str(exc), server, tool, **details).reply()
        except SavedToolProblem as exc:
            return Refusal(ERROR_KIND_ARGUMENT, str(exc)).reply()
        except SavedToolsUnavailable as exc:
            return Refusal(ERROR_KIND_MCP, str(exc)).reply()

    # ----------------------------------------------------------------------------------------- requests

    async def _servers(self, owner: str, message: CallFrame) -> list[ServerEntry]:
        await self.directory.load()
        entries = [entry for entry in self._server_entries() if self.added.visible(owner, entry["name"])]
        for entry in entries:
            state = self.hub.state(entry["name"])
            known = self.directory.known(entry["name"])
            entry["state"] = state.status
            entry["tools"] = len(known.tools) if known is not None else state.tools
            entry["listing"] = known.origin if known is not None else "unknown"
            if state.error:
                entry["error"] = state.error
        return entries

    async def _describe(self, owner: str, message: CallFrame) -> dict[str, Any]:
        return await self._description(message.get("server"))

    async def _description(self, wanted: object) -> dict[str, Any]:
        """``describe``'s answer for the server named ``wanted`` (checked here, as every name code sends)."""
        server = self._server_named(wanted)
        config = self.hub.config(server)
        listing = await self.directory.listing(server)
        described: dict[str, Any] = {"name": server, "alias": config.alias, "transport": config.transport}
        if config.description:
            described["description"] = config.description
        if config.cwd:
            described["cwd"] = config.cwd
        aliases = listing.aliases
        described["tools"] = [
            {
                "name": tool.name,
                "alias": aliases[tool.name],
                "description": catalog.first_line(tool.description),
                "input_schema": tool.input_schema or {"type": "object"},
            }
            for tool in listing.tools
        ]
        return described

    async def _loaded(self, owner: str, message: CallFrame) -> list[dict[str, Any]]:
        """``describe`` of every loaded server: one the hub runs or is starting (a ``servers`` hint, an earlier
        call or search started it). Nothing is started here; a server whose start fails is left out."""
        names = [name for name in self.hub.names() if self.hub.state(name).status in ("ready", "connecting")
                 and self.added.visible(owner, name)]  # fmt: skip
        described = await asyncio.gather(*(self._description(name) for name in names), return_exceptions=True)
        loaded = []
        for name, entry in zip(names, described, strict=True):
            if isinstance(entry, dict):
                loaded.append(entry)
            elif isinstance(entry, (ServerUnavailable, UpstreamCallError, UpstreamTimeout)):
                log.info("list_loaded_server_metadata leaves out %r: %s", name, entry)
            elif isinstance(entry, BaseException):
                raise entry
        return loaded

    async def _tools(self, owner: str, message: CallFrame) -> list[dict[str, Any]]:
        listing = await self.directory.listing(self._server(message))
        return [catalog.proxy_info(tool, listing.aliases[tool.name]) for tool in listing.tools]

    async def _docs(self, owner: str, message: CallFrame) -> Any:
        server = self._server(message)
        detail = checked_detail(message)
        listing = await self.directory.listing(server)
        wanted = message.get("tool")
        if wanted is None:
            if detail == "stub":
                config = self.hub.config(server)
                return catalog.server_stub(server, config.alias, config.description, listing.tools, listing.aliases)
            return [catalog.tool_doc(server, tool, listing.aliases[tool.name], detail) for tool in listing.tools]
        tool = self._find_tool(server, listing, checked_text(wanted, "tool", MAX_NAME))
        return catalog.tool_doc(server, tool, listing.aliases[tool.name], detail)

    async def _search(self, owner: str, message: CallFrame) -> dict[str, Any]:
        refuse_unknown(message, SEARCH_KEYS, "search", "query, limit, offset, detail and server")
        query = checked_text(message.get("query"), "query", MAX_QUERY)
        limit = checked_int(message.get("limit", 5), "limit", 1, MAX_LIMIT)
        offset = checked_int(message.get("offset", 0), "offset", 0, MAX_OFFSET)
        detail = checked_detail(message)
        wanted = message.get("server")
        server = None if wanted is None else self._server(message)
        page = await self.directory.search(
            query, limit=limit, offset=offset, server=server, wait=self.settings.search_wait,
            among=lambda name: self.added.visible(owner, name),
        )  # fmt: skip
        return self.added.only_visible(owner, page.reply(detail))

    async def _call(self, run: Run, message: CallFrame, note: CallNote) -> dict[str, Any]:
        name = checked_text(message.get("server"), "server", MAX_NAME)
        note.server = name
        wanted = checked_text(message.get("tool"), "tool", MAX_NAME)
        note.tool = wanted
        arguments = message.get("arguments", {})
        if not isinstance(arguments, dict):
            raise Refusal(ERROR_KIND_ARGUMENT, "arguments must be a dict of the tool's parameters", name, wanted)
        # Measured first (without recursion) so every audit line has the arguments' hash; refused below, after
        # the names, because "this server is refused" is the more useful news.
        too_large, note.arguments = self.policy.argument_refusal(arguments)
        if note.arguments is not None and not is_unicode(note.arguments.decode("utf-8", "surrogatepass")):
            raise Refusal(ERROR_KIND_ARGUMENT, "the arguments hold a lone surrogate, which is not valid Unicode text; "
                          "pass text as str without surrogates, or bytes as base64", name, wanted)  # fmt: skip
        config = self._call_target(name, wanted, note)
        server = note.server = note.configured = config.name
        typed = self.policy.name_refusal(ToolNames.typed_only(server, config.alias, wanted))
        if typed is not None:
            raise self.guard.refused(f"{server}/{wanted}", typed, note, server, wanted)
        if too_large is not None:
            raise self.guard.refused(f"{server}/{wanted}", too_large, note, server, wanted)
        timeout = message.get("timeout")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or
                                    not 0 < timeout <= self.settings.max_timeout):  # fmt: skip
            raise Refusal(ERROR_KIND_ARGUMENT, f"timeout must be a number of seconds above 0 and at most "
                          f"{self.settings.max_timeout}, not {timeout!r:.40}")  # fmt: skip
        # Arguments are checked against what the running server lists now, never against a cached listing.
        listing = await self.directory.listing(server, live=True)
        tool = listing.lookup.get(wanted) or self._find_tool(server, listing, wanted, note)
        note.tool = note.listed = tool.name
        try:
            check_arguments(tool.name, tool.input_schema or {}, arguments)
        except ArgumentProblem as exc:
            raise Refusal(ERROR_KIND_ARGUMENT, str(exc), server, tool.name) from None
        names = ToolNames(server, config.alias, tool.name, listing.aliases.get(tool.name, tool.name), wanted)
        await self.guard.approve(run, names, arguments, note)
        self.guard.spend(run, f"{server}/{tool.name}", note)
        news = run.caller.news  # the client asked for progress: what the server reports goes there
        progress = upstream_progress(news, server, tool.name) if news is not None else None
        link = self.guard.link(run, server, config.alias, tool.name)
        result = await self.hub.call_tool(server, tool.name, arguments, timeout=timeout, progress=progress, link=link)
        return self.added.scrub(server, result.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def _read_resource(self, run: Run, message: CallFrame, note: CallNote) -> dict[str, Any]:
        name = checked_text(message.get("server"), "server", MAX_NAME)
        note.server = name
        uri = note.tool = checked_text(message.get("uri"), "uri", MAX_URI)
        config = self._call_target(name, uri, note)
        server = note.server = note.configured = config.name
        refused = self.policy.resource_refusal(server, config.alias, uri)
        if refused is not None:
            raise self.guard.refused(f"resource {uri!r:.300} of {server!r}", refused, note, server)
        self.guard.spend(run, f"resource {uri!r:.300} of {server!r}", note)
        result = await self.hub.read_resource(server, uri)
        return self.added.scrub(server, result.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def _get_prompt(self, run: Run, message: CallFrame, note: CallNote) -> dict[str, Any]:
        name = checked_text(message.get("server"), "server", MAX_NAME)
        note.server = name
        prompt = note.tool = checked_text(message.get("prompt"), "prompt", MAX_NAME)
        arguments = message.get("arguments") or {}
        if not isinstance(arguments, dict) or not all(isinstance(value, str) for value in arguments.values()):
            raise Refusal(ERROR_KIND_ARGUMENT, "a prompt's arguments must be a dict of strings (MCP prompt arguments "
                          "are text: pass str(value))", name, prompt)  # fmt: skip
        too_large, note.arguments = self.policy.argument_refusal(arguments)
        config = self._call_target(name, prompt, note)
        server = note.server = note.configured = config.name
        subject = f"prompt {prompt!r} of {server!r}"
        refused = self.policy.prompt_refusal(server, config.alias, prompt) or too_large
        if refused is not None:
            raise self.guard.refused(subject, refused, note, server)
        self.guard.spend(run, subject, note)
        try:
            result = await self.hub.get_prompt(server, prompt, arguments)
        except UpstreamCallError:
            known = [listed.name for listed in await self._allowed_prompts(server)]
            if prompt in known:
                raise
            close = close_matches(prompt, known)
            hint = did_you_mean(close)
            raise Refusal(ERROR_KIND_ARGUMENT, f"the {server!r} server has no prompt {prompt!r}.{hint} Its prompts: "
                          f"{', '.join(known) or 'none'}.", server, suggestions=close) from None  # fmt: skip
        return self.added.scrub(server, result.model_dump(mode="json", by_alias=True, exclude_none=True))

    def _call_target(self, name: str, tool: str, note: CallNote) -> ServerConfig:
        """The server a call names; one the policy refuses is refused here, without being started or listed."""
        try:
            return self.hub.config(name)
        except UnknownServer:
            found = self.directory.refused.get(name)
            if found is None:
                raise
            config, refused = found
            note.server = config.name
            raise self.guard.refused(f"{config.name}/{tool}", refused, note, config.name, tool) from None

    async def _resources(self, owner: str, message: CallFrame) -> list[dict[str, Any]]:
        server = self._server(message)
        alias = self.hub.config(server).alias
        resources = await self.hub.list_resources(server)
        allowed = [item for item in resources if self.policy.resource_refusal(server, alias, str(item.uri)) is None]
        return [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in allowed]

    async def _resource_templates(self, owner: str, message: CallFrame) -> list[dict[str, Any]]:
        server = self._server(message)
        alias = self.hub.config(server).alias
        templates = await self.hub.list_resource_templates(server)
        allowed = [item for item in templates if self.policy.resource_refusal(server, alias, item.uri_template) is None]
        return [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in allowed]

    async def _prompts(self, owner: str, message: CallFrame) -> list[dict[str, Any]]:
        prompts = await self._allowed_prompts(self._server(message))
        return [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in prompts]

    async def _allowed_prompts(self, server: str) -> list[types.Prompt]:
        alias = self.hub.config(server).alias
        prompts = await self.hub.list_prompts(server)
        return [item for item in prompts if self.policy.prompt_refusal(server, alias, item.name) is None]

    # ------------------------------------------------------------------------------------------ helpers

    def _server(self, message: CallFrame) -> str:
        """The configured server a request names (by name or alias); the hub's UnknownServer carries suggestions."""
        return self._server_named(message.get("server"))

    def _server_named(self, wanted: object) -> str:
        return self.hub.config(checked_text(wanted, "server", MAX_NAME)).name

    def _unknown_server(self, name: str, owner: str) -> Refusal:
        """ServerNotFound in the words sandboxed code sees everywhere (the same as ``mcp_servers[...]``), or the
        policy's refusal for a server it hides; suggestions never name a hidden server."""
        found = self.directory.refused.get(name)
        if found is not None:
            return self.guard.refused(f"server {found[0].name!r}", found[1], server=found[0].name)
        names = [name for name in self.hub.names() if self.added.visible(owner, name)]
        close = close_matches(name, names)
        hint = did_you_mean(close)
        return Refusal(ERROR_KIND_SERVER_NOT_FOUND, f"no MCP server named {name!r}.{hint} Configured servers: "
                       f"{', '.join(names) or 'none'}.", name, suggestions=close)  # fmt: skip

    def _find_tool(self, server: str, listing: Listing, name: str, note: CallNote | None = None) -> types.Tool:
        found = listing.lookup.get(name)
        if found is not None:
            return found
        refused = listing.refused.get(name)
        if refused is not None:
            raise self.guard.refused(f"{server}/{name}", refused, note, server, name)
        names = [tool.name for tool in listing.tools]
        candidates = list(dict.fromkeys(names + list(listing.aliases.values())))
        close = close_matches(name, candidates)
        hint = did_you_mean(close)
        raise Refusal(ERROR_KIND_TOOL_NOT_FOUND, f"the {server!r} server has no tool {name!r}.{hint} Its tools: "
                      f"{', '.join(names) or 'none'}.", server, name, suggestions=close)  # fmt: skip
