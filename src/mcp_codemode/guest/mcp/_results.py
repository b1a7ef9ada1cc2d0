"""The natural values tool results become: parsed text, ``Image``, ``Audio``/``Media``, embedded resources,
``ResourceLink``; and the values of a resource read and a prompt.

Standard library only. A tool's ``CallToolResult`` arrives as a dict; every way of calling a tool (a proxy
function, ``call_tool``), of reading a resource and of getting a prompt converts it here, so the rules are
written once.
"""

from __future__ import annotations

import binascii

from ._images import Image, sniff
from ._rpc import ToolError, rpc

# The guest's own JSON decoder, not ``json``: that imports ``re``, about 1.2 MiB every idle sandbox would keep.
if __package__ != "mcp":  # imported on the host (tests) as mcp_codemode.guest.mcp._results
    from ..worker_json import loads
else:  # in the sandbox the guest's folder is on sys.path and this package is the top-level ``mcp``
    from worker_json import loads  # type: ignore[import-not-found,no-redef]

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


class ResourceLink(dict):  # type: ignore[type-arg]
    """A link to a resource in a tool result: the link's fields as a dict (``uri``, ``name``, ``mimeType``, ...),
    and ``read()`` / ``read_sync()`` to read it from the server whose tool returned it, in one call.

    A dict so code written when links came as plain dicts keeps working."""

    def __init__(self, item: dict[str, Any], server: str) -> None:
        super().__init__(item)
        self.server = server

    @property
    def uri(self) -> str:
        return str(self.get("uri", ""))

    async def read(self) -> Any:
        """The linked resource's contents, as ``runtime.read_resource`` gives them."""
        return read_resource_value(await rpc.arequest("read_resource", server=self.server, uri=self.uri))

    def read_sync(self) -> Any:
        """Blocking twin of ``read``."""
        return read_resource_value(rpc.request("read_resource", server=self.server, uri=self.uri))

    def __repr__(self) -> str:
        return f"ResourceLink({self.uri!r}, server={self.server!r})"


class _Embedded:
    """What an embedded resource's value knows besides its contents: where it came from.

    Mixed into the contents' own type (``str``, ``bytes``, ``dict``, ``list``), so the value is used, compared
    and printed exactly as the plain contents were before, and ``.uri`` names the resource to read again."""

    __slots__ = ()
    uri: str
    mime_type: str | None
    server: str

    async def read(self) -> Any:
        """The resource's current contents, read again from the server, as ``runtime.read_resource`` gives them."""
        return read_resource_value(await rpc.arequest("read_resource", server=self.server, uri=self.uri))

    def read_sync(self) -> Any:
        """Blocking twin of ``read``."""
        return read_resource_value(rpc.request("read_resource", server=self.server, uri=self.uri))


class EmbeddedText(_Embedded, str):
    """An embedded resource's text: a ``str`` with ``uri``, ``mime_type``, ``server`` and ``read()``."""

    uri: str
    mime_type: str | None
    server: str


class EmbeddedBytes(_Embedded, bytes):
    """An embedded resource's blob: ``bytes`` with ``uri``, ``mime_type``, ``server`` and ``read()``."""

    uri: str
    mime_type: str | None
    server: str


class EmbeddedDict(_Embedded, dict):  # type: ignore[type-arg]
    """An embedded resource whose text is a JSON object: the ``dict`` with ``uri``, ``mime_type``, ``server``."""

    uri: str
    mime_type: str | None
    server: str


class EmbeddedList(_Embedded, list):  # type: ignore[type-arg]
    """An embedded resource whose text is a JSON array: the ``list`` with ``uri``, ``mime_type``, ``server``."""

    uri: str
    mime_type: str | None
    server: str


_EMBEDDED: dict[type, type] = {str: EmbeddedText, bytes: EmbeddedBytes, dict: EmbeddedDict, list: EmbeddedList}


