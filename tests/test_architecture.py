"""The import rules of issue 21, checked on the source so they survive refactors.

Why a test rather than a review habit: a wrong-way import (a lower layer reaching up into the server, web or
cli) or a cycle hidden behind a function-level import compiles and runs fine, and is only noticed when the next
change trips over it. This test parses every module under ``src/`` with ``ast`` (no import is executed, so it is
pure and takes well under a second), builds the graph from module-level *and* function-level imports, and fails on
a cycle, on guest code importing host code or a non-standard-library package, and on the forbidden edges below.

One builder, ``imports``, reads the statements (with where each sits: module level, under an ``if``, inside a
function); every rule here reads what it returns: the layers and cycles of the whole product, the upstream
package's downward-only imports, guest/mcp's sibling imports, and that no test module imports another (the last
three were tests/test_upstream_layers.py and tests/test_guest_imports.py, merged here with every assertion kept).

The layers are the packages (``LAYERS``: guest, the core, ``runs``, ``face``, ``cli``); docs/architecture.md draws
them. The wrong-way edges issue 21 found are gone and stay in ``EXTRA_FORBIDDEN`` so they cannot come back.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.parsing import parse

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "mcp_codemode"
GUEST = f"{PACKAGE}.guest"
# What the guest folder holds at its top (mcp, protocol, worker, boot): the names guest code imports them by.
GUEST_TOP_LEVEL = frozenset(
    path.stem if path.suffix == ".py" else path.name
    for path in (SRC / PACKAGE / "guest").iterdir()
    if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
)

#: The layers, lowest first: a module may import its own layer and the ones below, never one above. The guest
#: (rank 0) has its own, stricter rule below. Rank 1 is the core every part stands on: the top-level modules
#: (settings, errors, state files, reply encoding), the policy's rules and the parts that know nothing of a run:
#: upstream, sandbox, provision. Then the run service (with the policy's guard, which enforces the rules on a run),
#: the faces over it, and the command line over everything.
LAYERS: tuple[tuple[str, ...], ...] = (
    (GUEST,),
    (),  # the core: every module not named by another layer
    (f"{PACKAGE}.runs", f"{PACKAGE}.policy.guard"),
    (f"{PACKAGE}.face",),
    (f"{PACKAGE}.cli", f"{PACKAGE}.console", f"{PACKAGE}.__main__"),  # the web console renders as the face does
)
#: Edges the layers allow but that still run the wrong way inside a layer (each one was a real edge once).
EXTRA_FORBIDDEN = {
    (f"{PACKAGE}.cli.weak_setups", f"{PACKAGE}.face.web"),  # doctor's pure rules must not drag uvicorn in
    (f"{PACKAGE}.face.web", f"{PACKAGE}.face.server"),
    (f"{PACKAGE}.upstream.tools.directory", f"{PACKAGE}.settings"),
    *{(f"{PACKAGE}.{m}", f"{PACKAGE}.sandbox.frames") for m in ("runs.relay", "runs.relay_params", "policy.guard")},
    *{
        (f"{PACKAGE}.{s}", f"{PACKAGE}.upstream.tools.directory")
        for s in ("settings", "settings_fields", "settings_file")
    },
}

#: Parts one part must never import, whatever the layers allow (each a package, with everything under it). The face
#: asks the Bridge (``runs/bridge.py``) for what it needs, and reaches the cluster's Leases through ``cluster/``,
#: never the sandboxes or the upstream servers themselves; ``cluster/`` stands below the kubernetes backend and the
#: face's replicas, which both import it.
FORBIDDEN_PARTS = {
    (f"{PACKAGE}.face", f"{PACKAGE}.upstream"),
    (f"{PACKAGE}.face", f"{PACKAGE}.sandbox"),
    (f"{PACKAGE}.console", f"{PACKAGE}.upstream.servers"),  # the console, like the face, asks the Bridge
    (f"{PACKAGE}.console", f"{PACKAGE}.upstream.tools"),
    (f"{PACKAGE}.console", f"{PACKAGE}.sandbox"),
    (f"{PACKAGE}.cluster", f"{PACKAGE}.sandbox"),
    (f"{PACKAGE}.cluster", f"{PACKAGE}.upstream"),
}


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layer_of(module: str) -> int:
    """The rank of the layer a module belongs to (1, the core, when no other layer names it)."""
    for rank, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    return 1


@dataclasses.dataclass(frozen=True)
class Import:
    """One ``import`` statement of one module, as the source says it: what every rule below reads.

    ``scope`` is the chain of enclosing statements from the module down, each as ``(node type, field)``, e.g.
    ``()`` at module level, ``(("If", "body"),)`` under a module-level ``if TYPE_CHECKING:``, and a
    ``("FunctionDef", "body")`` link for an import hidden inside a function.
    """

    module: str
    path: Path
    is_package: bool
    node: ast.Import | ast.ImportFrom
    scope: tuple[tuple[str, str], ...]

    @property
    def lineno(self) -> int:
        return self.node.lineno

    def base(self) -> str:
        """The absolute module an ``import from`` names (``.`` and ``..`` resolved); '' for a plain import."""
        node = self.node
        if not isinstance(node, ast.ImportFrom):
            return ""
        if not node.level:
            return node.module or ""
        base = self.module.split(".") if self.is_package else self.module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def targets(self) -> list[str]:
        """Absolute names the statement may refer to (in ``from X import Y``, Y may be a submodule)."""
        if isinstance(self.node, ast.Import):
            return [alias.name for alias in self.node.names]
        target = self.base()
        return [target] + [f"{target}.{alias.name}" for alias in self.node.names]

    def in_function(self) -> bool:
        return any(kind in ("FunctionDef", "AsyncFunctionDef") for kind, _ in self.scope)


def _scoped(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, tuple[tuple[str, str], ...]]]:
    """Every import of ``tree`` in ``ast.walk`` order, with the statements around it."""
    scopes: dict[int, tuple[tuple[str, str], ...]] = {id(tree): ()}
    for node in ast.walk(tree):
        for field, value in ast.iter_fields(node):
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    link = (type(node).__name__, field)
                    scopes[id(child)] = scopes[id(node)] + ((link,) if not isinstance(node, ast.Module) else ())
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, scopes[id(node)]


def python_files(root: Path, pattern: str = "**/*.py") -> list[Path]:
    """Our modules under ``root``, sorted: never what npm installed (tests/node/node_modules ships Python files)."""
    return sorted(path for path in root.glob(pattern) if "node_modules" not in path.relative_to(root).parts)


def imports(root: Path, package: str, pattern: str = "**/*.py") -> list[Import]:
    """The one graph builder: every import of every module under ``root`` (named ``package.…``), files sorted.

    Parsed once per session for each (root, package, pattern): a dozen rules read the same few hundred files, and
    parsing them again for each rule was most of this file's time.
    """
    return list(_parsed_imports(root, package, pattern))


@functools.cache
def _parsed_imports(root: Path, package: str, pattern: str) -> tuple[Import, ...]:
    found: list[Import] = []
    for path in python_files(root, pattern):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        tree = parse(path.read_text(encoding="utf-8"))
        module, is_package = ".".join(parts), path.name == "__init__.py"
        found += [Import(module, path, is_package, node, scope) for node, scope in _scoped(tree)]
    return tuple(found)


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(internal edges, all raw top-level imported names) per module of the product, from every import in it.

    A fresh copy for each caller (the rules must not share mutable sets), built from the one cached parse.
    """
    internal, raw = _built_graph()
    return {m: set(t) for m, t in internal.items()}, {m: set(n) for m, n in raw.items()}


