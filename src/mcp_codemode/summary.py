"""The capability summary: one text that tells a model what the sandbox offers and how to use it.

It is served twice, identically: as the ``codemode://capabilities`` resource and, inside the sandbox, as
``runtime.capability_summary()``. It is built from the settings alone, so it costs nothing per call.
"""

from __future__ import annotations

from . import __version__
from .settings import Settings, format_size


def capability_summary(settings: Settings, backend: str, servers: tuple[str, ...] = (), problem: str = "") -> str:
    """The summary; ``problem`` (no usable sandbox) comes first, because nothing else works until it is fixed."""
    cpus = f"{settings.cpus:g} CPU" if settings.cpus else "a shared CPU"
    if problem:
        first = f"mcp-codemode {__version__}: run_python cannot run code right now. {problem}"
    else:
        first = f"mcp-codemode {__version__}: run_python runs Python 3 in a {backend} sandbox."
    lines = [
        first,
        f"- Limits: {settings.timeout} s per call by default (timeout= up to {settings.max_timeout} s); "
        f"memory {format_size(settings.memory)}; {settings.pids} processes; {cpus}.",
        "- No network. Host files, secrets and environment variables are out of reach. Writable: "
        f"/workspace ({format_size(settings.workspace_size)}, the working directory) and /tmp "
        f"({format_size(settings.tmp_size)}); both belong to the session.",
        "- Sessions: variables, imports and functions persist between calls of one session (by default each "
        'client has its own; session="name" picks another, reset=true starts it fresh). Idle sessions end '
        f"after {settings.session_idle_timeout:g} s.",
        "- Output: what the code prints, the value of a last bare expression, stderr and errors. Over "
        f"{settings.output_limit:,} characters the middle is cut. Top-level await works.",
        "- Images: `import mcp.runtime as runtime; runtime.show(obj)` sends PNG/JPEG/GIF/WebP bytes, a file "
        "path, a PIL image or a matplotlib figure; figures left open and an image as the last value are sent too "
        f"(each up to {format_size(settings.image_limit)}, {settings.max_images} per call).",
        "- MCP servers: " + (", ".join(servers) if servers else "none are configured."),
    ]
    return "\n".join(lines)
