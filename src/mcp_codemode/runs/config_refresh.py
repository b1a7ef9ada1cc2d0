"""The configuration refresh: the server config files and secrets read again while the bridge runs.

Why: a team's servers come from a ConfigMap and their credentials from a mounted Secret, both updated in place by
the kubelet; a bridge that read them once would need a restart (and lose every session) for each new server or
rotated token. With ``MCP_BRIDGE_CONFIG_REFRESH`` set, every that many seconds the paths ``ConfigSources.watched``
names are looked at (``upstream/config/refresh.py``: what each resolves to, and the bytes of the small ones); when
something changed, discovery runs again exactly as at start, and the bridge applies the outcome
(``Bridge.reconfigure``): servers added, removed, or restarted from a changed entry (a rotated secret is a changed
entry), the others untouched.

Nothing is lost to a bad edit: a configuration that reads with a problem the running one did not have (a file
that no longer parses, a secret that is missing, an entry that broke) is not applied at all, since applying the
rest would drop every server of a file that failed to parse. The running servers stay as they are, each new
problem is logged once, as a warning saying so, and ``problems`` holds them until a later change reads cleanly.
Problems the running configuration already had (a client's file that was broken at start) do not hold it back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from ..upstream.config.discovery import ConfigSources
from ..upstream.config.refresh import Changes, Fingerprint, fingerprint
from ..upstream.model import ConfigProblem, Discovery

log = logging.getLogger("mcp_codemode.bridge")


class ConfigRefresh:
    """Looks at the config sources every ``interval`` seconds and hands a changed, clean discovery to ``apply``."""

    def __init__(
        self,
        sources: ConfigSources,
        interval: float,
        apply: Callable[[Discovery], Awaitable[Changes]],
        accepted: Iterable[ConfigProblem] = (),
    ) -> None:
        """``accepted``: the problems of the configuration the bridge runs now, which do not hold a refresh back."""
        self.sources = sources
        self.interval = interval
        self._apply = apply
        self._accepted = set(accepted)
        # None: nothing looked at yet, so the first look reads everything again (a change made between the start's
        # discovery and that look is not missed; an unchanged configuration changes nothing).
        self._seen: Fingerprint | None = None
        self.problems: tuple[ConfigProblem, ...] = ()  # why the last change on disk was not applied
        self.applied = 0  # refreshes that changed the servers

    async def run(self) -> None:
        """Look, then wait, forever (the bridge cancels it); a failed look is logged and tried again next time."""
        while True:
            try:
                await self.check()
            except Exception:  # the refresh must never take the bridge down, nor stop refreshing
                log.exception("reading the MCP server configuration again failed; the running servers are kept")
            await asyncio.sleep(self.interval)

    async def check(self) -> Changes | None:
        """One look: the changes applied, or None when nothing changed on disk or what changed was not applied."""
        seen = await asyncio.to_thread(lambda: fingerprint(self.sources.watched()))
        if seen == self._seen:
            return None
        discovery = await asyncio.to_thread(self.sources.discover)
        self._seen = seen
        new = tuple(problem for problem in discovery.problems if problem not in self._accepted)
        if new:
            if new != self.problems:
                for problem in new:
                    log.warning(
                        "MCP server config changed but cannot be used: %s. The servers keep running as configured "
                        "before; nothing changes until this is fixed",
                        problem,
                    )
            self.problems = new
            return None
        if self.problems:
            log.info("MCP server config reads cleanly again")
        self.problems = ()
        self._accepted = set(discovery.problems)
        found = await self._apply(discovery)
        if found:
            self.applied += 1
        return found
