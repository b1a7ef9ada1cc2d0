"""Writing a JSON file so that a reader sees the old document or the new one, never half of either.

The bridge keeps state a crash must not corrupt (saved tools, the catalog cache): each document is written to
a temporary file in the same folder, made private, and renamed over the old one; on any failure the temporary
file is removed and the old document stays as it was.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


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
