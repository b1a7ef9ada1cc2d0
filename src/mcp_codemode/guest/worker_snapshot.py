"""A session written to bytes and brought back in a new sandbox: the guest's half of hibernation.

Only the sandbox may read a snapshot's contents. It holds pickles, and unpickling runs code: the host stores the
bytes it is handed without looking inside (``runs/snapshot_store.py`` seals them with a MAC so that no other file is
ever handed back), and only a new sandbox of the same session unpickles them, where whatever they do is contained.

What is kept, and how it comes back (in this order, at restore):

* the files of ``/workspace`` (regular files and folders; a symlink, a special file or a file of another file system
  is named as lost), as a tar archive extracted without links or paths that leave the workspace;
* modules bound to names, imported again by name;
* the import and definition statements ``worker_definitions`` kept, run again in the order the cells ran them, so
  functions and classes are the cells' own (a statement that fails is tried again after the variables: its default
  arguments or base classes may be among them);
* every other variable, pickled one by one (so one that cannot be, an open file or a generator, is named and the
  others are kept), while ``__main__`` stands for the namespace: a pickled instance names its class
  ``__main__.Point``, found again once the class statement ran.

Names bound by the bridge (``runtime``, ``mcp_servers``, the ``mcp_<alias>`` proxies) and saved tools are not kept:
the bridge gives a new sandbox those with its first call. ``runtime.hibernation(False)`` makes the guest decline:
the host then drops the session (and any snapshot) instead.

The exchange rides on FILES frames (``SNAPSHOT_OPS`` of ``protocol.py``), which the control thread passes to the main
thread, idle while no cell runs (a restore's imports and definitions run where a cell's would): the snapshot is
built once and read back in chunks; a restore is written in chunks, then applied.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gc
import importlib
import io
import os
import pickle
import stat
import sys
import tarfile
import time
import types
import zlib

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms of start-up and is only needed by type checkers
    from collections.abc import Iterator
    from typing import Any

if __package__:  # imported on the host (tests) as mcp_codemode.guest.worker_snapshot
    from .protocol import FILE_CHUNK, FILE_REPLY
else:  # in the sandbox the guest folder is on sys.path
    from protocol import FILE_CHUNK, FILE_REPLY  # type: ignore[import-not-found,no-redef]

MAGIC = b"mcp-codemode snapshot 1\n"  # then the state, pickled and compressed (zlib level 1: a few ms per MB)
MAX_LOST = 50  # names of what was not kept, at most; the rest are counted
_BRIDGE_NAMES = frozenset({"runtime", "mcp_servers"})


class _Main(types.ModuleType):
    """``__main__`` while pickling or unpickling: the session's namespace, where the cells defined their classes."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        super().__init__("__main__")
        self.__dict__["_codemode_namespace"] = namespace

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_codemode_namespace"][name]
        except KeyError:
            raise AttributeError(name) from None


@contextlib.contextmanager
def main_is(namespace: dict[str, Any]) -> Iterator[None]:
    """``__main__`` stands for the namespace, and the cyclic collector waits: unpickling a few MB makes hundreds of
    thousands of objects, each allocation counting towards a collection that finds nothing (it tripled a restore)."""
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = _Main(namespace)
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
        if saved is not None:
            sys.modules["__main__"] = saved


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:160]


