"""The host and the guest speak the protocol of ``guest/protocol.py`` and nothing else: they cannot drift.

Pure checks of the source (no sandbox): every frame type one side sends is one the other side decodes, derived
from the module's two sets; no file of either side spells a frame type or the error kind as its own literal;
the limits the host enforces and the guest checks are the module's objects; the two session-name rules are
the module's, and every name a user may give still makes a valid internal key.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from mcp_codemode import server, sessions
from mcp_codemode.guest import protocol
from mcp_codemode.guest import worker_channel as guest_worker
from mcp_codemode.guest.mcp import _rpc
from mcp_codemode.sandbox import frames
from mcp_codemode.sandbox import worker as host_worker

SRC = Path(protocol.__file__).resolve().parents[1]
GUEST_FILES = [*sorted((SRC / "guest").glob("worker*.py")), SRC / "guest" / "mcp" / "_rpc.py"]
HOST_FILES = [SRC / "sandbox" / "worker.py", SRC / "sandbox" / "frames.py"]
NAMES = {value: name for name, value in vars(protocol).items() if name.isupper() and isinstance(value, str)}


def _protocol_names_used(path: Path) -> set[str]:
    """The protocol constants a file uses (by name, after importing them from the protocol module)."""
    tree = ast.parse(path.read_text())
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("protocol")
        for alias in node.names
    }
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return imported & used


def _values(names: set[str]) -> set[str]:
    return {getattr(protocol, name) for name in names if isinstance(getattr(protocol, name), str)}


def test_the_two_directions_are_disjoint_and_complete() -> None:
    assert not protocol.GUEST_FRAME_TYPES & protocol.HOST_FRAME_TYPES
    assert protocol.ERROR_KIND_MCP == "MCPError" == _rpc.MCPError.__name__  # the guest raises it by this name
    assert protocol.ERROR_KIND_MCP in _rpc.ERRORS


def test_every_frame_the_guest_sends_the_host_decodes_and_back() -> None:
    host = _values(_protocol_names_used(SRC / "sandbox" / "worker.py"))
    guest = _values(set().union(*(_protocol_names_used(path) for path in GUEST_FILES)))
    assert host >= protocol.GUEST_FRAME_TYPES, "the host does not handle every frame the guest sends"
    assert guest >= protocol.HOST_FRAME_TYPES, "the guest does not handle every frame the host sends"
    assert guest >= protocol.GUEST_FRAME_TYPES and host >= protocol.HOST_FRAME_TYPES


def test_no_side_spells_a_frame_type_or_error_kind_itself() -> None:
    words = protocol.GUEST_FRAME_TYPES | protocol.HOST_FRAME_TYPES | {protocol.ERROR_KIND_MCP}
    pattern = re.compile(r"""(?:"type"\s*:\s*|type=|kind\s*(?:==|in)\s*\(?|"kind"\s*:\s*)["'](\w+)["']""")
    for path in GUEST_FILES + HOST_FILES:
        spelled = set(pattern.findall(path.read_text())) & words
        assert not spelled, f"{path.name} spells {sorted(spelled)} itself: import them from guest/protocol.py"


def test_the_guest_reads_the_prefix_the_host_writes() -> None:
    """The guest recovers the id of a reply it cannot decode from the prefix the host's encoder writes."""
    for body in ({"ok": True, "value": [1, "x"]}, {"ok": False, "error": {"kind": protocol.ERROR_KIND_MCP}}):
        payload = frames.encode_reply(41, body)[frames.HEADER.size :]
        reply = guest_worker.undecodable_reply(payload, ValueError("test"))
        assert reply is not None and reply["id"] == 41 and reply["type"] == protocol.REPLY


def test_the_limits_are_the_modules_objects() -> None:
    assert vars(frames)["MAX_FRAME_BYTES"] is protocol.MAX_FRAME_BYTES
    assert vars(frames)["MAX_DEPTH"] is protocol.MAX_DEPTH
    assert vars(frames)["MAX_VALUES"] is protocol.MAX_VALUES
    assert vars(host_worker)["MAX_FRAME_BYTES"] is protocol.MAX_FRAME_BYTES
    assert vars(guest_worker)["MAX_VALUES"] is protocol.MAX_VALUES
    assert vars(guest_worker)["MAX_DEPTH"] is protocol.MAX_DEPTH
    assert vars(guest_worker)["MAX_INBOUND_FRAME"] is protocol.MAX_INBOUND_FRAME
    assert protocol.MAX_INBOUND_FRAME >= protocol.MAX_FRAME_BYTES


def test_the_two_session_name_rules_are_the_modules_and_nest() -> None:
    assert server.SESSION_PATTERN is protocol.USER_SESSION_NAME_PATTERN
    assert sessions.SESSION_NAME.pattern is protocol.SESSION_KEY_PATTERN
    user, key = re.compile(protocol.USER_SESSION_NAME_PATTERN), re.compile(protocol.SESSION_KEY_PATTERN)
    longest = "a" * 64
    assert user.fullmatch(longest) and not user.fullmatch(longest + "a") and not user.fullmatch("a:b")
    for name in ("default", longest, "x.y@z-1_2"):  # the keys server.py builds from a user's name
        assert key.fullmatch(f"stdio:{name}")
        assert key.fullmatch(f"p:{'o' * 40}:{name}")
