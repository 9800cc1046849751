"""What ``engine.analyze`` returns: incidents with ranked culprits, the lead verdict and an exit status.

The JSON form (``TriageReport.to_dict``) is a contract other tools read::

    {"verdict": {"status", "cause", "npu", "node", "rank", "training_job", "check", "text", "summary", "also",
                 "action", "runbook"},
     "exit_code": int, "outcome": "none" | "culprit" | "unknown" | "unreadable",
     "fleet_view": bool,
     "findings": [{"node", "npu", "kind", "status", "check", "where", "detail"}],
     "incidents": [{"comm": str, "start": epoch, "codes": [...], "rank_size": int,
                    "reporting_ranks": [...], "silent_ranks": [...],
                    "culprits": [{"node": str, "npu": int|null, "rank": int|null, "cause": str,
                                  "score": float, "evidence": [str, ...]}],
                    "tie": null | {"culprits": [{"node", "npu", "rank"}], "score": float,
                                   "would_break_it": [str, ...]}}]}

with culprits best first; culprits that share the top score are a ``tie`` and none of them is named
(the order among them is only for display). ``verdict`` is the object ``check --json`` prints
(``agent.health.verdict.Verdict``, with the lead's ``node``), ranked as ``agent.triage.verdict`` says; the exit
status is its status's, as for ``check``. ``outcome`` is the incidents' question alone (no incident, every culprit
named, an incident without one, nothing readable). ``rank`` is the rank the lead names (a culprit's, a
straggler's), ``training_job`` a straggler's. ``fleet_view`` says whether the fleet rules' own findings were read
(a Prometheus, never a bundle); each of them is a finding of a fleet kind (``job_straggler``) that adds its
alert's ``training_job``, ``rank`` and ``cause`` (compute, link, host) and its ``text``, ``action`` and
``runbook``. Extra keys may be added; these never change meaning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.health.verdict import Verdict, exit_code
from agent.triage.evidence import Window

__all__ = ["OUTCOMES", "Culprit", "Incident", "Tie", "TriageReport"]

# none: no incident; culprit: every incident has a named culprit; unknown: an incident without one;
# unreadable: no input could be read (or none but what could not be read may hold one).
OUTCOMES = ("none", "culprit", "unknown", "unreadable")


@dataclass(frozen=True)
class Culprit:
    node: str  # "unknown" when nothing locates it
    npu: int | None
    rank: int | None
    cause: str
    score: float
    evidence: tuple[str, ...]
    ip: str | None = None

    @property
    def where(self) -> str:
        """``node-c NPU 1 (rank 9)``."""
        text = self.node if self.node != "unknown" else (self.ip or "an unknown node")
        if self.npu is not None:
            text += f" NPU {self.npu}"
        if self.rank is not None:
            text += f" (rank {self.rank})"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "npu": self.npu, "rank": self.rank, "cause": self.cause,
                "score": self.score, "evidence": list(self.evidence)}


@dataclass(frozen=True)
class Tie:
    """Culprits that share the top score: none of them is named (agent.triage.ties)."""

    culprits: tuple[Culprit, ...]
    score: float
    would_break_it: tuple[str, ...]

    @property
    def text(self) -> str:
        """``node-a NPU 1 (rank 1) and node-c NPU 1 (rank 5) score 4.25 each``."""
        names = [c.where for c in self.culprits]
        joined = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        return f"{joined} score {self.score:g} each"

    def to_dict(self) -> dict[str, Any]:
        return {"culprits": [{"node": c.node, "npu": c.npu, "rank": c.rank} for c in self.culprits],
                "score": self.score, "would_break_it": list(self.would_break_it)}


@dataclass(frozen=True)
class Incident:
    comm: str  # "" when the logs do not say which communicator
    start: float | None
    end: float | None
    codes: tuple[str, ...]
    rank_size: int
    reporting_ranks: tuple[int, ...]
    silent_ranks: tuple[int, ...]
    culprits: tuple[Culprit, ...]
    op: str | None = None
    reporters: int = 0  # reporting processes, with or without a known rank
    nodes: tuple[str, ...] = ()  # nodes whose ranks reported
    notes: tuple[str, ...] = ()  # what the incident lacks (missing bundles, unmapped addresses)
    named: bool = False  # a culprit is named with enough evidence
    verdict: str = ""
    title: str = ""  # "communicator <tag>", "process group 0 (default_pg)"
    tie: Tie | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"comm": self.comm, "start": self.start, "end": self.end, "codes": list(self.codes),
                "rank_size": self.rank_size, "reporting_ranks": list(self.reporting_ranks),
                "silent_ranks": list(self.silent_ranks), "culprits": [c.to_dict() for c in self.culprits],
                "tie": self.tie.to_dict() if self.tie is not None else None, "verdict": self.verdict}


@dataclass(frozen=True)
class TriageReport:
    status: str  # one of OUTCOMES: the incidents' outcome
    verdict: str  # the incidents' verdict in words (the lead's summary when no local fault leads)
    incidents: tuple[Incident, ...]
    window: Window
    nodes: tuple[str, ...]
    problems: tuple[str, ...] = ()
    lead: Verdict | None = None  # the one verdict (agent.triage.verdict); None only before the engine sets it
    lead_node: str | None = None
    findings: tuple[dict[str, Any], ...] = ()  # every node's local findings and the fleet's, in check's order
    lead_rank: int | None = None
    lead_training_job: str | None = None
    fleet_view: bool = False  # the fleet rules' findings were read (agent.triage.stragglers)

    @property
    def exit_code(self) -> int:
        return self.lead.exit_code() if self.lead is not None else exit_code("unknown")

    def to_dict(self) -> dict[str, Any]:
        verdict = ({**self.lead.to_dict(), "node": self.lead_node, "rank": self.lead_rank,
                    "training_job": self.lead_training_job} if self.lead is not None else None)
        return {"verdict": verdict, "exit_code": self.exit_code, "outcome": self.status, "fleet_view": self.fleet_view,
                "window": {"start": self.window.start, "end": self.window.end},
                "nodes": list(self.nodes), "incidents": [incident.to_dict() for incident in self.incidents],
                "findings": list(self.findings),
                "problems": list(self.problems)}
