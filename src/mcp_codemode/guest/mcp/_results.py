"""The natural values tool results become: parsed text, ``Image``, ``Audio``/``Media``, resource contents.

Standard library only. A tool's ``CallToolResult`` arrives as a dict; every way of calling a tool (a proxy
function, ``call_tool``) and of reading a resource converts it here, so the rules are written once.
"""

from __future__ import annotations

import base64
import json

from ._images import Image, sniff
from ._rpc import ToolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


# --------------------------------------------------------------------------------------------- results


class Media:
    """Binary content of a tool result (audio, or an image of a type we cannot show): bytes and MIME type."""

    def __init__(self, data: bytes, mime: str) -> None:
        self.data = data
        self.mime = mime

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.mime}, {len(self.data)} bytes>"


class Audio(Media):
    """Audio content of a tool result."""


def natural(raw: dict[str, Any], server: str, tool: str, wrapped: bool = False) -> Any:
    """The value a tool result means: structured content, parsed JSON text, text, images; isError raises."""
    if raw.get("isError"):
        raise ToolError(_error_text(raw) or f"{tool} on {server} failed without a message", server=server, tool=tool)
    structured = raw.get("structuredContent")
    if structured is not None:
        if wrapped and isinstance(structured, dict) and set(structured) == {"result"}:
            return structured["result"]
        return structured
    items = [_content(item) for item in raw.get("content") or [] if isinstance(item, dict)]
    if not items:
        return None
    return items[0] if len(items) == 1 else items


def _error_text(raw: dict[str, Any]) -> str:
    parts = [item.get("text", "") for item in raw.get("content") or [] if isinstance(item, dict)]
    return "\n".join(part for part in parts if isinstance(part, str) and part).strip()


def parse_text(text: str) -> Any:
    """JSON text becomes the value it encodes; anything else stays text."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
        try:
            return json.loads(stripped)
        except ValueError:
            return text
    return text


def _content(item: dict[str, Any]) -> Any:
    kind = item.get("type")
    if kind == "text":
        return parse_text(str(item.get("text", "")))
    if kind in ("image", "audio"):
        try:
            data = base64.b64decode(str(item.get("data", "")), validate=False)
        except ValueError:
            return item
        mime = str(item.get("mimeType", "application/octet-stream"))
        if kind == "image":
            if sniff(data) is not None:
                return Image(data)
            return Media(data, mime)
        return Audio(data, mime)
    if kind == "resource":
        return resource_value(item.get("resource") or {})
    return item  # resource_link and anything newer: the raw item, which says what it is


def resource_value(contents: dict[str, Any]) -> Any:
    """One resource's contents: text (parsed if JSON), or bytes for a blob."""
    if "text" in contents:
        return parse_text(str(contents.get("text", "")))
    if "blob" in contents:
        try:
            return base64.b64decode(str(contents["blob"]), validate=False)
        except ValueError:
            return contents
    return contents
