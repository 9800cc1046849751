"""The agent's short memory of each chip's readings, for the node page's charts (docs/node-page.md).

A store listener (``NodeHistory.listen``) appends one point per chip to fixed-size rings each time the chip
table (``npu_smi_info``: temperature, AI Core, HBM use) or the RoCE link state (``hccn_link``) is stored; no
other work happens per round and nothing is read from the tools for it. Memory is bounded whatever the node
does: at most ``max_chips`` chips, each with a ring of ``points`` slots per series (``array``: a float64 time
and a float32 value, 12 bytes a slot), 16 x 4 x 360 points by default, 270 KiB at most.

One slot covers ``step_s`` seconds (10 s: an hour in 360 points). Points closer together than that share the
slot, which keeps the worst value: the highest temperature, AI Core and HBM use, and a link that went down.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

from collectors.base import Sample

__all__ = ["HISTORY_SOURCES", "SERIES", "ChipSeries", "NodeHistory", "Ring"]

HOUR_S = 3600.0
# series -> (source that carries it, metric); HBM use is a ratio of used to total.
SERIES: dict[str, tuple[str, str]] = {
    "temperature": ("npu_smi_info", "npu_temperature_celsius"),
    "aicore": ("npu_smi_info", "npu_aicore_utilization_ratio"),
    "hbm": ("npu_smi_info", "npu_hbm_used_bytes"),
    "link": ("hccn_link", "npu_roce_link_up"),
}
HISTORY_SOURCES = frozenset(source for source, _metric in SERIES.values())
_WORST_IS_LOW = frozenset({"link"})  # a slot keeps the lowest link state (down), the highest of the others


class Ring:
    """The last ``size`` (time, value) points, oldest overwritten first; a point within ``step_s`` of the
    newest one merges into it. Not thread-safe on its own (``NodeHistory`` holds the lock)."""

    __slots__ = ("_count", "_head", "_low", "_step", "_times", "_values")

    def __init__(self, size: int, step_s: float, keep_low: bool = False) -> None:
        if size < 1:
            raise ValueError("a ring needs at least one slot")
        self._times = array("d", bytes(8 * size))
        self._values = array("f", bytes(4 * size))
        self._head = 0  # the next slot to write
        self._count = 0
        self._step = step_s
        self._low = keep_low

    def __len__(self) -> int:
        return self._count

    @property
    def size(self) -> int:
        return len(self._values)

    def append(self, at: float, value: float) -> None:
        size = len(self._values)
        if self._count:
            last = (self._head - 1) % size
            if 0.0 <= at - self._times[last] < self._step:
                kept = self._values[last]
                self._values[last] = min(kept, value) if self._low else max(kept, value)
                return
        self._times[self._head] = at
        self._values[self._head] = value
        self._head = (self._head + 1) % size
        self._count = min(self._count + 1, size)

    def points(self, since: float | None = None) -> list[tuple[float, float]]:
        """The stored points, oldest first; ``since``: only those at or after it."""
        size = len(self._values)
        start = (self._head - self._count) % size
        out = [(self._times[(start + i) % size], float(self._values[(start + i) % size])) for i in range(self._count)]
        return out if since is None else [point for point in out if point[0] >= since]

    def latest(self) -> float | None:
        """When the newest point was taken (None: empty)."""
        return self._times[(self._head - 1) % len(self._times)] if self._count else None


@dataclass(frozen=True)
class ChipSeries:
    """One chip's points of the last hour, oldest first: (epoch seconds, value) per series."""

    temperature: list[tuple[float, float]]
    aicore: list[tuple[float, float]]
    hbm: list[tuple[float, float]]  # used / total, 0..1
    link: list[tuple[float, float]]  # 1 up, 0 down


class NodeHistory:
    """Rings per chip and series, fed by the snapshot store; read by the node page on request."""

    def __init__(self, max_chips: int = 16, points: int = 360, step_s: float = HOUR_S / 360) -> None:
        self.max_chips = max_chips
        self.points = points
        self.step_s = step_s
        self._lock = threading.Lock()
        self._chips: dict[tuple[int, int], dict[str, Ring]] = {}

    def listen(self, snap: object) -> None:
        """A store listener: record the chip table's and the link state's readings when either is stored."""
        source = getattr(snap, "source", None)
        if source not in HISTORY_SOURCES:
            return
        at = getattr(snap, "last_success", None)
        if at is not None:
            self.record(str(source), getattr(snap, "samples", ()), float(at))

    def record(self, source: str, samples: Iterable[Sample], at: float) -> None:
        """One round of ``source``'s samples, taken at ``at``."""
        values: dict[tuple[int, int], dict[str, float]] = {}
        totals: dict[tuple[int, int], float] = {}
        wanted = {metric: name for name, (from_source, metric) in SERIES.items() if from_source == source}
        for sample in samples:
            if sample.metric not in wanted and sample.metric != "npu_hbm_total_bytes":
                continue
            key = _chip_key(sample)
            if key is None:
                continue
            if sample.metric == "npu_hbm_total_bytes":
                totals[key] = sample.value
            else:
                values.setdefault(key, {})[wanted[sample.metric]] = sample.value
        for key, series in values.items():
            used = series.pop("hbm", None)
            if used is not None and totals.get(key):
                series["hbm"] = used / totals[key]
        with self._lock:
            for key, series in values.items():
                rings = self._rings(key, at)
                if rings is None:
                    continue
                for name, value in series.items():
                    rings[name].append(at, value)

    def _rings(self, key: tuple[int, int], at: float) -> dict[str, Ring] | None:
        rings = self._chips.get(key)
        if rings is not None:
            return rings
        if len(self._chips) >= self.max_chips and not self._evict(at):
            return None
        rings = {name: Ring(self.points, self.step_s, keep_low=name in _WORST_IS_LOW) for name in SERIES}
        self._chips[key] = rings
        return rings

    def _evict(self, now: float) -> bool:
        """Make room for a new chip by forgetting one silent for an hour (a chip gone or renumbered)."""
        def newest(rings: dict[str, Ring]) -> float:
            return max((ring.latest() or 0.0) for ring in rings.values())

        key, rings = min(self._chips.items(), key=lambda item: newest(item[1]))
        if now - newest(rings) < HOUR_S:
            return False
        del self._chips[key]
        return True

    def chips(self) -> list[tuple[int, int]]:
        with self._lock:
            return sorted(self._chips)

    def series(self, npu: int, chip: int, now: float, window_s: float = HOUR_S) -> ChipSeries | None:
        """The chip's points of the last ``window_s`` before ``now`` (None: nothing recorded for it)."""
        with self._lock:
            rings = self._chips.get((npu, chip))
            if rings is None:
                return None
            since = now - window_s
            return ChipSeries(**{name: ring.points(since) for name, ring in rings.items()})

    def clear(self) -> None:
        with self._lock:
            self._chips.clear()


def _chip_key(sample: Sample) -> tuple[int, int] | None:
    labels = dict(sample.labels)
    npu, chip = labels.get("npu", ""), labels.get("chip", "0")
    if not npu.isdigit() or not chip.isdigit():
        return None
    return int(npu), int(chip)
