"""ConfigMap and Secret volumes laid out as the kubelet lays them out, in a plain directory.

The kubelet keeps a volume's files in a timestamped directory, points the hidden link ``..data`` at it, and makes
each key a link through ``..data``; an update writes a new directory and swaps ``..data`` with one rename, so no
key's own path changes. The configuration refresh must see such a swap, and a secret read through it must count as
inside its directory: the tests build the same layout here rather than a flat stand-in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def kubelet_volume(root: Path, files: dict[str, Any], version: str) -> Path:
    """``root`` holding ``files`` (a value is text as it is, anything else JSON) as version ``version`` (a name such
    as ``..2026_11_30_10_00_00.1``); called again with another version, it is the kubelet's update of the volume."""
    root.mkdir(parents=True, exist_ok=True)
    (root / version).mkdir()
    for name, content in files.items():
        data = content if isinstance(content, str | bytes) else json.dumps(content)
        (root / version / name).write_bytes(data if isinstance(data, bytes) else data.encode())
        if not (root / name).is_symlink():
            (root / name).symlink_to(Path("..data") / name)
    (root / "..data_tmp").symlink_to(version)
    (root / "..data_tmp").replace(root / "..data")  # rename(2): atomic, as the kubelet's swap is
    return root
