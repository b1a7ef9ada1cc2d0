"""Files in and out of a session through the MCP face, with the SDK's real ``Client`` in both eras, stdio and HTTP.

In: the ``codemode/files`` entry of a run_python call's ``_meta`` (text, and bytes as a data: URI). Out: a cell's
``runtime.share_file`` link in the result, read with ``resources/read``; the ``files/`` listing; the resource
template; ``resources/list`` naming the caller's sessions. Over HTTP, URIs resolve with the caller's token:
another token's client reads nothing of the first one's session even with the same URI.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.support.clients import (
    MODES,
    HttpServer,
    assert_no_orphans,
    bearer,
    http_client_for,
    require_bubblewrap,
    stdio_client_for,
    text_of,
)

pytestmark = [pytest.mark.anyio, pytest.mark.backend]
TOKEN_A = "fa" * 8 + uuid.uuid4().hex[:16]
TOKEN_B = "fb" * 8 + uuid.uuid4().hex[:16]
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


@pytest.fixture(scope="module", autouse=True)
def _bubblewrap_usable() -> None:
    require_bubblewrap()


@pytest.fixture(params=list(MODES))
async def stdio(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Client]:
    async with stdio_client_for(tmp_path / "server.log", request.param, MCP_BRIDGE_WARM_POOL="0") as client:
        yield client
    assert_no_orphans()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    log = tmp_path_factory.mktemp("http-files") / "server.log"
    with HttpServer(log, "--token", TOKEN_A, "--token", TOKEN_B, MCP_BRIDGE_WARM_POOL="0") as server:
        yield server
    assert_no_orphans()


WHERE = '_meta["codemode/files"]'


def files_meta(files: object) -> Any:
    """The request _meta that carries files for the session's /workspace (the client program's, not the model's)."""
    return {"codemode/files": files}


def _links(result: types.CallToolResult) -> list[types.ResourceLink]:
    return [block for block in result.content if isinstance(block, types.ResourceLink)]


async def _read(client: Client, uri: str) -> types.TextResourceContents | types.BlobResourceContents:
    result = await client.read_resource(uri)
    assert len(result.contents) == 1, result
    return result.contents[0]


async def test_files_go_in_with_the_call_and_come_out_as_links_and_resources(stdio: Client) -> None:
    given = [
        {"path": "data/input.csv", "content": "a,b\n1,2\n"},
        {"path": "logo.png", "content": "data:image/png;base64," + base64.b64encode(PNG).decode()},
        {"path": "/workspace/notes.txt", "content": "héllo"},
    ]
    code = (
        "import hashlib, os\n"
        "os.makedirs('out', exist_ok=True)\n"
        "rows = open('data/input.csv').read().splitlines()\n"
        "open('out/report.csv', 'w').write('\\n'.join(r + ',x' for r in rows))\n"
        "runtime.share_file('out/report.csv', description='the report')\n"
        "runtime.share_file('logo.png')\n"
        "print(hashlib.sha256(open('logo.png', 'rb').read()).hexdigest(), open('notes.txt').read())"
    )
    result = await stdio.call_tool("run_python", {"code": code}, meta=files_meta(given))
    assert not result.is_error, text_of(result)
    assert text_of(result).splitlines()[0] == f"{hashlib.sha256(PNG).hexdigest()} héllo"
    links = {link.name: link for link in _links(result)}
    assert set(links) == {"report.csv", "logo.png"}, result.content
    report, logo = links["report.csv"], links["logo.png"]
    assert str(report.uri) == "codemode://sessions/default/files/out/report.csv"
    assert (report.mime_type, report.size, report.description) == ("text/csv", len("a,b,x\n1,2,x"), "the report")
    assert result.structured_content is not None
    assert result.structured_content["files"] == [str(report.uri), str(logo.uri)]

    text = await _read(stdio, str(report.uri))
    assert isinstance(text, types.TextResourceContents) and text.text == "a,b,x\n1,2,x"
    blob = await _read(stdio, str(logo.uri))
    assert isinstance(blob, types.BlobResourceContents) and blob.mime_type == "image/png"
    assert base64.b64decode(blob.blob) == PNG

    listing = await _read(stdio, "codemode://sessions/default/files/")
    assert isinstance(listing, types.TextResourceContents)
    document = json.loads(listing.text)
    paths = {entry["path"]: entry for entry in document["files"]}
    assert set(paths) == {"data/input.csv", "logo.png", "notes.txt", "out/report.csv"}
    assert paths["logo.png"]["size"] == len(PNG)
    assert paths["out/report.csv"]["uri"] == str(report.uri)
    assert sorted(document["folders"]) == ["data", "out"]
    folder = json.loads((await _read(stdio, "codemode://sessions/default/files/data/")).text)  # type: ignore[union-attr]
    assert [entry["path"] for entry in folder["files"]] == ["data/input.csv"]

    resources = await stdio.list_resources()
    assert "codemode://sessions/default/files/" in {str(resource.uri) for resource in resources.resources}
    templates = await stdio.list_resource_templates()
    assert [t.uri_template for t in templates.resource_templates] == ["codemode://sessions/{session}/files/{path}"]


