"""Saved tools: functions sandboxed code asked to keep, stored on the host and defined in later sessions.

The source travels over the frame channel and is written here, outside the sandbox, never through a
writable shared mount: a sandbox cannot plant files that another one would then run. Tools are kept per
owner (the HTTP principal, or "local"), so one client's saved code never runs in another client's
sessions. Files are written atomically; a file that cannot be read is reported, not fatal.

The relay asks a ``SavedTools`` store: these files (``FileSavedTools``, on this machine), or ConfigMaps that every
face replica reads (``saved_tools_cluster.py``); both check a tool the same way (``new_tool``) and read through on
every load, so a tool saved or deleted on one replica is what the next new session on any replica gets.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import keyword
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from ..errors import CodemodeError
from ..state_files import make_private_dir, write_json

MAX_SOURCE_CHARS = 100_000
MAX_DESCRIPTION_CHARS = 2_000
MAX_TOOLS_PER_OWNER = 200
MAX_NAME_CHARS = 64


class SavedToolProblem(CodemodeError, ValueError):
    """A save or delete the store refuses; the message says what to change."""


class SavedToolsUnavailable(CodemodeError):
    """The store of saved tools could not be reached; the message is for sandboxed code (the log has the cause)."""


@dataclasses.dataclass(frozen=True)
class SavedTool:
    name: str
    source: str
    description: str
    saved_at: float


class SavedTools(Protocol):
    """Where the relay keeps saved tools, per owner."""

    async def save(self, owner: str, name: Any, source: Any, description: Any = "") -> SavedTool: ...

    async def load(self, owner: str) -> tuple[list[SavedTool], list[str]]:
        """Every readable saved tool of ``owner``, and a note for each one that could not be read."""
        ...

    async def delete(self, owner: str, name: Any) -> bool: ...


def new_tool(name: Any, source: Any, description: Any) -> SavedTool:
    """The tool a save asks for, checked (name, source size), or the problem to tell the code."""
    name = check_name(name)
    if not isinstance(source, str) or not source.strip():
        raise SavedToolProblem("save_tool() needs the function's source text")
    if len(source) > MAX_SOURCE_CHARS:
        raise SavedToolProblem(f"the source is {len(source):,} characters; at most {MAX_SOURCE_CHARS:,} are kept")
    text = description if isinstance(description, str) else ""
    return SavedTool(name, source, text[:MAX_DESCRIPTION_CHARS], time.time())


def too_many() -> SavedToolProblem:
    return SavedToolProblem(
        f"{MAX_TOOLS_PER_OWNER} tools are saved already; delete some with runtime.delete_saved_tool(name)"
    )


class SavedToolStore:
    """A directory per owner under ``root``, one JSON file per tool."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _dir(self, owner: str) -> Path:
        return self.root / hashlib.sha256(owner.encode()).hexdigest()[:16]

    def save(self, owner: str, name: Any, source: Any, description: Any = "") -> SavedTool:
        tool = new_tool(name, source, description)
        folder = self._dir(owner)
        target = folder / f"{tool.name}.json"
        if not target.exists() and len(self._files(folder)) >= MAX_TOOLS_PER_OWNER:
            raise too_many()
        make_private_dir(self.root)
        make_private_dir(folder)
        write_json(target, dataclasses.asdict(tool))
        return tool

    def load(self, owner: str) -> tuple[list[SavedTool], list[str]]:
        """Every readable saved tool of ``owner``, and a note for each file that could not be read."""
        tools: list[SavedTool] = []
        problems: list[str] = []
        for path in self._files(self._dir(owner)):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                tools.append(SavedTool(str(data["name"]), str(data["source"]), str(data.get("description", "")),
                                       float(data.get("saved_at", 0))))  # fmt: skip
            except (OSError, ValueError, KeyError, TypeError) as exc:
                problems.append(
                    f"saved tool {path.stem!r} could not be read ({type(exc).__name__}); save it again with "
                    f"runtime.save_tool() or remove it with runtime.delete_saved_tool({path.stem!r})"
                )
        return tools, problems

    def delete(self, owner: str, name: Any) -> bool:
        path = self._dir(owner) / f"{check_name(name)}.json"
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        return True

    @staticmethod
    def _files(folder: Path) -> list[Path]:
        try:
            return sorted(p for p in folder.glob("*.json") if not p.name.startswith("."))
        except OSError:
            return []


class FileSavedTools:
    """``SavedTools`` on the files of a ``SavedToolStore``, read and written in a thread (the event loop serves
    every session meanwhile)."""

    def __init__(self, files: SavedToolStore) -> None:
        self.files = files

    async def save(self, owner: str, name: Any, source: Any, description: Any = "") -> SavedTool:
        return await asyncio.to_thread(self.files.save, owner, name, source, description)

    async def load(self, owner: str) -> tuple[list[SavedTool], list[str]]:
        return await asyncio.to_thread(self.files.load, owner)

    async def delete(self, owner: str, name: Any) -> bool:
        return await asyncio.to_thread(self.files.delete, owner, name)


def check_name(name: Any) -> str:
    if (
        not isinstance(name, str)
        or not name.isidentifier()
        or keyword.iskeyword(name)
        or len(name) > MAX_NAME_CHARS
        or name.startswith("_")
    ):
        raise SavedToolProblem(
            f"{name!r:.80} is not a usable tool name: use a Python identifier of up to {MAX_NAME_CHARS} characters "
            "that does not start with '_' (for example 'summarize_folder')"
        )
    return name


def saved_tool_requests(store: SavedTools) -> dict[str, Callable[[str, Any], Awaitable[Any]]]:
    """The relay's handlers of sandboxed code's saved-tool requests (``save_tool``, ``saved_tools``,
    ``delete_saved_tool``): each an owner and a call frame in, the reply's value out."""

    async def save(owner: str, message: Any) -> dict[str, Any]:
        tool = await store.save(owner, message.get("name"), message.get("source"), message.get("description", ""))
        return {"name": tool.name, "saved": True}

    async def listed(owner: str, message: Any) -> list[dict[str, Any]]:
        tools, problems = await store.load(owner)
        found: list[dict[str, Any]] = [
            {"name": tool.name, "description": tool.description, "saved_at": tool.saved_at} for tool in tools
        ]
        return found + [{"problem": problem} for problem in problems]

    async def delete(owner: str, message: Any) -> bool:
        return await store.delete(owner, message.get("name"))

    return {"save_tool": save, "saved_tools": listed, "delete_saved_tool": delete}
