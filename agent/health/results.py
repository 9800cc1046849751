"""The one result record of every health judgement (``Result``), and a check folded from its results (``CheckResult``).

A check that could not run, or could not judge what it measured, is UNKNOWN, never PASS. Statuses
fold in the one order of ``agent.health.status``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Union

from agent.health.status import PASS, UNKNOWN, rank, worst
from agent.health.thresholds import fault_kind

__all__ = ["CheckResult", "Result", "Value", "fold"]

Value = Union[float, int, str, None]


@dataclass(frozen=True)
class Result:
    """One judged subject: a chip, a chip pair (``peer``), or the node (``npu`` None).

    ``value`` is what was seen, ``threshold`` what it was held to, ``basis`` where that threshold
    comes from (``fleet median of 412 nodes``, ``910B3 reference (ascend-dmi --bw -t d2d)``,
    ``config check.expected_chips``), ``measure`` the key a fleet baseline uses for this value.
    ``kind`` is the fault kind (``agent.health.thresholds``) a fault function found, None when it
    found none; ``at`` and ``until`` date the fault (epoch seconds) when the tool's output says when.
    """

    status: str
    evidence: str
    npu: int | None = None
    chip: int | None = None
    peer: int | None = None
    value: Value = None
    threshold: Value = None
    unit: str | None = None
    basis: str | None = None
    measure: str | None = None
    model: str | None = None
    kind: str | None = None
    at: float | None = None
    until: float | None = None

    def where(self, label: str) -> Result:
        """This result with its evidence led by where it was seen (``NPU 3: ...``)."""
        return replace(self, evidence=f"{label}: {self.evidence}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status, "npu": self.npu, "chip": self.chip, "peer": self.peer,
            "value": self.value, "threshold": self.threshold, "unit": self.unit, "basis": self.basis,
            "measure": self.measure, "model": self.model, "kind": self.kind, "evidence": self.evidence,
        }


@dataclass(frozen=True)
class CheckResult:
    """One check: its status (the worst of its results), a summary, and every result behind it."""

    name: str
    status: str
    evidence: str
    results: tuple[Result, ...] = ()
    hint: str = ""
    duration_s: float = 0.0

    @property
    def deciding(self) -> Result | None:
        """The result that set the status (the first of the worst), for a one-line summary."""
        for result in self.results:
            if result.status == self.status:
                return result
        return None

    def with_duration(self, seconds: float) -> CheckResult:
        return CheckResult(self.name, self.status, self.evidence, self.results, self.hint, seconds)

    def to_dict(self) -> dict[str, Any]:
        top = self.deciding
        return {
            "name": self.name,
            "status": self.status,
            "evidence": self.evidence,
            "hint": self.hint,
            "npu": top.npu if top is not None and self.status != PASS else None,
            "duration_s": round(self.duration_s, 3),
            "value": top.value if top else None,
            "threshold": top.threshold if top else None,
            "unit": top.unit if top else None,
            "basis": top.basis if top else None,
            "results": [result.to_dict() for result in self.results],
        }


def fold(name: str, results: Iterable[Result], ok_text: str, hint: str = "", empty: str = "nothing to check"
         ) -> CheckResult:
    """One check from its results: the worst status; the evidence lists what did not pass, worst first.

    The hint is the fault kind's of the worst result that found one (its ``kind``, as found by check ``name``), else
    ``hint``: a check that found a fault says what to do about that fault, the same words on every command."""
    items = tuple(results)
    if not items:
        return CheckResult(name, UNKNOWN, empty, (), hint)
    status = worst(r.status for r in items)
    bad = sorted((r for r in items if r.status != PASS), key=lambda r: -rank(r.status))
    if not bad:
        return CheckResult(name, PASS, ok_text, items)
    shown = [r.evidence for r in bad[:3]]
    more = f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""
    kinds = [r.kind for r in bad if r.kind is not None and r.status == status]
    return CheckResult(name, status, "; ".join(shown) + more, items,
                       fault_kind(kinds[0]).hint_for(name) if kinds else hint)