async def test_a_shared_file_reads_back_as_the_type_its_link_showed(stdio: Client) -> None:
    """Bytes that happen to be UTF-8 stay what the link said: a ``.bin``, a ``.txt`` shared as text/csv, a file of
    no known type (its link says application/octet-stream); only an unshared file of no known type is sniffed."""
    code = (
        "open('payload.bin', 'wb').write(b'plain ascii')\n"
        "open('table.txt', 'w').write('a,b\\n1,2')\n"
        "open('NOTES', 'w').write('hello')\n"
        "runtime.share_file('payload.bin')\n"
        "runtime.share_file('table.txt', mime_type='text/csv')\n"
        "runtime.share_file('NOTES')\n"
    )
    result = await stdio.call_tool("run_python", {"code": code, "session": "types"})
    assert not result.is_error, text_of(result)
    links = {link.name: link for link in _links(result)}
    for name, kind, mime in (("payload.bin", types.BlobResourceContents, "application/octet-stream"),
                             ("table.txt", types.TextResourceContents, "text/csv"),
                             ("NOTES", types.BlobResourceContents, "application/octet-stream")):  # fmt: skip
        assert links[name].mime_type == mime, links[name]
        read = await _read(stdio, str(links[name].uri))
        assert isinstance(read, kind) and read.mime_type == mime, (name, read)
    assert str(links["table.txt"].uri).endswith("/table.txt?type=text%2Fcsv")
    unshared = await _read(stdio, "codemode://sessions/types/files/NOTES")  # from a listing: judged by its bytes
    assert isinstance(unshared, types.TextResourceContents) and unshared.text == "hello", unshared
    forged = "codemode://sessions/types/files/NOTES?type=text%2Fhtml%0D%0AX-Evil%3A%201"
    with pytest.raises(MCPError, match="Resource not found"):  # a type that is no media type is refused
        await stdio.read_resource(forged)


async def test_a_named_session_has_its_own_files_and_a_file_is_read_while_a_cell_runs(stdio: Client) -> None:
    await stdio.call_tool(
        "run_python", {"code": "x = 1", "session": "other"}, meta=files_meta({"only-here.txt": "other"})
    )
    seen = await _read(stdio, "codemode://sessions/other/files/only-here.txt")
    assert isinstance(seen, types.TextResourceContents) and seen.text == "other"
    with pytest.raises(MCPError, match="has no running sandbox"):  # the default session never ran here
        await stdio.read_resource("codemode://sessions/default/files/only-here.txt")

    started = anyio.Event()
    answer: list[types.CallToolResult] = []

    async def slow_cell() -> None:
        started.set()
        code = "import time\nwith open('progress.txt', 'w') as f:\n    f.write('half way')\ntime.sleep(4)\n'done'"
        answer.append(await stdio.call_tool("run_python", {"code": code, "session": "other"}))

    async with anyio.create_task_group() as group:
        group.start_soon(slow_cell)
        await started.wait()
        with anyio.fail_after(60):
            while True:  # the cell writes the file first; the read must not wait for the cell's end
                with contextlib.suppress(MCPError):  # not there yet
                    during = await _read(stdio, "codemode://sessions/other/files/progress.txt")
                    if isinstance(during, types.TextResourceContents) and during.text:  # created, then written
                        break
                await anyio.sleep(0.1)
        assert not answer, "the read waited for the running cell"
    assert isinstance(during, types.TextResourceContents) and during.text == "half way"
    assert text_of(answer[0]) == "'done'"


