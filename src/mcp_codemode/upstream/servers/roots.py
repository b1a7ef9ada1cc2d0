"""The roots the bridge gives its upstream servers when they ask (``roots/list``), and telling them when those
change.

Configured roots (``MCP_BRIDGE_ROOTS``) win; without them, the roots the bridge's own client gave (a stdio
bridge has one client, asked on its first call and again whenever it says its roots changed); without either,
none. An HTTP bridge serves many clients through the same upstream connections, so only configured roots mean
anything there. A change is announced to every connected server with ``notifications/roots/list_changed``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import mcp_types as types

logger = logging.getLogger("mcp_codemode.upstream.roots")  # the name log lines have always shown


class Roots:
    """What ``roots/list`` answers, for every upstream connection of one bridge."""

    def __init__(self, configured: Sequence[Path] = ()) -> None:
        self.configured = [
            types.Root.model_validate({"uri": path.as_uri(), "name": path.name or str(path)}) for path in configured
        ]
        self._client: list[types.Root] | None = None
        self._listeners: list[Callable[[], Awaitable[None]]] = []

    @property
    def follows_client(self) -> bool:
        """Whether the client's own roots are the ones given (none are configured)."""
        return not self.configured

    @property
    def known(self) -> bool:
        """Whether there is anything to give yet: configured roots, or the client's, once it gave them."""
        return bool(self.configured) or self._client is not None

    def current(self) -> list[types.Root]:
        return list(self.configured or self._client or [])

    async def on_list(self, context: Any) -> types.ListRootsResult:
        """An upstream server's ``roots/list`` (the SDK client's callback)."""
        return types.ListRootsResult(roots=self.current())

    def on_change(self, listener: Callable[[], Awaitable[None]]) -> None:
        self._listeners.append(listener)

    async def client_gave(self, roots: Sequence[types.Root]) -> None:
        """The client's roots, just asked for; the servers are told when that changes what they are given."""
        before = self.current()
        self._client = list(roots)
        if self.current() != before:
            for listener in tuple(self._listeners):
                try:
                    await listener()
                except Exception:  # one server that cannot be told must not keep the others from it
                    logger.debug("telling a server its roots changed failed", exc_info=True)
