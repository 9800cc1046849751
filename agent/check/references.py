"""What a measured value is held to: the model's reference figure, the config's, the fleet median.

A measurement (a bandwidth, a FLOP/s rate) is judged against every reference that exists for its
model and measure, and the worst outcome counts:

- the fleet median of the same model (``--baseline FILE`` / ``--prometheus URL``, when at least
  ``check.fleet_min_nodes`` nodes are behind it): below ``fleet_fail_ratio`` fails, below
  ``fleet_warn_ratio`` warns. This catches one slow node of a uniform fleet without a hand-tuned number;
- ``check.references`` from the config, then the built-in tables (``agent.probes.peaks``: measured
  GEMM peaks, and the bandwidths ``ascend-dmi`` measures on a healthy chip): below ``fail_ratio``
  fails, below ``warn_ratio`` warns. A datasheet figure is shown but never fails a chip (real
  kernels reach 60-80 % of it).

With no reference at all the value is reported and the check is UNKNOWN for it (nothing to judge
by), unless the caller can judge something else (a GEMM's correctness).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agent.health.probe_limits import FLEET_FAIL, FLEET_MIN_NODES, FLEET_WARN, REFERENCE_FAIL, REFERENCE_WARN
from agent.health.status import FAIL, PASS, UNKNOWN, WARN, worst
from agent.probes.peaks import lookup_bandwidth, lookup_peak, normalise_model

__all__ = [
    "BANDWIDTH_KIND",
    "MEASURES",
    "Judgement",
    "Reference",
    "Thresholds",
    "judge",
    "measure_unit",
    "references_for",
]

# measure -> unit; "gemm:<dtype>" and "sustained_gemm:<dtype>" are FLOP/s, "dmi_bandwidth:<path>" bytes/s
MEASURES: dict[str, str] = {
    "hbm_bandwidth": "bytes_per_second",
    "h2d_bandwidth": "bytes_per_second",
    "d2h_bandwidth": "bytes_per_second",
    "p2p_bandwidth": "bytes_per_second",
    "allreduce": "bytes_per_second",  # bus bandwidth
}
_PREFIXED = {"gemm": "flop_per_second", "sustained_gemm": "flop_per_second", "dmi_bandwidth": "bytes_per_second"}


@dataclass(frozen=True)
class Reference:
    value: float
    basis: str  # said in --json and the table: where the figure comes from
    gates: bool  # False: datasheet figures, shown but never failing
    fleet: bool = False


# measure -> the copy kind of agent.probes.peaks' bandwidth table (ascend-dmi's figures on a healthy
# 910B3: device copy 1538 GB/s read + written, PCIe 24.8 GB/s each way, HCCS 26.2 GB/s)
BANDWIDTH_KIND = {
    "hbm_bandwidth": "membw", "h2d_bandwidth": "h2d", "d2h_bandwidth": "d2h", "p2p_bandwidth": "p2p",
    "dmi_bandwidth:d2d": "membw", "dmi_bandwidth:h2d": "h2d", "dmi_bandwidth:d2h": "d2h", "dmi_bandwidth:p2p": "p2p",
}


def measure_unit(measure: str) -> str | None:
    if measure in MEASURES:
        return MEASURES[measure]
    head, sep, _ = measure.partition(":")
    return _PREFIXED.get(head) if sep else None


@dataclass(frozen=True)
class Thresholds:
    fail_ratio: float = REFERENCE_FAIL.value
    warn_ratio: float = REFERENCE_WARN.value
    fleet_fail_ratio: float = FLEET_FAIL.value
    fleet_warn_ratio: float = FLEET_WARN.value
    fleet_min_nodes: int = FLEET_MIN_NODES


def _lookup(table: Mapping[str, Mapping[str, float]], model: str) -> Mapping[str, float] | None:
    wanted = normalise_model(model)
    for key, entries in table.items():
        if normalise_model(key) == wanted:
            return entries
    return None


def references_for(model: str | None, measure: str, *, configured: Mapping[str, Mapping[str, float]] | None,
                   peaks: Mapping[str, Mapping[str, float]] | None, fleet: Reference | None) -> list[Reference]:
    """Every reference for ``measure`` on ``model``: the fleet median first, then one fixed figure
    (config over the built-in tables)."""
    found: list[Reference] = [fleet] if fleet is not None else []
    if not model:
        return found
    configured_entries = _lookup(configured or {}, model)
    if configured_entries is not None and measure in configured_entries:
        found.append(Reference(float(configured_entries[measure]), f"config check.references.{model}.{measure}", True))
        return found
    head, _, dtype = measure.partition(":")
    if head in ("gemm", "sustained_gemm") and dtype:
        peak = lookup_peak(model, dtype, peaks)
        if peak is not None:
            found.append(Reference(peak.flops, f"{normalise_model(model)} {dtype} peak ({peak.basis}: {peak.source})",
                                   peak.gates))
        return found
    kind = BANDWIDTH_KIND.get(measure)
    expected = lookup_bandwidth(model, kind) if kind is not None else None
    if expected is not None:
        found.append(Reference(expected.bytes_per_second,
                               f"{normalise_model(model)} {kind} reference ({expected.basis}: {expected.source})",
                               expected.gates))
    return found


@dataclass(frozen=True)
class Judgement:
    status: str  # PASS, WARN, FAIL; UNKNOWN when no reference gates the value
    threshold: float | None  # the fail threshold of the deciding reference
    basis: str  # the deciding reference, or why there is none


def _rate(ref: Reference, thresholds: Thresholds) -> tuple[float, float]:
    if ref.fleet:
        return thresholds.fleet_fail_ratio, thresholds.fleet_warn_ratio
    return thresholds.fail_ratio, thresholds.warn_ratio


def judge(value: float, refs: Sequence[Reference], thresholds: Thresholds) -> Judgement:
    """Higher is better: the worst outcome over the gating references; the first one when all pass."""
    gating = [ref for ref in refs if ref.gates]
    if not gating:
        shown = f"; {refs[0].basis} (not gating)" if refs else ""
        return Judgement(UNKNOWN, None, f"no reference for this model{shown}")
    outcomes = []
    for ref in gating:
        fail_ratio, warn_ratio = _rate(ref, thresholds)
        fail_at, warn_at = fail_ratio * ref.value, warn_ratio * ref.value
        status = FAIL if value < fail_at else WARN if value < warn_at else PASS
        outcomes.append((status, fail_at, f"{fail_ratio:.0%} of {ref.basis}"))
    status = worst(status for status, _, _ in outcomes)
    _, threshold, basis = next(outcome for outcome in outcomes if outcome[0] == status)
    return Judgement(status, threshold, basis)
