"""Diagnose's readings as triage evidence, and the remote rank the shared engine blames.

One code path: the log scan already produced triage's records (``LogScan.evidence``); each
finding of the checks with a fault kind (``agent.health.verdict.findings``) becomes its ``LocalFault``; the
node's live RoCE addresses place its own NPUs. ``agent.triage.engine.analyze`` then scores the
incidents in the window exactly as ``npuwatch triage`` would with this node's bundle, and
``remote_culprit`` takes the best culprit that is not on this node.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from agent.health.readings import NodeReadings
from agent.health.results import CheckResult
from agent.health.verdict import findings
from agent.triage.engine import analyze
from agent.triage.evidence import Address, Evidence, LocalFault, Window
from agent.triage.report import Culprit, TriageReport
from agent.triage.weights import WEIGHTS
from collectors.hccn_link import device_id

__all__ = ["culprit_text", "node_evidence", "remote_culprit", "triage_node"]


def node_evidence(readings: NodeReadings, checks: Sequence[CheckResult], now: float | None = None) -> Evidence:
    node = readings.node
    seen = time.time() if now is None else now
    evidence = Evidence()
    evidence.coverage(node)
    if readings.logs is not None and readings.logs.evidence is not None:
        evidence.extend(readings.logs.evidence)
    for finding in findings(checks):
        if finding.kind is not None:
            evidence.faults.append(LocalFault(node, finding.npu, finding.kind, finding.detail, seen_at=seen,
                                              source=finding.check))
    for ref, roce in readings.roce.items():
        if roce.ip.ok:
            evidence.addresses.append(Address(roce.ip.value.address, node, device_id(ref), source="hccn_tool -ip"))
    return evidence


def triage_node(readings: NodeReadings, checks: Sequence[CheckResult], window_s: float,
                now: float | None = None) -> TriageReport:
    now = time.time() if now is None else now
    return analyze(node_evidence(readings, checks, now), Window(now - window_s, None))


def remote_culprit(report: TriageReport, node: str) -> Culprit | None:
    """The best named culprit off this node, newest incident first."""
    for incident in reversed(report.incidents):
        for culprit in incident.culprits:
            identified = culprit.node != "unknown" or culprit.rank is not None or culprit.ip is not None
            if culprit.node != node and culprit.score >= WEIGHTS["named_score"] and identified:
                return culprit
    return None


def culprit_text(culprit: Culprit) -> str:
    """``node b / remote rank 5 / IP 29.1.2.3``: the culprit as far as the logs name it."""
    parts = (f"node {culprit.node}" if culprit.node != "unknown" else "",
             f"remote rank {culprit.rank}" if culprit.rank is not None else "",
             f"IP {culprit.ip}" if culprit.ip else "")
    return " / ".join(part for part in parts if part)
