"""Fault events by their serial number: the same event delivered twice is applied once, and the events a
helper restart's gap cost are counted (docs/dcmi.md, "Fault events").

A library may replay its recent events to a new subscriber (a new helper after a restart): each is then
a second copy of one the agent already applied, with the same ``event_serial_num``, code, chip,
assertion and raise time. The last ``WINDOW`` events' keys are kept (a bounded window: a replay of
older events than that is counted again, which only a replay longer than the window can cause).

A library that does not replay loses what the driver raised while no helper held the subscription. The
driver numbers its events: when the first new event after a restart carries a serial number more than
one past the last one seen, the numbers between are events that never arrived. Only a gap across a
restart is counted, as ``npuwatch_dcmi_events_missed_total``: within one helper's life the numbering
may skip events this subscription does not get. A library whose numbers start again with a new
subscriber (a number at or below the last seen, that is no replay) cannot say what it missed: nothing is
counted, and its numbers are followed from there. An event numbered 0 (a library that does not number
them) is neither deduplicated nor counted.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Optional

from agent.dcmi.event_counts import FaultEvent

__all__ = ["WINDOW", "EventSerials"]

WINDOW = 16384  # the keys of the last events seen: a few hundred bytes each at most, bounded
_Key = tuple[int, str, int, int, Optional[float]]


def _key(event: FaultEvent) -> _Key:
    return (event.serial, event.code, event.deviceid, event.assertion, event.raised_at)


class EventSerials:
    """``accept(event)``: None for a copy of an event seen already, else how many events were missed
    before it (0 mostly). Thread-safe."""

    def __init__(self, window: int = WINDOW) -> None:
        self._lock = threading.Lock()
        self._order: deque[_Key] = deque()
        self._seen: set[_Key] = set()
        self._window = window
        self._last: int | None = None  # the highest serial number of the current numbering
        self._helper: int | None = None  # the helper start the last event came through

    def accept(self, event: FaultEvent) -> int | None:
        if event.serial <= 0:  # a library that does not number its events: nothing to go by
            return 0
        key = _key(event)
        with self._lock:
            if key in self._seen:
                return None
            self._seen.add(key)
            self._order.append(key)
            if len(self._order) > self._window:
                self._seen.discard(self._order.popleft())
            missed = 0
            restarted = event.helper is not None and self._helper is not None and event.helper != self._helper
            if self._last is None or event.serial > self._last:
                if restarted and self._last is not None:
                    missed = event.serial - self._last - 1
                self._last = event.serial
            elif restarted:
                self._last = event.serial  # numbering started again with the new subscriber
            if event.helper is not None:
                self._helper = event.helper
            return missed
