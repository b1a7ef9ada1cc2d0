"""The host and the guest speak the protocol of ``guest/protocol.py`` and nothing else: they cannot drift.

Pure checks of the source (no sandbox): every frame type one side sends is one the other side decodes, derived
from the module's two sets; no file of either side spells a frame type or the error kind as its own literal;
the limits the host enforces and the guest checks are the module's objects; the two session-name rules are
the module's, and every name a user may give still makes a valid internal key. The error kinds the host can
send are the table's, and the guest maps each of them to its exception class; the ops the guest asks for are
the ones the relay answers; the typed fields of each frame name the frame types the two sets hold.
"""

from __future__ import annotations

import ast
import json
import re
import typing
from pathlib import Path

from mcp_codemode.face import tool
from mcp_codemode.guest import protocol
from mcp_codemode.guest import worker_channel as guest_worker
from mcp_codemode.guest.mcp import _rpc
from mcp_codemode.runs import relay_params, session_names
from mcp_codemode.sandbox import frames
from mcp_codemode.sandbox import worker as host_worker
from mcp_codemode.session_keys import SessionKey
from tests.support.parsing import parse

SRC = Path(protocol.__file__).resolve().parents[1]
GUEST_FILES = [*sorted((SRC / "guest").glob("worker*.py")), SRC / "guest" / "mcp" / "_rpc.py"]
RELAY_FILES = [SRC / "runs" / "relay.py", SRC / "runs" / "relay_params.py", SRC / "policy" / "guard.py"]
# The host side of one worker: its frame loop, the guest's calls it relays and the client's file requests it sends.
WORKER_FILES = [SRC / "sandbox" / name for name in ("worker.py", "calls.py", "file_requests.py")]
HOST_FILES = [*WORKER_FILES, SRC / "sandbox" / "frames.py", *RELAY_FILES]
NAMES = {value: name for name, value in vars(protocol).items() if name.isupper() and isinstance(value, str)}


def _protocol_names_used(path: Path) -> set[str]:
    """The protocol constants a file uses (by name, after importing them from the protocol module)."""
    tree = parse(path.read_text())
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("protocol")
        for alias in node.names
    }
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return imported & used


def _values(names: set[str]) -> set[str]:
    # The frames' TypedDicts exist only for the type checker (imported under TYPE_CHECKING): not values here.
    return {value for name in names if isinstance(value := getattr(protocol, name, None), str)}


def test_the_two_directions_are_disjoint_and_complete() -> None:
    assert not protocol.GUEST_FRAME_TYPES & protocol.HOST_FRAME_TYPES
    assert protocol.ERROR_KIND_MCP == "MCPError" == _rpc.MCPError.__name__  # the guest raises it by this name
    assert protocol.ERROR_KIND_MCP in _rpc.ERRORS


def test_every_frame_the_guest_sends_the_host_decodes_and_back() -> None:
    host = _values(set().union(*(_protocol_names_used(path) for path in WORKER_FILES)))
    guest = _values(set().union(*(_protocol_names_used(path) for path in GUEST_FILES)))
    assert host >= protocol.GUEST_FRAME_TYPES, "the host does not handle every frame the guest sends"
    assert guest >= protocol.HOST_FRAME_TYPES, "the guest does not handle every frame the host sends"
    assert guest >= protocol.GUEST_FRAME_TYPES and host >= protocol.HOST_FRAME_TYPES


def test_no_side_spells_a_frame_type_or_error_kind_itself() -> None:
    words = protocol.GUEST_FRAME_TYPES | protocol.HOST_FRAME_TYPES | protocol.ERROR_KINDS
    pattern = re.compile(r"""(?:"type"\s*:\s*|type=|kind\s*(?:==|in)\s*\(?|"kind"\s*:\s*|Refusal\(\s*)["'](\w+)["']""")
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
    assert tool.SESSION_PATTERN is protocol.USER_SESSION_NAME_PATTERN
    assert session_names.SESSION_NAME.pattern is protocol.SESSION_KEY_PATTERN
    user, key = re.compile(protocol.USER_SESSION_NAME_PATTERN), re.compile(protocol.SESSION_KEY_PATTERN)
    longest = "a" * 64
    assert user.fullmatch(longest) and not user.fullmatch(longest + "a") and not user.fullmatch("a:b")
    for name in ("default", longest, "x.y@z-1_2"):  # the keys placement.py builds from a user's name
        assert key.fullmatch(str(SessionKey.stdio(name)))
        assert key.fullmatch(str(SessionKey.principal("o" * 40, name)))


