"""Image bytes recognised by their first bytes, and the objects that can become one.

Standard library only. This is the bottom of the in-sandbox API: the result conversion (a tool's image
content becomes an ``Image``), the per-cell display and ``runtime.Image`` itself all need it, so it lives
apart from each of them and imports none of them (it used to sit in ``runtime``, which made the proxies
import ``runtime`` back from inside a function).
"""

from __future__ import annotations

import io
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
# Every type ``sniff`` recognises: also what the host accepts from a guest (sandbox/results.py checks with sniff).
IMAGE_TYPES = frozenset({mime for _, mime in _SIGNATURES} | {"image/webp"})


def sniff(data: bytes) -> str | None:
    """The image type of ``data`` from its first bytes, or None when it is not an image we can send."""
    for magic, mime in _SIGNATURES:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


class Image:
    """Image bytes with their type; returning one as a cell's last value shows it to the client."""

    def __init__(self, data: bytes | bytearray | memoryview, mime: str | None = None) -> None:
        raw = bytes(data)
        found = sniff(raw)
        if found is None:
            raise ValueError("these bytes are not a PNG, JPEG, GIF or WebP image")
        if mime is not None and mime != found:
            raise ValueError(f"the bytes are {found}, not {mime}")
        self.data = raw
        self.mime = found

    def __repr__(self) -> str:
        return f"<Image {self.mime}, {len(self.data)} bytes>"

    def _repr_png_(self) -> bytes | None:
        return self.data if self.mime == "image/png" else None


def is_image_like(obj: object) -> bool:
    """Whether a cell's last value should be shown as an image rather than only as text."""
    if isinstance(obj, Image):
        return True
    kind = type(obj)
    module = getattr(kind, "__module__", "") or ""
    if module.startswith("matplotlib.") and hasattr(obj, "savefig"):
        return True
    if module.startswith("PIL.") and hasattr(obj, "save") and hasattr(obj, "mode"):
        return True
    # Looked up on the type, as for the items of a value: an instance's __getattr__ is user code.
    return callable(getattr(kind, "_repr_png_", None)) or callable(getattr(kind, "_repr_jpeg_", None))


def to_image(obj: object) -> Image:
    """Turn what user code wants to show into image bytes, or explain what it can pass instead."""
    if isinstance(obj, Image):
        return obj
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return Image(obj)
    if isinstance(obj, (str, os.PathLike)):
        with open(obj, "rb") as handle:
            return Image(handle.read())
    module = getattr(type(obj), "__module__", "") or ""
    savefig = getattr(obj, "savefig", None)
    if callable(savefig):
        buffer = io.BytesIO()
        savefig(buffer, format="png")
        return Image(buffer.getvalue())
    if module.startswith("PIL.") and callable(getattr(obj, "save", None)):
        return Image(_pil_png(obj))
    for method in ("_repr_png_", "_repr_jpeg_"):
        render = getattr(obj, method, None)
        if callable(render):
            data = render()
            if isinstance(data, (bytes, bytearray)):
                return Image(data)
    raise TypeError(
        f"cannot show a {type(obj).__name__}: pass PNG/JPEG/GIF/WebP bytes, a file path, "
        "a PIL image or a matplotlib figure"
    )


def _pil_png(picture: Any) -> bytes:
    buffer = io.BytesIO()
    try:
        picture.save(buffer, format="PNG")
    except (OSError, ValueError):  # modes PNG cannot hold (CMYK, ...) become RGB
        buffer = io.BytesIO()
        picture.convert("RGB").save(buffer, format="PNG")
    return buffer.getvalue()
