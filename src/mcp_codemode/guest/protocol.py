"""The host–guest protocol, written down once: frame types and fields, limits, error kinds, request ops,
the protocol version and the session-name rules.

Host and guest exchange length-prefixed JSON frames (``sandbox/frames.py`` on the host, ``worker.py`` and
``mcp/_rpc.py`` in the sandbox). Before this module each side spelled the frame types, the limits and the error
kinds as its own literals, with nothing checking that they agreed; now both import them from here, and
``tests/test_protocol_contract.py`` fails when one side uses a name or a limit this module does not define.

It lives in the guest package because the guest may import nothing of the host, while the host may import a
pure guest module: standard library only, Python >= 3.10, and no import at all at run time, so it adds nothing
to a sandbox's start-up. The frames' fields are ``TypedDict``s for the type checker only (under
``TYPE_CHECKING``, like the guest's other annotations): importing ``typing`` would cost every sandbox's start
a few milliseconds for names nothing checks at run time; host modules import them under ``TYPE_CHECKING`` too.
Inside the sandbox it is imported as the top-level module ``protocol`` (``boot.py`` puts the guest directory
on ``sys.path``); on the host as ``mcp_codemode.guest.protocol``.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final, Literal, NotRequired, TypedDict

# The version of this protocol. Bump it when a change would make an older guest and a newer host (or the
# reverse) misread each other: a frame type, op or required field added, removed or renamed, a field's meaning
# or type changed, a limit lowered, an error kind removed. Adding an optional field both sides ignore when
# absent does not bump it. The guest sends it in its ready frame; a host refuses a guest of another version (a
# sandbox image baked by another release, on the kubernetes backend) before it runs a cell. A host frame that every
# guest drops unread (KEEPALIVE: ``control_loop`` has ignored unknown types since the first release) does not bump
# it either: no side can misread it.
PROTOCOL_VERSION: Final = 4  # 2: the FILES / FILE_REPLY frames (a session's /workspace); 3: SNAPSHOT_OPS; 4: finding
# and adding servers (the find_servers, add_server, remove_server and added_servers ops)

# Frame types the guest sends to the host, and the host to the guest: each frame is a JSON object whose
# ``type`` is one of these.
READY: Final = "ready"  # guest -> host, once, when the worker can run cells: {"type", "protocol", "python", "pid"}
OUTPUT: Final = "output"  # guest -> host: a piece of a cell's stdout/stderr: {"type", "stream", "data"}
RESULT: Final = "result"  # guest -> host: a cell finished: {"type", "id", "duration", "status", ...}
CALL: Final = "call"  # guest -> host: a request to the bridge (a tool call, a listing...): {"type", "id", "op", ...}
EXECUTE: Final = "execute"  # host -> guest: run a cell: {"type", "id", "code", ...}
INTERRUPT: Final = "interrupt"  # host -> guest: stop the running cell: {"type", "id"}
SHUTDOWN: Final = "shutdown"  # host -> guest: exit: {"type"}
REPLY: Final = "reply"  # host -> guest: the answer to a CALL: {"type", "id", "ok", "value" | "error"}
# host -> guest, dropped by the guest: bytes on an idle exec stream, which a kubelet closes after its
# streamingConnectionIdleTimeout (4 h by default) of silence: {"type"}
KEEPALIVE: Final = "keepalive"
# host -> guest: list, read or write a file of /workspace for the client, answered even while a cell runs:
# {"type", "id", "op", "path", "offset"?, "data"?}
FILES: Final = "files"
# guest -> host: the answer to a FILES frame: {"type", "id", "ok", "value" | "error"}
FILE_REPLY: Final = "file_reply"

GUEST_FRAME_TYPES = frozenset({READY, OUTPUT, RESULT, CALL, FILE_REPLY})
HOST_FRAME_TYPES = frozenset({EXECUTE, INTERRUPT, SHUTDOWN, REPLY, KEEPALIVE, FILES})

# The ``kind`` of the error in a refused REPLY: the name of the ``mcp.runtime`` exception class the guest raises
# for it (``_rpc.ERRORS`` maps each kind to its class; an unknown kind raises ``MCPError``).
ERROR_KIND_MCP: Final = "MCPError"  # any other failure of a request (the base of all the others)
ERROR_KIND_TOOL: Final = "ToolError"  # raised by the guest itself, for a result the server marked isError
ERROR_KIND_TOOL_NOT_FOUND: Final = "ToolNotFound"
ERROR_KIND_SERVER_NOT_FOUND: Final = "ServerNotFound"
ERROR_KIND_ARGUMENT: Final = "ArgumentError"
ERROR_KIND_SERVER_UNAVAILABLE: Final = "ServerUnavailable"
ERROR_KIND_TOOL_TIMEOUT: Final = "ToolTimeout"
ERROR_KIND_POLICY: Final = "PolicyError"
ERROR_KIND_APPROVAL: Final = "ApprovalDenied"  # a PolicyError: a call ask_tools names was not approved
ERROR_KINDS = frozenset(
    {
        ERROR_KIND_MCP,
        ERROR_KIND_TOOL,
        ERROR_KIND_TOOL_NOT_FOUND,
        ERROR_KIND_SERVER_NOT_FOUND,
        ERROR_KIND_ARGUMENT,
        ERROR_KIND_SERVER_UNAVAILABLE,
        ERROR_KIND_TOOL_TIMEOUT,
        ERROR_KIND_POLICY,
        ERROR_KIND_APPROVAL,
    }
)
# The kinds only the guest raises: the host never sends them in a REPLY.
GUEST_ONLY_ERROR_KINDS = frozenset({ERROR_KIND_TOOL})

# The ``op`` of a CALL frame: what sandboxed code asks the bridge for. The host answers any other op with an
# ``MCPError`` reply.
CALL_OPS = frozenset(
    {
        "servers",
        "describe",
        "loaded",
        "tools",
        "docs",
        "search",
        "call",
        "resources",
        "read_resource",
        "resource_templates",
        "prompts",
        "get_prompt",
        "save_tool",
        "saved_tools",
        "delete_saved_tool",
        "find_servers",
        "add_server",
        "remove_server",
        "added_servers",
    }
)

# The ``op`` of a FILES frame. Paths are relative to /workspace (``workspace_path_problem``); "list" takes "" for the
# workspace itself. "read" answers at most FILE_CHUNK bytes from ``offset`` (base64) and the file's size; "write"
# replaces the file with ``data`` (base64) through a temporary file, making missing folders.
FILE_OPS = frozenset({"list", "read", "write"})
# The ``op`` of a FILES frame that hibernates or restores the session (``worker_snapshot.py``), sent by the host only
# while no cell runs: "snapshot" builds it (``limit``: its most bytes) and answers its size, counts and what was lost
# (or ``declined``); "snapshot_read" answers FILE_CHUNK bytes from ``offset``; "restore_put" appends ``data`` at
# ``offset``; "restore" applies what was put and answers its counts and what was lost.
SNAPSHOT_OPS = frozenset({"snapshot", "snapshot_read", "restore_put", "restore"})
FILE_CHUNK = 4 * 1024 * 1024  # bytes of a file one FILE_REPLY carries (base64: 5.4 MB, under MAX_FRAME_BYTES)
MAX_LISTED_FILES = 1000  # entries one "list" answers; it says when there were more
MAX_PATH_CHARS = 1024
MAX_PATH_PARTS = 32


def workspace_path_problem(path: object) -> str:
    """Why ``path`` cannot name a file of /workspace ("" when it can): relative, '/'-separated, no empty, '.' or
    '..' part, no NUL or control character, at most MAX_PATH_PARTS parts and MAX_PATH_CHARS characters. Both sides
    check it: the host to tell the client what to fix, the guest because it trusts no frame either."""
    if not isinstance(path, str) or not path:
        return "a file path must be a non-empty string such as 'data/report.csv'"
    if len(path) > MAX_PATH_CHARS:
        return f"the path is {len(path)} characters; the limit is {MAX_PATH_CHARS}"
    if path.startswith("/"):
        return "the path must be relative to /workspace, such as 'data/report.csv', not absolute"
    parts = path.split("/")
    if len(parts) > MAX_PATH_PARTS:
        return f"the path has {len(parts)} parts; the limit is {MAX_PATH_PARTS}"
    for part in parts:
        if part in ("", ".", ".."):
            return f"the path has a {part or 'empty'!r} part: name each folder, as in 'data/report.csv'"
        if any(ord(char) < 32 or ord(char) == 127 for char in part):
            return "the path has a control character"
        if len(part.encode("utf-8", "surrogatepass")) > 255:
            return "a part of the path is longer than 255 bytes"
    return ""


# Limits. The host kills a worker whose frame is larger, nested deeper or holds more values than this; the
# guest refuses a request built from user values that would break them first, so user code gets an error and
# keeps its session.
MAX_FRAME_BYTES = 8 * 1024 * 1024  # a frame the host reads from the guest (raised for a cell's larger limits)
MAX_DEPTH = 100  # the frame object itself is level 1; a call's arguments start at level 2 (policy allows 64)
MAX_VALUES = 250_000  # JSON values in one frame, counted from its commas and brackets (about 100 bytes of Python each)
MAX_INBOUND_FRAME = 64 * 1024 * 1024  # a frame the guest reads from the host

# Session names. Two rules, deliberately different: the name a user gives (the tool's ``session`` argument or
# the Mcp-Codemode-Session header) has no ':', so that the bridge can build its internal session key from it,
# a prefix and the principal (``stdio:NAME``, ``p:OWNER:NAME``, ``h:ID``); the key allows ':' and is longer.
USER_SESSION_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$"
SESSION_KEY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$"


if TYPE_CHECKING:
    # The fields of every frame: what a well-behaved side sends. What arrives from the guest is untrusted: the
    # host types a guest frame by its ``type`` (the frame reader checked only that it is an object with a string
    # ``type``) and still checks each other field's type before use, as the guest may send anything in it.

    class ReadyFrame(TypedDict):
        type: Literal["ready"]
        protocol: int  # PROTOCOL_VERSION of the guest that sent it
        python: str  # the guest's Python version, "3.11.2"
        pid: int

    class OutputFrame(TypedDict):
        type: Literal["output"]
        stream: str  # "stdout" or "stderr"
        data: str

    class CellError(TypedDict):
        """An exception a cell raised, as the guest describes it (traceback trimmed to the user's frames)."""

        type: str
        message: str
        traceback: str

    class ImageData(TypedDict):
        mime: str
        data: str  # base64

    class ResultFrame(TypedDict):
        type: Literal["result"]
        id: int  # the EXECUTE frame's
        duration: float  # seconds, measured in the guest
        status: str  # "ok", "error" or "interrupted"
        value: NotRequired[str | None]  # the repr of the cell's last expression
        error: NotRequired[CellError]
        notes: NotRequired[list[str]]
        images: NotRequired[list[ImageData]]
        stdout_tail: NotRequired[str]
        stdout_dropped: NotRequired[int]
        stderr_tail: NotRequired[str]
        stderr_dropped: NotRequired[int]
        links: NotRequired[list[FileLink]]

    class CallFrame(TypedDict):
        """A request; its parameters sit beside ``op`` (which ones depends on the op)."""

        type: Literal["call"]
        id: int  # fresh per request; the REPLY carries it back
        op: str  # one of CALL_OPS
        server: NotRequired[str]
        tool: NotRequired[str | None]
        arguments: NotRequired[dict[str, Any]]
        timeout: NotRequired[float | None]
        detail: NotRequired[str]
        query: NotRequired[str]
        limit: NotRequired[int]
        offset: NotRequired[int]
        uri: NotRequired[str]
        name: NotRequired[str]
        source: NotRequired[str]
        description: NotRequired[str]
        version: NotRequired[str]  # add_server: the registry entry's version
        alias: NotRequired[str]  # add_server: the proxy's alias

    class CellPolicy(TypedDict):
        max_argument_depth: int
        where: str  # where the policy comes from, for messages

    class SavedToolSource(TypedDict):
        name: str
        source: str

    class ServerEntry(TypedDict):
        """A configured server as code sees it: in the cell context, and with its state in the answer to the
        ``servers`` request (``list_servers(detailed=True)``)."""

        name: str
        alias: str  # the Python name of its proxy, ``mcp_<alias>``
        transport: str
        description: NotRequired[str]
        state: NotRequired[str]  # servers: idle, connecting, ready or failed
        tools: NotRequired[int | None]  # servers: how many tools it lists, None until listed
        listing: NotRequired[str]  # servers: where that listing comes from ("unknown" when none)
        error: NotRequired[str]  # servers: why it failed

    class CellContext(TypedDict):
        """What the bridge sends with a cell: the servers and catalog versions, and for a new sandbox the saved
        tools. The host sends only what changed since the last cell, so every field may be missing."""

        servers: NotRequired[list[ServerEntry]]
        versions: NotRequired[dict[str, Any]]
        policy: NotRequired[CellPolicy]
        saved: NotRequired[list[SavedToolSource]]
        saved_problems: NotRequired[list[str]]

    class ExecuteFrame(TypedDict):
        type: Literal["execute"]
        id: int
        code: str
        summary: NotRequired[str]  # the tool call's summary, shown by mcp.runtime; sent when it changed
        context: NotRequired[CellContext]

    class InterruptFrame(TypedDict):
        type: Literal["interrupt"]
        id: int  # the running cell's

    class ShutdownFrame(TypedDict):
        type: Literal["shutdown"]

    class KeepaliveFrame(TypedDict):
        type: Literal["keepalive"]

    class FilesFrame(TypedDict):
        type: Literal["files"]
        id: int  # fresh per request; the FILE_REPLY carries it back
        op: str  # one of FILE_OPS
        path: str  # relative to /workspace ("" lists the workspace itself)
        offset: NotRequired[int]  # read: where to start
        data: NotRequired[str]  # write: the whole file, base64

    class FileEntry(TypedDict):
        path: str  # relative to /workspace
        size: int
        kind: str  # "file" or "folder"

    class FileReplyFrame(TypedDict):
        """``value``: list -> {"entries": [FileEntry], "more": bool}; read -> {"data", "size"}; write -> {"size"}.
        ``error``: {"message"}."""

        type: Literal["file_reply"]
        id: int
        ok: bool
        value: NotRequired[dict[str, Any]]
        error: NotRequired[dict[str, str]]

    class FileLink(TypedDict):
        """A file the cell handed back (``runtime.share_file``), in the RESULT frame's ``links``."""

        path: str  # relative to /workspace
        size: int
        mime: str
        description: NotRequired[str]

    class ErrorInfo(TypedDict):
        """Why a request failed: ``kind`` is one of ERROR_KINDS, the exception class the guest raises."""

        kind: str
        message: str
        server: NotRequired[str]
        tool: NotRequired[str]
        details: NotRequired[dict[str, Any]]  # e.g. {"suggestions": [...]} or {"rule": "..."}

    class ReplyValue(TypedDict):
        """The body of a REPLY that answers its request: ``value`` is the op's answer."""

        ok: Literal[True]
        value: Any

    class ReplyRefusal(TypedDict):
        ok: Literal[False]
        error: ErrorInfo

    class ReplyFrame(TypedDict):
        """A REPLY as it is framed: the body's fields beside ``type`` and ``id`` (the CALL frame's)."""

        type: Literal["reply"]
        id: int
        ok: bool
        value: NotRequired[Any]
        error: NotRequired[ErrorInfo]

    ReplyBody = ReplyValue | ReplyRefusal
    GuestFrame = ReadyFrame | OutputFrame | ResultFrame | CallFrame | FileReplyFrame
    HostFrame = ExecuteFrame | InterruptFrame | ShutdownFrame | ReplyFrame | KeepaliveFrame | FilesFrame
