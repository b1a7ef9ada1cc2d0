"""Capture the tool listings of the seven reference MCP servers into benchmarks/corpus/tools/<server>.json.

Each server is started by its ``ServerConfig`` from tests/support/upstreams.py (the real entry point, no npx/uvx),
through the official SDK client (``mcp.Client``, ``mode="legacy"``, stdio), and asked for ``tools/list`` until the
last page. Every tool is written exactly as it came over the wire (``model_dump(mode="json", by_alias=True,
exclude_none=True)``), in the order the server listed them, as pretty JSON with sorted keys.

The filesystem root, the memory file and the git repository are temporary. The only place a path of this machine
could reach the listing is a description that names the allowed directory; ``normalize`` replaces each temporary
path with a fixed placeholder so the files do not change from one capture to the next, and the capture fails if a
temporary path is left anywhere in the output.

Usage (from the repository root)
    .venv/bin/python benchmarks/corpus/capture.py [--out DIR]

The servers must be installed: scripts/setup-node.sh (everything, filesystem, memory, sequential-thinking) and
scripts/setup-upstreams.sh (time, git, fetch).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: make tests.support.upstreams and the src layout importable
    sys.path.insert(0, str(ROOT))

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from tests.support import upstreams  # noqa: E402

from mcp_codemode.upstream.model import ServerConfig  # noqa: E402

TOOLS_DIR = Path(__file__).resolve().parent / "tools"
CALL_TIMEOUT = 60.0
SERVERS = ("everything", "filesystem", "memory", "sequential-thinking", "time", "git", "fetch")
PLACEHOLDER = "/corpus"  # what a temporary directory reads as in the captured descriptions


class CaptureError(Exception):
    """A server could not be started or listed; the message says which and how to fix it."""


def configs(scratch: Path) -> dict[str, ServerConfig]:
    """The seven servers, each with its own temporary state under ``scratch``."""
    root = scratch / "files"
    root.mkdir()
    repo = scratch / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "--quiet", str(repo)], check=True)
    makers: dict[str, Callable[[], ServerConfig]] = {
        "everything": lambda: upstreams.everything(),
        "filesystem": lambda: upstreams.filesystem(root),
        "memory": lambda: upstreams.memory(scratch / "memory.jsonl"),
        "sequential-thinking": lambda: upstreams.sequential_thinking(),
        "time": lambda: upstreams.time(),
        "git": lambda: upstreams.git(repo),
        "fetch": lambda: upstreams.fetch(),
    }
    found: dict[str, ServerConfig] = {}
    for name, make in makers.items():
        try:
            found[name] = make()
        except (
            BaseException
        ) as exc:  # tests.support.upstreams says "not installed" through pytest.skip/fail outside pytest
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            raise CaptureError(f"{name}: {exc}") from None
    return found


async def list_tools(config: ServerConfig, errlog_path: Path) -> list[dict[str, Any]]:
    """Every tool of the server, across all pages, dumped exactly as on the wire."""
    assert config.command is not None
    params = StdioServerParameters(
        command=config.command, args=list(config.args), env=dict(config.env) or None, cwd=config.cwd
    )
    tools: list[dict[str, Any]] = []
    with errlog_path.open("w", encoding="utf-8") as errlog:
        transport = stdio_client(params, errlog=errlog)
        async with Client(transport, mode="legacy", cache=None, read_timeout_seconds=CALL_TIMEOUT) as client:
            cursor: str | None = None
            while True:
                page = await client.list_tools(cursor=cursor)
                tools.extend(tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    return tools


def normalize(value: Any, replacements: Sequence[tuple[str, str]]) -> Any:
    """``value`` with every temporary path in a string replaced by its placeholder."""
    if isinstance(value, str):
        for old, new in replacements:
            value = value.replace(old, new)
        return value
    if isinstance(value, list):
        return [normalize(item, replacements) for item in value]
    if isinstance(value, dict):
        return {key: normalize(item, replacements) for key, item in value.items()}
    return value


async def capture(out: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="mcp-codemode-corpus-") as tmp:
        scratch = Path(tmp)
        resolved = scratch.resolve()
        # Longest first, so that /tmp/x/files is replaced before /tmp/x; the filesystem server reports its root
        # resolved (a symlinked tmp dir reads differently), so both spellings are covered.
        pairs = {
            str(resolved / "files"): f"{PLACEHOLDER}/files",
            str(scratch / "files"): f"{PLACEHOLDER}/files",
            str(resolved / "repo"): f"{PLACEHOLDER}/repo",
            str(scratch / "repo"): f"{PLACEHOLDER}/repo",
            str(resolved): PLACEHOLDER,
            str(scratch): PLACEHOLDER,
        }
        replacements = sorted(pairs.items(), key=lambda pair: -len(pair[0]))
        logs = scratch / "logs"
        logs.mkdir()
        out.mkdir(parents=True, exist_ok=True)
        for name, config in configs(scratch).items():
            try:
                tools = await list_tools(config, logs / f"{name}.log")
            except Exception as exc:
                tail = (logs / f"{name}.log").read_text(errors="replace")[-2000:]
                raise CaptureError(f"{name}: tools/list failed: {exc!r}; its stderr ends:\n{tail}") from exc
            tools = normalize(tools, replacements)
            text = json.dumps(tools, indent=2, ensure_ascii=False) + "\n"
            if "mcp-codemode-corpus-" in text:
                raise CaptureError(f"{name}: a temporary path is left in the listing; extend normalize()")
            (out / f"{name}.json").write_text(text, encoding="utf-8")
            counts[name] = len(tools)
            print(f"{name}: {len(tools)} tools", file=sys.stderr)
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=TOOLS_DIR, help="directory for the <server>.json files")
    args = parser.parse_args(argv)
    try:
        counts = asyncio.run(capture(args.out))
    except CaptureError as exc:
        print(f"capture failed: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"servers": counts, "total": sum(counts.values())}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
