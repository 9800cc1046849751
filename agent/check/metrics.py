"""A level's report as catalogue samples.

- ``npu_check_result{level,check,npu,chip}``: 1 pass (or warn), 0 fail, absent when unknown; a
  node-wide result has ``npu=""`` and ``chip=""`` (Prometheus drops empty labels);
- ``npu_check_verdict{level,verdict}``: 1 for the level's verdict (ok, warn, fail, unknown), 0 for the others;
- ``npu_check_last_run_timestamp_seconds{level}``, ``npu_check_duration_seconds{level}``;
- ``npu_check_bandwidth_bytes_per_second{level,measure,model,npu,chip,peer}`` and
  ``npu_check_flops{level,measure,model,npu,chip}``: the measurements, the input of fleet baselines.
"""

from __future__ import annotations

from agent.check.report import LevelReport
from agent.health.results import Result
from agent.health.status import FAIL, PASS, UNKNOWN, WARN, worst
from collectors.base import Sample, label_pairs

__all__ = ["VERDICTS", "report_samples"]

VERDICTS = ("ok", "warn", "fail", "unknown")
_RESULT_VALUE = {PASS: 1.0, WARN: 1.0, FAIL: 0.0}


def _text(value: int | None) -> str:
    return "" if value is None else str(value)


def report_samples(report: LevelReport) -> list[Sample]:
    level = report.level
    out: list[Sample] = [Sample("npu_check_verdict", label_pairs(level=level, verdict=verdict),
                                1.0 if verdict == report.verdict else 0.0) for verdict in VERDICTS]
    out.append(Sample("npu_check_last_run_timestamp_seconds", label_pairs(level=level),
                      report.started_at + report.duration_s))
    out.append(Sample("npu_check_duration_seconds", label_pairs(level=level), report.duration_s))
    statuses: dict[tuple[str, str, str], list[str]] = {}
    measured: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for check in report.checks:
        for result in check.results:
            key = (check.name, _text(result.npu), _text(result.chip))
            statuses.setdefault(key, []).append(result.status)
            sample = _measurement(level, result)
            if sample is not None:
                measured[(sample.metric, sample.labels)] = sample.value
    for (name, npu, chip), seen in sorted(statuses.items()):
        status = worst(seen, default=UNKNOWN)
        if status != UNKNOWN:
            out.append(Sample("npu_check_result", label_pairs(level=level, check=name, npu=npu, chip=chip),
                              _RESULT_VALUE[status]))
    out += [Sample(metric, labels, value) for (metric, labels), value in sorted(measured.items())]
    return out


def _measurement(level: str, result: Result) -> Sample | None:
    if result.measure is None or isinstance(result.value, (bool, str)) or result.value is None:
        return None
    value = float(result.value)
    model = result.model or ""
    if result.unit == "bytes_per_second":
        return Sample("npu_check_bandwidth_bytes_per_second",
                      label_pairs(level=level, measure=result.measure, model=model, npu=_text(result.npu),
                                  chip=_text(result.chip), peer=_text(result.peer)), value)
    if result.unit == "flop_per_second":
        return Sample("npu_check_flops", label_pairs(level=level, measure=result.measure, model=model,
                                                     npu=_text(result.npu), chip=_text(result.chip)), value)
    return None
