"""The pure parts of session files: the path rule both sides apply, the ``files`` argument, the URIs, the host's
check of shared-file links, and the guest's walk run against a temporary folder standing in for /workspace."""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

import mcp_types as types
import pytest

from mcp_codemode.face.workspace_files import BadFiles, file_contents, file_uri, parse_file_uri, parse_files
from mcp_codemode.guest import worker_files
from mcp_codemode.guest.protocol import FILE_CHUNK, FILE_REPLY, workspace_path_problem
from mcp_codemode.runs.session_files import MAX_FILE_BYTES, SessionFileError, checked_path
from mcp_codemode.sandbox.results import guest_links


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("", "non-empty"),
        ("/etc/passwd", "relative"),
        ("../x", "'..' part"),
        ("a/../../x", "'..' part"),
        ("a//b", "'empty' part"),
        ("./a", "'.' part"),
        ("a/", "'empty' part"),
        ("a\x00b", "control character"),
        ("a\nb", "control character"),
        ("x" * 256, "255 bytes"),
        ("/".join(["d"] * 33), "33 parts"),
        ("y" * 1025, "1025 characters"),
        (5, "non-empty string"),
    ],
)
def test_the_path_rule_names_what_is_wrong(path: object, problem: str) -> None:
    assert problem in workspace_path_problem(path)


@pytest.mark.parametrize("path", ["a.txt", "data/report.csv", ".hidden", "a b/ü.txt", "..a/b..", "x" * 255])
def test_the_path_rule_takes_ordinary_names(path: str) -> None:
    assert workspace_path_problem(path) == ""


def test_a_leading_workspace_is_accepted_and_dropped() -> None:
    assert checked_path("/workspace/out/a.csv") == "out/a.csv"
    with pytest.raises(SessionFileError, match=r"'\.\.' part"):
        checked_path("/workspace/../etc/passwd")


def test_files_for_a_call_take_text_and_data_uris_as_a_list_or_a_map() -> None:
    png = b"\x89PNG\r\n\x1a\n\x00"
    uri = "data:image/png;base64," + base64.b64encode(png).decode()
    listed = parse_files(
        [{"path": "a.txt", "content": "héllo"}, {"path": "b.png", "content": uri}, {"path": "c", "content": "data:x"}]
    )
    assert listed == (("a.txt", "héllo".encode()), ("b.png", png), ("c", b"data:x"))
    assert parse_files({"a.txt": "héllo", "b.png": uri, "c": "data:x"}) == listed
    assert parse_files(None) == () == parse_files({}) == parse_files([])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("a.txt", "must be a list of"),
        ([{"path": "a.txt"}], "must be a list of"),
        ([{"path": "a", "content": "x", "mode": 1}], "must be a list of"),
        ({"../a": "x"}, "'..' part"),
        ({"a": 1}, "must be a string"),
        ({"a": "data:;base64,%%%"}, "does not decode"),
        ({f"f{i}": "" for i in range(65)}, "at most 64"),
        ({"a": "x" * (MAX_FILE_BYTES + 1)}, "more than"),
    ],
)
def test_bad_files_for_a_call_say_what_to_send(value: object, message: str) -> None:
    with pytest.raises(BadFiles, match=re.escape(message)) as caught:
        parse_files(value, "_meta.files")
    assert str(caught.value).startswith("_meta.files")


def test_uris_round_trip_and_foreign_ones_are_not_taken() -> None:
    uri = file_uri("s-1", "out/a b%.csv")
    assert uri == "codemode://sessions/s-1/files/out/a%20b%25.csv"
    assert parse_file_uri(uri) == ("s-1", "out/a b%.csv", None)
    assert parse_file_uri("codemode://sessions/s-1/files/") == ("s-1", "", None)
    assert file_uri("s-1", "a.csv", "text/csv") == "codemode://sessions/s-1/files/a.csv"  # the name says it already
    typed = file_uri("s-1", "a?.txt", "text/csv")
    assert typed == "codemode://sessions/s-1/files/a%3F.txt?type=text%2Fcsv"
    assert parse_file_uri(typed) == ("s-1", "a?.txt", "text/csv")
    assert file_uri("s-1", "x", "text/html\r\nX-Evil: 1") == "codemode://sessions/s-1/files/x"  # no media type
    assert parse_file_uri("codemode://sessions/s-1/files/x?type=text%2Fhtml%0D%0A") is None
    assert parse_file_uri("codemode://capabilities") is None
    assert parse_file_uri("codemode://sessions/a:b/files/x") is None  # internal keys are never names
    assert parse_file_uri("codemode://sessions/../files/x") is None


