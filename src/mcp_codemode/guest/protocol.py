"""The host–guest protocol, written down once: frame types, limits, error kinds and session-name rules.

Host and guest exchange length-prefixed JSON frames (``sandbox/frames.py`` on the host, ``worker.py`` and
``mcp/_rpc.py`` in the sandbox). Before this module each side spelled the frame types, the limits and the error
kinds as its own literals, with nothing checking that they agreed; now both import them from here, and
``tests/test_protocol_contract.py`` fails when one side uses a name or a limit this module does not define.

It lives in the guest package because the guest may import nothing of the host, while the host may import a
pure guest module: standard library only, Python >= 3.10, and no import at all, so it adds nothing to a
sandbox's start-up. Inside the sandbox it is imported as the top-level module ``protocol`` (``boot.py`` puts
the guest directory on ``sys.path``); on the host as ``mcp_codemode.guest.protocol``.
"""

from __future__ import annotations

# Frame types the guest sends to the host, and the host to the guest: each frame is a JSON object whose
# ``type`` is one of these.
READY = "ready"  # guest -> host, once, when the worker can run cells: {"type", "python", "pid"}
OUTPUT = "output"  # guest -> host: a piece of a cell's stdout/stderr: {"type", "stream", "data"}
RESULT = "result"  # guest -> host: a cell finished: {"type", "id", "duration", "ok", ...}
CALL = "call"  # guest -> host: a request to the bridge (an upstream tool, a listing...): {"type", "id", "op", ...}
EXECUTE = "execute"  # host -> guest: run a cell: {"type", "id", "code", ...}
INTERRUPT = "interrupt"  # host -> guest: stop the running cell: {"type", "id"}
SHUTDOWN = "shutdown"  # host -> guest: exit: {"type"}
REPLY = "reply"  # host -> guest: the answer to a CALL: {"type", "id", "ok", "value" | "error"}

GUEST_FRAME_TYPES = frozenset({READY, OUTPUT, RESULT, CALL})
HOST_FRAME_TYPES = frozenset({EXECUTE, INTERRUPT, SHUTDOWN, REPLY})

# The ``kind`` of the error in a refused REPLY: the guest raises its ``mcp.MCPError`` for it.
ERROR_KIND_MCP = "MCPError"

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
