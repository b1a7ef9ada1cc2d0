"""The statements a session's cells defined things with, kept as source so a hibernated session can define them again.

A function or a class cannot be pickled by value (pickle stores where to find it, ``__main__.f``), so a session
written to disk keeps the statement that made it instead, and its new sandbox runs that statement again before it
unpickles the variables (whose instances then find their class). Only top-level statements are kept, chosen from the
cell's syntax tree: ``import``/``from ... import``, ``def``/``async def``/``class`` (with their decorators) and a
lambda assigned to a name. A definition made any other way (inside an ``if``, by ``exec``) has no statement here and
is named as lost when the session hibernates. A name defined again keeps only its latest statement, and the sources
are bounded in characters (the oldest go first, and are named as lost too), so a long session's memory stays flat.

Standard library only; ``_ast`` rather than ``ast`` as in ``worker_cells`` (the cell's tree is already parsed there).
"""

from __future__ import annotations

import _ast
import itertools

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms of start-up and is only needed by type checkers
    from typing import Any

_DEFS = (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef)
_IMPORTS = (_ast.Import, _ast.ImportFrom)


class Statement:
    """One kept statement: the names it binds, and for a definition the one name it defines."""

    __slots__ = ("kind", "names", "order", "source")

    def __init__(self, kind: str, source: str, names: tuple[str, ...], order: int) -> None:
        self.kind = kind  # "import" or "def"
        self.source = source
        self.names = names  # ("*",) for a star import
        self.order = order


class Definitions:
    """The definition and import statements of a session's cells, latest per name, bounded in characters."""

    def __init__(self, budget: int = 4_000_000) -> None:
        self.budget = budget
        self._statements: dict[str, Statement] = {}  # "def:NAME" or "import:SOURCE" -> the statement
        self._chars = 0
        self._order = itertools.count()
        self.forgotten: set[str] = set()  # names whose source went over the budget

    def note(self, tree: Any, source: str) -> None:
        """Keep the cell's top-level definitions and imports (``tree``: its module, parsed from ``source``)."""
        lines: list[str] | None = None
        for node in tree.body:
            selected = _selected(node)
            if selected is None:
                continue
            lines = lines if lines is not None else source.splitlines(True)
            kind, names = selected
            text = segment(lines, node)
            key = f"def:{names[0]}" if kind == "def" else f"import:{text}"
            old = self._statements.pop(key, None)
            if old is not None:
                self._chars -= len(old.source)
            self._statements[key] = Statement(kind, text, names, next(self._order))
            self._chars += len(text)
            self.forgotten.difference_update(names if kind == "def" else ())
        while self._chars > self.budget and self._statements:
            key = next(iter(self._statements))
            old = self._statements.pop(key)
            self._chars -= len(old.source)
            if old.kind == "def":
                self.forgotten.update(old.names)

    def statements(self) -> list[Statement]:
        """Every kept statement, in the order the cells ran them."""
        return sorted(self._statements.values(), key=lambda statement: statement.order)

    def defined(self, name: str) -> Statement | None:
        return self._statements.get(f"def:{name}")


def _selected(node: Any) -> tuple[str, tuple[str, ...]] | None:
    """What a top-level statement is kept as, and the names it binds; None when it is not kept."""
    if isinstance(node, _DEFS):
        return "def", (node.name,)
    if isinstance(node, _IMPORTS):
        names = tuple("*" if alias.name == "*" else (alias.asname or alias.name.split(".")[0]) for alias in node.names)
        return "import", names
    if (
        isinstance(node, _ast.Assign)
        and isinstance(node.value, _ast.Lambda)
        and len(node.targets) == 1
        and isinstance(node.targets[0], _ast.Name)
    ):
        return "def", (node.targets[0].id,)
    return None


def segment(lines: list[str], node: Any) -> str:
    """The source of one top-level statement, decorators included. Column offsets count UTF-8 bytes."""
    start, column = node.lineno, node.col_offset
    decorators = getattr(node, "decorator_list", None) or []
    if decorators:
        start, column = min(decorator.lineno for decorator in decorators), 0  # a decorator begins its line
    end, end_column = node.end_lineno, node.end_col_offset
    chosen = [line.encode("utf-8", "surrogatepass") for line in lines[start - 1 : end]]
    if not chosen:
        return ""
    if len(chosen) == 1:
        chosen[0] = chosen[0][column:end_column]
    else:
        chosen[0] = chosen[0][column:]
        chosen[-1] = chosen[-1][:end_column]
    return b"".join(chosen).decode("utf-8", "surrogatepass").rstrip() + "\n"
