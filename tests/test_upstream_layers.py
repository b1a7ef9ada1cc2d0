"""Pure logic: the upstream package imports only downward, and never from inside a function.

The upstream package (config discovery, the hub, the directory, the catalog) sits below the bridge: the bridge,
the relay, the CLI and the web face build it and hand it what it needs (``directory.DirectorySettings``,
``gate.Gate``). An import of a higher module from here, or a function-level import that hides a circle, is what
this test catches, so the rule survives the next change.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mcp_codemode.upstream

PACKAGE = Path(mcp_codemode.upstream.__file__).parent
# Project modules below the upstream package: the version, the error base, private state files, the pure guest.
ALLOWED = ("mcp_codemode.upstream", "mcp_codemode.errors", "mcp_codemode.state_files", "mcp_codemode.guest")


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The absolute module an ``import from`` names, resolving ``.`` and ``..`` against ``mcp_codemode.upstream``."""
    if node.level == 0:
        return node.module or ""
    base = f"mcp_codemode.upstream.{module}".split(".")[: -node.level]
    return ".".join([*base, *([node.module] if node.module else [])])


def violations(package: Path) -> list[str]:
    """Every import in ``package`` that goes up or sideways out of it, and every import inside a function or class."""
    found = []
    for path in sorted(package.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = {id(node) for node in tree.body}
        top |= {id(child) for node in tree.body if isinstance(node, ast.If) for child in node.body}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            if id(node) not in top:
                found.append(f"{path.name}:{node.lineno}: import inside a function or class")
            names = [_absolute(path.stem, node)] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            if isinstance(node, ast.ImportFrom) and names == ["mcp_codemode"]:
                names = [f"mcp_codemode.{alias.name}" for alias in node.names]
            for name in names:
                if name.split(".")[0] != "mcp_codemode" or name == "mcp_codemode.__version__":
                    continue
                if not any(name == allowed or name.startswith(allowed + ".") for allowed in ALLOWED):
                    found.append(f"{path.name}:{node.lineno}: imports {name}, a layer above the upstream package")
    return found


def test_upstream_imports_only_downward_and_only_at_module_level() -> None:
    assert violations(PACKAGE) == []


def test_the_check_sees_a_wrong_way_edge_and_a_hidden_circle(tmp_path: Path) -> None:
    (tmp_path / "directory.py").write_text("from ..settings import Settings\n", encoding="utf-8")
    (tmp_path / "stubs.py").write_text("def f():\n    from .catalog import proxy_info\n", encoding="utf-8")
    assert violations(tmp_path) == [
        "directory.py:1: imports mcp_codemode.settings, a layer above the upstream package",
        "stubs.py:2: import inside a function or class",
    ]
