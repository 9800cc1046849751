"""The node's judgement as metrics: what every surface (top, triage, the alerts, the dashboards) reads.

- ``npu_fault_since_timestamp_seconds{npu,chip,kind,status}``: one series per active finding, present while it
  is found; its value is when it started (the tool's own date where the output gives one, else the first
  round that found it). ``kind`` is the fault kind (``agent.health.thresholds``), or the check's name for a
  problem without a kind (a collector down); a node-wide finding has ``npu=""`` and ``chip=""``;
- ``npu_chip_status{npu,chip,status,cause}``: 1 for each chip, its status (ok, warn, fail, unknown) and the
  cause that leads on it (empty when ok);
- ``npu_node_status{status,cause,npu}``: 1, the node's verdict as ``npuwatch check`` prints it now, its lead
  cause and the NPU it leads on (empty for a node-wide cause).

Statuses fold in the one order of ``agent.health.status``; the lead is ``agent.health.verdict``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agent.health.results import CheckResult
from agent.health.status import FAIL, PASS, UNKNOWN, VERDICT_OF, WARN, rank
from agent.health.verdict import Finding, Verdict, findings
from collectors.base import ChipRef, Sample, label_pairs

__all__ = ["FAULT_METRIC", "finding_keys", "verdict_samples"]

FAULT_METRIC = "npu_fault_since_timestamp_seconds"
FaultKey = tuple[str, str, str]  # (npu, chip, kind), "" where it has none


def _text(value: int | None) -> str:
    return "" if value is None else str(value)


def _key(finding: Finding) -> FaultKey:
    chip = finding.chip if finding.chip is not None else (0 if finding.npu is not None else None)
    return _text(finding.npu), _text(chip), finding.cause


def finding_keys(checks: Sequence[CheckResult]) -> dict[FaultKey, float | None]:
    """Every active finding's key, once, with the date its tool gives for it (None: undated)."""
    out: dict[FaultKey, float | None] = {}
    for finding in findings(checks):
        key = _key(finding)
        if key not in out or (out[key] is None and finding.at is not None):
            out[key] = finding.at
    return out


def _chip_statuses(checks: Iterable[CheckResult], chips: Sequence[ChipRef]) -> dict[tuple[int, int], tuple[str, str]]:
    """Each chip's worst status and the cause that leads on it (a FAIL or WARN finding's, else the check that could
    not judge it)."""
    known = {(ref.npu, ref.chip) for ref in chips}
    status: dict[tuple[int, int], str] = dict.fromkeys(known, PASS)
    unjudged: dict[tuple[int, int], str] = {}
    checks = list(checks)
    for check in checks:
        for result in check.results:
            if result.npu is None:
                continue
            where = (result.npu, result.chip if result.chip is not None else 0)
            if where not in known:
                continue
            if rank(result.status) > rank(status[where]):
                status[where] = result.status
            if result.status == UNKNOWN:
                unjudged.setdefault(where, check.name)
    causes: dict[tuple[int, int], str] = {}
    for finding in findings(checks):  # ranked: the first finding of a chip at its status leads there
        if finding.npu is None:
            continue
        where = (finding.npu, finding.chip if finding.chip is not None else 0)
        if where in status and finding.status == status[where]:
            causes.setdefault(where, finding.cause)
    return {where: (VERDICT_OF[state], causes.get(where, unjudged.get(where, "") if state == UNKNOWN else ""))
            for where, state in status.items()}


def verdict_samples(checks: Sequence[CheckResult], verdict: Verdict, chips: Sequence[ChipRef],
                    since: dict[FaultKey, float]) -> list[Sample]:
    out: list[Sample] = []
    seen: set[FaultKey] = set()
    for finding in findings(checks):
        key = _key(finding)
        if key in seen or finding.status not in (FAIL, WARN) or key not in since:
            continue
        seen.add(key)
        npu, chip, kind = key
        out.append(Sample(FAULT_METRIC, label_pairs(npu=npu, chip=chip, kind=kind,
                                                    status=VERDICT_OF[finding.status]), since[key]))
    for (npu_id, chip_id), (state, cause) in sorted(_chip_statuses(checks, chips).items()):
        out.append(Sample("npu_chip_status", label_pairs(npu=npu_id, chip=chip_id, status=state, cause=cause), 1.0))
    out.append(Sample("npu_node_status", label_pairs(status=verdict.status, cause=verdict.cause or "",
                                                     npu=_text(verdict.npu)), 1.0))
    return out
