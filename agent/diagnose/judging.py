"""Per-device results of diagnose's checks, folded into one ``Check`` per area.

A device's result is the ``agent.health.results.Result`` a fault function returned, led by the
device's label; a fault found becomes the ``Finding`` of its cause, which the verdict weighs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent.core.humanize import plural
from agent.diagnose.results import CAUSES, KIND_CAUSES, Check, Finding
from agent.health.readings import NodeReadings, Reading
from agent.health.results import Result
from agent.health.status import PASS, UNKNOWN, rank, worst
from collectors.base import ChipRef

__all__ = ["DeviceResult", "aggregate", "judged", "no_chips", "unknown_result"]


@dataclass(frozen=True)
class DeviceResult:
    result: Result  # its evidence led by the device's label
    finding: Finding | None = None

    @property
    def npu(self) -> int | None:
        return self.result.npu

    @property
    def status(self) -> str:
        return self.result.status

    @property
    def text(self) -> str:
        return self.result.evidence


def judged(result: Result, label: str) -> DeviceResult:
    """A fault function's result on the device ``label`` names; a fault found is also a finding."""
    finding = None
    if result.kind is not None and result.kind in KIND_CAUSES:
        finding = Finding(KIND_CAUSES[result.kind], result.status, result.npu, label, result.evidence)
    return DeviceResult(result.where(label), finding)


def aggregate(name: str, results: Sequence[DeviceResult], ok_text: str, default_hint: str = "") -> Check:
    """One check from per-device results: worst status (``agent.health.status``), non-passing evidence first."""
    records = tuple(r.result for r in results)
    if not results:
        return Check(name, UNKNOWN, "no devices to check", default_hint)
    status = worst(r.status for r in results)
    if all(r.status == UNKNOWN for r in results):
        more = f" (and {plural(len(results) - 1, 'more device')})" if len(results) > 1 else ""
        return Check(name, UNKNOWN, results[0].text + more, default_hint, results=records)
    ordered = sorted(results, key=lambda r: -rank(r.status))
    shown = [r.text for r in ordered if r.status != PASS]
    evidence = "; ".join(shown) if shown else ok_text
    findings = tuple(sorted((r.finding for r in results if r.finding is not None),
                            key=lambda f: (-rank(f.status), f.rank)))
    top = ordered[0]
    hint = CAUSES[findings[0].cause][1] if findings else default_hint
    device = top.npu if status != PASS else None
    return Check(name, status, evidence, hint if status != PASS else "", device, findings, records)


def unknown_result(readings: NodeReadings, ref: ChipRef, reading: Reading) -> DeviceResult:
    return DeviceResult(Result(UNKNOWN, f"{readings.label(ref)}: {reading.error}", npu=ref.npu, chip=ref.chip))


def no_chips(name: str, readings: NodeReadings) -> Check | None:
    if readings.table.ok:
        return None
    text = f"no chip list: {readings.table.error}"
    return Check(name, UNKNOWN, text, "npu-smi must answer first: run `npu-smi info` by hand and check dmesg for "
                 "dcmi errors", results=(Result(UNKNOWN, str(readings.table.error)),))
