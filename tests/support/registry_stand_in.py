"""A stand-in for the MCP Registry's read API, on 127.0.0.1, serving recorded real entries.

The official registry cannot be reached from the tests, so this serves what it serves, the way it serves it
(docs/reference/api/openapi.yaml of modelcontextprotocol/registry, the /v0.1 API): ``GET /v0.1/servers`` with
``search`` (a substring of the name), ``limit`` (at most 100), ``cursor`` (opaque; here the last name and version of
the previous page), ``version`` (``latest`` or one exact version), ``updated_since`` (RFC 3339; deleted entries
included then, as the registry does) and ``include_deleted``; pages end with ``metadata.nextCursor`` and ``count``;
``GET /v0.1/servers/{name}/versions/{version|latest}`` for one entry. Every answer carries an ETag (a hash of its
body) and a request whose ``If-None-Match`` matches it gets 304. Each item is ``{"server": <server.json>,
"_meta": {"io.modelcontextprotocol.registry/official": {status, publishedAt, updatedAt, isLatest}}}``.

A test can publish, deprecate or delete entries while it runs, count what was asked, and replace any answer
(``misbehave``) to play a hostile registry: endless pages, looping cursors, a slow drip, bytes that are not JSON.
It is a real HTTP server (the stdlib's, one thread per request), so the client under test uses its real transport.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent.parent / "data" / "registry" / "entries.json"
OFFICIAL = "io.modelcontextprotocol.registry/official"
EPOCH = datetime(2025, 10, 1, tzinfo=UTC)


def recorded_servers() -> list[dict[str, Any]]:
    """The recorded server.json objects (tests/data/registry/entries.json says where they come from)."""
    servers: list[dict[str, Any]] = json.loads(DATA.read_text())["servers"]
    return servers


@dataclasses.dataclass
class Reply:
    """An answer a misbehaving registry gives instead of its own: status, headers, body, and how it is sent."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    drip: float = 0.0  # seconds between single bytes of the body (a slow drip)
    length: bool = True  # False: no Content-Length, the body ends when the connection closes


Misbehaviour = Callable[[str, dict[str, str]], "Reply | None"]


