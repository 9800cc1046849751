"""Local faults as triage weighs them: the kinds, weights and cause groups are the one fault vocabulary's
(``agent.health.thresholds.FAULT_KINDS``), so the node view (``npuwatch diagnose``, ``check``) and the
cluster view (``npuwatch triage``) never order the same faults differently.

A fault with no date (a state seen in a snapshot, such as an ECC count) weighs ``UNDATED_FACTOR``
of its weight: it may predate the incident or have nothing to do with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agent.health.status import FAIL
from agent.health.thresholds import CAUSE_GROUPS, FAIL_WEIGHT, FAULT_KINDS, FaultKind, fault_kind
from agent.triage.evidence import LocalFault

__all__ = [
    "CAUSES",
    "FAIL_WEIGHT",
    "FAULT_KINDS",
    "UNDATED_FACTOR",
    "FaultKind",
    "best_fault",
    "fault_kind",
    "fault_weight",
    "is_failure",
    "rank_faults",
]

# The culprit causes of a triage report (JSON ``cause``), in no particular order.
CAUSES = CAUSE_GROUPS
UNDATED_FACTOR = 0.6


def is_failure(kind: str) -> bool:
    """Whether a fault of this kind fails a node's check (else it warns)."""
    return fault_kind(kind).status == FAIL


def fault_weight(fault: LocalFault) -> float:
    """The fault's weight, discounted when it carries no date."""
    weight = fault_kind(fault.kind).weight
    return weight if fault.dated else weight * UNDATED_FACTOR


def rank_faults(faults: Iterable[LocalFault], *, discount_undated: bool = True) -> list[LocalFault]:
    """Most convincing first (weight; then dated before undated, then earlier, then by NPU).

    ``discount_undated=False`` orders by the kind alone: a node's own readings, taken now, are all
    equally current (``npuwatch diagnose``).
    """
    def key(fault: LocalFault) -> tuple[float, int, float, int]:
        weight = fault_weight(fault) if discount_undated else fault_kind(fault.kind).weight
        return (-weight, 0 if fault.dated else 1, fault.at or 0.0, -1 if fault.npu is None else fault.npu)

    return sorted(faults, key=key)


def best_fault(faults: Sequence[LocalFault]) -> LocalFault | None:
    ranked = rank_faults(faults)
    return ranked[0] if ranked else None
