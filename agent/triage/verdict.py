"""Triage's lead: the one ``agent.health.verdict.Verdict`` of what the inputs show, ranked as ``check`` ranks.

Triage's own question first (who stopped the job), then status first as ``agent.health.verdict.lead`` ranks
(FAIL > UNKNOWN > WARN > ok):

- an incident whose culprit is named: **fail**, led by the first such incident (its culprit's cause group,
  NPU and node; the words name every incident, and the local faults that fail elsewhere than on the culprit
  follow as ``also``);
- else an incident whose culprit could not be named (a tie, or nothing points at a rank): **unknown**; a local
  fault never breaks the tie it is evidence of, it follows as ``also``;
- else, no incident: the nodes' local faults as ``check`` ranks its findings (**fail**, then **unknown** when an
  input could not be read or nothing was, then **warn**), else **ok**.

The fleet's findings (a straggler of a training job, ``agent.triage.stragglers``: its rules' warning) are
findings like the nodes' own, ranked with them: a culprit, a fault that fails or an input that could not be read
leads before them, a heavier warning too; a straggler that leads names its rank and training job.

The exit status is ``agent.health.status.EXIT_CODES`` of that status, as for ``check``
(docs/health-checks.md#exit-status holds the one table).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agent.health.status import FAIL, VERDICT_OF, WARN
from agent.health.thresholds import FAULT_KINDS, fault_kind
from agent.health.verdict import Finding, Verdict, devices_text, ranked, runbook_url, unsubsumed, verdict_of
from agent.triage.evidence import JobStraggler, LocalFault
from agent.triage.report import Incident
from agent.triage.stragglers import StragglerFinding, straggler_dict, straggler_findings

__all__ = ["TRIAGE_CAUSES", "TriageLead", "finding_dict", "local_findings", "triage_lead"]

# The causes only triage's verdict names (besides fault kinds and culprit cause groups): what to do, and the alert
# whose runbook says more.
TRIAGE_CAUSES: dict[str, tuple[str, str | None]] = {
    "culprit_unknown": ("read what the incident's notes say is missing (the silent ranks' bundles, a rank table, "
                        "flight-recorder dumps) and run triage again with it", "HCCLTimeout"),
    "unreadable": ("check the paths and the Prometheus address; what could not be read is listed under "
                   "\"could not read\"", None),
}


@dataclass(frozen=True)
class TriageLead:
    """The verdict, the node its NPU is on (None: no NPU, or a culprit nothing places), and every node's local
    findings in check's order (node, finding)."""

    verdict: Verdict
    node: str | None = None
    findings: tuple[tuple[str, Finding], ...] = ()
    rank: int | None = None  # the rank the lead names: an incident's culprit's, a straggler's
    training_job: str | None = None  # a straggler's training job


def finding_dict(node: str, finding: Finding) -> dict[str, Any]:
    """One finding in triage's JSON ``findings``: where, what, and as which check and status (a fleet finding
    adds its alert's labels, words, action and runbook: ``agent.triage.stragglers.straggler_dict``)."""
    found = {"node": node, "npu": finding.npu, "kind": finding.kind, "status": VERDICT_OF[finding.status],
             "check": finding.check, "where": finding.where, "detail": finding.detail}
    if isinstance(finding, StragglerFinding):
        found.update(straggler_dict(finding))
    return found


def _where(fault: LocalFault) -> str:
    return f"{fault.node} NPU {fault.npu}" if fault.npu is not None else fault.node


def local_findings(faults: Iterable[LocalFault]) -> list[tuple[str, Finding]]:
    """Each node's local faults as check's findings (one per node, NPU and kind), in check's order."""
    by_node: dict[str, dict[tuple[int | None, str], Finding]] = {}
    for fault in faults:
        if fault.kind not in FAULT_KINDS:
            continue
        entry = fault_kind(fault.kind)
        found = by_node.setdefault(fault.node, {})
        if (fault.npu, fault.kind) not in found:
            found[(fault.npu, fault.kind)] = Finding(fault.status or entry.status, fault.kind, entry.check, fault.npu,
                                                     _where(fault), fault.detail, at=fault.at)
    nodes = {id(finding): node for node, found in by_node.items() for finding in found.values()}
    kept = [finding for found in by_node.values() for finding in unsubsumed(list(found.values()))]
    return [(nodes[id(finding)], finding) for finding in ranked(kept)]