def _refusal_kinds(path: Path) -> set[str]:
    """The names each ``Refusal(...)`` of a host file passes as its kind; a literal shows as itself, quoted."""
    kinds = set()
    for node in ast.walk(parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Refusal":
            kind = node.args[0]
            kinds.add(kind.id if isinstance(kind, ast.Name) else repr(ast.unparse(kind)))
    return kinds


def test_every_error_kind_the_host_sends_the_guest_raises_as_its_class() -> None:
    """Each kind is one class of the guest's, named as the kind; the host builds refusals only from the table."""
    assert set(_rpc.ERRORS) == protocol.ERROR_KINDS
    for kind, cls in _rpc.ERRORS.items():
        assert cls.__name__ == kind and issubclass(cls, _rpc.MCPError)
    raised = {cls for cls in vars(_rpc).values() if isinstance(cls, type) and issubclass(cls, _rpc.MCPError)}
    assert raised == set(_rpc.ERRORS.values()), "a runtime exception class the host cannot name by a kind"
    sent: set[str] = set()
    for path in RELAY_FILES:
        kinds = _refusal_kinds(path)
        assert kinds <= {name for name in vars(protocol) if name.startswith("ERROR_KIND_")}, (
            f"{path.name} refuses with {sorted(kinds)}: use the ERROR_KIND_* constants of guest/protocol.py"
        )
        sent |= {getattr(protocol, name) for name in kinds}
    sent |= _values(set().union(*(_protocol_names_used(path) for path in WORKER_FILES))) & protocol.ERROR_KINDS
    assert sent <= set(_rpc.ERRORS)
    # And back: every kind but the guest's own is one the host sends in some case.
    assert sent == protocol.ERROR_KINDS - protocol.GUEST_ONLY_ERROR_KINDS


def _ops_answered() -> set[object]:
    """The ops relay.py dispatches: the keys of its ``_ops`` and ``_uses`` tables and any op it compares against."""
    ops: set[object] = set()
    for node in ast.walk(parse((SRC / "runs" / "relay.py").read_text())):
        target = node.target if isinstance(node, ast.AnnAssign) else None
        named = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""
        if isinstance(node, ast.AnnAssign) and named in ("_ops", "_uses"):
            assert isinstance(node.value, ast.Dict)
            ops |= {key.value for key in node.value.keys if isinstance(key, ast.Constant)}
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "op":
            ops |= {c.value for c in node.comparators if isinstance(c, ast.Constant)}
    # The tables relay.py takes in whole: the saved tools' handlers and the added servers' (``self.ops``).
    for node in ast.walk(parse((SRC / "runs" / "saved_tools.py").read_text())):
        if isinstance(node, ast.FunctionDef) and node.name == "saved_tool_requests":
            table = node.body[-1]
            assert isinstance(table, ast.Return) and isinstance(table.value, ast.Dict)
            ops |= {key.value for key in table.value.keys if isinstance(key, ast.Constant)}
    for node in ast.walk(parse((SRC / "runs" / "added_servers.py").read_text())):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Dict):
            continue
        if isinstance(node.targets[0], ast.Attribute) and node.targets[0].attr == "ops":
            ops |= {key.value for key in node.value.keys if isinstance(key, ast.Constant)}
    return ops


def test_the_ops_the_guest_asks_for_are_the_ones_the_relay_answers() -> None:
    assert _ops_answered() == protocol.CALL_OPS
    asked: set[object] = set()
    for path in (SRC / "guest").rglob("*.py"):
        for node in ast.walk(parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("request", "arequest")
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                asked.add(node.args[0].value)
    assert asked == protocol.CALL_OPS, asked


def _typed_protocol() -> dict[str, typing.Any]:
    """protocol.py run as the type checker reads it (its TypedDicts exist only under TYPE_CHECKING)."""
    source = Path(protocol.__file__).read_text().replace("TYPE_CHECKING = False", "TYPE_CHECKING = True", 1)
    namespace: dict[str, typing.Any] = {"__name__": "protocol_typed"}
    exec(compile(source, protocol.__file__, "exec"), namespace)
    return namespace


def _fields(frame: typing.Any, typed: dict[str, typing.Any]) -> tuple[set[str], set[str]]:
    """A TypedDict's required keys and all its keys (read from its hints: the module's annotations are strings,
    which ``__required_keys__`` cannot see into)."""
    hints = typing.get_type_hints(frame, localns=typed, include_extras=True)
    required = {key for key, hint in hints.items() if typing.get_origin(hint) is not typing.NotRequired}
    return required, set(hints)


def test_the_typed_frames_are_the_frame_types_and_the_protocol_is_versioned() -> None:
    typed = _typed_protocol()
    for union, types in (("GuestFrame", protocol.GUEST_FRAME_TYPES), ("HostFrame", protocol.HOST_FRAME_TYPES)):
        named = set()
        for frame in typing.get_args(typed[union]):
            hints = typing.get_type_hints(frame, localns=typed)
            named |= set(typing.get_args(hints["type"]))
            assert "type" in _fields(frame, typed)[0]
        assert named == types, union
    assert isinstance(protocol.PROTOCOL_VERSION, int) and protocol.PROTOCOL_VERSION >= 1


def test_what_the_host_builds_has_the_typed_fields() -> None:
    """A refusal and a reply as the relay and the frame encoder build them hold only the fields the types name."""
    typed = _typed_protocol()
    refusal = relay_params.Refusal(protocol.ERROR_KIND_TOOL_NOT_FOUND, "no", "s", "t", suggestions=["u"]).reply()
    assert set(refusal) == set(typed["ReplyRefusal"].__annotations__)
    assert set(refusal["error"]) == set(typed["ErrorInfo"].__annotations__)
    for body in (refusal, {"ok": True, "value": 1}):
        frame = json.loads(frames.encode_reply(7, body)[frames.HEADER.size :])
        required, known = _fields(typed["ReplyFrame"], typed)
        assert required <= set(frame) <= known
