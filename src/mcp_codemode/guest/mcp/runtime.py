"""Helpers for code running in the sandbox: showing images and describing what the sandbox offers.

Standard library only, importable on any Python >= 3.10. The worker binds a ``Display`` for each cell;
outside a running cell (or outside the worker) the helpers say so instead of failing obscurely.
"""

from __future__ import annotations

import io
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Image", "capability_summary", "show"]

_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


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
    return callable(getattr(obj, "_repr_png_", None)) or callable(getattr(obj, "_repr_jpeg_", None))


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


def _format_bytes(size: int) -> str:
    for unit, factor in (("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:.1f} {unit}"
    return f"{size} bytes"


class Display:
    """The images of one cell, capped in size and number; the worker sends them with the cell's result."""

    def __init__(self, image_limit: int, max_images: int) -> None:
        self.image_limit = image_limit
        self.max_images = max_images
        self.images: list[Image] = []
        self.notes: list[str] = []
        self.shown: set[int] = set()

    def add(self, obj: object, strict: bool, quiet: bool = False) -> None:
        """Attach an image; ``strict`` (runtime.show) raises on a problem, automatic capture only notes it.

        ``quiet`` is for a cell's last value, which merely looked like an image: if it cannot be rendered,
        its text is shown as usual and nothing is said.
        """
        if id(obj) in self.shown:
            return
        self.shown.add(id(obj))  # tried once: a figure refused here is not tried (and noted) again later
        try:
            image = to_image(obj)
        except Exception as exc:
            if strict:
                raise
            if not quiet:
                self.notes.append(f"an image could not be shown: {exc}")
            return
        problem = self._refusal(image)
        if problem:
            if strict:
                raise ValueError(problem)
            self.notes.append(f"an image was not shown: {problem}")
            return
        self.images.append(image)

    def _refusal(self, image: Image) -> str:
        if len(image.data) > self.image_limit:
            return (
                f"the image is {_format_bytes(len(image.data))}, over the {_format_bytes(self.image_limit)} cap "
                "per image; make it smaller (lower dpi or size) or save it as JPEG"
            )
        if len(self.images) >= self.max_images:
            return f"at most {self.max_images} images can be shown per call"
        return ""

    def collect_figures(self) -> None:
        """Show matplotlib figures left open (or 'shown': the Agg backend keeps them open), then close them."""
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None:
            return
        try:
            numbers = list(pyplot.get_fignums())
            for number in numbers:
                self.add(pyplot.figure(number), strict=False)
            if numbers:
                pyplot.close("all")
        except Exception as exc:  # noqa: BLE001 - a broken pyplot must not cost the cell its result
            self.notes.append(f"open matplotlib figures could not be collected: {exc}")

    def payload(self) -> dict[str, Any]:
        import base64

        images = [{"mime": i.mime, "data": base64.b64encode(i.data).decode("ascii")} for i in self.images]
        return {"images": images, "notes": self.notes}


class _State:
    display: Display | None = None
    summary: str = ""


_state = _State()


def show(obj: object) -> None:
    """Send an image to the client with this call's result: PNG/JPEG bytes, a file path, PIL image or figure."""
    if _state.display is None:
        raise RuntimeError("runtime.show() works only while a run_python call is running")
    _state.display.add(obj, strict=True)


def capability_summary() -> str:
    """What this sandbox offers and how to use it (the same text as the bridge's capabilities resource)."""
    return _state.summary or "No capability summary was provided by the bridge."
