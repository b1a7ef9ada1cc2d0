"""Pure logic: no upstream module imports a name another upstream module spells as private.

A leading underscore tells a reader "only this module uses it": safe to change without looking elsewhere. A name
imported by a sibling module breaks that promise, so such a name is public (no underscore) in its home module.
Whole private modules (none in this package today) are fine to import; private names in them are not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mcp_codemode.upstream
from tests.support.parsing import parse

PACKAGE = Path(mcp_codemode.upstream.__file__).parent


def private_imports(package: Path) -> list[str]:
    """Every ``from .x import _name`` (or ``from mcp_codemode.upstream.x import _name``) in ``package``."""
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level == 0 and not (node.module or "").startswith("mcp_codemode.upstream"):
                continue  # another package's private names are that package's business (and its test's)
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(
                        f"{path.relative_to(package)}:{node.lineno}: imports {alias.name} from {node.module or '.'}"
                    )
    return found


def test_no_upstream_module_imports_a_private_name_of_another() -> None:
    assert private_imports(PACKAGE) == []


def test_the_check_sees_a_private_name_crossing_modules(tmp_path: Path) -> None:
    (tmp_path / "servers").mkdir()  # a room of the package: its modules are checked too
    (tmp_path / "servers" / "hub.py").write_text("from .connection import _Connection, headline\n", "utf-8")
    (tmp_path / "deep.py").write_text("from mcp_codemode.upstream.config.entry import _Raw\n", encoding="utf-8")
    (tmp_path / "other.py").write_text("from typing import _T\n", encoding="utf-8")
    assert private_imports(tmp_path) == [
        "deep.py:1: imports _Raw from mcp_codemode.upstream.config.entry",
        "servers/hub.py:1: imports _Connection from connection",
    ]
