"""Local faults from npuwatch's own metric series (a bundle's ``/metrics`` snapshot, or Prometheus).

``faults_from_samples(node, samples, seen_at)`` takes ``(metric, labels, value)`` triples of the
catalogue's series (README "Metric reference") for one node and returns the faults they show:

=====================================================  =========================================
series                                                 fault
=====================================================  =========================================
``npu_roce_link_up == 0``                              link_down (dated by
                                                       ``npu_roce_link_last_change_timestamp_seconds``)
``npu_optical_signal_lost == 1``                       optics_dark
``npu_roce_net_health_state{state!="success"} == 1``   net_health (``init``: net_health_init)
``npu_health_state{state}`` / ``npu_healthy == 0``     chip_unhealthy (warning: chip_warning)
``npu_fault_handling{handling} == 1``                  the level's kind (``agent.health.faults.LEVEL_KINDS``:
                                                       chip_fault_isolate, _reset, _drain, chip_warning)
``npu_hbm_ecc_current_errors{bit="double"} > 0``       hbm_dbe
``npu_probe_gemm_correct == 0``                        probe_failed
``npu_probe_gemm_efficiency_ratio < 0.8``              probe_slow
=====================================================  =========================================

A Prometheus client passes each series' latest value in the window and ``seen_at`` = the
sample's time; ``parse_exposition`` reads the text format of a saved ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from agent.health.faults import LEVEL_KINDS
from agent.health.probe_limits import REFERENCE_FAIL
from agent.triage.evidence import LocalFault

__all__ = ["PROBE_SLOW_RATIO", "Sample", "faults_from_samples", "parse_exposition"]

PROBE_SLOW_RATIO = REFERENCE_FAIL.value  # probes.gemm.min_efficiency's default

Sample = tuple[str, Mapping[str, str], float]


def _npu(labels: Mapping[str, str]) -> int | None:
    value = labels.get("npu", "")
    return int(value) if value.isdigit() else None


def faults_from_samples(node: str, samples: Iterable[Sample], seen_at: float | None = None) -> list[LocalFault]:
    rows = list(samples)
    changed = {_npu(labels): value for metric, labels, value in rows
               if metric == "npu_roce_link_last_change_timestamp_seconds"}
    faults: list[LocalFault] = []
    seen: set[tuple[int | None, str]] = set()

    def add(npu: int | None, kind: str, detail: str, at: float | None = None) -> None:
        if (npu, kind) not in seen:
            seen.add((npu, kind))
            faults.append(LocalFault(node, npu, kind, detail, at=at, seen_at=seen_at, source="metrics"))

    for metric, labels, value in rows:
        npu = _npu(labels)
        if metric == "npu_roce_link_up" and value == 0:
            add(npu, "link_down", "npu_roce_link_up 0", changed.get(npu))
        elif metric == "npu_optical_signal_lost" and value == 1:
            add(npu, "optics_dark", "npu_optical_signal_lost 1")
        elif metric == "npu_roce_net_health_state" and value == 1 and labels.get("state", "success") != "success":
            state = labels.get("state", "")
            add(npu, "net_health_init" if state == "init" else "net_health", f"net_health state {state}")
        elif metric == "npu_health_state" and value == 1 and labels.get("state", "ok") != "ok":
            state = labels.get("state", "")
            add(npu, "chip_warning" if state == "warning" else "chip_unhealthy", f"npu-smi health {state}")
        elif metric == "npu_fault_handling" and value == 1 and LEVEL_KINDS.get(labels.get("handling", "")):
            handling = labels.get("handling", "")
            add(npu, LEVEL_KINDS[handling] or "", f"npu_fault_handling {handling} (the agent's handling level)")
        elif metric == "npu_hbm_ecc_current_errors" and labels.get("bit") == "double" and value > 0:
            add(npu, "hbm_dbe", f"{int(value)} HBM double-bit errors (npu_hbm_ecc_current_errors)")
        elif metric == "npu_probe_gemm_correct" and value == 0:
            add(npu, "probe_failed", f"GEMM probe gave a wrong result ({labels.get('dtype', '?')})")
        elif metric == "npu_probe_gemm_efficiency_ratio" and value < PROBE_SLOW_RATIO:
            add(npu, "probe_slow", f"GEMM probe at {value:.0%} of peak ({labels.get('dtype', '?')})")
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