class Lost:
    """What could not be kept, as the model will read it: a name and why, bounded."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.more = 0

    def add(self, text: str) -> None:
        if len(self.items) < MAX_LOST:
            self.items.append(text[:240])
        else:
            self.more += 1

    def listed(self) -> list[str]:
        return self.items + ([f"{self.more} more"] if self.more else [])


def _bridge_owned(name: str, value: Any) -> bool:
    """Names the bridge binds again in every new sandbox, and saved tools, which it loads there."""
    if name in _BRIDGE_NAMES or (name.startswith("__") and name.endswith("__")):
        return True
    if name.startswith("mcp_") and type(value).__name__ == "ServerProxy":
        return True
    code = getattr(value, "__code__", None)
    return code is not None and str(getattr(code, "co_filename", "")).startswith("<saved tool ")


def _from_cells(value: Any) -> bool:
    """A function or class a cell made (its module is the namespace's), which pickle could only name, not keep."""
    return isinstance(value, (types.FunctionType, type)) or hasattr(value, "__wrapped__")


def build(executor: Any, workspace: str, limit: int) -> tuple[bytes, dict[str, int], list[str]]:
    """The session as bytes (at most ``limit``, what does not fit is named as lost), its counts, and what is lost."""
    namespace: dict[str, Any] = executor.namespace
    lost = Lost()
    statements: list[tuple[str, str]] = []
    covered: set[str] = set()
    imported: set[str] = set()
    for statement in executor.definitions.statements():
        if statement.kind == "import":
            if "*" in statement.names or all(name in namespace for name in statement.names):
                statements.append(("import", statement.source))
                imported.update(statement.names)
        elif statement.names[0] in namespace and getattr(namespace[statement.names[0]], "__module__", "") == "__main__":
            statements.append(("def", statement.source))
            covered.add(statement.names[0])
    modules: dict[str, str] = {}
    variables: dict[str, bytes] = {}
    size = len(MAGIC) + sum(len(source) for _, source in statements) + 4096
    with main_is(namespace):
        for name, value in list(namespace.items()):
            if name in covered or _bridge_owned(name, value):
                continue
            if isinstance(value, types.ModuleType):
                modules[name] = value.__name__
                continue
            qualname = getattr(value, "__qualname__", None)
            by_reference = qualname in covered and namespace.get(qualname) is value  # ``Alias = Base``: pickled by name
            if getattr(value, "__module__", None) == "__main__" and _from_cells(value) and not by_reference:
                forgotten = name in executor.definitions.forgotten
                why = "over the budget of kept sources" if forgotten else "not made by a top-level def or class"
                lost.add(f"{name} (its source is not kept: {why})")
                continue
            try:
                data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException as exc:  # noqa: BLE001 - anything a __reduce__ raises: this one variable is lost
                if name not in imported and name != "_":
                    lost.add(f"{name} ({type(value).__name__}: {_why(exc)})")
                continue
            if size + len(data) > limit:
                lost.add(f"{name} ({type(value).__name__} of {len(data):,} bytes: over the snapshot's size limit)")
                continue
            size += len(data)
            variables[name] = data
    files, archive = _archive(workspace, limit - size, lost)
    state = {
        "statements": statements,
        "modules": modules,
        "variables": variables,
        "names": [name for name in namespace if not _bridge_owned(name, namespace[name])],
        "workspace": archive,
    }
    # Compressed because every byte crosses the frame channel twice as base64 in JSON, which costs more than zlib's
    # fastest level takes: a typical session's data (records, repeated keys) shrinks several times.
    blob = MAGIC + zlib.compress(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL), 1)
    imports = sum(kind == "import" for kind, _ in statements)
    counts = {"definitions": len(covered), "imports": imports, "variables": len(variables), "files": files}
    return blob, counts, lost.listed()


def _archive(workspace: str, room: int, lost: Lost) -> tuple[int, bytes]:
    """The workspace's folders and regular files as a tar archive of at most ``room`` bytes, and how many files."""
    buffer = io.BytesIO()
    files = 0
    try:
        device = os.stat(workspace).st_dev
    except OSError:
        return 0, b""
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for folder, folders, names in os.walk(workspace):
            for name in sorted([*folders, *names]):
                path = os.path.join(folder, name)
                relative = os.path.relpath(path, workspace)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                if info.st_dev != device:
                    lost.add(f"/workspace/{relative} (on another file system, a mount)")
                    folders[:] = [entry for entry in folders if entry != name]
                elif stat.S_ISDIR(info.st_mode):
                    tar.add(path, arcname=relative, recursive=False)
                elif not stat.S_ISREG(info.st_mode):
                    what = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a regular file"
                    lost.add(f"/workspace/{relative} ({what})")
                elif buffer.tell() + info.st_size + 1024 > room:
                    lost.add(f"/workspace/{relative} ({info.st_size:,} bytes: over the snapshot's size limit)")
                else:
                    try:
                        tar.add(path, arcname=relative, recursive=False)
                        files += 1
                    except OSError as exc:
                        lost.add(f"/workspace/{relative} ({_why(exc)})")
    return files, buffer.getvalue()


def restore(executor: Any, workspace: str, blob: bytes) -> tuple[dict[str, int], list[str]]:
    """Bring the session of ``blob`` back into this (fresh) sandbox; its counts and what could not come back."""
    if not blob.startswith(MAGIC):
        raise ValueError("not a snapshot of this release")
    state = pickle.loads(zlib.decompress(blob[len(MAGIC) :]))  # noqa: S301 - in the session's own sandbox
    namespace: dict[str, Any] = executor.namespace
    lost = Lost()
    files = _extract(workspace, state.get("workspace") or b"", lost)
    before = set(namespace)
    for name, module in state.get("modules", {}).items():
        try:
            namespace[name] = importlib.import_module(module)
        except BaseException as exc:  # noqa: BLE001 - an import that fails now is named, the rest come back
            lost.add(f"{name} (module {module}: {_why(exc)})")
    statements = list(state.get("statements", []))
    variables = dict(state.get("variables", {}))
    failed: dict[str, str] = {}
    done = {"def": 0, "import": 0}
    with main_is(namespace):
        for _ in range(3):  # a statement may need a variable, and a variable a class: a few rounds settle it
            progress = False
            for statement in list(statements):
                kind, source = statement
                try:
                    executor.define(source)
                except BaseException as exc:  # noqa: BLE001 - tried again next round, then named
                    failed[source] = _why(exc)
                    continue
                statements.remove(statement)
                done[kind] += 1
                progress = True
            for name, data in list(variables.items()):
                try:
                    namespace[name] = pickle.loads(data)  # noqa: S301 - see above
                except BaseException as exc:  # noqa: BLE001 - see above
                    failed[name] = _why(exc)
                    continue
                del variables[name]
                progress = True
            if not progress or not (statements or variables):
                break
    for _, source in statements:
        lost.add(f"{source.splitlines()[0][:80]} ({failed.get(source, 'not run')})")
    for name in variables:
        lost.add(f"{name} ({failed.get(name, 'not unpickled')})")
    kept = set(state.get("names", []))
    for name in set(namespace) - before - kept:  # a name deleted before hibernating, defined again by its statement
        if not name.startswith("__"):
            del namespace[name]
    restored = len(state.get("variables", {})) - len(variables)
    counts = {"definitions": done["def"], "imports": done["import"], "variables": restored, "files": files}
    return counts, lost.listed()


