"""What is counted by looking: read when Prometheus scrapes, never kept or updated on a call's path.

Live sessions, the warm pool's level, how many sandboxes exist and each upstream server's state are already
known to the parts that own them; copying every change into a gauge would put work on every call for a number
read once in fifteen seconds. So the bridge hands a function that takes a ``Snapshot`` of them, and the collector
calls it while the registry is read. Scrapes are answered on the event loop, as every call is, so the snapshot
sees no half-made change.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .metrics import (
    BUILD_INFO,
    POOL_READY,
    POOL_TARGET,
    SANDBOXES,
    SERVER_RESTARTS,
    SERVER_STATE,
    SERVER_STATES,
    SESSIONS,
    SESSIONS_MAX,
    Family,
)

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ServerSnapshot:
    name: str  # as configured: the operator's name for it
    state: str  # one of SERVER_STATES
    restarts: int


@dataclasses.dataclass(frozen=True)
class Snapshot:
    version: str
    backend: str  # the sandbox backend's name, or "unavailable"
    sessions: int = 0
    sessions_max: int = 0
    sandboxes: int = 0
    pool_ready: int = 0
    pool_target: int = 0
    servers: tuple[ServerSnapshot, ...] = ()


def _gauge(family: Family, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(family.name, family.help, value=value)


class SnapshotCollector(Collector):
    """Turns a ``Snapshot`` into metric families each time the registry is read."""

    def __init__(self, look: Callable[[], Snapshot]) -> None:
        self.look = look

    def collect(self) -> Iterator[Metric]:
        try:
            now = self.look()
        except Exception:  # a scrape must still get the other metrics; the log says what broke
            log.exception("could not read the bridge's state for /metrics")
            return
        info = GaugeMetricFamily(BUILD_INFO.name, BUILD_INFO.help, labels=BUILD_INFO.labels)
        info.add_metric([now.version, now.backend], 1)
        yield info
        yield _gauge(SESSIONS, now.sessions)
        yield _gauge(SESSIONS_MAX, now.sessions_max)
        yield _gauge(SANDBOXES, now.sandboxes)
        yield _gauge(POOL_READY, now.pool_ready)
        yield _gauge(POOL_TARGET, now.pool_target)
        state = GaugeMetricFamily(SERVER_STATE.name, SERVER_STATE.help, labels=SERVER_STATE.labels)
        restarts = CounterMetricFamily(SERVER_RESTARTS.name, SERVER_RESTARTS.help, labels=SERVER_RESTARTS.labels)
        for server in now.servers:
            for name in SERVER_STATES:
                state.add_metric([server.name, name], 1 if server.state == name else 0)
            restarts.add_metric([server.name], server.restarts)
        yield state
        yield restarts