@pytest.mark.parametrize(
    ("path", "declared", "data", "expect"),
    [
        ("a.bin", None, b"ascii", ("blob", "application/octet-stream")),
        ("a.txt", "text/csv", b"a,b", ("text", "text/csv")),
        ("a.txt", "text/csv", b"\xff\xfe", ("blob", "text/csv")),
        ("NOTES", None, b"hello", ("text", "text/plain")),
        ("NOTES", None, b"\xff", ("blob", "application/octet-stream")),
        ("NOTES", "application/octet-stream", b"hello", ("blob", "application/octet-stream")),
        ("d.json", None, b"{}", ("text", "application/json")),
        ("p.png", None, b"ascii", ("blob", "image/png")),
    ],
)
def test_a_file_reads_as_the_type_it_was_shared_as_else_the_type_its_name_says(path, declared, data, expect) -> None:
    contents = file_contents("codemode://x", path, data, declared)
    kind = "text" if isinstance(contents, types.TextResourceContents) else "blob"
    assert (kind, contents.mime_type) == expect


def test_links_from_the_guest_are_checked_one_by_one() -> None:
    raw = [
        {"path": "ok.csv", "size": 3, "mime": "text/csv", "description": "d" * 900},
        {"path": "../escape", "size": 1, "mime": "text/plain"},
        {"path": "neg", "size": -1, "mime": "text/plain"},
        {"path": "flag", "size": True, "mime": "text/plain"},
        {"path": "odd-mime", "size": 1, "mime": "text/html\r\nX-Evil: 1"},
        "junk",
        *({"path": f"f{i}", "size": i, "mime": "text/plain"} for i in range(40)),
    ]
    links = guest_links(raw)
    assert [link.path for link in links][:2] == ["ok.csv", "odd-mime"]
    assert len(links) <= 16
    assert len(links[0].description) == 500 and links[1].mime == "application/octet-stream"
    assert guest_links("not a list") == ()


def _ask(root: Path, **message: object) -> dict[str, object]:
    reply = worker_files.answer(str(root), {"id": 7, **message})
    assert reply["type"] == FILE_REPLY and reply["id"] == 7
    return reply


def test_the_guest_walk_writes_reads_and_lists_without_following_links(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("secret")
    root = tmp_path / "workspace"
    root.mkdir()
    os.symlink(outside / "secret", root / "link")
    os.symlink(outside, root / "dir")
    os.mkfifo(root / "fifo")
    big = os.urandom(FILE_CHUNK + 10)
    data = base64.b64encode(big).decode()

    assert _ask(root, op="write", path="new/deep/big.bin", data=data)["value"] == {"size": len(big)}
    first = _ask(root, op="read", path="new/deep/big.bin")["value"]
    assert isinstance(first, dict) and first["size"] == len(big)
    second = _ask(root, op="read", path="new/deep/big.bin", offset=FILE_CHUNK)["value"]
    assert isinstance(second, dict)
    assert base64.b64decode(first["data"]) + base64.b64decode(second["data"]) == big

    for path, said in [("link", "symlink"), ("dir/secret", "not a folder"), ("fifo", "not a regular file")]:
        reply = _ask(root, op="read", path=path)
        assert reply["ok"] is False and said in str(reply["error"]), reply
    assert _ask(root, op="write", path="dir/planted", data="eA==")["ok"] is False
    assert not (outside / "planted").exists()
    assert _ask(root, op="write", path="link", data="eA==")["ok"] is True  # replaces the link itself
    assert (outside / "secret").read_text() == "secret" and (root / "link").read_bytes() == b"x"

    listing = _ask(root, op="list", path="")["value"]
    assert isinstance(listing, dict)
    assert [entry["path"] for entry in listing["entries"]] == ["link", "new", "new/deep", "new/deep/big.bin"]
    assert not [name for name in os.listdir(root / "new" / "deep") if name.endswith(".partial")]

    refused: list[dict[str, object]] = [
        {"op": "read", "path": "../outside/secret"},
        {"op": "read", "path": "x", "offset": -1},
        {"op": "write", "path": "x", "data": "not base64!"},
        {"op": "delete", "path": "x"},
        {"op": "list", "path": "/"},
    ]
    for message in refused:
        assert _ask(root, **message)["ok"] is False, message
