"""Probe results as catalogue samples: counters, last-success timestamps, measurement gauges."""

from __future__ import annotations

import threading

from agent.probes.records import OUTCOMES, PROBES, STAGES, AllreduceMeasurement, GemmMeasurement, ProbeResult
from collectors.base import Sample, label_pairs

# --------------------------------------------------------------------------- metrics


class ProbeMetrics:
    """Accumulates probe results (thread-safe) and renders them as catalogue samples.

    Counters live in memory for the agent's lifetime and exist from the start at 0. The
    measurement gauges show the latest run that ran: a run that failed to measure drops
    them (a failed read drops the series), a skipped run leaves them as they were.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs = {(p, o): 0 for p in PROBES for o in OUTCOMES}
        self._timeouts = {(p, s): 0 for p in PROBES for s in STAGES}
        self._last_success: dict[str, float] = {}
        self._duration: dict[str, float] = {}
        self._gemm: list[GemmMeasurement] = []
        self._allreduce: dict[str, AllreduceMeasurement | None] = {}

    def record(self, result: ProbeResult) -> None:
        with self._lock:
            key = (result.probe, result.outcome)
            self._runs[key] = self._runs.get(key, 0) + 1
            if result.outcome == "skipped":
                return
            if result.outcome == "timeout" and result.stage:
                stage_key = (result.probe, result.stage)
                self._timeouts[stage_key] = self._timeouts.get(stage_key, 0) + 1
            self._duration[result.probe] = result.duration_s
            if result.outcome == "pass":
                self._last_success[result.probe] = result.started_at + result.duration_s
            if result.probe == "gemm":
                self._gemm = list(result.gemm)
            elif result.probe == "allreduce":
                self._allreduce[result.scope or "node"] = result.allreduce

    def samples(self) -> list[Sample]:
        with self._lock:
            out = [Sample("npuwatch_probe_runs_total", label_pairs(probe=p, outcome=o), float(n))
                   for (p, o), n in sorted(self._runs.items())]
            out += [Sample("npuwatch_probe_timeouts_total", label_pairs(probe=p, stage=s), float(n))
                    for (p, s), n in sorted(self._timeouts.items())]
            out += [Sample("npuwatch_probe_last_success_timestamp_seconds", label_pairs(probe=p), t)
                    for p, t in sorted(self._last_success.items())]
            out += [Sample("npuwatch_probe_duration_seconds", label_pairs(probe=p), d)
                    for p, d in sorted(self._duration.items())]
            for m in self._gemm:
                labels = label_pairs(npu=m.npu, chip=m.chip, dtype=m.dtype)
                out.append(Sample("npu_probe_gemm_flops", labels, m.flops))
                if m.efficiency is not None:
                    out.append(Sample("npu_probe_gemm_efficiency_ratio", labels, m.efficiency))
                out.append(Sample("npu_probe_gemm_correct", labels, 1.0 if m.correct else 0.0))
            for scope, ar in sorted(self._allreduce.items()):
                if ar is None:
                    continue
                labels = label_pairs(scope=scope, size_bytes=ar.size_bytes)
                out.append(Sample("npu_probe_allreduce_algo_bandwidth_bytes_per_second", labels,
                                  ar.algbw_bytes_per_second))
                out.append(Sample("npu_probe_allreduce_bus_bandwidth_bytes_per_second", labels,
                                  ar.busbw_bytes_per_second))
                out.append(Sample("npu_probe_allreduce_correct", label_pairs(scope=scope),
                                  1.0 if ar.correct else 0.0))
            return out
