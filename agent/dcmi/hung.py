"""Calls that hang: each call name that did not return within its limit is skipped for a while, longer each
time it hangs again in a row, while the helper and its fault-event subscription stay up (docs/dcmi.md,
"Isolation"). The worker answers for the hung call (``collectors.dcmi.serve``); the tool serves that
reading until the call is tried again. One name's hangs never reset, or are reset by, another's answers.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from collectors.dcmi.errors import DcmiCallHung

__all__ = ["DEFAULT_HUNG_BACKOFF", "Backoff", "HungCalls", "call_limit"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Backoff:
    """Seconds to wait before the next try after ``failures`` failures in a row: base, doubling, capped."""

    base_s: float = 1.0
    factor: float = 2.0
    max_s: float = 300.0

    def delay(self, failures: int) -> float:
        if failures <= 0:
            return 0.0
        return float(min(self.max_s, self.base_s * self.factor ** (failures - 1)))


# A call that hung is skipped (the tool serves it) for 30 s, then 1, 2, 4 ... minutes, at most an hour.
DEFAULT_HUNG_BACKOFF = Backoff(base_s=30.0, max_s=3600.0)


def call_limit(deadline_s: float) -> float:
    """The seconds the worker gives a call before it answers for it (``timeout``): a little less than the
    client's own deadline, so that the worker, not the kill, ends the wait."""
    return max(0.05, deadline_s - min(1.0, 0.3 * deadline_s))


class HungCalls:
    """Per call name: hangs in a row and when it is tried again. Not thread-safe: the client's lock guards it."""

    def __init__(self, backoff: Backoff, clock: Callable[[], float]) -> None:
        self.backoff = backoff
        self._clock = clock
        self._count: Counter[str] = Counter()
        self._until: dict[str, float] = {}

    def check(self, name: str) -> None:
        """Raise ``DcmiCallHung`` (kind ``backoff``) while ``name`` is being skipped."""
        until = self._until.get(name)
        if until is not None and self._clock() < until:
            raise DcmiCallHung(name, "backoff", f"{name} hung {self._count[name]} time(s) in a row; the tool "
                                                f"serves it for {until - self._clock():.0f}s more")

    def hung(self, name: str, error: DcmiCallHung) -> None:
        self._count[name] += 1
        delay = self.backoff.delay(self._count[name])
        self._until[name] = self._clock() + delay
        log.warning("DCMI: %s (%d time(s) in a row); the tool serves it for %.0fs, the helper and its fault "
                    "events stay up", error, self._count[name], delay)

    def answered(self, name: str) -> None:
        if name in self._count:
            del self._count[name]
            self._until.pop(name, None)

    def held(self) -> dict[str, float]:
        """The calls being skipped: name -> seconds until one is tried again."""
        now = self._clock()
        return {name: until - now for name, until in self._until.items() if until > now}