class StandInRegistry:
    """The entries, the clock of their updates, the requests seen, and the server; use as a context manager."""

    def __init__(self, servers: list[dict[str, Any]] | None = None) -> None:
        self.items: list[dict[str, Any]] = []
        self._tick = 0
        self.requests: list[tuple[str, dict[str, str], int]] = []  # path, query, status answered
        self.misbehave: Misbehaviour | None = None
        self.lock = threading.Lock()
        for server in servers if servers is not None else recorded_servers():
            self.publish(server)
        self._httpd: ThreadingHTTPServer | None = None

    # ------------------------------------------------------------------------------------------ the data

    def _now(self) -> str:
        self._tick += 1
        return (EPOCH + timedelta(minutes=self._tick)).isoformat().replace("+00:00", "Z")

    def publish(self, server: dict[str, Any]) -> None:
        """Add one version of a server; it becomes the latest of its name."""
        with self.lock:
            now = self._now()
            for item in self.items:
                if item["server"]["name"] == server["name"] and item["_meta"][OFFICIAL]["isLatest"]:
                    item["_meta"][OFFICIAL].update(isLatest=False, updatedAt=now)
            meta = {"status": "active", "publishedAt": now, "updatedAt": now, "isLatest": True}
            self.items.append({"server": server, "_meta": {OFFICIAL: meta}})

    def set_status(self, name: str, status: str) -> None:
        """Deprecate or delete every version of ``name``."""
        with self.lock:
            now = self._now()
            for item in self.items:
                if item["server"]["name"] == name:
                    item["_meta"][OFFICIAL].update(status=status, updatedAt=now)

    # ------------------------------------------------------------------------------------------ the API

    def list_servers(self, query: dict[str, str]) -> tuple[int, object]:
        try:
            limit = int(query.get("limit", "30"))
        except ValueError:
            return 400, {"error": "limit must be an integer"}
        if not 1 <= limit <= 100:
            return 400, {"error": "limit must be between 1 and 100"}
        since = query.get("updated_since", "")
        include_deleted = bool(since) or query.get("include_deleted") == "true"
        search = query.get("search", "").lower()
        version = query.get("version", "")
        with self.lock:
            chosen = [
                item
                for item in sorted(self.items, key=lambda i: (i["server"]["name"], i["server"]["version"]))
                if (include_deleted or item["_meta"][OFFICIAL]["status"] != "deleted")
                and search in item["server"]["name"].lower()
                and (not since or item["_meta"][OFFICIAL]["updatedAt"] >= since)
                and (
                    not version
                    or (version == "latest" and item["_meta"][OFFICIAL]["isLatest"])
                    or item["server"]["version"] == version
                )
            ]
        after = _decode_cursor(query.get("cursor", ""))
        if after is None:
            return 400, {"error": "invalid cursor"}
        if after:
            chosen = [item for item in chosen if (item["server"]["name"], item["server"]["version"]) > after]
        page = chosen[:limit]
        metadata: dict[str, Any] = {"count": len(page)}
        if len(chosen) > limit:
            last = page[-1]["server"]
            metadata["nextCursor"] = _encode_cursor(last["name"], last["version"])
        return 200, {"servers": page, "metadata": metadata}

    def one_server(self, name: str, version: str) -> tuple[int, object]:
        with self.lock:
            same = [i for i in self.items if i["server"]["name"] == name]
        same = [i for i in same if i["_meta"][OFFICIAL]["status"] != "deleted"]
        wanted = [i for i in same if (i["_meta"][OFFICIAL]["isLatest"] if version == "latest" else
                                      i["server"]["version"] == version)]  # fmt: skip
        if not wanted:
            return 404, {"error": "Server not found"}
        return 200, wanted[-1]

    def answer(self, path: str, query: dict[str, str]) -> tuple[int, object]:
        if path == "/v0.1/servers":
            return self.list_servers(query)
        prefix = "/v0.1/servers/"
        if path.startswith(prefix) and "/versions/" in path:
            quoted_name, _, quoted_version = path[len(prefix) :].partition("/versions/")
            return self.one_server(urllib.parse.unquote(quoted_name), urllib.parse.unquote(quoted_version))
        return 404, {"error": "Not found"}

    # ------------------------------------------------------------------------------------------ serving

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> StandInRegistry:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                parts = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(parts.query))
                odd = registry.misbehave(parts.path, query) if registry.misbehave is not None else None
                if odd is not None:
                    self._send_odd(odd, parts.path, query)
                    return
                status, document = registry.answer(parts.path, query)
                body = json.dumps(document).encode()
                etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
                if status == 200 and self.headers.get("If-None-Match") == etag:
                    status, body = 304, b""
                registry.requests.append((parts.path, query, status))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                if status in (200, 304):
                    self.send_header("ETag", etag)
                self.end_headers()
                self.wfile.write(body)

            def _send_odd(self, odd: Reply, path: str, query: dict[str, str]) -> None:
                registry.requests.append((path, query, odd.status))
                self.send_response(odd.status)
                length = {"Content-Length": str(len(odd.body))} if odd.length else {"Connection": "close"}
                headers = {"Content-Type": "application/json", **length, **odd.headers}
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    if odd.drip:
                        for byte in odd.body:
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                            time.sleep(odd.drip)
                    else:
                        self.wfile.write(odd.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up, as it should
                if not odd.length:
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="registry-stand-in", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    def asked(self, path: str = "/v0.1/servers") -> Iterator[tuple[dict[str, str], int]]:
        """The queries of the requests for ``path`` and the status each got, in order."""
        return ((query, status) for seen, query, status in list(self.requests) if seen == path)


def _encode_cursor(name: str, version: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([name, version]).encode()).decode()


def _decode_cursor(cursor: str) -> tuple[str, str] | tuple[()] | None:
    if not cursor:
        return ()
    try:
        name, version = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, TypeError):
        return None
    return (str(name), str(version))
