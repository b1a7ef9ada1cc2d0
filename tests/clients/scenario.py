"""What every driver in this folder does to the bridge, and how it is told where the bridge is.

The drivers run with the Python of ``.cache/clients`` (``scripts/setup-clients.sh``), never the project's: each
one imports a third-party agent framework, connects it to a real ``mcp-codemode serve`` the way that library's
own documentation does, runs the calls below through it, and prints one JSON object with what the library handed
back (for an agent framework: what its model is shown). ``tests/face/test_agent_frameworks.py`` starts them and judges
that JSON, so what is checked is the library's own behaviour with its defaults, not our reading of the protocol.

This module is standard library only, so that the drivers can import it whichever framework they drive.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TypedDict

# Two calls: the second sees the first's variable only when the client kept one session.
STATE_SET = "x = 41"
STATE_GET = '"state kept: %d" % (x + 1)'  # a string no failure can contain

# A failure two frames deep: the traceback's frame lines ("File ..., line 2, in divide") are what a model needs to
# fix the code, and what a client that shows only the error's type loses.
TRACEBACK = "def divide(a, b):\n    return a / b\n\ndivide(1, 0)\n"

# A cell still awaiting when its timeout comes: what the client shows must be the user's await, no frame of ours.
TIMEOUT_CELL = "import asyncio\n\nawait asyncio.sleep(60)\n"
TIMEOUT_SECONDS = 2

# A 4x4 red PNG made with the standard library (the sandbox has no Pillow to rely on), shown to the client.
IMAGE = """\
import struct
import zlib

import mcp.runtime as runtime


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


rows = b"".join(b"\\x00" + b"\\xff\\x00\\x00" * 4 for _ in range(4))
header = struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0)
png = b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
runtime.show(png)
"shown"
"""

# A file sent in the request's _meta, which the code reads, then a file it makes and shares: the result carries a
# resource_link to it (codemode://sessions/<session>/files/made.txt), which resources/read reads back.
FILES_META = {"codemode/files": [{"path": "sent.txt", "content": "sent in _meta"}]}
SHARE = "open('made.txt', 'w').write('made in the sandbox')\nruntime.share_file('made.txt')\nopen('sent.txt').read()"


class Target(TypedDict, total=False):
    """Where the bridge is: ``transport`` is "stdio" (with command, args, env) or "http" (with url, headers)."""

    transport: str
    command: str
    args: list[str]
    env: dict[str, str]
    url: str
    headers: dict[str, str]


def target() -> Target:
    """The target the test passed as the driver's one argument (a JSON object)."""
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} TARGET_JSON")
    found: Target = json.loads(sys.argv[1])
    return found


def report(found: dict[str, Any]) -> None:
    """Print what the driver saw, as the one line of JSON the test reads."""
    print(json.dumps(found))
