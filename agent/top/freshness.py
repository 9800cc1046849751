"""How old the readings ``npuwatch top`` shows are, from what the agent exports about its collectors: each
reading's collector (the catalogue's owning source), when that collector last succeeded
(``npuwatch_collector_last_success_timestamp_seconds``) and how often it runs
(``npuwatch_collector_interval_seconds``).

A reading is stale when its collector is down (the agent serves its last good samples for a while) or its last
success is older than its interval, plus half an interval, its last run's duration and 2 s: a round that was due
has not landed (an npu-smi that hangs until its timeout). The half interval is the grace of a round that starts
late because the one before it in its group overran (the scheduler skips a turn, it does not queue one). This
compares times, never a reading: top still judges nothing."""

from __future__ import annotations

from collections.abc import Iterable

from agent.top.model import Collector, NodeView
from collectors.catalogue import CATALOGUE

__all__ = ["GRACE", "SLACK_S", "STALE_MARK", "TABLE_METRICS", "Freshness", "source_of"]

SLACK_S = 2.0  # the scheduler's jitter between one run's end and the next's
GRACE = 0.5  # of an interval: a round delayed by its group's previous one
STALE_MARK = "?"
# What the NPU table shows, by the metric each column reads (the header's age is the oldest of these).
TABLE_METRICS = (
    "npu_aicore_utilization_ratio", "npu_hbm_used_bytes", "npu_hbm_bandwidth_utilization_ratio",
    "npu_temperature_celsius", "npu_power_watts", "npu_chip_status", "npu_roce_link_up", "npu_processes",
    "npu_error_code_active",
)


def source_of(metric: str) -> str | None:
    """The collector that owns ``metric`` (None: not in the catalogue, or the agent's own)."""
    spec = CATALOGUE.get(metric)
    return spec.source if spec is not None and spec.source != "agent" else None


def _stale(collector: Collector, now: float) -> bool:
    if collector.last_success is None:
        return False  # it never answered: it has no reading to show
    if not collector.up:
        return True  # the last good readings, served while it fails
    if collector.interval is None:
        return False  # an agent that exports no interval: nothing to compare with
    due = collector.interval * (1.0 + GRACE) + (collector.duration or 0.0) + SLACK_S
    return now - collector.last_success > due


class Freshness:
    """The stale collectors of one view at ``now``, and the age of the readings a set of metrics shows."""

    def __init__(self, view: NodeView, now: float) -> None:
        self.now = now
        self._by_name = {c.name: c for c in view.collectors}
        self.stale = {c.name for c in view.collectors if _stale(c, now)}

    def is_stale(self, metric: str) -> bool:
        source = source_of(metric)
        return source is not None and source in self.stale

    def oldest(self, metrics: Iterable[str] = TABLE_METRICS) -> tuple[float, str] | None:
        """(age in seconds, collector) of the oldest reading behind ``metrics``; None when none has a time."""
        ages = []
        for source in {source_of(m) for m in metrics} - {None}:
            collector = self._by_name.get(source or "")
            if collector is not None and collector.last_success is not None:
                ages.append((max(0.0, self.now - collector.last_success), collector.name))
        return max(ages) if ages else None

    def stale_sources(self, metrics: Iterable[str] = TABLE_METRICS) -> list[Collector]:
        """The stale collectors behind ``metrics``, the oldest first."""
        names = {source_of(m) for m in metrics} & self.stale
        found = [self._by_name[name] for name in names if name is not None]
        return sorted(found, key=lambda c: (c.last_success or 0.0, c.name))
