"""``Debounced``: an action asked for many times in a burst runs once, a moment after the first ask.

The driver's fault events come in bursts (a chip's codes, several chips at once); each asks the agent to judge
again, and one judgement after the burst has been applied answers them all. An ask that comes while the action
runs schedules one more run, so the last event is always judged.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["Debounced"]

log = logging.getLogger(__name__)


class Debounced:
    """Calling it runs ``action`` on a timer thread ``delay_s`` later, once for every ask until then."""

    def __init__(self, action: Callable[[], None], delay_s: float, name: str = "debounced") -> None:
        self._action = action
        self._delay_s = delay_s
        self._name = name
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._closed = False

    def __call__(self) -> None:
        with self._lock:
            if self._timer is not None or self._closed:
                return
            self._timer = threading.Timer(self._delay_s, self._run)
            self._timer.name = self._name
            self._timer.daemon = True
            self._timer.start()

    def _run(self) -> None:
        with self._lock:
            self._timer = None  # an ask from now on is after this run's readings: it runs again
            if self._closed:
                return
        try:
            self._action()
        except Exception:  # the scheduled run comes anyway; a failure here must not end the events thread
            log.exception("%s failed", self._name)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
