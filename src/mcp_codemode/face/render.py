"""Turning one execution into the tool result a model reads.

The model pays for every character, so the default ("compact") is plain text in reading order: what the code
printed, its last value, a ``stderr:`` block, an ``error:`` block, then what the bridge has to say (timeouts,
lost state). ``toon`` and ``json`` render the same fields as one structured document for clients that prefer
that. Whatever the mode, the text is held to a budget: the longest fields are cut in the middle first, so a
flood of output never pushes the error (usually at the end) out of sight.

``structuredContent`` carries the very same fitted fields, traceback included, plus what a program wants
(session, duration, counts). It is not a summary: some clients (pydantic-ai, whenever every content block is
text) show the model ``structuredContent`` instead of the text, and such a model must learn all the text says.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import mcp_types as types
import toon_format

from ..settings_fields import OutputMode
from .workspace_files import file_uri, link_blocks

if TYPE_CHECKING:  # the result type of Bridge.run, without loading the bridge to render one
    from ..runs.bridge import ExecutionResult

log = logging.getLogger("mcp_codemode.render")  # the name log lines have always shown
ERROR_MESSAGE_LIMIT = 1000  # the error's one-line summary for programs; the traceback carries it whole
NO_OUTPUT = "(no output)"
_MARKER_ROOM = 60  # the "[... N characters cut ...]" marker, with its line breaks


def cut_middle(text: str, keep: int) -> str:
    """Keep about ``keep`` characters of ``text``: its head and tail around a marker saying how much went."""
    if len(text) <= keep:
        return text
    keep = max(keep, 0)
    head = keep - keep // 2
    tail = keep // 2
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut:,} characters cut ...]\n{text[len(text) - tail :] if tail else ''}"


def fit_fields(fields: dict[str, str], budget: int) -> tuple[dict[str, str], int]:
    """Cut the longest fields first until all of them fit ``budget``; returns them and how much was cut.

    Finds the largest per-field length ``cap`` with ``sum(min(len, cap)) <= budget`` (water-filling), so short
    fields such as an error message stay whole while a flood of output is what gets shortened.
    """
    total = sum(len(text) for text in fields.values())
    if total <= budget:
        return dict(fields), 0
    lengths = sorted(len(text) for text in fields.values())
    low, high = 0, lengths[-1]
    while low < high:
        middle = (low + high + 1) // 2
        used = sum(min(length, middle) + (_MARKER_ROOM if length > middle else 0) for length in lengths)
        if used <= budget:
            low = middle
        else:
            high = middle - 1
    fitted = {name: cut_middle(text, low) for name, text in fields.items()}
    return fitted, sum(max(len(text) - low, 0) for text in fields.values())


def _error_text(result: ExecutionResult) -> str:
    if result.error is None:
        return ""
    return result.error.traceback.rstrip("\n") or f"{result.error.type}: {result.error.message}"


def result_fields(result: ExecutionResult) -> dict[str, str]:
    """The parts a reader needs, in reading order; empty parts are left out."""
    fields = {
        "stdout": result.stdout,
        "value": result.value or "",
        "stderr": result.stderr,
        "error": _error_text(result),
        "notice": result.notice,
    }
    return {name: text for name, text in fields.items() if text}


def _compact(fields: dict[str, str]) -> str:
    parts: list[str] = []
    for name in ("stdout", "value"):
        if name in fields:
            parts.append(fields[name].rstrip("\n"))
    for name in ("stderr", "error"):
        if name in fields:
            parts.append(f"{name}:\n{fields[name].rstrip()}")
    if "notice" in fields:
        parts.append(f"[{fields['notice']}]")
    return "\n".join(parts) if parts else NO_OUTPUT


def _document(result: ExecutionResult, fields: dict[str, str]) -> dict[str, Any]:
    document: dict[str, Any] = {"status": result.status}
    document.update(fields)
    return document


def _toon(result: ExecutionResult, fields: dict[str, str]) -> str:
    try:
        return str(toon_format.encode(_document(result, fields)))
    except Exception:  # the encoder is a library; a bug in it must not cost the caller the result
        log.exception("TOON encoding failed; falling back to JSON")
        return _json(result, fields)


def _json(result: ExecutionResult, fields: dict[str, str]) -> str:
    return json.dumps(_document(result, fields), ensure_ascii=False)


_RENDERERS: dict[OutputMode, Callable[[ExecutionResult, dict[str, str]], str]] = {
    "compact": lambda _result, fields: _compact(fields),
    "toon": _toon,
    "json": _json,
}


def structured(result: ExecutionResult, fields: dict[str, str], session: str, cut: int) -> dict[str, Any]:
    """The machine-readable twin of the text, built from the same fitted ``fields`` (see ``fit_fields``)."""
    document: dict[str, Any] = {
        "status": result.status,
        "session": session,
        "duration_ms": round(result.duration * 1000, 3),
    }
    for name in ("stdout", "value", "stderr"):
        if name in fields:
            document[name] = fields[name]
    if result.error is not None:
        traceback = fields.get("error", "")
        keep = min(ERROR_MESSAGE_LIMIT, max(len(traceback), 100))
        document["error"] = {
            "type": result.error.type,
            "message": cut_middle(result.error.message, keep),
            "traceback": traceback,
        }
    if "notice" in fields:
        document["notice"] = fields["notice"]
    if result.state_lost:
        document["state_lost"] = True
    if result.images:
        document["images"] = len(result.images)
    if result.links:
        document["files"] = [file_uri(session, link.path, link.mime) for link in result.links]
    if cut:
        document["characters_cut"] = cut
    return document


def render_result(result: ExecutionResult, mode: OutputMode, limit: int, session: str) -> types.CallToolResult:
    """The tool result for one execution: text within ``limit`` characters, then the images it showed."""
    fields, cut = fit_fields(result_fields(result), max(limit - 200, 100))
    text = _RENDERERS[mode](result, fields)
    if len(text) > limit:  # escaping in JSON/TOON can grow the text past the field budget
        cut += len(text) - limit
        text = cut_middle(text, limit - _MARKER_ROOM)
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
    content.extend(
        types.ImageContent(type="image", data=base64.b64encode(image.data).decode("ascii"), mime_type=image.mime)
        for image in result.images
    )
    content.extend(link_blocks(session, result.links))
    return types.CallToolResult(
        content=content,
        structured_content=structured(result, fields, session, cut),
        is_error=result.status != "ok",
    )


def error_result(message: str, kind: str = "InvalidArguments") -> types.CallToolResult:
    """A tool-level error (bad arguments, a busy bridge): the model reads it and can correct itself."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)],
        structured_content={"status": "refused", "error": {"type": kind, "message": message}},
        is_error=True,
    )
