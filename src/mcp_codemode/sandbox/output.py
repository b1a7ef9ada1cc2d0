"""The host's own bound on one stream of a cell's output (stdout or stderr), whatever the guest claims.

Apart from the worker because it is a small piece of pure logic with its own rule (half head, half tail, like
the guest's capture, and a dropped count that a lying guest cannot inflate past printing) that tests drive on
its own; the worker only feeds it output frames and asks it for the text at the end.
"""

from __future__ import annotations

from typing import Any

_MAX_DROPPED = 1 << 62  # a count the guest reports; beyond this it is a lie, and printing it must not fail


class BoundedStream:
    """Host-side bound on one stream of one cell, split like the guest's: half head, half tail."""

    def __init__(self, limit: int) -> None:
        self.limit = max(limit // 2, 1)
        self.tail_limit = max(limit - self.limit, 0)
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0

    def add(self, text: str) -> str:
        room = self.limit - self.size
        kept = text[:room] if room > 0 else ""
        self.dropped += len(text) - len(kept)
        if kept:
            self.parts.append(kept)
            self.size += len(kept)
        return kept

    def render(self, tail: Any, guest_dropped: Any) -> str:
        tail_text = tail if isinstance(tail, str) else ""
        tail_text = tail_text[len(tail_text) - self.tail_limit :] if self.tail_limit else ""
        claimed = guest_dropped if type(guest_dropped) is int and guest_dropped > 0 else 0
        dropped = self.dropped + min(claimed, _MAX_DROPPED)
        head = "".join(self.parts)
        if dropped:
            return f"{head}\n[... {dropped} characters of output dropped ...]\n{tail_text}"
        return head + tail_text