def _extract(workspace: str, archive: bytes, lost: Lost) -> int:
    """Unpack the workspace's folders and regular files; anything else in the archive, or a path that would leave
    the workspace, is skipped (the archive is this session's own, but checked all the same)."""
    if not archive:
        return 0
    files = 0
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r") as tar:
        members = []
        for member in tar.getmembers():
            name = member.name
            if name.startswith("/") or ".." in name.split("/") or not (member.isfile() or member.isdir()):
                lost.add(f"/workspace/{name[:100]} (refused in the archive)")
                continue
            members.append(member)
            files += member.isfile()
        if hasattr(tarfile, "data_filter"):
            tar.extractall(workspace, members=members, filter="data")
        else:  # Python < 3.11.4: the members were checked above
            tar.extractall(workspace, members=members)  # noqa: S202
    return files


class Hibernator:
    """Answers the host's snapshot requests (FILES frames of ``SNAPSHOT_OPS``) for one worker."""

    def __init__(self, executor: Any, workspace: str, runtime: Any) -> None:
        self.executor = executor
        self.workspace = workspace
        self.runtime = runtime
        self._out = b""  # the snapshot built, read back in chunks
        self._in = bytearray()  # the snapshot being restored, written in chunks

    def answer(self, message: dict[str, Any]) -> dict[str, Any]:
        reply: dict[str, Any] = {"type": FILE_REPLY, "id": message.get("id")}
        try:
            reply["value"] = self._serve(message)
            reply["ok"] = True
        except BaseException as exc:  # noqa: BLE001 - on the control thread: raising would end the worker
            reply.update(ok=False, error={"message": _why(exc)})
        return reply

    def _serve(self, message: dict[str, Any]) -> dict[str, Any]:
        """One request's answer; building and applying say how long they took here (wall and CPU), which the
        benchmark reads apart from the channel and the sandbox's start."""
        op = message.get("op")
        began, cpu = time.perf_counter(), time.process_time()
        answer = self._answer(op, message)
        if op in ("snapshot", "restore"):
            answer.update(ms=(time.perf_counter() - began) * 1000, cpu_ms=(time.process_time() - cpu) * 1000)
        return answer

    def _answer(self, op: object, message: dict[str, Any]) -> dict[str, Any]:
        if op == "snapshot":
            if not getattr(self.runtime._state, "hibernate", True):
                return {"declined": True}
            limit = message.get("limit")
            self._out, counts, lost = build(self.executor, self.workspace, limit if type(limit) is int else 0)
            return {"size": len(self._out), "counts": counts, "lost": lost}
        if op == "snapshot_read":
            offset = message.get("offset", 0)
            if type(offset) is not int or offset < 0:
                raise ValueError("the offset must be a whole number of bytes, at least 0")
            chunk = self._out[offset : offset + FILE_CHUNK]
            if offset + len(chunk) >= len(self._out):
                self._out = b""  # read to its end: the memory is the sandbox's
            return {"data": base64.b64encode(chunk).decode("ascii")}
        if op == "restore_put":
            data = message.get("data")
            if message.get("offset") != len(self._in) or not isinstance(data, str):
                raise ValueError("restore chunks must come in order")
            try:
                self._in += binascii.a2b_base64(data)  # the host's own encoding: not validated again (slow)
            except (binascii.Error, ValueError) as exc:
                raise ValueError("the chunk was not valid base64") from exc
            return {"size": len(self._in)}
        if op == "restore":
            blob, self._in = bytes(self._in), bytearray()
            counts, lost = restore(self.executor, self.workspace, blob)
            return {"counts": counts, "lost": lost}
        raise ValueError(f"unknown snapshot operation {op!r}")
