"""Probe results as catalogue samples: counters, last-success timestamps, measurement gauges.

The counters and the last results are kept in ``<state_dir>/probes.json`` (temp file + rename after
every run), so a restarted agent goes on from where it was: a probe that passed an hour ago still
passed an hour ago after a restart, and the stale-probe alert does not start again from "never".
An unusable state file is logged once and the results live in memory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from agent.probes.records import OUTCOMES, PROBES, STAGES, AllreduceMeasurement, GemmMeasurement, ProbeResult
from collectors.base import Sample, label_pairs

__all__ = ["ProbeMetrics"]

log = logging.getLogger(__name__)
STATE_VERSION = 1

# --------------------------------------------------------------------------- metrics


class ProbeMetrics:
    """Accumulates probe results (thread-safe) and renders them as catalogue samples.

    Counters live in memory for the agent's lifetime and exist from the start at 0. The
    measurement gauges show the latest run that ran: a run that failed to measure drops
    them (a failed read drops the series), a skipped run leaves them as they were.
    """

    def __init__(self, state_file: str | os.PathLike[str] | None = None) -> None:
        self._lock = threading.Lock()
        self._runs = {(p, o): 0 for p in PROBES for o in OUTCOMES}
        self._timeouts = {(p, s): 0 for p in PROBES for s in STAGES}
        self._last_success: dict[str, float] = {}
        self._duration: dict[str, float] = {}
        self._gemm: list[GemmMeasurement] = []
        self._allreduce: dict[str, AllreduceMeasurement | None] = {}
        self._state_file = Path(state_file) if state_file is not None else None
        self._state_warned = False
        if self._state_file is not None:
            self._load(self._state_file)

    def _load(self, path: Path) -> None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("probe state %s unreadable (%s); probe counters start from zero", path, exc)
            return
        try:
            if data.get("version") != STATE_VERSION:
                return
            runs = dict(self._runs)
            for probe, outcome, count in data["runs"]:
                if (probe, outcome) in runs:
                    runs[(probe, outcome)] = int(count)
            timeouts = dict(self._timeouts)
            for probe, stage, count in data["timeouts"]:
                if (probe, stage) in timeouts:
                    timeouts[(probe, stage)] = int(count)
            last_success = {p: float(t) for p, t in data["last_success"].items() if p in PROBES}
            duration = {p: float(d) for p, d in data["duration"].items() if p in PROBES}
            gemm = [GemmMeasurement(**item) for item in data["gemm"]]
            allreduce = {scope: AllreduceMeasurement(**item) if item else None
                         for scope, item in data["allreduce"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            log.warning("probe state %s malformed (%s); probe counters start from zero", path, exc)
            return
        self._runs, self._timeouts, self._last_success, self._duration = runs, timeouts, last_success, duration
        self._gemm, self._allreduce = gemm, allreduce

    def _save(self) -> None:
        """Write the state (called with the lock held); a failure is logged once, never raised."""
        if self._state_file is None:
            return
        data: dict[str, Any] = {
            "version": STATE_VERSION,
            "runs": [[p, o, n] for (p, o), n in sorted(self._runs.items())],
            "timeouts": [[p, s, n] for (p, s), n in sorted(self._timeouts.items())],
            "last_success": self._last_success,
            "duration": self._duration,
            "gemm": [dataclasses.asdict(m) for m in self._gemm],
            "allreduce": {scope: dataclasses.asdict(m) if m else None for scope, m in self._allreduce.items()},
        }
        directory = self._state_file.parent
        try:
            fd, temp = tempfile.mkstemp(prefix=".probes.", suffix=".tmp", dir=directory)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(data, handle)
                os.replace(temp, self._state_file)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
        except OSError as exc:
            if not self._state_warned:
                log.warning("probe state %s not written (%s); probe counters are kept in memory only",
                            self._state_file, exc)
                self._state_warned = True
            return
        self._state_warned = False

    def record(self, result: ProbeResult) -> None:
        with self._lock:
            self._record(result)
            self._save()

    def _record(self, result: ProbeResult) -> None:
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
