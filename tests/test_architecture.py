"""The import rules of issue 21, checked on the source so they survive refactors.

Why a test rather than a review habit: a wrong-way import (a lower layer reaching up into the server, web or
cli) or a cycle hidden behind a function-level import compiles and runs fine, and is only noticed when the next
change trips over it. This test parses every module under ``src/`` with ``ast`` (no import is executed, so it is
pure and takes well under a second), builds the graph from module-level *and* function-level imports, and fails on
a cycle, on guest code importing host code or a non-standard-library package, and on the forbidden edges below.

Edges that exist today and are being removed by parallel branches are listed in ``KNOWN_VIOLATIONS``: the test
passes with them and fails on any new one; the lead empties the set after merging.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "mcp_codemode"
GUEST = f"{PACKAGE}.guest"
# What the guest folder holds at its top (mcp, protocol, worker, boot): the names guest code imports them by.
GUEST_TOP_LEVEL = frozenset(
    path.stem if path.suffix == ".py" else path.name
    for path in (SRC / PACKAGE / "guest").iterdir()
    if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
)

#: Lower layers and the higher modules they must never import.
LOWER_LAYERS = (f"{PACKAGE}.upstream", f"{PACKAGE}.sandbox", GUEST)
HIGHER_MODULES = tuple(
    f"{PACKAGE}.{name}" for name in ("server", "web", "stdio", "cli", "bridge", "doctor", "sessions", "relay")
)
EXTRA_FORBIDDEN = {
    (f"{PACKAGE}.settings", f"{PACKAGE}.policy"),
    (f"{PACKAGE}.weak_setups", f"{PACKAGE}.web"),
    (f"{PACKAGE}.web", f"{PACKAGE}.server"),
    (f"{PACKAGE}.render", f"{PACKAGE}.sandbox.worker"),
    (f"{PACKAGE}.relay", f"{PACKAGE}.sandbox.frames"),
    (f"{PACKAGE}.upstream.directory", f"{PACKAGE}.policy"),
    (f"{PACKAGE}.upstream.directory", f"{PACKAGE}.settings"),
}

#: Violations present when this test was written; other issue-21 branches remove them. Remove an entry when its
#: edge is gone (the test fails on a stale entry, so the set only shrinks).
KNOWN_VIOLATIONS: set[tuple[str, str]] = set()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    """Absolute names an ``from X import Y`` may refer to (Y may be a submodule)."""
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    return [target] + [f"{target}.{alias.name}" for alias in node.names]


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(internal edges, all raw top-level imported names) per module."""
    files = {_module_name(p): p for p in (SRC / PACKAGE).rglob("*.py")}
    internal: dict[str, set[str]] = {m: set() for m in files}
    raw: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = _resolve(module, is_package, node)
                if node.level:
                    raw[module].add(PACKAGE)
                else:
                    raw[module].add((node.module or "").split(".")[0])
            for name in names:
                if isinstance(node, ast.Import):
                    raw[module].add(name.split(".")[0])
                if module.startswith(GUEST) and name.split(".")[0] in GUEST_TOP_LEVEL:
                    # Inside the sandbox the guest folder is on sys.path: ``guest/mcp`` is ``mcp`` there, and
                    # ``guest/protocol.py`` is ``protocol``.
                    name = f"{GUEST}.{name}"
                if name in files and name != module:
                    internal[module].add(name)
    return internal, raw


def _violations(internal: dict[str, set[str]]) -> set[tuple[str, str]]:
    found = set()
    for source, targets in internal.items():
        for target in targets:
            lower = source.startswith(LOWER_LAYERS)
            higher = any(target == h or target.startswith(h + ".") for h in HIGHER_MODULES)
            if (lower and higher) or (source, target) in EXTRA_FORBIDDEN:
                found.add((source, target))
    return found


def _cycles(internal: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in internal[node]:
            # A package's __init__ re-exporting its submodules is not a cycle of concern.
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in sorted(internal):
        if node not in index:
            visit(node)
    return result


def test_no_new_forbidden_import() -> None:
    internal, _ = _graph()
    new = _violations(internal) - KNOWN_VIOLATIONS
    assert not new, f"lower layer imports a higher one (move the shared piece down): {sorted(new)}"


def test_known_violations_are_still_real() -> None:
    internal, _ = _graph()
    stale = KNOWN_VIOLATIONS - _violations(internal) - _cycle_edges(internal)
    assert not stale, f"remove these fixed entries from KNOWN_VIOLATIONS: {sorted(stale)}"


def _cycle_edges(internal: dict[str, set[str]]) -> set[tuple[str, str]]:
    edges = set()
    for component in _cycles(internal):
        members = set(component)
        edges |= {(s, t) for s in component for t in internal[s] if t in members}
    return edges


def test_no_import_cycle() -> None:
    internal, _ = _graph()
    new = _cycle_edges(internal) - KNOWN_VIOLATIONS
    assert not new, f"import cycle (cut it by moving the shared piece down): {sorted(new)}"


def test_guest_imports_only_guest_code_and_the_standard_library() -> None:
    internal, raw = _graph()
    bad = set()
    for module, names in raw.items():
        if not module.startswith(GUEST):
            continue
        bad |= {(module, t) for t in internal[module] if not t.startswith(GUEST)}
        allowed = set(sys.stdlib_module_names) | GUEST_TOP_LEVEL | {"__future__", PACKAGE, ""}
        bad |= {(module, n) for n in names if n not in allowed}
    assert not bad, f"guest code must stay standard-library only and never import host code: {sorted(bad)}"


def test_the_checker_sees_a_planted_violation() -> None:
    """The rules are not vacuous: a lower-layer edge to the server is reported."""
    internal = {f"{PACKAGE}.sandbox.x": {f"{PACKAGE}.server"}, f"{PACKAGE}.server": {f"{PACKAGE}.sandbox.x"}}
    assert _violations(internal) == {(f"{PACKAGE}.sandbox.x", f"{PACKAGE}.server")}
    assert _cycles(internal) == [sorted(internal)]
