"""Reading one answer of a registry's HTTP API: bounded in bytes and time, JSON or a clear refusal.

Apart from the client's paging and caching because this is the one place a registry's bytes enter the bridge: a
hostile or broken registry may answer slowly (a drip of a byte a second never trips a read timeout), at great length,
with something that is not JSON, or nest it deep enough to exhaust the parser. Each answer is read in chunks against
a byte bound and the caller's deadline, and every failure becomes a ``RegistryUnreachable`` naming the registry and
what it did, which the finder turns into a notice the model reads.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

import httpx2

from ...errors import CodemodeError

MAX_PAGE_BYTES = 4 << 20  # one page of up to 100 entries; the official registry's are a few hundred KiB
MAX_SERVER_BYTES = 512 << 10  # one server's entry
USER_AGENT = "mcp-codemode (find_servers)"


class RegistryUnreachable(CodemodeError):
    """A registry did not answer usefully (network, status, size, time or format): what it did, in a few words."""


@dataclasses.dataclass(frozen=True)
class Answer:
    """A registry's answer: its status (200, 304 or 404), its JSON body (None unless 200) and its ETag."""

    status: int
    body: object = None
    etag: str = ""


async def get_json(
    client: httpx2.AsyncClient, url: str, *, params: Mapping[str, str] | None = None, etag: str = "",
    limit: int = MAX_SERVER_BYTES,
) -> Answer:  # fmt: skip
    """GET ``url`` (conditionally when ``etag`` is known) and read at most ``limit`` bytes of JSON."""
    # Uncompressed: the byte bound is then the bound on what is parsed (no archive bomb gets past it).
    headers = {"Accept": "application/json", "Accept-Encoding": "identity", "User-Agent": USER_AGENT}
    if etag:
        headers["If-None-Match"] = etag
    try:
        async with client.stream("GET", url, params=params, headers=headers) as response:
            if response.status_code in (304, 404):
                return Answer(response.status_code, etag=etag if response.status_code == 304 else "")
            if response.status_code != 200:
                raise RegistryUnreachable(f"answered HTTP {response.status_code}", fix="try again later")
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise RegistryUnreachable(f"announced {int(declared):,} bytes, over the bound of {limit:,}")
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_raw():
                size += len(chunk)
                if size > limit:
                    raise RegistryUnreachable(f"sent more than {limit:,} bytes for one answer")
                chunks.append(chunk)
            raw = b"".join(chunks)
            new_etag = response.headers.get("etag", "")[:200]
            encoding = response.headers.get("content-encoding", "identity").lower()
    except httpx2.HTTPError as exc:
        raise RegistryUnreachable(f"could not be reached ({type(exc).__name__}: {str(exc)[:160]})") from None
    if encoding not in ("", "identity"):
        raise RegistryUnreachable(f"sent a body encoded as {encoding[:40]!r}, which is not read here")
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise RegistryUnreachable("sent an answer that is not JSON") from None
    return Answer(200, body, new_etag)
