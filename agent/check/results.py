"""What a check returns: one ``Result`` per device (or one for the node), folded into a ``CheckResult``.

Statuses are PASS, WARN, FAIL and UNKNOWN. A check that could not run, or could not judge what it
measured, is UNKNOWN, never PASS. Folding many statuses into one (a check over its devices, a level
over its checks) takes the worst in the order FAIL > UNKNOWN > WARN > PASS: a gate that could not
look at part of the node cannot vouch for it, which weighs more than a warning.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Union

__all__ = [
    "FAIL",
    "PASS",
    "STATUSES",
    "UNKNOWN",
    "VERDICT_OF",
    "WARN",
    "CheckResult",
    "Result",
    "Value",
    "fold",
    "worst",
]

PASS, WARN, FAIL, UNKNOWN = "PASS", "WARN", "FAIL", "UNKNOWN"
STATUSES = (PASS, WARN, UNKNOWN, FAIL)  # least to most severe
_RANK = {status: index for index, status in enumerate(STATUSES)}
VERDICT_OF = {PASS: "ok", WARN: "warn", FAIL: "fail", UNKNOWN: "unknown"}

Value = Union[float, int, str, None]


def worst(statuses: Iterable[str], default: str = PASS) -> str:
    return max(statuses, key=_RANK.__getitem__, default=default)


@dataclass(frozen=True)
class Result:
    """One judged subject: a chip, a chip pair (``peer``), or the node (``npu`` None).

    ``value`` is what was seen, ``threshold`` what it was held to, ``basis`` where that threshold
    comes from (``fleet median of 412 nodes``, ``910B3 reference (ascend-dmi --bw -t d2d)``,
    ``config check.expected_chips``), ``measure`` the key a fleet baseline uses for this value.
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status, "npu": self.npu, "chip": self.chip, "peer": self.peer,
            "value": self.value, "threshold": self.threshold, "unit": self.unit, "basis": self.basis,
            "measure": self.measure, "model": self.model, "evidence": self.evidence,
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
            "duration_s": round(self.duration_s, 3),
            "value": top.value if top else None,
            "threshold": top.threshold if top else None,
            "unit": top.unit if top else None,
            "basis": top.basis if top else None,
            "results": [result.to_dict() for result in self.results],
        }


def fold(name: str, results: Iterable[Result], ok_text: str, hint: str = "", empty: str = "nothing to check"
         ) -> CheckResult:
    """One check from its results: the worst status; the evidence lists what did not pass, worst first."""
    items = tuple(results)
    if not items:
        return CheckResult(name, UNKNOWN, empty, (), hint)
    status = worst(r.status for r in items)
    bad = sorted((r for r in items if r.status != PASS), key=lambda r: -_RANK[r.status])
    if not bad:
        return CheckResult(name, PASS, ok_text, items)
    shown = [r.evidence for r in bad[:3]]
    more = f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""
    return CheckResult(name, status, "; ".join(shown) + more, items, hint)