def embedded_value(contents: dict[str, Any], server: str) -> Any:
    """An embedded resource's contents (as ``resource_value`` makes them) that also know their ``uri``,
    ``mime_type`` and ``server``; contents without a URI, or of another shape, stay as they are."""
    value = resource_value(contents)
    uri = contents.get("uri")
    kind = _EMBEDDED.get(type(value))
    if kind is None or not isinstance(uri, str):
        return value
    made = kind(value)
    made.uri = uri
    mime = contents.get("mimeType")
    made.mime_type = mime if isinstance(mime, str) else None
    made.server = server
    return made


def natural(raw: dict[str, Any], server: str, tool: str, wrapped: bool = False) -> Any:
    """The value a tool result means: structured content, parsed JSON text, text, images; isError raises."""
    if raw.get("isError"):
        raise ToolError(_error_text(raw) or f"{tool} on {server} failed without a message", server=server, tool=tool)
    structured = raw.get("structuredContent")
    if structured is not None:
        if wrapped and isinstance(structured, dict) and set(structured) == {"result"}:
            return structured["result"]
        return structured
    items = [_content(item, server) for item in raw.get("content") or [] if isinstance(item, dict)]
    if not items:
        return None
    return items[0] if len(items) == 1 else items


def _error_text(raw: dict[str, Any]) -> str:
    parts = [item.get("text", "") for item in raw.get("content") or [] if isinstance(item, dict)]
    return "\n".join(part for part in parts if isinstance(part, str) and part).strip()


def _b64decode(text: str) -> bytes:
    """``base64.b64decode(text)`` (not validated: other characters are skipped) without importing ``base64``,
    which imports ``re``. A ``ValueError`` for text that is not ASCII or not base64, as there."""
    return binascii.a2b_base64(text.encode("ascii"))


def parse_text(text: str) -> Any:
    """JSON text becomes the value it encodes; anything else stays text."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
        try:
            return loads(stripped)
        except ValueError:
            return text
    return text


def _content(item: dict[str, Any], server: str) -> Any:
    kind = item.get("type")
    if kind == "text":
        return parse_text(str(item.get("text", "")))
    if kind in ("image", "audio"):
        try:
            data = _b64decode(str(item.get("data", "")))
        except ValueError:
            return item
        mime = str(item.get("mimeType", "application/octet-stream"))
        if kind == "image":
            if sniff(data) is not None:
                return Image(data)
            return Media(data, mime)
        return Audio(data, mime)
    if kind == "resource":
        contents = item.get("resource")
        return embedded_value(contents, server) if isinstance(contents, dict) else contents
    if kind == "resource_link" and isinstance(item.get("uri"), str):
        return ResourceLink(item, server)
    return item  # anything newer: the raw item, which says what it is


def resource_value(contents: dict[str, Any]) -> Any:
    """One resource's contents: text (parsed if JSON), or bytes for a blob."""
    if "text" in contents:
        return parse_text(str(contents.get("text", "")))
    if "blob" in contents:
        try:
            return _b64decode(str(contents["blob"]))
        except ValueError:
            return contents
    return contents


def read_resource_value(result: Any) -> Any:
    """The value of a whole ``read_resource`` reply: one content's value, a list of several, or None."""
    contents = [item for item in (result or {}).get("contents") or [] if isinstance(item, dict)]
    values = [resource_value(item) for item in contents]
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def prompt_value(result: Any, server: str) -> dict[str, Any]:
    """A ``get_prompt`` reply as plain values: ``description`` and ``messages``, each ``{"role", "content"}``
    with the content converted as a tool result's is (text, ``Image``, a resource's contents, ``ResourceLink``)."""
    result = result if isinstance(result, dict) else {}
    messages = []
    for message in result.get("messages") or []:
        if isinstance(message, dict):
            content = message.get("content")
            value = _content(content, server) if isinstance(content, dict) else content
            messages.append({"role": message.get("role"), "content": value})
    return {"description": result.get("description"), "messages": messages}