@functools.cache
def _built_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    files = {_name(p): p for p in (SRC / PACKAGE).rglob("*.py")}
    internal: dict[str, set[str]] = {m: set() for m in files}
    raw: dict[str, set[str]] = {m: set() for m in files}
    for found in imports(SRC / PACKAGE, PACKAGE):
        module, node = found.module, found.node
        if isinstance(node, ast.ImportFrom):
            raw[module].add(PACKAGE if node.level else (node.module or "").split(".")[0])
        for name in found.targets():
            if isinstance(node, ast.Import):
                raw[module].add(name.split(".")[0])
            if module.startswith(GUEST) and name.split(".")[0] in GUEST_TOP_LEVEL:
                # Inside the sandbox the guest folder is on sys.path: ``guest/mcp`` is ``mcp`` there, and
                # ``guest/protocol.py`` is ``protocol``.
                name = f"{GUEST}.{name}"
            if name in files and name != module:
                internal[module].add(name)
    return internal, raw


def _name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _violations(internal: dict[str, set[str]]) -> set[tuple[str, str]]:
    found = set()
    for source, targets in internal.items():
        for target in targets:
            if (
                layer_of(target) > layer_of(source)
                or (source, target) in EXTRA_FORBIDDEN
                or any(_within(source, part) and _within(target, other) for part, other in FORBIDDEN_PARTS)
            ):
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


