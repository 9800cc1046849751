"""The exposition served on /metrics.

No I/O and no tool runs here: a scrape only reads the snapshot store.
``ExpositionCache`` serves bytes from ``agent.core.exposition.SnapshotRenderer`` and renders
again only after a store change or an expiry. The same families through prometheus_client are
``agent.core.prom_collector`` (the agent itself does not import prometheus_client).
"""

from __future__ import annotations

import gzip
import logging
import threading
from dataclasses import dataclass

from agent.core.exposition import SnapshotRenderer
from agent.core.snapshot import SnapshotStore
from collectors.catalogue import CATALOGUE

__all__ = ["FAILSLOW_FAMILIES", "FAILSLOW_METRICS", "OPENMETRICS_CONTENT_TYPE", "TEXT_CONTENT_TYPE", "Exposition",
           "ExpositionCache"]

log = logging.getLogger(__name__)

TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"

# What /metrics/failslow serves (docs/failslow.md#signals): the series fail-slow's rules take rates and 15-30 s
# means of, for a scrape job every 5 s beside the full one (deploy/prometheus/layouts.py).
FAILSLOW_METRICS: tuple[str, ...] = (
    "npu_aicore_utilization_ratio",
    "npu_aicore_frequency_hertz",
    "npu_roce_transmitted_bytes_total",
    "npu_roce_pfc_pause_frames_total",
    "npu_roce_errors_total",
    "npuwatch_host_cpu_utilization_ratio",
)
FAILSLOW_FAMILIES = frozenset(name.removesuffix("_total") if CATALOGUE[name].type == "counter" else name
                              for name in FAILSLOW_METRICS)


@dataclass(frozen=True)
class Exposition:
    body: bytes
    content_type: str
    gzipped: bool


class ExpositionCache:
    """Serves the rendered exposition, re-rendering only after a store change or an expiry."""

    def __init__(self, renderer: SnapshotRenderer, store: SnapshotStore) -> None:
        self._renderer = renderer
        self._store = store
        self._lock = threading.Lock()
        self._key: tuple[int, frozenset[str]] | None = None
        self._cache: dict[tuple[bool, bool, bool], bytes] = {}

    def _current_key(self) -> tuple[int, frozenset[str]]:
        now = self._store.clock()
        fresh = frozenset(snap.source for snap in self._store.all() if snap.fresh(now))
        return self._store.version, fresh

    def render(self, openmetrics: bool = False, gzipped: bool = False, failslow: bool = False) -> Exposition:
        """The whole exposition, or with ``failslow`` the ``FAILSLOW_METRICS`` alone (/metrics/failslow)."""
        key = self._current_key()
        content_type = OPENMETRICS_CONTENT_TYPE if openmetrics else TEXT_CONTENT_TYPE
        with self._lock:
            if key != self._key:
                self._key = key
                self._cache = {}
            body = self._cache.get((failslow, openmetrics, gzipped))
            if body is None:
                plain = self._cache.get((failslow, openmetrics, False))
                if plain is None:
                    plain = self._renderer.render(openmetrics, FAILSLOW_FAMILIES if failslow else None)
                    self._cache[(failslow, openmetrics, False)] = plain
                body = gzip.compress(plain, compresslevel=5) if gzipped else plain
                self._cache[(failslow, openmetrics, gzipped)] = body
        return Exposition(body, content_type, gzipped)
