"""``analyze(evidence, window) -> TriageReport``: which rank stopped the collective, and why.

Failure reports of a category the HCCL table marks for triage (``collectors.hccl.codes``) become
incident drafts (``agent.triage.drafts``); each incident's candidates are scored
(``agent.triage.scoring``, weights in ``agent.triage.weights``) and explained
(``agent.triage.wording``).

**Cause.** A fault of weight >= ``strong_fault`` names the cause (link_down, link_flap, optics,
roce_errors, chip_fault, hbm_ecc, slow_chip); else desync (flight recorder or HCCL); else a hang
(flight recorder behind, heartbeat "stuck", entry log behind, silent while its node's logs
continue); else process_exit (heartbeat lost); else a weaker fault's cause; else unknown.

A culprit is *named* when its score reaches ``named_score``, something identifies it (a node,
a rank or an address) and no other culprit scores the same (``agent.triage.ties``: a tie is
reported with the evidence that would break it, never broken by name or order). The report's lead
verdict and exit status are ``agent.triage.verdict``'s: the incidents and the inputs' local faults, status first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from agent.triage.drafts import Draft, attach_flight, drafts, scope_of
from agent.triage.evidence import Blame, Evidence, Window
from agent.triage.flight import analyze_flights
from agent.triage.locate import Locator
from agent.triage.report import Incident, TriageReport
from agent.triage.scoring import Scorer
from agent.triage.ties import find_tie
from agent.triage.verdict import finding_dict, triage_lead
from agent.triage.weights import WEIGHTS
from agent.triage.wording import Wording
from collectors.hccl.codes import TRIAGE_FAILURE_CATEGORIES

__all__ = ["analyze"]


def _incident(draft: Draft, evidence: Evidence, blames: Sequence[Blame], locator: Locator) -> Incident:
    scope = scope_of(draft, locator)
    wording = Wording(scope, evidence, locator)
    culprits = Scorer(scope, evidence, blames, locator, wording).culprits()
    top = culprits[0] if culprits else None
    tie = find_tie(culprits, scope, evidence)
    named = tie is None and top is not None and top.score >= WEIGHTS["named_score"] and (
        top.node != "unknown" or top.rank is not None or top.ip is not None)
    comm = draft.comm or (draft.finding.label if draft.finding is not None else "")
    if draft.comm:
        title = f"communicator {draft.comm}"
    elif draft.finding is not None:
        title = draft.finding.label
    else:
        title = "communicator not named in the logs"
    return Incident(comm=comm, start=scope.start, end=scope.end, codes=tuple(scope.codes), rank_size=scope.rank_size,
                    reporting_ranks=scope.reporting, silent_ranks=scope.silent, culprits=tuple(culprits),
                    op=scope.op, reporters=scope.reporters, nodes=tuple(sorted(scope.nodes)),
                    notes=tuple(wording.notes(named, tie)), named=named,
                    verdict=wording.verdict(top if named else None, comm, tie), title=title, tie=tie)


def analyze(evidence: Evidence, window: Window | None = None) -> TriageReport:
    """Incidents in ``window`` (default: everything) with their culprits, best first, and the lead verdict."""
    report = _incidents(evidence, window or Window())
    lead = triage_lead(report.status, report.verdict, report.incidents, evidence.faults, evidence.stragglers)
    return replace(report, lead=lead.verdict, lead_node=lead.node, lead_rank=lead.rank,
                   lead_training_job=lead.training_job, fleet_view=evidence.fleet_view,
                   findings=tuple(finding_dict(node, finding) for node, finding in lead.findings))


def _incidents(evidence: Evidence, window: Window) -> TriageReport:
    nodes = tuple(sorted(evidence.nodes))
    problems = tuple(evidence.problems)
    if evidence.empty:
        text = "could not read any input" + (f": {problems[0]}" if problems else "")
        return TriageReport("unreadable", text, (), window, nodes, problems)
    failures = [f for f in evidence.failures if f.category in TRIAGE_FAILURE_CATEGORIES and window.contains(f.at)]
    blames = [b for b in evidence.blames if window.contains(b.at)]
    locator = Locator(evidence)
    found = drafts(failures)
    for finding in analyze_flights(evidence.flights):
        if window.contains(finding.at):
            attach_flight(finding, found, locator)
    incidents = [_incident(draft, evidence, blames, locator) for draft in found]
    incidents.sort(key=lambda i: (i.start is None, i.start or 0.0, i.comm))
    if not incidents:
        where = "in the window" if not window.everything else "in the inputs"
        read = f"{len(nodes)} node{'s' if len(nodes) != 1 else ''} read"
        if problems:  # what could not be read may hold the incident: could not tell, as scan-logs says
            return TriageReport("unreadable", f"no HCCL incident {where} ({read}), but {len(problems)} "
                                              f"problem{'s' if len(problems) != 1 else ''} reading the inputs",
                                (), window, nodes, problems)
        return TriageReport("none", f"no HCCL incident {where} ({read})", (), window, nodes, problems)
    status = "culprit" if all(i.named for i in incidents) else "unknown"
    if len(incidents) == 1:
        verdict = incidents[0].verdict
    else:
        verdict = f"{len(incidents)} incidents: " + "; ".join(
            f"[{n}] {i.verdict}" for n, i in enumerate(incidents, start=1))
    return TriageReport(status, verdict, tuple(incidents), window, nodes, problems)
