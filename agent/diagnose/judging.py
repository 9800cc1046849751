"""Per-device results of diagnose's checks, folded into one ``Check`` per area."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent.core.humanize import plural
from agent.diagnose.results import (
    CAUSES,
    FAIL,
    KIND_CAUSES,
    PASS,
    SEVERITY,
    UNKNOWN,
    WARN,
    Check,
    Finding,
    worst,
)
from agent.health.readings import NodeReadings, Reading
from agent.triage.evidence import LocalFault
from agent.triage.faults import is_failure
from collectors.base import ChipRef

__all__ = ["DeviceResult", "aggregate", "device_finding", "fault_result", "no_chips", "unknown_result"]


@dataclass(frozen=True)
class DeviceResult:
    npu: int | None
    status: str
    text: str
    finding: Finding | None = None


def device_finding(readings: NodeReadings, ref: ChipRef, cause: str, status: str, detail: str, *,
           text: str | None = None) -> DeviceResult:
    label = readings.label(ref)
    finding = Finding(cause, status, ref.npu, label, detail)
    return DeviceResult(ref.npu, status, f"{label}: {text or detail}", finding)


def fault_result(readings: NodeReadings, ref: ChipRef, fault: LocalFault, *, text: str | None = None) -> DeviceResult:
    """A fault judged by ``agent.triage.snapshots`` as this check's result: FAIL or WARN by its kind."""
    status = FAIL if is_failure(fault.kind) else WARN
    return device_finding(readings, ref, KIND_CAUSES[fault.kind], status, fault.detail, text=text)


def aggregate(name: str, results: Sequence[DeviceResult], ok_text: str, default_hint: str = "") -> Check:
    """One check from per-device results: worst status, non-passing evidence first."""
    if not results:
        return Check(name, UNKNOWN, "no devices to check", default_hint)
    status = worst(r.status for r in results)
    if all(r.status == UNKNOWN for r in results):
        more = f" (and {plural(len(results) - 1, 'more device')})" if len(results) > 1 else ""
        return Check(name, UNKNOWN, results[0].text + more, default_hint)
    ordered = sorted(results, key=lambda r: -SEVERITY[r.status])
    shown = [r.text for r in ordered if r.status != PASS]
    evidence = "; ".join(shown) if shown else ok_text
    findings = tuple(sorted((r.finding for r in results if r.finding is not None),
                            key=lambda f: (-SEVERITY[f.status], f.rank)))
    top = ordered[0]
    hint = CAUSES[findings[0].cause][1] if findings else default_hint
    device = top.npu if status != PASS else None
    return Check(name, status, evidence, hint if status != PASS else "", device, findings)


def unknown_result(readings: NodeReadings, ref: ChipRef, reading: Reading) -> DeviceResult:
    return DeviceResult(ref.npu, UNKNOWN, f"{readings.label(ref)}: {reading.error}")


def no_chips(name: str, readings: NodeReadings) -> Check | None:
    if readings.table.ok:
        return None
    return Check(name, UNKNOWN, f"no chip list: {readings.table.error}",
                 "npu-smi must answer first: run `npu-smi info` by hand and check dmesg for dcmi errors")