def _incident_lead(incident: Incident, summary: str, also: tuple[str, ...]) -> TriageLead:
    top = incident.culprits[0]
    kind = top.cause if top.cause in FAULT_KINDS else None
    action = f"look at {top.where} first (`npuwatch diagnose` there)"
    if kind is not None:
        action += f"; {fault_kind(kind).hint}"
    alert = fault_kind(kind).runbook_for(None) if kind is not None else "HCCLTimeout"
    node = top.node if top.node != "unknown" else None
    evidence = top.evidence[0] if top.evidence else ""
    return TriageLead(Verdict("fail", top.cause, top.npu, summary, also, action, runbook_url(alert), None,
                              evidence), node, rank=top.rank)


def _found(lead: TriageLead, finding: Finding) -> TriageLead:
    """``lead``, led by ``finding``: a straggler's rank and training job with it."""
    if isinstance(finding, StragglerFinding):
        return replace(lead, rank=finding.rank, training_job=finding.training_job)
    return lead


def _named(cause: str, status: str, summary: str, also: tuple[str, ...]) -> TriageLead:
    action, alert = TRIAGE_CAUSES[cause]
    return TriageLead(Verdict(status, cause, None, summary, also, action, runbook_url(alert)))


def _labels(found: Sequence[Finding]) -> tuple[str, ...]:
    by_cause: dict[str, list[str]] = {}
    for finding in found:
        by_cause.setdefault(finding.label, []).append(finding.where)
    return tuple(f"{label} on {devices_text(where)}" for label, where in by_cause.items())


def triage_lead(status: str, text: str, incidents: Sequence[Incident], faults: Sequence[LocalFault],
                stragglers: Sequence[JobStraggler] = ()) -> TriageLead:
    """The lead of a report whose outcome is ``status`` (``agent.triage.report.OUTCOMES``) and verdict text
    ``text``, with the inputs' local ``faults`` and the fleet's ``stragglers``."""
    both = local_findings(faults) + straggler_findings(stragglers)
    nodes = {id(finding): node for node, finding in both}
    local = [(nodes[id(finding)], finding) for finding in ranked([finding for _, finding in both])]
    return replace(_lead(status, text, incidents, local), findings=tuple(local))


def _lead(status: str, text: str, incidents: Sequence[Incident], local: list[tuple[str, Finding]]) -> TriageLead:
    found = [finding for _, finding in local]
    node_of = {id(finding): node for node, finding in local}
    fails = [finding for finding in found if finding.status == FAIL]
    warns = [finding for finding in found if finding.status == WARN]
    named = [incident for incident in incidents if incident.named]
    unnamed = [incident for incident in incidents if not incident.named]
    if named:  # the words name every incident, in time order; the first named culprit leads
        top = named[0].culprits[0]
        culprit = f"{top.node} NPU {top.npu}" if top.npu is not None else top.node
        return _incident_lead(named[0], text, _labels([f for f in fails if f.where != culprit]))
    if unnamed:  # a tie is never broken, not even by a local fault that is its evidence
        also = tuple(f"FAIL {label}" for label in _labels(fails)) + tuple(f"WARN {label}" for label in _labels(warns))
        return _named("culprit_unknown", "unknown", text, also)
    if fails:
        return _found(TriageLead(verdict_of("fail", fails), node_of[id(fails[0])]), fails[0])
    also = (f"WARN {verdict_of('warn', warns).summary}",) if warns else ()
    if status == "unreadable":
        return _named("unreadable", "unknown", text, also)
    if warns:
        return _found(TriageLead(verdict_of("warn", warns), node_of[id(warns[0])]), warns[0])
    return TriageLead(Verdict("ok", None, None, text))

