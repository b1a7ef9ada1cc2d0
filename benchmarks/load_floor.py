"""The floor of ``benchmarks/load.py``: the MCP SDK's own no-op tool server, driven by the same clients as the bridge.

It is ``bare_server.py``'s server (the SDK's ``MCPServer``, one no-op tool) plus one tool, ``wait``, that sleeps
for as long as the bridge's deliberate timeout cell waits: the timeout's wait is the workload's, not overhead, so
the floor pays it too and both sides keep the same number of clients busy. Over HTTP it is served as the bridge
serves (the SDK's Streamable HTTP app under uvicorn, no access log), so both eras' clients reach it the same way.

Usage: ``python benchmarks/load_floor.py stdio`` or ``python benchmarks/load_floor.py http PORT``.
"""

from __future__ import annotations

import sys

import anyio
import uvicorn

from bare_server import server


@server.tool()
async def wait(seconds: float) -> str:
    """Sleep ``seconds``, as the bridge's timeout cell does before its interrupt."""
    await anyio.sleep(seconds)
    return "ok"


def main(argv: list[str]) -> int:
    if argv[:1] == ["stdio"]:
        server.run()
        return 0
    if len(argv) == 2 and argv[0] == "http" and argv[1].isdigit():
        app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
        config = uvicorn.Config(app, host="127.0.0.1", port=int(argv[1]), log_config=None, log_level="warning",
                                access_log=False, lifespan="on")  # fmt: skip
        uvicorn.Server(config).run()
        return 0
    print("usage: load_floor.py stdio | load_floor.py http PORT", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