def test_no_forbidden_import() -> None:
    internal, _ = _graph()
    found = _violations(internal)
    assert not found, f"lower layer imports a higher one (move the shared piece down): {sorted(found)}"


def test_every_layer_exists() -> None:
    """A renamed package would silently empty its layer and pass every rule: each prefix must name modules."""
    internal, _ = _graph()
    empty = [p for prefixes in LAYERS for p in prefixes if not any(m == p or m.startswith(p + ".") for m in internal)]
    assert not empty, f"LAYERS names what is no longer in src/: {empty}"
    missing = {edge for edge in EXTRA_FORBIDDEN if not set(edge) <= set(internal)}
    assert not missing, f"EXTRA_FORBIDDEN names modules that no longer exist: {sorted(missing)}"
    gone = {part for edge in FORBIDDEN_PARTS for part in edge if not any(_within(m, part) for m in internal)}
    assert not gone, f"FORBIDDEN_PARTS names packages that no longer exist: {sorted(gone)}"


def _cycle_edges(internal: dict[str, set[str]]) -> set[tuple[str, str]]:
    edges = set()
    for component in _cycles(internal):
        members = set(component)
        edges |= {(s, t) for s in component for t in internal[s] if t in members}
    return edges


def test_no_import_cycle() -> None:
    internal, _ = _graph()
    found = _cycle_edges(internal)
    assert not found, f"import cycle (cut it by moving the shared piece down): {sorted(found)}"


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
    """The rules are not vacuous: a lower-layer edge to the server is reported, and so is a face reaching the CLI."""
    server, lower = f"{PACKAGE}.face.server", f"{PACKAGE}.runs.x"
    internal = {lower: {server}, server: {lower}}
    assert _violations(internal) == {(lower, server)}
    assert _cycles(internal) == [sorted(internal)]
    assert _violations({f"{PACKAGE}.runs.bridge": {f"{PACKAGE}.face.render"}}) == {
        (f"{PACKAGE}.runs.bridge", f"{PACKAGE}.face.render")
    }
    assert _violations({f"{PACKAGE}.face.web": {f"{PACKAGE}.cli.main"}}) == {
        (f"{PACKAGE}.face.web", f"{PACKAGE}.cli.main")
    }
    # The face past its door, and the cluster package reaching up into the backend that imports it:
    render, results = f"{PACKAGE}.face.render", f"{PACKAGE}.sandbox.results"
    replicas, roots = f"{PACKAGE}.face.replicas", f"{PACKAGE}.upstream.roots"
    leases, backend = f"{PACKAGE}.cluster.leases", f"{PACKAGE}.sandbox.kube.backend"
    planted = {render: {results}, replicas: {roots, f"{PACKAGE}.cluster.api"}, leases: {backend}}
    assert _violations(planted) == {(render, results), (replicas, roots), (leases, backend)}


# ------------------------------------------------------------------------------------------ the face's one door
# The face asks the Bridge for what it needs through its public methods and the attributes its class body declares
# (``settings``, ``summary``), never through what the bridge holds (``bridge.sessions``, ``bridge.files``,
# ``bridge.hub.roots`` were such reaches): how sessions, files and roots are kept may then change under it.

BRIDGE = SRC / PACKAGE / "runs" / "bridge.py"
FACE = SRC / PACKAGE / "face"
CONSOLE = SRC / PACKAGE / "console"  # the web console asks through the same door


