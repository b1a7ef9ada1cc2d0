"""What one cell produced, as the host hands it on: the result types and the checks that build them from a frame.

Apart from the worker because these are plain data that the faces (rendering, the CLI, the bridge) consume
without needing the process handle, its asyncio machinery or the backends; and the decoding lives with the types
because it is where the guest's untrusted result frame becomes them (``cell_result``): every field is checked
here (images by type, size and magic bytes, notes and texts by type and length, the output's tails and dropped
counts by ``output.py``), and anything that fails is dropped. A cell that ended without a frame (timed out past
its interrupt, or its worker died) gets its result here too, from the output the host kept (``lost_result``).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..guest.mcp._images import IMAGE_TYPES, sniff
from ..guest.protocol import workspace_path_problem
from ..settings import Settings
from .output import BoundedStream

if TYPE_CHECKING:
    from ..guest.protocol import ResultFrame

Status = Literal["ok", "error", "timeout", "crashed"]


@dataclasses.dataclass(frozen=True)
class GuestError:
    """An exception raised by the user's code, as the guest described it."""

    type: str
    message: str
    traceback: str


@dataclasses.dataclass(frozen=True)
class OutputImage:
    """An image the code showed, checked on the host: a type we can send and bytes that really are one."""

    mime: str
    data: bytes


_MAX_NOTES = 16
_MAX_LINKS = 16
_MIME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,63}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,63}$")


@dataclasses.dataclass(frozen=True)
class FileLink:
    """A file of the session's /workspace the code handed back (``runtime.share_file``): shown as a resource link."""

    path: str  # relative to /workspace, checked by the protocol's path rule
    size: int
    mime: str
    description: str = ""


@dataclasses.dataclass(frozen=True)
class ExecutionResult:
    """What one cell produced. ``notice`` is a plain sentence for timeouts and crashes."""

    status: Status
    stdout: str = ""
    stderr: str = ""
    value: str | None = None
    error: GuestError | None = None
    duration: float = 0.0
    state_lost: bool = False
    notice: str = ""
    images: tuple[OutputImage, ...] = ()
    links: tuple[FileLink, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def cell_result(
    frame: ResultFrame,
    streams: Mapping[str, BoundedStream],
    settings: Settings,
    started: float,
    timed_out: float | None = None,
) -> ExecutionResult:
    """The result of a cell started at ``started`` (``time.monotonic``) from its result frame and the output the host
    kept of it (``streams``). ``timed_out``: it ran past that many seconds and stopped when interrupted."""
    stdout = streams["stdout"].render(frame.get("stdout_tail"), frame.get("stdout_dropped"))
    stderr = streams["stderr"].render(frame.get("stderr_tail"), frame.get("stderr_dropped"))
    error = guest_error(frame.get("error"))
    value = frame.get("value") if isinstance(frame.get("value"), str) else None
    duration = time.monotonic() - started
    images, notes = guest_images(frame.get("images"), settings), guest_notes(frame.get("notes"))
    links = guest_links(frame.get("links"))
    notice = " ".join(f"Note: {note}." for note in notes)
    if timed_out is not None:
        notice = f"Timed out after {timed_out:g} s; the code was interrupted and the session's state was kept."
        return ExecutionResult("timeout", stdout, stderr, None, error, duration, False, notice, images, links)
    status: Status = "ok" if frame.get("status") == "ok" else "error"
    return ExecutionResult(
        status, stdout, stderr, value if status == "ok" else None, error if status == "error" else None,
        duration, notice=notice, images=images, links=links,
    )  # fmt: skip


def lost_result(streams: Mapping[str, BoundedStream], started: float, status: Status, notice: str) -> ExecutionResult:
    """The result of a cell that ended without a result frame, its state lost: ``notice`` says why."""
    stdout = streams["stdout"].render("", 0)
    stderr = streams["stderr"].render("", 0)
    return ExecutionResult(status, stdout, stderr, None, None, time.monotonic() - started, True, notice)


def guest_error(raw: Any) -> GuestError | None:
    if not isinstance(raw, dict):
        return None
    fields = [raw.get(key) for key in ("type", "message", "traceback")]
    text = [value if isinstance(value, str) else "" for value in fields]
    return GuestError(text[0][:200] or "Exception", text[1], text[2])


def guest_images(raw: Any, settings: Settings) -> tuple[OutputImage, ...]:
    """Images from the guest that pass every check; anything else is dropped (the guest is not trusted)."""
    if not isinstance(raw, list):
        return ()
    kept: list[OutputImage] = []
    for item in raw[: settings.max_images]:
        if not isinstance(item, dict):
            continue
        mime, encoded = item.get("mime"), item.get("data")
        if not isinstance(mime, str) or mime not in IMAGE_TYPES or not isinstance(encoded, str):
            continue
        if len(encoded) > settings.image_limit * 4 // 3 + 8:
            continue
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            continue
        if len(data) <= settings.image_limit and sniff(data) == mime:
            kept.append(OutputImage(mime, data))
    return tuple(kept)


def guest_links(raw: Any) -> tuple[FileLink, ...]:
    """The files the guest says the code shared, each checked (path rule, size, media type); others dropped."""
    if not isinstance(raw, list):
        return ()
    kept: dict[str, FileLink] = {}
    for item in raw[:_MAX_LINKS]:
        if not isinstance(item, dict):
            continue
        path, size, mime, description = (item.get(key) for key in ("path", "size", "mime", "description"))
        if not isinstance(path, str) or workspace_path_problem(path) or type(size) is not int or size < 0:
            continue
        if not isinstance(mime, str) or not _MIME.fullmatch(mime):
            mime = "application/octet-stream"
        text = description[:500] if isinstance(description, str) else ""
        kept[path] = FileLink(path, size, mime, text)
    return tuple(kept.values())


def guest_notes(raw: Any) -> list[str]:
    if not isinstance(raw, list):
        return []
    return [note[:500] for note in raw[:_MAX_NOTES] if isinstance(note, str)]
