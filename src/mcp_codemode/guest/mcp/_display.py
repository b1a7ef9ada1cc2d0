"""The images one cell shows: ``runtime.show`` and a cell's last value, capped in size and number.

Standard library only. The worker binds one ``Display`` per running cell (through ``runtime``) and sends
its images with the cell's result; the scan of a last value for nested images lives here too, because
its caps are the display's.
"""

from __future__ import annotations

import sys

from ._images import Image, is_image_like, to_image

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


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

    def add_found_in(self, value: object) -> None:
        """Attach the images a cell's last value holds: itself, or inside lists, tuples, sets and dict values.

        An upstream result that mixes text and images (a list holding ``Image``s) is the common case. The walk is
        bounded (``SCAN_DEPTH`` levels, ``SCAN_ITEMS`` items), so a huge or self-referencing value costs little,
        and it only looks at an item's type, never at its attributes: an object whose ``__getattr__`` does work
        (a server proxy asks the bridge) is not woken. Images past the caps are counted in one note.
        """
        if is_image_like(value):  # the value itself (a figure, a PIL image...), judged as before
            self.add(value, strict=False, quiet=True)
            return
        found = _images_in(value)
        room = max(self.max_images - len(self.images), 0)
        for item in found[:room]:
            self.add(item, strict=False, quiet=True)
        if len(found) > room:
            extra = len(found) - room
            self.notes.append(
                f"{extra} image{'s' if extra > 1 else ''} in the value {'were' if extra > 1 else 'was'} not shown: "
                f"at most {self.max_images} images can be shown per call"
            )

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


SCAN_DEPTH = 6  # how deep a cell's last value is searched for images
SCAN_ITEMS = 10_000  # and how many of its items are looked at in all


def _nested_image_like(obj: object) -> bool:
    """``is_image_like`` judged on the type alone: items of a value may be anything, proxies included."""
    kind = type(obj)
    if issubclass(kind, Image):
        return True
    module = getattr(kind, "__module__", "") or ""
    if module.startswith("matplotlib.") and hasattr(kind, "savefig"):
        return True
    if module.startswith("PIL.") and hasattr(kind, "save") and hasattr(kind, "mode"):
        return True
    return callable(getattr(kind, "_repr_png_", None)) or callable(getattr(kind, "_repr_jpeg_", None))


def _images_in(value: object) -> list[object]:
    """The image-like items inside ``value`` (not ``value`` itself), in reading order, each object once."""
    import itertools

    found: list[object] = []
    seen: set[int] = set()
    budget = SCAN_ITEMS
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack and budget > 0:
        node, depth = stack.pop()
        if not isinstance(node, (dict, list, tuple, set, frozenset)) or id(node) in seen or depth >= SCAN_DEPTH:
            continue
        seen.add(id(node))
        items = list(itertools.islice(node.values() if isinstance(node, dict) else node, budget))
        budget -= len(items)
        children = []
        for item in items:
            if item is None or isinstance(item, (str, bytes, bytearray, int, float)):
                continue
            if _nested_image_like(item):
                if id(item) not in seen:
                    seen.add(id(item))
                    found.append(item)
            else:
                children.append((item, depth + 1))
        stack.extend(reversed(children))
    return found
