"""Local faults from a node's own judgement: the findings its agent exported (a bundle's ``/metrics``
snapshot, or Prometheus).

``faults_from_samples(node, samples, seen_at)`` takes ``(metric, labels, value)`` triples for one node and
returns a fault per ``npu_fault_since_timestamp_seconds{npu,chip,kind,status}`` series whose kind is a fault
kind (``agent.health.thresholds``), dated by the series' value (when the agent first found it). Triage judges
no reading itself: a node whose agent exports no findings shows no local fault from its series.

A Prometheus client passes each series' latest value in the window and ``seen_at`` = the sample's time;
``parse_exposition`` reads the text format of a saved ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from agent.health.status import FAIL, WARN
from agent.health.thresholds import FAULT_KINDS
from agent.health.verdict_metrics import FAULT_METRIC
from agent.triage.evidence import LocalFault

__all__ = ["FAULT_METRIC", "Sample", "faults_from_samples", "parse_exposition"]

Sample = tuple[str, Mapping[str, str], float]
_STATUS = {"fail": FAIL, "warn": WARN}


def _npu(labels: Mapping[str, str]) -> int | None:
    value = labels.get("npu", "")
    return int(value) if value.isdigit() else None


def faults_from_samples(node: str, samples: Iterable[Sample], seen_at: float | None = None) -> list[LocalFault]:
    faults: list[LocalFault] = []
    seen: set[tuple[int | None, str]] = set()
    for metric, labels, value in samples:
        kind = labels.get("kind", "")
        if metric != FAULT_METRIC or kind not in FAULT_KINDS:
            continue
        npu = _npu(labels)
        if (npu, kind) in seen:
            continue
        seen.add((npu, kind))
        status = labels.get("status", "")
        faults.append(LocalFault(node, npu, kind, f"the agent's finding ({status}: {FAULT_KINDS[kind].label})",
                                 at=value, seen_at=seen_at, source="metrics", status=_STATUS.get(status, "")))
    return faults


def parse_exposition(text: str) -> list[Sample]:
    """The samples of a Prometheus text exposition; unparsable input gives none."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: list[Sample] = []
    try:
        for family in text_string_to_metric_families(text):
            samples.extend((sample.name, dict(sample.labels), float(sample.value)) for sample in family.samples)
    except (ValueError, TypeError):
        return samples
    return samples
