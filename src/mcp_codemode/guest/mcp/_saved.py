"""Saved tools: functions a session keeps for later sessions, and their loading into a fresh namespace.

Standard library only. The bridge stores the source outside the sandbox; this module sends it (without
the ``@save_tool`` decorator, so loading does not save again) and defines what the bridge sends back,
one broken saved tool never stopping the others.
"""

from __future__ import annotations

from ._rpc import rpc

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


# ------------------------------------------------------------------------------------ saved tools


def save_tool(func: Any = None, *, name: str | None = None, description: str | None = None) -> Any:
    """Save a function so that later sessions start with it defined; use as ``save_tool(f)`` or ``@save_tool``.

    The function's source is sent to the bridge, which keeps it outside the sandbox. It should be
    self-contained: import what it needs inside, and call MCP tools through ``mcp_<alias>`` proxies.
    """
    if func is None:
        return lambda f: save_tool(f, name=name, description=description)
    import inspect
    import textwrap

    if not inspect.isfunction(func) or func.__name__ == "<lambda>":
        raise TypeError("save_tool() takes a function defined with def (or async def)")
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError) as exc:
        raise TypeError(f"the source of {func.__name__}() cannot be found ({exc}); define it in a cell") from None
    source = _without_save_decorator(source)
    saved_name = name or func.__name__
    if saved_name != func.__name__:
        source += f"\n{saved_name} = {func.__name__}\n"
    doc = description if description is not None else (inspect.getdoc(func) or "").split("\n\n")[0]
    rpc.request("save_tool", name=saved_name, source=source, description=doc)
    return func


def _without_save_decorator(source: str) -> str:
    """Drop ``@save_tool`` / ``@runtime.save_tool(...)`` decorators (however many lines): loading must not re-save."""
    import ast
    import gc

    # The collector is paused while parsing: Python before 3.11.8 keeps the AST builder's recursion count in one
    # global (gh-106905), and a finalizer run by a collection mid-parse lets another thread's parse break this one.
    enabled = gc.isenabled()
    gc.disable()
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    finally:
        if enabled:
            gc.enable()
    node = tree.body[0] if tree.body else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return source
    lines = source.splitlines(True)
    drop: set[int] = set()
    for decorator in node.decorator_list:
        if "save_tool" in (ast.get_source_segment(source, decorator) or ""):
            drop.update(range(decorator.lineno - 1, (decorator.end_lineno or decorator.lineno)))
    return "".join(line for number, line in enumerate(lines) if number not in drop)


def list_saved_tools() -> list[dict[str, Any]]:
    """The saved tools (name, description, saved_at); each one is defined in every new session."""
    result: list[dict[str, Any]] = rpc.request("saved_tools")
    return result


def delete_saved_tool(name: str) -> bool:
    """Forget a saved tool (sessions that already have it keep their copy); True if it existed."""
    return bool(rpc.request("delete_saved_tool", name=name))


def _load_saved(namespace: dict[str, Any], saved: list[Any]) -> list[str]:
    """Define saved tools in a fresh namespace; one that fails is reported and the others still load. ``linecache``
    only once there is one: it imports ``re``, about 1.4 MiB every idle sandbox would keep (docs/density.md)."""
    notes: list[str] = []
    for entry in saved:
        if not isinstance(entry, dict) or not isinstance(entry.get("source"), str):
            continue
        name = str(entry.get("name", "?"))
        filename = f"<saved tool {name}>"
        source = entry["source"]
        import linecache

        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        try:
            exec(compile(source, filename, "exec", dont_inherit=True), namespace)  # noqa: S102 - the user's own code
        except BaseException as exc:  # noqa: BLE001 - one broken saved tool must not break the session
            notes.append(
                f"saved tool {name!r} could not be loaded ({type(exc).__name__}: {exc}); fix it with "
                f"runtime.save_tool() or remove it with runtime.delete_saved_tool({name!r})"
            )
    return notes