async def test_bad_paths_names_and_sessions_are_refused_with_what_to_do(stdio: Client) -> None:
    await stdio.call_tool("run_python", {"code": "open('kept.txt', 'w').write('kept')"})
    for bad in ("../escape.txt", "/etc/passwd", "a//b", "", "x/./y"):
        result = await stdio.call_tool("run_python", {"code": "1"}, meta=files_meta({bad: "evil"}))
        assert result.is_error, bad
        assert WHERE in text_of(result) and "data/report.csv" in text_of(result), text_of(result)
    for value, expected in [
        ({"a.txt": 5}, "must be a string"),
        ({"a.bin": "data:;base64,@@@"}, "base64"),
        ([{"path": "a.txt"}], 'list of {"path", "content"} objects'),
        ("a.txt", 'list of {"path", "content"} objects'),
    ]:
        refused = await stdio.call_tool("run_python", {"code": "1"}, meta=files_meta(value))
        assert refused.is_error and expected in text_of(refused) and WHERE in text_of(refused), text_of(refused)
    for uri, expected in [
        ("codemode://sessions/default/files/../../etc/passwd", "'..' part"),
        ("codemode://sessions/default/files/%2e%2e/%2e%2e/etc/passwd", "'..' part"),
        ("codemode://sessions/default/files/kept.txt%00.png", "control character"),
        ("codemode://sessions/never-ran/files/kept.txt", "has no running sandbox"),
        ("codemode://sessions/default/files/missing.txt", "does not exist"),
        ("codemode://sessions/default/elsewhere", "Resource not found"),
    ]:
        with pytest.raises(MCPError, match=expected):
            await stdio.read_resource(uri)
    kept = await _read(stdio, "codemode://sessions/default/files/kept.txt")
    assert isinstance(kept, types.TextResourceContents) and kept.text == "kept"  # nothing was lost on the way


@pytest.mark.parametrize("mode", list(MODES))
async def test_over_http_a_token_reads_only_its_own_sessions_files(guarded: HttpServer, mode: str) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    uri = f"codemode://sessions/{session}/files/secret.txt"
    async with http_client_for(guarded.url, mode, headers=bearer(TOKEN_A)) as owner:
        given = files_meta({"secret.txt": "mine"})
        result = await owner.call_tool("run_python", {"code": "1", "session": session}, meta=given)
        assert not result.is_error, text_of(result)
        mine = await _read(owner, uri)
        assert isinstance(mine, types.TextResourceContents) and mine.text == "mine"
        listed = {str(resource.uri) for resource in (await owner.list_resources()).resources}
        assert f"codemode://sessions/{session}/files/" in listed
    async with http_client_for(guarded.url, mode, headers=bearer(TOKEN_B)) as other:
        with pytest.raises(MCPError, match="has no running sandbox"):
            await other.read_resource(uri)
        listed = {str(resource.uri) for resource in (await other.list_resources()).resources}
        assert f"codemode://sessions/{session}/files/" not in listed
        await other.call_tool("run_python", {"code": "1", "session": session})  # its own session of that name
        with pytest.raises(MCPError, match="does not exist"):
            await other.read_resource(uri)


async def test_over_http_a_legacy_clients_default_session_links_resolve_to_its_own_connection(
    guarded: HttpServer,
) -> None:
    async with http_client_for(guarded.url, "legacy", headers=bearer(TOKEN_A)) as client:
        result = await client.call_tool(
            "run_python", {"code": "open('mine.txt', 'w').write('conn')\nruntime.share_file('mine.txt')"}
        )
        (link,) = _links(result)
        assert str(link.uri) == "codemode://sessions/default/files/mine.txt"
        seen = await _read(client, str(link.uri))
        assert isinstance(seen, types.TextResourceContents) and seen.text == "conn"
