"""A session's files as the client sees them: files sent with a run_python call, and resources to read.

MCP gives a client no way to write a server's resource, so files go in with the call that uses them, in the
request's ``_meta`` (``"codemode/files": [{"path": "data.csv", "content": "a,b\\n1,2"}]``, bytes as a ``data:``
URI), written into the session's /workspace before the code runs; and they come out as resources of the bridge,
``codemode://sessions/{session}/files/{path}`` (one file) and ``codemode://sessions/{session}/files/`` (a
listing), which a cell's
``runtime.share_file`` links to from its result. The session in a URI is the name the client knows; the bridge
resolves it with the caller's principal exactly as a call's ``session`` argument, so one token's URIs never
reach another's sessions.
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
import re
import urllib.parse
from typing import TYPE_CHECKING

import mcp_types as types

from ..runs.session_files import MAX_FILE_BYTES, MAX_FILES_PER_CALL, Listing, SessionFileError, checked_path

if TYPE_CHECKING:  # a type of Bridge.run's result, without loading the bridge to link one
    from ..runs.bridge import FileLink

SCHEME_PREFIX = "codemode://sessions/"
FILE_TEMPLATE = "codemode://sessions/{session}/files/{path}"
_URI = re.compile(
    r"^codemode://sessions/(?P<session>[A-Za-z0-9][A-Za-z0-9_.@-]{0,63})/files/(?P<path>[^?]*)(?:\?type=(?P<type>.*))?$"
)
_MEDIA_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,63}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,63}$")
_DATA_URI = re.compile(r"^data:(?P<mime>[^,;]*)(?:;[^,;]+)*;base64,", re.IGNORECASE)
_TEXT_TYPES = ("application/json", "application/xml", "application/x-yaml", "application/yaml", "application/toml")


class BadFiles(SessionFileError, ValueError):
    """The files sent with a call cannot be used; the message names the entry and shows a good value."""


def parse_files(value: object, where: str = "files") -> tuple[tuple[str, bytes], ...]:
    """Files for /workspace: a list of ``{"path", "content"}`` (or one object of paths to contents), each content
    text or a ``data:...;base64,`` URI for bytes. ``where`` names the value in messages."""
    if value is None or value == {} or value == []:
        return ()
    example = (
        '[{"path": "data/input.csv", "content": "a,b\\n1,2"}, {"path": "logo.png", "content": "data:image/png;b..."}]'
    )
    if isinstance(value, dict):
        value = [{"path": path, "content": content} for path, content in value.items()]
    if not isinstance(value, list) or not all(
        isinstance(item, dict) and set(item) == {"path", "content"} for item in value
    ):
        raise BadFiles(f'{where} must be a list of {{"path", "content"}} objects; for example {example}')
    if len(value) > MAX_FILES_PER_CALL:
        raise BadFiles(f"{where} names {len(value)} files; a call may put at most {MAX_FILES_PER_CALL}")
    parsed: list[tuple[str, bytes]] = []
    total = 0
    for item in value:
        path, content = item["path"], item["content"]
        try:
            checked = checked_path(path)
        except SessionFileError as exc:
            raise BadFiles(f"{where}: {exc}; for example {example}") from None
        if not isinstance(content, str):
            raise BadFiles(f"{where}: the content of {path!r} must be a string (text, or a data: URI for bytes), "
                           f"not {type(content).__name__}")  # fmt: skip
        data = _decoded(where, path, content)
        total += len(data)
        if total > MAX_FILE_BYTES:
            raise BadFiles(f"{where} holds more than {MAX_FILE_BYTES:,} bytes; put large data in several calls")
        parsed.append((checked, data))
    return tuple(parsed)


def _decoded(where: str, path: str, content: str) -> bytes:
    match = _DATA_URI.match(content)
    if match is None:
        return content.encode("utf-8", "surrogatepass")
    try:
        return base64.b64decode(content[match.end() :], validate=True)
    except (binascii.Error, ValueError):
        raise BadFiles(f"{where}: the content of {path!r} is a data: URI whose base64 does not decode") from None


def file_uri(session: str, path: str, mime: str | None = None) -> str:
    """A file's URI; ``mime``, the type a cell shared it as, goes in the URI when its name says otherwise, so that
    reading the link gives the type the link showed (the bridge keeps no record of what was shared)."""
    uri = f"{SCHEME_PREFIX}{session}/files/{urllib.parse.quote(path, safe='/')}"
    if mime is not None and mime != mimetypes.guess_type(path)[0] and _MEDIA_TYPE.match(mime):
        uri += "?type=" + urllib.parse.quote(mime, safe="")
    return uri


def parse_file_uri(uri: str) -> tuple[str, str, str | None] | None:
    """(session, path, the type it was shared as) of a files URI ("" path: the listing); None when ``uri`` is not
    one (a ``type`` that is no media type included)."""
    match = _URI.fullmatch(uri)
    if match is None:
        return None
    declared = urllib.parse.unquote(match["type"], errors="strict") if match["type"] is not None else None
    if declared is not None and not _MEDIA_TYPE.match(declared):
        return None
    return match["session"], urllib.parse.unquote(match["path"], errors="strict"), declared


def file_contents(uri: str, path: str, data: bytes | bytearray, declared: str | None = None) -> (
    types.TextResourceContents | types.BlobResourceContents
):  # fmt: skip
    """The file as the type it was shared as, else the type its name says: text when that type is textual and the
    bytes are UTF-8, else base64 with that type. Only a name of no known type is judged by its bytes (text/plain
    when they decode), so a ``.bin`` or a file shared as ``application/octet-stream`` stays bytes."""
    mime = declared or mimetypes.guess_type(path)[0]
    if mime is None or mime.startswith("text/") or mime in _TEXT_TYPES:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return types.TextResourceContents(uri=uri, mime_type=mime or "text/plain", text=text)
    blob = base64.b64encode(data).decode("ascii")
    return types.BlobResourceContents(uri=uri, mime_type=mime or "application/octet-stream", blob=blob)


def listing_contents(uri: str, session: str, listing: Listing) -> types.TextResourceContents:
    """The listing as JSON: each entry with its URI, so a client reads a file by the name it was shown."""
    document: dict[str, object] = {
        "session": session,
        "files": [
            {"path": entry.path, "size": entry.size, "uri": file_uri(session, entry.path)}
            for entry in listing.entries
            if entry.kind == "file"
        ],
        "folders": [entry.path for entry in listing.entries if entry.kind == "folder"],
    }
    if listing.more:
        document["more"] = "the listing stopped at its limit; read a folder's URI for the rest"
    return types.TextResourceContents(uri=uri, mime_type="application/json", text=json.dumps(document, indent=1))


def session_folder(session: str) -> types.Resource:
    return types.Resource(
        uri=file_uri(session, ""),
        name=f"session {session}: files",
        title=f"Files of the run_python session {session!r}",
        description="JSON listing of the session's /workspace; each file is a resource of its own",
        mime_type="application/json",
    )


FILE_RESOURCE_TEMPLATE = types.ResourceTemplate(
    uri_template=FILE_TEMPLATE,
    name="session file",
    title="A file of a run_python session's /workspace",
    description="Read a file the code wrote (path relative to /workspace); end the URI with files/ for a listing",
)


def link_blocks(session: str, links: tuple[FileLink, ...]) -> list[types.ContentBlock]:
    """The resource links of the files a cell shared, for its tool result."""
    return [
        types.ResourceLink(
            type="resource_link",
            uri=file_uri(session, link.path, link.mime),
            name=link.path.rsplit("/", 1)[-1],
            title=f"/workspace/{link.path}",
            description=link.description or None,
            mime_type=link.mime,
            size=link.size,
        )
        for link in links
    ]
