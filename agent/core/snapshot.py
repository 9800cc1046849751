"""Snapshot store: the latest result of every collector, swapped atomically.

Jobs ``put`` a new snapshot; scrapes only read. A failed run keeps serving the
last good samples until they are older than ``max_age_s`` (3x the interval),
then serves nothing for that collector; ``up`` drops to 0 at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from collectors.base import Sample

__all__ = ["DOWN_REASONS", "ERROR_REASONS", "SnapshotStore", "SourceSnapshot"]

ERROR_REASONS: tuple[str, ...] = ("timeout", "exit", "parse", "missing_tool")
# Why a collector is down (npuwatch_collector_down_reason): an error reason, or one of these.
DOWN_REASONS: tuple[str, ...] = (
    *ERROR_REASONS,
    "no_data",  # nothing to collect here: the optional tool is absent, no RoCE port (not a fault)
    "no_inventory",  # a per-chip collector with no chip list: npu-smi never answered since start
    "degraded",  # it collects, but something beside it is wrong (e.g. its state file is unwritable)
    "not_run",  # registered, not run yet
)


@dataclass(frozen=True)
class SourceSnapshot:
    source: str
    interval_s: float
    max_age_s: float | None  # None: never expires (probe results carry their own timestamps)
    started_at: float | None = None
    duration_s: float | None = None
    ok: bool = False
    error: str | None = None
    error_reason: str | None = None
    no_data: bool = False
    down_reason: str | None = "not_run"  # None while up
    last_success: float | None = None
    samples: tuple[Sample, ...] = ()
    records: Any = None
    errors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ERROR_REASONS, 0))
    rejections: int = 0  # lines or values the parser refused (impossible values, malformed rows)

    def fresh(self, now: float) -> bool:
        """Whether the last good samples may still be exported."""
        if self.last_success is None:
            return False
        return self.max_age_s is None or now - self.last_success <= self.max_age_s


class SnapshotStore:
    """Thread-safe map of collector name to its latest snapshot, with a change counter."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._snapshots: dict[str, SourceSnapshot] = {}
        self._version = 0
        self._listeners: list[Callable[[SourceSnapshot], None]] = []

    def add_listener(self, listener: Callable[[SourceSnapshot], None]) -> None:
        """Called (in the collector's thread, outside the lock) with every new successful snapshot."""
        self._listeners.append(listener)

    def clear_listeners(self) -> None:
        self._listeners.clear()

    def _notify(self, source: str) -> None:
        snap = self._snapshots.get(source)
        if snap is None:
            return
        for listener in self._listeners:
            listener(snap)

    @property
    def clock(self) -> Callable[[], float]:
        return self._clock

    @property
    def version(self) -> int:
        return self._version

    def register(self, source: str, interval_s: float, max_age_s: float | None = -1.0) -> None:
        """Declare a collector so its self-metrics exist from startup (up 0, errors 0)."""
        age = 3.0 * interval_s if max_age_s == -1.0 else max_age_s
        with self._lock:
            current = self._snapshots.get(source)
            if current is None:
                self._snapshots[source] = SourceSnapshot(source, interval_s, age)
            else:
                self._snapshots[source] = replace(current, interval_s=interval_s, max_age_s=age)
            self._version += 1

    def unregister(self, source: str) -> None:
        with self._lock:
            if self._snapshots.pop(source, None) is not None:
                self._version += 1

    def _update(self, source: str, **changes: Any) -> None:
        with self._lock:
            self._snapshots[source] = replace(self._require(source), **changes)
            self._version += 1

    def put_success(
        self,
        source: str,
        samples: Sequence[Sample],
        records: Any,
        started_at: float,
        duration_s: float,
    ) -> None:
        self._update(
            source, started_at=started_at, duration_s=duration_s, ok=True, error=None, error_reason=None,
            no_data=False, down_reason=None, last_success=self._clock(), samples=tuple(samples), records=records,
        )
        self._notify(source)

    def put_failure(
        self, source: str, reason: str, error: str, started_at: float, duration_s: float
    ) -> None:
        if reason not in ERROR_REASONS:
            raise ValueError(f"unknown error reason {reason!r}")
        with self._lock:
            current = self._require(source)
            errors = {**current.errors, reason: current.errors[reason] + 1}
            self._snapshots[source] = replace(
                current, started_at=started_at, duration_s=duration_s, ok=False, error=error,
                error_reason=reason, no_data=False, down_reason=reason, errors=errors,
            )
            self._version += 1

    def put_samples(self, based_on: SourceSnapshot, samples: Sequence[Sample], records: Any) -> bool:
        """New samples and records between two runs (a DCMI fault event changed a chip's codes), made from
        ``based_on``: stored only while that is still the source's snapshot (False: a run was stored
        meanwhile; build again from the new one). The run's time, health and freshness stay the last
        run's; listeners are not told (they hear of runs)."""
        with self._lock:
            if self._snapshots.get(based_on.source) is not based_on:
                return False
            self._snapshots[based_on.source] = replace(based_on, samples=tuple(samples), records=records)
            self._version += 1
            return True

    def put_degraded(self, source: str, why: str) -> None:
        """The run worked but something is wrong beside it: up 0, no error counted, samples kept."""
        self._update(source, ok=False, error=why, error_reason=None, down_reason="degraded")

    def put_no_data(self, source: str, why: str, started_at: float, duration_s: float,
                    reason: str = "no_data") -> None:
        """Nothing collected and no error counted (tool absent, no RoCE port, no chip list): up 0."""
        if reason not in DOWN_REASONS or reason in ERROR_REASONS:
            raise ValueError(f"not a no-data reason: {reason!r}")
        self._update(
            source, started_at=started_at, duration_s=duration_s, ok=False, error=why, error_reason=None,
            no_data=True, down_reason=reason, samples=(), records=None,
        )

    def count_rejections(self, source: str, count: int) -> None:
        with self._lock:
            current = self._require(source)
            self._snapshots[source] = replace(current, rejections=current.rejections + count)
            self._version += 1

    def get(self, source: str) -> SourceSnapshot | None:
        return self._snapshots.get(source)

    def records(self, source: str) -> Any:
        """The last good records of ``source`` while fresh, else None."""
        snap = self._snapshots.get(source)
        if snap is None or not snap.fresh(self._clock()):
            return None
        return snap.records

    def all(self) -> list[SourceSnapshot]:
        with self._lock:
            return list(self._snapshots.values())

    def _require(self, source: str) -> SourceSnapshot:
        try:
            return self._snapshots[source]
        except KeyError:
            raise KeyError(f"collector {source!r} was never registered") from None
