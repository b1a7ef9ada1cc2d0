"""Self-reference: whether a configured server is a code-mode bridge (this one or the reference one).

A bridge that lists itself as an upstream would start itself recursively. Config discovery skips an entry
whose command launches a bridge (``launches_bridge``); the connection closes a server whose ``serverInfo`` says
it is one (``bridge_identity``). Apart from both so the connection need not import config discovery.
"""

from __future__ import annotations

import re
from typing import Final

from ..model import ServerConfig

SELF_SERVER_SETTING: Final = "MCP_BRIDGE_ALLOW_SELF_SERVER=1"


# Program names (normalised by _program_name) that start a code-mode bridge: this one and the reference one.
_SELF_NAMES: Final = {
    "mcp-codemode": "mcp-codemode itself",
    "mcp-server-code-execution-mode": "mcp-server-code-execution-mode, the reference code-mode bridge",
}


# Options whose value is a directory, not a program: `uv run --directory ~/src/mcp-codemode other-server`
# must not look like the bridge just because of where it runs.
_DIRECTORY_OPTIONS: Final = frozenset({"--directory", "--project", "--cwd", "--prefix"})


def launches_bridge(config: ServerConfig) -> str | None:
    """Which code-mode bridge this entry would start, if it would start one; None otherwise.

    The bridge is usually configured in the very client files it reads, and proxying itself would start
    another bridge per session, each one proxying itself again. Only whole program names count, so
    ``uvx mcp-server-time`` or a server living in a directory called ``mcp-codemode`` are not mistaken.
    """
    if config.transport != "stdio":
        return None
    previous = ""
    for token in (config.command, *config.args):
        program: str | None
        if previous in _DIRECTORY_OPTIONS:
            program = None
        elif previous == "-m":
            program = token.split(".")[0]
        elif token.startswith("-m") and not token.startswith("--") and len(token) > 2:  # python -mmcp_codemode
            program = token[2:].split(".")[0]
        elif token.startswith("-"):  # --from=mcp-codemode counts; --directory=~/src/mcp-codemode does not
            option, equals, value = token.partition("=")
            program = value if equals and option not in _DIRECTORY_OPTIONS else None
        else:
            program = token
        previous = token
        bridge = _SELF_NAMES.get(_program_name(program)) if program is not None else None
        if bridge is not None:
            return bridge
    return None


def bridge_identity(server_name: str) -> str | None:
    """Which code-mode bridge a server is by the name it gives itself (``serverInfo``), if it is one.

    The command line cannot tell every time: a wrapper script with another name, or the bridge's own HTTP
    URL, start or reach the bridge all the same. Its ``serverInfo`` name can: the hub checks it on connecting.
    """
    return _SELF_NAMES.get(server_name.strip().lower())


def _program_name(token: str) -> str:
    """``/x/mcp_codemode.py``, ``mcp-codemode@latest``, ``git+https://…/mcp-codemode.git`` → ``mcp-codemode``."""
    name = re.split(r"[/\\]", token.rstrip("/\\"))[-1].lower()
    name = re.split(r"[@=<>!~\[ ]", name, maxsplit=1)[0]
    for suffix in (".exe", ".cmd", ".py", ".pyz", ".git"):
        name = name.removesuffix(suffix)
    return name.replace("_", "-")
