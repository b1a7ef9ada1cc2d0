"""Files the bridge keeps under its state directory: the directory itself, and JSON documents written whole.

The state directory must let the sandbox's uid pass through (to reach the staged guest files) without
listing it, so whichever part creates it first makes it 0711. Documents a crash must not corrupt (saved
tools, the catalog cache) are written to a temporary file in the same folder, made private, and renamed over
the old one; on any failure the temporary file is removed and the old document stays as it was.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def make_state_dir(state_dir: Path) -> None:
    """Create the state directory if it is missing: 0711, so the sandbox uid can pass through but not list it."""
    if not state_dir.exists():
        state_dir.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(PermissionError):
            os.chmod(state_dir, 0o711)  # noqa: S103 - the sandbox uid must be able to pass through, not list


def write_json(path: Path, document: Any, *, compact: bool = False) -> Path:
    """Replace ``path`` with ``document`` as JSON, readable by this user only (0600)."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem[:40]}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            if compact:
                json.dump(document, stream, ensure_ascii=False, separators=(",", ":"))
            else:
                json.dump(document, stream)
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return path
