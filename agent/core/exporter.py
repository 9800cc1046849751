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

__all__ = ["OPENMETRICS_CONTENT_TYPE", "TEXT_CONTENT_TYPE", "Exposition", "ExpositionCache"]

log = logging.getLogger(__name__)

TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"


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
        self._cache: dict[tuple[bool, bool], bytes] = {}

    def _current_key(self) -> tuple[int, frozenset[str]]:
        now = self._store.clock()
        fresh = frozenset(snap.source for snap in self._store.all() if snap.fresh(now))
        return self._store.version, fresh

    def render(self, openmetrics: bool = False, gzipped: bool = False) -> Exposition:
        key = self._current_key()
        content_type = OPENMETRICS_CONTENT_TYPE if openmetrics else TEXT_CONTENT_TYPE
        with self._lock:
            if key != self._key:
                self._key = key
                self._cache = {}
            body = self._cache.get((openmetrics, gzipped))
            if body is None:
                plain = self._cache.get((openmetrics, False))
                if plain is None:
                    plain = self._renderer.render(openmetrics)
                    self._cache[(openmetrics, False)] = plain
                body = gzip.compress(plain, compresslevel=5) if gzipped else plain
                self._cache[(openmetrics, gzipped)] = body
        return Exposition(body, content_type, gzipped)
