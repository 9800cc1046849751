"""What ``/healthz`` (liveness) and ``/readyz`` (readiness) answer.

Liveness is about the agent itself: the HTTP thread answering (it is, if the request got here)
and the scheduler still dispatching jobs, shown by a ``Heartbeat`` job the scheduler runs on a
thread of its own. A vendor tool that hangs or fails is *not* a liveness failure: restarting
the agent would not fix npu-smi, and a supervisor that restarts on it would lose the error
counters and the logs' read positions for nothing. Tool trouble shows in ``/readyz`` and in
``npuwatch_collector_up``.

Readiness: the agent has something worth scraping. It is ready once the chip list
(``npu_smi_info``, the ``npu-smi info`` table) has been read successfully at least once since
start, or straight away when that source is disabled; it stays ready when npu-smi fails later
(the failure shows per collector). The JSON body lists every collector::

    {"ready": true, "reason": "chip list read 4s ago",
     "collectors": [{"name": "npu_smi_info", "state": "up", "up": true, "reason": null,
                     "last_success_age_seconds": 4.0}, ...]}

``state`` is ``up``, ``pending`` (not run yet), ``no_data`` (nothing to collect here, e.g. no
RoCE port), ``degraded`` (the last run failed or reported a problem, its last good samples are
still served) or ``down`` (no fresh samples).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: this module imports on Python 3.9 whatever the store needs
    from agent.core.snapshot import SnapshotStore, SourceSnapshot

__all__ = ["CHIP_LIST_SOURCE", "Heartbeat", "collector_state", "liveness", "readiness"]

CHIP_LIST_SOURCE = "npu_smi_info"


class Heartbeat:
    """Beaten by a scheduler job every ``interval_s``; stale after ``stale_after`` missed beats."""

    def __init__(self, interval_s: float = 5.0, stale_after: int = 6,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self.stale_after_s = interval_s * stale_after
        self._clock = clock
        self._last: float | None = None
        self._lock = threading.Lock()

    def beat(self) -> None:
        with self._lock:
            self._last = self._clock()

    def age(self) -> float | None:
        """Seconds since the last beat; None before the first."""
        with self._lock:
            return None if self._last is None else self._clock() - self._last

    def reset(self) -> None:
        """Start counting from now (the scheduler has just started)."""
        self.beat()


def liveness(heartbeat: Heartbeat, scheduling: bool, stopping: bool) -> tuple[bool, str]:
    """(alive, reason) for ``/healthz``; ``scheduling``: a scheduler was started and not stopped."""
    if stopping:
        return False, "stopping"
    if not scheduling:
        return True, "ok (serving; no collection schedule running)"
    age = heartbeat.age()
    if age is not None and age > heartbeat.stale_after_s:
        return False, f"scheduler stalled: no heartbeat for {age:.0f}s"
    return True, "ok"


def collector_state(snap: SourceSnapshot, now: float) -> dict[str, Any]:
    if snap.started_at is None:
        state = "pending"
    elif snap.ok:
        state = "up"
    elif snap.no_data:
        state = "no_data"
    elif snap.fresh(now):
        state = "degraded"
    else:
        state = "down"
    age = None if snap.last_success is None else round(max(0.0, now - snap.last_success), 3)
    reason = snap.error if state != "up" else None
    if state == "pending":
        reason = "not run yet"
    return {"name": snap.source, "state": state, "up": snap.ok, "reason": reason,
            "last_success_age_seconds": age}


def readiness(store: SnapshotStore, chip_list_collected: bool) -> tuple[bool, dict[str, Any]]:
    """(ready, JSON body) for ``/readyz``; ``chip_list_collected``: npu_smi_info is enabled."""
    now = store.clock()
    snapshots: Iterable[SourceSnapshot] = sorted(store.all(), key=lambda snap: snap.source)
    collectors = [collector_state(snap, now) for snap in snapshots]
    chip_list = store.get(CHIP_LIST_SOURCE) if chip_list_collected else None
    if chip_list is None:
        ready, reason = True, f"{CHIP_LIST_SOURCE} is disabled: nothing to wait for"
    elif chip_list.last_success is None:
        why = chip_list.error or "not run yet"
        ready, reason = False, f"chip list not read yet ({CHIP_LIST_SOURCE}: {why})"
    else:
        ready, reason = True, f"chip list read {max(0.0, now - chip_list.last_success):.0f}s ago"
    return ready, {"ready": ready, "reason": reason, "collectors": collectors}
