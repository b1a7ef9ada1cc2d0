"""Where a bridge keeps what outlives a session: sign-ins (OAuth tokens) and saved tools, chosen by
``MCP_BRIDGE_SHARED_STATE``.

``files`` (the default) keeps them under the state directory: right for one machine, where every bridge of the
user shares that directory. ``kubernetes`` keeps them in the cluster (``cluster/shared_state.py``: one Secret
of sign-ins, a ConfigMap per saved tool), so that face replicas, whose state directories are emptyDirs lost with
their pods, all see one sign-in per server and one set of saved tools per principal; ``mcp-codemode login`` with the
same setting writes there too. Chosen here, in the run service, because it is the layer that may reach both the
upstream package (which uses sign-ins through its ``SignInStore`` protocol) and the cluster client.

Saved tools in the cluster are read through on every load (each new session, each ``list_saved_tools()``): one
list request, and a tool saved, replaced or deleted on any replica is what the next new session anywhere gets. A
failure of the cluster is told to sandboxed code without its details (addresses of the cluster are not its
business); the bridge's log has them.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from ..cluster.api import EXTRA_FIX, KubeApiError, require_client
from ..cluster.naming import saved_tool_object
from ..cluster.shared_state import LazyApi, SecretRecords, ToolConfigMaps
from ..errors import SandboxUnavailable, SettingsError
from ..settings import Settings
from ..upstream.servers.sign_ins import FileSignIns, SignInStore
from .saved_tools import (
    MAX_TOOLS_PER_OWNER,
    FileSavedTools,
    SavedTool,
    SavedToolProblem,
    SavedTools,
    SavedToolStore,
    SavedToolsUnavailable,
    check_name,
    new_tool,
    too_many,
)

log = logging.getLogger("mcp_codemode.shared_state")
UNAVAILABLE = "the store of saved tools in the cluster did not answer (the bridge's log says why)"


@dataclasses.dataclass
class SharedState:
    """The stores of one bridge (or one command), and the API client they share, closed with ``aclose``."""

    sign_ins: SignInStore
    saved_tools: SavedTools
    api: LazyApi | None = None

    async def aclose(self) -> None:
        if self.api is not None:
            await self.api.aclose()


def shared_state(settings: Settings) -> SharedState:
    """The stores ``settings.shared_state`` names; for ``kubernetes``, refused at once without the client."""
    if settings.shared_state == "kubernetes":
        try:
            require_client()
        except SandboxUnavailable:
            raise SettingsError(
                "MCP_BRIDGE_SHARED_STATE=kubernetes keeps sign-ins and saved tools in the cluster, which needs the "
                "optional Kubernetes client; it is not installed",
                fix=f"{EXTRA_FIX}, or set MCP_BRIDGE_SHARED_STATE=files",
            ) from None
        api = LazyApi(settings.kube_config, settings.kube_context)
        namespace = settings.kube_namespace
        return SharedState(SecretRecords(api, namespace), ClusterSavedTools(ToolConfigMaps(api, namespace)), api)
    files = SavedToolStore(settings.state_dir / "saved-tools")
    return SharedState(FileSignIns(settings.state_dir / "oauth"), FileSavedTools(files))


class ClusterSavedTools:
    """``SavedTools`` on ConfigMaps: the limits of the files (200 tools of an owner, 100,000 characters each), one
    object per tool. The count is checked on the list a save reads first, so replicas saving new tools of one owner
    at the same instant may pass 200 by one each; nothing else is shared between two tools."""

    def __init__(self, objects: ToolConfigMaps) -> None:
        self.objects = objects

    async def save(self, owner: str, name: Any, source: Any, description: Any = "") -> SavedTool:
        tool = new_tool(name, source, description)
        try:
            tool.source.encode()
        except UnicodeEncodeError:
            raise SavedToolProblem("the source holds text that is not valid Unicode (a lone surrogate)") from None
        try:
            saved = {data.get("name") for _, data in await self.objects.listed(owner)}
            if tool.name not in saved and len(saved) >= MAX_TOOLS_PER_OWNER:
                raise too_many()
            await self.objects.put(owner, tool.name, _data(tool))
        except KubeApiError as exc:
            log.error("saving a tool in the cluster failed: %s", exc)
            raise SavedToolsUnavailable(f"the tool was not saved: {UNAVAILABLE}") from None
        return tool

    async def load(self, owner: str) -> tuple[list[SavedTool], list[str]]:
        try:
            listed = await self.objects.listed(owner)
        except KubeApiError as exc:
            log.error("reading saved tools from the cluster failed: %s", exc)
            return [], [f"saved tools could not be read: {UNAVAILABLE}; a later new session tries again"]
        tools: list[SavedTool] = []
        problems: list[str] = []
        for object_name, data in sorted(listed, key=lambda item: str(item[1].get("name"))):
            tool = _tool(owner, object_name, data)
            if tool is not None:
                tools.append(tool)
                continue
            shown = data.get("name") if isinstance(data.get("name"), str) else object_name
            problems.append(f"saved tool {shown!r:.80} could not be read; save it again with runtime.save_tool() or "
                            "remove it with runtime.delete_saved_tool(name)")  # fmt: skip
        return tools, problems

    async def delete(self, owner: str, name: Any) -> bool:
        checked = check_name(name)
        try:
            return await self.objects.remove(owner, checked)
        except KubeApiError as exc:
            log.error("deleting a saved tool in the cluster failed: %s", exc)
            raise SavedToolsUnavailable(f"the tool was not deleted: {UNAVAILABLE}") from None


def _data(tool: SavedTool) -> dict[str, str]:
    return {"name": tool.name, "source": tool.source, "description": tool.description, "saved-at": repr(tool.saved_at)}


def _tool(owner: str, object_name: str, data: dict[str, str]) -> SavedTool | None:
    """The tool an object holds, if it is whole and is ``owner``'s: its name is the one derived from the owner and
    the tool's name (a label alone is no proof: it selects, it does not bind the data to the owner)."""
    try:
        name = check_name(data.get("name"))
        saved_at = float(data.get("saved-at", "0"))
    except (SavedToolProblem, ValueError):
        return None
    source = data.get("source")
    if object_name != saved_tool_object(owner, name) or not isinstance(source, str) or not source.strip():
        return None
    return SavedTool(name, source, str(data.get("description", "")), saved_at)
