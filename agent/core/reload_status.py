"""Whether the last config reload worked, as Prometheus exports its own
(``prometheus_config_last_reload_successful`` and ``..._success_timestamp_seconds``).

The agent's start counts as a successful load. A SIGHUP whose config (or web config) does not load
keeps the running one and sets ``successful`` to False until a reload works.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from collectors.base import Sample

__all__ = ["ReloadStatus"]


class ReloadStatus:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.successful = True
        self.success_at = clock()

    def record(self, successful: bool) -> None:
        with self._lock:
            self.successful = successful
            if successful:
                self.success_at = self._clock()

    def samples(self) -> list[Sample]:
        with self._lock:
            return [Sample("npuwatch_config_last_reload_successful", (), 1.0 if self.successful else 0.0),
                    Sample("npuwatch_config_last_reload_success_timestamp_seconds", (), self.success_at)]
