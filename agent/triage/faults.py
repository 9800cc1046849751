"""Local faults: what each kind is called, which culprit cause it means, and how much it weighs.

One table for the node view (``npuwatch diagnose``) and the cluster view (``npuwatch triage``), so
the two never order the same faults differently. The weight says how well the fault alone explains
an HCCL timeout on the ranks that use that NPU or node, most convincing first:

1. the RoCE link is down (5.0): nothing crosses the port, every collective through it stops;
2. the link flaps (4.5): connections break mid-collective and HCCL does not rebuild them;
3. the optics receive no light (4.2): the link is down or about to be;
4. net_health fails (4.0): the port is up but cannot reach its detect address, so the path
   beyond it is broken;
5. HBM double-bit ECC errors (3.8): uncorrectable, the task on the chip is killed;
6. the chip is unhealthy, missing or its heartbeat was lost (3.7, 3.6, 3.6): the rank's device
   stopped;
7. HCCS unhealthy (3.5), the RoCE address differs from hccn.conf (3.4: ranks dial an address
   nobody answers), the chip too hot (3.3), more HBM pages isolated than the threshold (3.1);
8. a probe failed (3.2), RoCE completion (CQE) errors in the logs (3.0), packet errors rising
   while watched (2.5), weak optics (2.2), one link-down episode (2.0): they slow or break some
   traffic, not all;
9. background that rarely stops a job alone (1.0 and less): net_health not configured, isolated
   HBM pages, a chip health warning, a hot chip, optics outside their own thresholds, a probe
   below its threshold, error counters that are non-zero since boot.

A fault with no date (a state seen in a snapshot, such as an ECC count) weighs ``UNDATED_FACTOR``
of its weight: it may predate the incident or have nothing to do with it. Whether a kind fails a
node's own report or warns is the thresholds table's (``agent.health.thresholds``); every kind it
fails weighs at least ``FAIL_WEIGHT`` and every kind it warns less (tests/unit/test_health_thresholds.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agent.health.log_categories import LOG_FAULTS
from agent.health.status import FAIL
from agent.health.thresholds import THRESHOLDS
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
CAUSES = ("link_down", "link_flap", "roce_errors", "optics", "chip_fault", "hbm_ecc", "process_hang",
          "process_exit", "desync", "slow_chip", "unknown")
UNDATED_FACTOR = 0.6
FAIL_WEIGHT = 3.0


@dataclass(frozen=True)
class FaultKind:
    name: str
    cause: str  # one of CAUSES
    weight: float
    label: str  # what a person calls it: "RoCE link down"


FAULT_KINDS: dict[str, FaultKind] = {kind.name: kind for kind in (
    FaultKind("link_down", "link_down", 5.0, "RoCE link down"),
    FaultKind("link_flap", "link_flap", 4.5, "RoCE link flapping"),
    FaultKind("optics_dark", "optics", 4.2, "optical module receives no light"),
    FaultKind("net_health", "roce_errors", 4.0, "RoCE network health check failing"),
    FaultKind("hbm_dbe", "hbm_ecc", 3.8, "HBM double-bit ECC errors"),
    FaultKind("chip_fault_isolate", "chip_fault", 3.9, "chip fault: take the chip out of service"),
    FaultKind("chip_unhealthy", "chip_fault", 3.7, "unhealthy chip"),
    FaultKind("chip_missing", "chip_fault", 3.6, "chip missing from npu-smi"),
    FaultKind("device_lost", "chip_fault", 3.6, "device heartbeat lost (kernel log)"),
    FaultKind("hccs_unhealthy", "chip_fault", 3.5, "HCCS link unhealthy"),
    FaultKind("chip_fault_reset", "chip_fault", 3.4, "chip fault: reset the chip"),
    FaultKind("ip_mismatch", "roce_errors", 3.4, "RoCE address differs from hccn.conf"),
    FaultKind("chip_too_hot", "chip_fault", 3.3, "chip too hot"),
    FaultKind("hbm_pages_over", "hbm_ecc", 3.1, "too many HBM pages isolated"),
    FaultKind("probe_failed", "chip_fault", 3.2, "probe failed"),
    FaultKind("roce_cqe", "roce_errors", 3.0, "RoCE completion (CQE) errors"),
    FaultKind("roce_errors_rising", "roce_errors", 2.5, "RoCE packet errors rising"),
    FaultKind("chip_fault_drain", "chip_fault", 2.4, "chip fault: isolate the chip after its job"),
    FaultKind("optics_weak", "optics", 2.2, "weak optical receive power"),
    FaultKind("link_down_once", "link_flap", 2.0, "RoCE link went down"),
    FaultKind("net_health_init", "roce_errors", 1.0, "RoCE network health not configured"),
    FaultKind("hbm_pages_isolated", "hbm_ecc", 1.0, "HBM pages isolated after ECC errors"),
    FaultKind("chip_warning", "chip_fault", 1.0, "chip health warning"),
    FaultKind("chip_hot", "chip_fault", 1.0, "chip running hot"),
    FaultKind("optics_out_of_range", "optics", 1.0, "optical module reading outside its thresholds"),
    FaultKind("probe_slow", "slow_chip", 1.0, "probe below its threshold"),
    FaultKind("roce_error_counters", "roce_errors", 0.8, "RoCE error counters non-zero"),
    # the failures a rank's own logs show (OOM, AI Core, SDMA, a device that dropped out, a port it could not
    # listen on): their weights live with the log categories (agent.health.log_categories)
    *(FaultKind(fault.kind, fault.cause, fault.weight, fault.label) for fault in LOG_FAULTS),
)}


def fault_kind(name: str) -> FaultKind:
    try:
        return FAULT_KINDS[name]
    except KeyError:
        raise ValueError(f"unknown fault kind {name!r}; one of {', '.join(FAULT_KINDS)}") from None


def is_failure(kind: str) -> bool:
    """Whether a fault of this kind fails a node's check (else it warns): the thresholds table's status,
    by weight for the kinds only triage finds (probes, logs)."""
    entry = THRESHOLDS.get(kind)
    if entry is not None:
        return entry.status == FAIL
    return fault_kind(kind).weight >= FAIL_WEIGHT


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
