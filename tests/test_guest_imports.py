"""The in-sandbox API package imports one way: no cycles, none hidden inside a function, nothing from the host.

``guest/mcp/`` is split into small modules (images, display, results, signatures, proxies, docs, saved tools)
under the ``runtime`` facade. A cycle between two of them used to hide behind an import inside a function;
these checks read the sources (no import runs), so a new one fails here instead of surfacing as a partly
initialised module inside a sandbox.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import mcp_codemode.guest.mcp as guest_mcp

PACKAGE = Path(guest_mcp.__file__).parent
MODULES = sorted(PACKAGE.glob("*.py"))
# The guest folder's own top-level modules (protocol, worker, boot): in the sandbox boot.py puts that folder on
# sys.path, so `from protocol import ...` is how guest/mcp reaches the protocol module there.
GUEST_TOP_LEVEL = frozenset(path.stem for path in PACKAGE.parent.glob("*.py")) - {"__init__"}
ALLOWED = frozenset(sys.stdlib_module_names) | GUEST_TOP_LEVEL


def _sibling_imports(tree: ast.AST) -> list[tuple[ast.ImportFrom, str]]:
    """Each ``from . import x`` / ``from .x import y`` with the sibling module it names."""
    found: list[tuple[ast.ImportFrom, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.append((node, node.module.split(".")[0]))
            else:
                found.extend((node, alias.name) for alias in node.names)
    return found


def _function_level(tree: ast.AST) -> set[int]:
    """The ids of import statements that sit inside a function body."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.update(id(child) for child in ast.walk(node) if isinstance(child, (ast.Import, ast.ImportFrom)))
    return inside


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in MODULES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[path.stem] = {name for _, name in _sibling_imports(tree)}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path of module names, or None."""
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        for target in sorted(graph.get(name, ())):
            found = visit(target, [*path, name])
            if found:
                return found
        done.add(name)
        return None

    for name in sorted(graph):
        found = visit(name, [])
        if found:
            return found
    return None


def test_the_package_is_split_into_the_expected_modules() -> None:
    names = {path.stem for path in MODULES}
    assert {"runtime", "_proxies", "_images", "_display", "_results", "_signatures", "_docs", "_saved"} <= names


@pytest.mark.parametrize("path", MODULES, ids=[path.name for path in MODULES])
def test_no_sibling_import_hides_inside_a_function(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    hidden = _function_level(tree)
    offenders = [f"line {node.lineno}: .{name}" for node, name in _sibling_imports(tree) if id(node) in hidden]
    assert not offenders, f"{path.name} imports a sibling inside a function (move the shared piece down): {offenders}"


def test_the_modules_import_each_other_without_a_cycle() -> None:
    assert _cycle(_graph()) is None, f"import cycle in guest/mcp: {' -> '.join(_cycle(_graph()) or [])}"


def test_the_cycle_finder_finds_a_cycle() -> None:
    found = _cycle({"runtime": {"_proxies"}, "_proxies": {"_results"}, "_results": {"runtime"}})
    assert found == ["_proxies", "_results", "runtime", "_proxies"]
    assert _cycle({"runtime": {"_proxies"}, "_proxies": set()}) is None


@pytest.mark.parametrize("path", MODULES, ids=[path.name for path in MODULES])
def test_only_the_standard_library_and_siblings_are_imported(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    outside: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            outside += [alias.name for alias in node.names if alias.name.split(".")[0] not in ALLOWED]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.split(".")[0] not in ALLOWED
        ):
            outside.append(node.module)
    assert not outside, (
        f"{path.name} runs in the sandbox and may import only the stdlib and the guest's own modules: {outside}"
    )
