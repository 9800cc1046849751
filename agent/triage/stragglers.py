"""The fleet's findings in triage's verdict: the rank, port or host that slows a training job.

Only the fleet's rules can judge a straggler: they compare every rank of a job (alerts/failslow.rules.yml,
docs/failslow.md), which no agent sees. They judge it once and export it as their alert, NPUJobStraggler
(``kind="job_straggler"``, ``status="warn"``, the registry's fleet kind, and the condition's ``training_job``,
``node``, ``npu``, ``rank`` and ``cause``). Triage reads the alert as it fired and judges nothing again:

- ``fleet_alerts()``: the ``ALERTS`` selector of the registry's fleet kinds' alerts, firing;
- ``straggler_of(labels)``: one firing alert's labels as a ``JobStraggler`` record (None when the labels name
  no fleet kind, or no node or training job to place it);
- ``straggler_findings(stragglers)``: each as ``check``'s ``Finding`` (one per job, node, NPU, rank and cause),
  with the registry's words and action for its cause, so the verdict ranks it as ``check`` ranks a warning;
- ``straggler_dict(finding)``: what a straggler's entry of triage's JSON ``findings`` adds.

A bundle holds one node: offline triage has no fleet view and reports no straggler (it says so).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agent.health.thresholds import FAULT_KINDS, FaultKind, fault_kind
from agent.health.verdict import Finding, runbook_url
from agent.triage.evidence import JobStraggler

__all__ = ["FLEET_KINDS", "StragglerFinding", "fleet_alerts", "straggler_dict", "straggler_findings",
           "straggler_of"]

# The registry's kinds the fleet's rules judge, by their alert's name.
FLEET_KINDS: dict[str, FaultKind] = {kind.alert: kind for kind in FAULT_KINDS.values() if kind.fleet and kind.alert}


def fleet_alerts(job: str) -> str:
    """``ALERTS{alertname=~"NPUJobStraggler", alertstate="firing", job=~"npuwatch|"}``: every fleet kind's alert
    while it fires, of the agents' scrape ``job`` or of none (a finding of a whole node, ``host``, keeps no
    ``job``: the rule aggregates it away)."""
    names = "|".join(sorted(FLEET_KINDS))
    return f'ALERTS{{alertname=~"{names}", alertstate="firing", job=~{json.dumps(re.escape(job) + "|")}}}'


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def _kind(labels: Mapping[str, str]) -> FaultKind | None:
    """The fleet kind the labels name: their ``kind`` (rules since it was added), else their alert's."""
    kind = labels.get("kind")
    if kind:
        entry = FAULT_KINDS.get(kind)
        return entry if entry is not None and entry.fleet else None
    return FLEET_KINDS.get(labels.get("alertname", ""))


def straggler_of(labels: Mapping[str, str], *, at: float | None = None, until: float | None = None,
                 source: str = "") -> JobStraggler | None:
    """The straggler a firing fleet alert (or its recorded condition) names, as its labels say."""
    entry = _kind(labels)
    node, job = labels.get("node", ""), labels.get("training_job", "")
    if entry is None or not node or not job:
        return None
    return JobStraggler(node, job, labels.get("cause", ""), entry.kind, _int(labels.get("npu")),
                        _int(labels.get("rank")), at=at, until=until, source=source)


@dataclass(frozen=True)
class StragglerFinding(Finding):
    """A fleet finding as ``check``'s ``Finding``: its cause's words are the detail, its cause's action the hint."""

    node: str = ""
    training_job: str = ""
    rank: int | None = None
    rule_cause: str = ""  # the rule's ``cause`` label: compute, link, host

    @property
    def hint(self) -> str:
        entry = fault_kind(str(self.kind))
        cause = entry.rule_cause(self.rule_cause)
        return cause.hint if cause is not None else entry.hint

    @property
    def text(self) -> str:
        return f"{self.label} on {self.where} ({self.detail})"


def _where(straggler: JobStraggler) -> str:
    if straggler.npu is None:
        return f"{straggler.node}, job {straggler.training_job}"
    rank = f"rank {straggler.rank} of " if straggler.rank is not None else ""
    return f"{straggler.node} NPU {straggler.npu}, {rank}job {straggler.training_job}"


def _finding(straggler: JobStraggler) -> StragglerFinding:
    entry = fault_kind(straggler.kind)
    cause = entry.rule_cause(straggler.cause)
    what = cause.label if cause is not None else "the fleet's rules name no cause the registry knows"
    return StragglerFinding(entry.status, entry.kind, entry.check, straggler.npu, _where(straggler),
                            f"{straggler.cause or 'no cause'}: {what}", at=straggler.at, node=straggler.node,
                            training_job=straggler.training_job, rank=straggler.rank, rule_cause=straggler.cause)


def straggler_findings(stragglers: Iterable[JobStraggler]) -> list[tuple[str, Finding]]:
    """(node, finding) per straggler, one per job, node, NPU, rank and cause (the earliest start kept)."""
    first: dict[tuple[str, str, int | None, int | None, str, str], JobStraggler] = {}
    for straggler in stragglers:
        key = (straggler.training_job, straggler.node, straggler.npu, straggler.rank, straggler.cause,
               straggler.kind)
        known = first.get(key)
        if known is None or (straggler.at is not None and (known.at is None or straggler.at < known.at)):
            first[key] = straggler
    return [(straggler.node, _finding(straggler)) for straggler in first.values()]


def straggler_dict(finding: StragglerFinding) -> dict[str, Any]:
    """The keys a straggler adds to its entry of triage's JSON ``findings``: the alert's own labels (its
    ``cause`` is the rule's: compute, link, host) and, as the verdict says them, its words, action and runbook."""
    entry = fault_kind(str(finding.kind))
    return {"training_job": finding.training_job, "rank": finding.rank, "cause": finding.rule_cause,
            "text": finding.text, "action": finding.hint, "runbook": runbook_url(entry.runbook_alert)}