def bridge_surface(source: str) -> set[str]:
    """What a face may use of a ``Bridge``: the public methods and properties of its class, and the attributes its
    class body declares with an annotation; not the parts ``__init__`` stores."""
    tree = parse(source)
    bridge = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Bridge")
    names = {node.name for node in bridge.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
    names |= {n.target.id for n in bridge.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    return {name for name in names if not name.startswith("_")}


def _names_bridge(annotation: ast.expr | None) -> bool:
    return annotation is not None and any(
        (isinstance(node, ast.Name) and node.id == "Bridge")
        or (isinstance(node, ast.Constant) and node.value == "Bridge")
        for node in ast.walk(annotation)
    )


def bridge_uses(source: str) -> list[tuple[int, str]]:
    """(line, attribute) of every attribute a module reads of a ``Bridge``: of a name bound to one (``bridge``, an
    argument or variable annotated ``Bridge``, a name assigned from one) or of any attribute called ``bridge``
    (``self.bridge``, ``router.bridge``)."""
    tree = parse(source)
    names = {"bridge"}
    names |= {node.arg for node in ast.walk(tree) if isinstance(node, ast.arg) and _names_bridge(node.annotation)}
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and _names_bridge(node.annotation):
            names.add(node.target.id)
        if isinstance(node, ast.Assign):
            pairs = [(target, node.value) for target in node.targets]
            for target, value in list(pairs):
                if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                    pairs += list(zip(target.elts, value.elts, strict=False))
            for target, value in pairs:
                if isinstance(target, ast.Name) and _is_bridge(value, names):
                    names.add(target.id)
    return sorted(
        (node.lineno, node.attr)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and _is_bridge(node.value, names)
    )


def _is_bridge(node: ast.expr, names: set[str]) -> bool:
    return (isinstance(node, ast.Name) and node.id in names) or (
        isinstance(node, ast.Attribute) and node.attr == "bridge"
    )


def test_the_face_uses_only_the_bridges_public_surface() -> None:
    surface = bridge_surface(BRIDGE.read_text(encoding="utf-8"))
    assert {"run", "settings", "summary"} <= surface and not {"sessions", "files", "hub"} & surface
    reaches = [
        f"{path.relative_to(SRC)}:{line}: bridge.{name}"
        for path in [*python_files(FACE), *python_files(CONSOLE)]
        for line, name in bridge_uses(path.read_text(encoding="utf-8"))
        if name not in surface
    ]
    assert not reaches, f"the face reaches past the Bridge's public methods (add one to runs/bridge.py): {reaches}"


def test_the_door_check_sees_a_face_reaching_past_the_bridge() -> None:
    planted = """
class Resources:
    def __init__(self, bridge: Bridge, router: Router) -> None:
        self.bridge = bridge
        self.router = router

    def read(self, door: Bridge | None) -> None:
        bridge, other = self.bridge, self.router
        held = self.bridge
        self.bridge.run(1)
        bridge.files.listing("k")
        held.sessions.names()
        door.hub.roots
        self.router.bridge.summary
        other.bridge.directory
"""
    surface = {"run", "summary"}
    assert [name for _, name in bridge_uses(planted) if name not in surface] == [
        "files",
        "sessions",
        "hub",
        "directory",
    ]
    assert bridge_surface("class Bridge:\n    settings: int\n    def run(self): ...\n    def _go(self): ...") == {
        "settings",
        "run",
    }


# ------------------------------------------------------------------------------------- the upstream package
# The upstream package (config discovery, the hub, the directory, the catalog) sits below the bridge: the bridge,
# the relay, the CLI and the web face build it and hand it what it needs (``directory.DirectorySettings``,
# ``gate.Gate``). An import of a higher module from here, or a function-level import that hides a circle, fails.
# Inside it, its rooms stand on each other in one order (``UPSTREAM_ROOMS``), on the shared words at its top.

UPSTREAM = SRC / PACKAGE / "upstream"
# Project modules below the upstream package: the version, the error base, private state files, the pure guest.
UPSTREAM_ALLOWED = ("mcp_codemode.upstream", "mcp_codemode.errors", "mcp_codemode.state_files", "mcp_codemode.guest")
MODULE_LEVEL = ((), (("If", "body"),))  # the module's body, or the body of an ``if`` there (TYPE_CHECKING)


def upstream_violations(package: Path) -> list[str]:
    """Every import in ``package`` that goes up or sideways out of it, and every import inside a function or class."""
    found = []
    for statement in imports(package, f"{PACKAGE}.upstream"):
        node, where = statement.node, f"{statement.path.relative_to(package)}:{statement.lineno}"
        if statement.scope not in MODULE_LEVEL:
            found.append(f"{where}: import inside a function or class")
        names = [statement.base()] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        if isinstance(node, ast.ImportFrom) and names == ["mcp_codemode"]:
            names = [f"mcp_codemode.{alias.name}" for alias in node.names]
        for name in names:
            if name.split(".")[0] != "mcp_codemode" or name == "mcp_codemode.__version__":
                continue
            if not any(name == allowed or name.startswith(allowed + ".") for allowed in UPSTREAM_ALLOWED):
                found.append(f"{where}: imports {name}, a layer above the upstream package")
    return found


def test_upstream_imports_only_downward_and_only_at_module_level() -> None:
    assert upstream_violations(UPSTREAM) == []


def test_the_check_sees_a_wrong_way_edge_and_a_hidden_circle(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "directory.py").write_text("from ...settings import Settings\n", encoding="utf-8")
    (tmp_path / "stubs.py").write_text("def f():\n    from .catalog import proxy_info\n", encoding="utf-8")
    assert upstream_violations(tmp_path) == [
        "stubs.py:2: import inside a function or class",
        "tools/directory.py:1: imports mcp_codemode.settings, a layer above the upstream package",
    ]


#: The rooms of the upstream package, lowest first: a room imports the rooms below it and the shared words at the
#: package's top (``model``, ``errors``, ``suggest``), never a room above; the shared words import no room.
UPSTREAM_ROOMS = ("config", "servers", "tools", "registry")


def _room_of(module: str) -> int | None:
    """The rank of the room ``module`` lies in (0 for the shared words at the top); None outside the package."""
    prefix = f"{PACKAGE}.upstream"
    if module != prefix and not module.startswith(prefix + "."):
        return None
    room = module[len(prefix) + 1 :].split(".")[0]
    return UPSTREAM_ROOMS.index(room) + 1 if room in UPSTREAM_ROOMS else 0


def upstream_room_violations(package: Path) -> list[str]:
    """Every import in ``package`` from one room into a room above it (or from the shared words into a room)."""
    found = []
    for statement in imports(package, f"{PACKAGE}.upstream"):
        source = _room_of(statement.module) or 0
        for target in statement.targets():
            rank = _room_of(target)
            if rank is not None and rank > source:
                where = f"{statement.path.relative_to(package)}:{statement.lineno}"
                found.append(f"{where}: imports {target}, a room above its own")
    return found


def test_upstream_rooms_import_each_other_in_one_direction() -> None:
    rooms = {path.name for path in UPSTREAM.iterdir() if (path / "__init__.py").is_file()}
    assert rooms == set(UPSTREAM_ROOMS), f"give every package in upstream/ its place in UPSTREAM_ROOMS: {rooms}"
    assert upstream_room_violations(UPSTREAM) == []


def test_the_room_check_sees_a_wrong_way_edge(tmp_path: Path) -> None:
    for room in UPSTREAM_ROOMS:
        (tmp_path / room).mkdir()
    (tmp_path / "config" / "discovery.py").write_text("from ..tools.directory import ToolDirectory\n", "utf-8")
    (tmp_path / "servers" / "hub.py").write_text(
        "from ..config.refresh import changes\nfrom .. import tools\n", "utf-8"
    )
    (tmp_path / "tools" / "directory.py").write_text("from ..servers import hub\nfrom ..model import X\n", "utf-8")
    (tmp_path / "model.py").write_text("from .servers.state import Status\n", encoding="utf-8")
    assert upstream_room_violations(tmp_path) == [
        "config/discovery.py:1: imports mcp_codemode.upstream.tools.directory, a room above its own",
        "config/discovery.py:1: imports mcp_codemode.upstream.tools.directory.ToolDirectory, a room above its own",
        "model.py:1: imports mcp_codemode.upstream.servers.state, a room above its own",
        "model.py:1: imports mcp_codemode.upstream.servers.state.Status, a room above its own",
        "servers/hub.py:2: imports mcp_codemode.upstream.tools, a room above its own",
    ]


# ---------------------------------------------------------------------------------- the in-sandbox API package
# ``guest/mcp/`` is split into small modules (images, display, results, signatures, proxies, docs, saved tools)
# under the ``runtime`` facade. A cycle between two of them used to hide behind an import inside a function; a new
# one fails here instead of surfacing as a partly initialised module inside a sandbox.

GUEST_MCP = SRC / PACKAGE / "guest" / "mcp"
GUEST_MCP_MODULES = sorted(GUEST_MCP.glob("*.py"))
# The guest folder's own top-level modules (protocol, worker, boot): in the sandbox boot.py puts that folder on
# sys.path, so `from protocol import ...` is how guest/mcp reaches the protocol module there.
GUEST_TOP_MODULES = frozenset(path.stem for path in GUEST_MCP.parent.glob("*.py")) - {"__init__"}
GUEST_MCP_ALLOWED = frozenset(sys.stdlib_module_names) | GUEST_TOP_MODULES


def _guest_mcp_imports(path: Path) -> list[Import]:
    return [found for found in imports(GUEST_MCP, f"{GUEST}.mcp", "*.py") if found.path == path]


def _sibling_imports(found: list[Import]) -> list[tuple[Import, str]]:
    """Each ``from . import x`` / ``from .x import y`` with the sibling module it names."""
    siblings: list[tuple[Import, str]] = []
    for statement in found:
        node = statement.node
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                siblings.append((statement, node.module.split(".")[0]))
            else:
                siblings.extend((statement, alias.name) for alias in node.names)
    return siblings


def _guest_mcp_graph() -> dict[str, set[str]]:
    return {path.stem: {name for _, name in _sibling_imports(_guest_mcp_imports(path))} for path in GUEST_MCP_MODULES}


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
    names = {path.stem for path in GUEST_MCP_MODULES}
    assert {"runtime", "_proxies", "_images", "_display", "_results", "_signatures", "_docs", "_saved"} <= names


@pytest.mark.parametrize("path", GUEST_MCP_MODULES, ids=[path.name for path in GUEST_MCP_MODULES])
def test_no_sibling_import_hides_inside_a_function(path: Path) -> None:
    siblings = _sibling_imports(_guest_mcp_imports(path))
    offenders = [f"line {found.lineno}: .{name}" for found, name in siblings if found.in_function()]
    assert not offenders, f"{path.name} imports a sibling inside a function (move the shared piece down): {offenders}"


def test_the_modules_import_each_other_without_a_cycle() -> None:
    graph = _guest_mcp_graph()
    assert _cycle(graph) is None, f"import cycle in guest/mcp: {' -> '.join(_cycle(graph) or [])}"


def test_the_cycle_finder_finds_a_cycle() -> None:
    found = _cycle({"runtime": {"_proxies"}, "_proxies": {"_results"}, "_results": {"runtime"}})
    assert found == ["_proxies", "_results", "runtime", "_proxies"]
    assert _cycle({"runtime": {"_proxies"}, "_proxies": set()}) is None


@pytest.mark.parametrize("path", GUEST_MCP_MODULES, ids=[path.name for path in GUEST_MCP_MODULES])
def test_only_the_standard_library_and_siblings_are_imported(path: Path) -> None:
    outside: list[str] = []
    for found in _guest_mcp_imports(path):
        node = found.node
        if isinstance(node, ast.Import):
            outside += [alias.name for alias in node.names if alias.name.split(".")[0] not in GUEST_MCP_ALLOWED]
        elif node.level == 0 and node.module and node.module.split(".")[0] not in GUEST_MCP_ALLOWED:
            outside.append(node.module)
    assert not outside, (
        f"{path.name} runs in the sandbox and may import only the stdlib and the guest's own modules: {outside}"
    )


# ----------------------------------------------------------------------------------------------- the tests
# Helpers the tests share live in tests/support/ and fixtures in conftest.py: a test module importing another
# test module (or a conftest as a module) collects that module's tests twice and ties the two files together.

TESTS = Path(__file__).resolve().parent


def imports_of_test_modules(root: Path) -> list[str]:
    """Every import, in any module under ``root`` (package ``tests``), of a ``test_*`` module or of a conftest."""
    found = imports(root, "tests")
    modules = {statement.module for statement in found} | {
        ".".join(["tests", *path.relative_to(root).with_suffix("").parts]) for path in python_files(root)
    }
    bad = []
    for statement in found:
        for name in set(statement.targets()) & modules:
            if name.rsplit(".", 1)[-1].startswith("test_") or name.rsplit(".", 1)[-1] == "conftest":
                bad.append(f"{statement.path.relative_to(root)}:{statement.lineno}: imports {name}")
    return bad


def test_no_test_module_imports_another_or_the_conftest() -> None:
    found = imports_of_test_modules(TESTS)
    assert found == [], f"move what they share into tests/support/ (fixtures into conftest.py): {found}"


def test_the_test_import_check_sees_a_test_module_and_the_conftest_imported(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text("import pytest\n", encoding="utf-8")
    (tmp_path / "test_a.py").write_text("from .test_b import helper\nfrom .support import fine\n", encoding="utf-8")
    (tmp_path / "test_b.py").write_text("from tests.conftest import sandbox_settings\n", encoding="utf-8")
    (tmp_path / "support.py").write_text("fine = 1\n", encoding="utf-8")
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "conftest.py").write_text("import pytest\n", encoding="utf-8")
    (tmp_path / "deep" / "test_c.py").write_text("from .conftest import Target\n", encoding="utf-8")
    (tmp_path / "node" / "node_modules" / "pkg").mkdir(parents=True)  # npm's Python files are not ours
    (tmp_path / "node" / "node_modules" / "pkg" / "test_x.py").write_text("from tests.test_b import y\n", "utf-8")
    assert imports_of_test_modules(tmp_path) == [
        "deep/test_c.py:1: imports tests.deep.conftest",
        "test_a.py:1: imports tests.test_b",
        "test_b.py:1: imports tests.conftest",
    ]


# ------------------------------------------------------------------------------------------------ the map
# docs/architecture.md sends a newcomer to each package's __init__ for what the package owns; an empty one (two
# were, while the page said otherwise) leaves them with 30 file names and nothing to tell them apart.


def test_every_package_says_in_its_init_what_it_owns() -> None:
    silent = []
    for init in sorted((SRC / PACKAGE).rglob("__init__.py")):
        docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        if len(docstring) < 100:
            silent.append(f"{init.relative_to(SRC)}: {len(docstring)} characters")
    assert not silent, f"say in a paragraph what each package owns (and must not know): {silent}"


def test_the_architecture_page_names_only_files_that_exist() -> None:
    """Each file docs/architecture.md names in backticks exists: a moved module must take the page with it."""
    root = SRC.parent
    page = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([A-Za-z0-9_./-]+\.(?:py|md|sh|yaml|json|toml))`", page))
    bases = (root, SRC / PACKAGE, SRC / PACKAGE / "guest")
    everywhere = {
        path.name for folder in ("src", "tests", "benchmarks", "scripts") for path in (root / folder).rglob("*")
    }
    missing = sorted(
        name
        for name in named
        if not any((base / name).exists() for base in bases) and ("/" in name or name not in everywhere)
    )
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_modules_stay_small_enough_to_read() -> None:
    """The house rule docs/architecture.md states: at most two modules over 450 lines, none over 600."""
    sizes = {
        str(path.relative_to(SRC)): len(path.read_text(encoding="utf-8").splitlines())
        for path in (SRC / PACKAGE).rglob("*.py")
    }
    over_600 = sorted(name for name, lines in sizes.items() if lines > 600)
    over_450 = sorted(f"{name} ({sizes[name]})" for name, lines in sizes.items() if lines > 450)
    assert not over_600, f"modules over 600 lines: {over_600}"
    assert len(over_450) <= 2, f"more than two modules over 450 lines: {over_450}; split one by what it owns"
