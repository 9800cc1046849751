"""The snapshot store as a prometheus_client Collector, for code that embeds npuwatch in a registry of its own.

It yields the families ``agent.core.exporter`` serves on /metrics; the tests use it as the reference the fast
renderer must match. The agent does not import it (nor prometheus_client).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from agent.core.exposition import SnapshotRenderer, group_by_metric, self_metric_samples, valid_rows
from agent.core.snapshot import SnapshotStore, SourceSnapshot
from collectors.base import Sample
from collectors.catalogue import CATALOGUE, MetricSpec, family_of

__all__ = ["NpuwatchCollector"]

log = logging.getLogger(__name__)


class NpuwatchCollector:
    """prometheus_client collector that renders the snapshot store."""

    def __init__(
        self,
        store: SnapshotStore,
        const_labels: Mapping[str, str] | None = None,
        expected_chips: int = 0,
    ) -> None:
        self._store = store
        self._const = tuple((const_labels or {}).items())
        self._const_names = tuple(name for name, _ in self._const)
        self._const_values = tuple(value for _, value in self._const)
        self._expected_chips = expected_chips
        self._unknown_logged: set[str] = set()

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        now = self._store.clock()
        snapshots = sorted(self._store.all(), key=lambda snap: snap.source)
        grouped: dict[str, list[Sample]] = {}
        for snap in snapshots:
            if not snap.fresh(now):
                continue
            for sample in snap.samples:
                grouped.setdefault(family_of(sample.metric) or sample.metric, []).append(sample)
        for name in sorted(grouped):
            family = self._family(name, grouped[name])
            if family is not None:
                yield family
        yield from self._self_metrics(snapshots)

    def _new_family(self, spec: MetricSpec) -> Metric:
        labels = [*spec.labels, *self._const_names]
        if spec.type == "counter":
            return CounterMetricFamily(spec.name.removesuffix("_total"), spec.help, labels=labels)
        return GaugeMetricFamily(spec.name, spec.help, labels=labels)

    def _family(self, name: str, samples: Iterable[Sample]) -> Metric | None:
        spec = CATALOGUE.get(name)
        if spec is None:
            if name not in self._unknown_logged:
                self._unknown_logged.add(name)
                log.error("dropping metric %s: not in the catalogue", name)
            return None
        if spec.type == "histogram":
            return self._histogram(spec, samples)
        family = self._new_family(spec)
        for values, value in valid_rows(spec, samples):
            family.add_metric([*values, *self._const_values], value)  # type: ignore[attr-defined]
        return family

    def _histogram(self, spec: MetricSpec, samples: Iterable[Sample]) -> Metric:
        family = HistogramMetricFamily(spec.name, spec.help, labels=[*spec.labels, *self._const_names])
        series: dict[tuple[str, ...], dict[str, Any]] = {}
        for sample in samples:
            labels = dict(sample.labels)
            key = tuple(labels.get(name, "") for name in spec.labels)
            entry = series.setdefault(key, {"buckets": [], "sum": 0.0})
            if sample.metric.endswith("_bucket"):
                entry["buckets"].append((labels.get("le", "+Inf"), sample.value))
            elif sample.metric.endswith("_sum"):
                entry["sum"] = sample.value
        for key, entry in series.items():
            family.add_metric([*key, *self._const_values], entry["buckets"], entry["sum"])
        return family

    def _self_metrics(self, snapshots: list[SourceSnapshot]) -> Iterator[Metric]:
        grouped = group_by_metric(self_metric_samples(snapshots, self._expected_chips))
        for name in SnapshotRenderer.SELF_METRICS:
            family = self._new_family(CATALOGUE[name])
            for values, value in valid_rows(CATALOGUE[name], grouped.get(name, [])):
                family.add_metric([*values, *self._const_values], value)  # type: ignore[attr-defined]
            yield family
