"""The face's resources: the capabilities text, and the files of the caller's own sessions.

One object per server (``SessionResources``) answers ``resources/list``, ``resources/templates/list`` and
``resources/read``; a files URI is placed by the same rules as a call (placement.py), so a caller reads only the
sessions it could run code in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from ..errors import CodemodeError
from ..runs.bridge import Bridge
from ..runs.summary import reference_capabilities
from .placement import DEFAULT_NAME, Placement, Transport, connection_key, connection_of, place, principal_of
from .workspace_files import FILE_RESOURCE_TEMPLATE, file_contents, listing_contents, parse_file_uri, session_folder

if TYPE_CHECKING:
    from .replicas import SessionRouter

CAPABILITIES_URI = "codemode://capabilities"
# The reference bridge's name for it, for prompts and clients written for that bridge: read, not listed, so a
# client that lists resources sees one capabilities text, not two that say the same.
REFERENCE_CAPABILITIES_URI = "resource://mcp-server-code-execution-mode/capabilities"


class SessionResources:
    """The resource handlers for one bridge and transport; ``router`` as for ``ToolCalls``."""

    def __init__(self, bridge: Bridge, transport: Transport, router: SessionRouter | None = None) -> None:
        self.bridge = bridge
        self.transport = transport
        self.router = router

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        capabilities = types.Resource(
            uri=CAPABILITIES_URI,
            name="capabilities",
            title="What the run_python sandbox offers",
            description="Limits, sessions, output, images and the MCP servers reachable from code",
            mime_type="text/markdown",
        )
        folders = [session_folder(label) for label in sorted(self._own_sessions(ctx))]
        return types.ListResourcesResult(resources=[capabilities, *folders])

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[FILE_RESOURCE_TEMPLATE])

    def _own_sessions(self, ctx: ServerRequestContext[Any, Any]) -> set[str]:
        """The names of the caller's sessions that have a running sandbox (whose files can be read)."""
        keys = self.bridge.live_sessions()
        if self.transport == "stdio":
            return {key.name for key in keys if key.kind == "stdio"}
        principal = principal_of(ctx) or "local"
        labels = {key.name for key in keys if key.kind == "principal" and key.owner == principal}
        session_id = getattr(connection_of(ctx), "session_id", None)
        if isinstance(session_id, str) and connection_key(session_id) in keys:
            labels.add(DEFAULT_NAME)
        return labels

    def _files_place(self, ctx: ServerRequestContext[Any, Any], name: str) -> Placement:
        """The session a files URI names, for this caller: as a call's ``session`` argument would place it, except
        that ``default`` over handshake-era HTTP is the connection's own default while it has one."""
        if self.transport == "http" and name == DEFAULT_NAME:
            connection = place(ctx, self.transport, None)
            if connection.per_connection and self.bridge.has_session(connection.key):
                return connection
        return place(ctx, self.transport, name)

    async def _read_session_file(self, ctx: ServerRequestContext[Any, Any], uri: str, name: str, path: str,
                                 declared: str | None) -> types.ReadResourceResult:  # fmt: skip
        bridge, router = self.bridge, self.router
        if bridge.why_not_running:
            raise MCPError(types.INVALID_PARAMS, bridge.why_not_running, data={"uri": uri})
        where = self._files_place(ctx, name)
        if router is not None and router.shares(where) and not bridge.session_running(where.key):
            raise MCPError(
                types.INVALID_PARAMS,
                f"the session {name!r} does not run on this replica; read its files through the replica that "
                "runs it, or hand the data back in the call's result",
                data={"uri": uri},
            )
        try:
            if path == "" or path.endswith("/"):
                listing = await bridge.file_listing(where.key, name, path.rstrip("/"))
                return types.ReadResourceResult(contents=[listing_contents(uri, name, listing)])
            async with bridge.reading_file(where.key, name, path) as data:  # held in the read budget while encoded
                return types.ReadResourceResult(contents=[file_contents(uri, path, data, declared)])
        except CodemodeError as exc:
            raise MCPError(types.INVALID_PARAMS, f"{exc}", data={"uri": uri}) from None

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            session_file = parse_file_uri(uri)
        except UnicodeDecodeError:
            raise MCPError(
                types.INVALID_PARAMS, f"the path in {uri} is not UTF-8 once decoded", data={"uri": uri}
            ) from None
        if session_file is not None:
            return await self._read_session_file(ctx, uri, *session_file)
        if uri == CAPABILITIES_URI:
            text = self.bridge.summary
        elif uri == REFERENCE_CAPABILITIES_URI:
            text = reference_capabilities(self.bridge.summary)
        else:
            raise MCPError(
                types.INVALID_PARAMS,
                f"Resource not found: {params.uri}; this server has {CAPABILITIES_URI} and the files of your sessions, "
                "codemode://sessions/{session}/files/{path} (files/ alone lists them)",
                data={"uri": uri},
            )
        contents = types.TextResourceContents(uri=uri, mime_type="text/markdown", text=text)
        return types.ReadResourceResult(contents=[contents])
