"""Chip checks of ``npuwatch diagnose``: the chip list and health, HBM ECC. Pure over ``NodeReadings``."""

from __future__ import annotations

from agent.core.humanize import plural
from agent.diagnose.judging import DeviceResult, aggregate, fault_result, no_chips, unknown_result
from agent.diagnose.results import (
    FAIL,
    PASS,
    Check,
    Finding,
)
from agent.health.readings import NodeReadings, Reading
from agent.triage.snapshots import ecc_fault, health_fault
from collectors.npu_smi_kv import chip_argv


def check_chips(readings: NodeReadings, expected_chips: int = 0) -> Check:
    """Health word of each chip (``npu-smi info`` and ``-t health``) and its active error codes."""
    name = "npu_health"
    if (missing := no_chips(name, readings)) is not None:
        return missing
    table = {(status.npu, status.chip): status for status in readings.table.value.chips}
    results: list[DeviceResult] = []
    for ref in readings.chips:
        reading = readings.health.get(ref, Reading(error="not read"))
        record = reading.value if reading.ok else None
        printed = record.health if record is not None else None
        word = printed or table[(ref.npu, ref.chip)].health
        codes = list(record.error_codes) if record is not None else []
        detail = f"npu-smi says {word}" + (f", error codes {' '.join(codes)}" if codes else "")
        said = f"{' '.join(['npu-smi', *chip_argv('health', ref)])} says {word} {' '.join(codes)}".strip()
        fault = health_fault(readings.node, ref.npu, said, word, codes=tuple(codes))
        if fault is None:
            results.append(DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: OK"))
        else:
            results.append(fault_result(readings, ref, fault, text=detail))
    ok_text = f"{plural(len(readings.chips), 'chip')} OK, no error codes"
    if expected_chips and len(readings.chips) < expected_chips:
        text = f"npu-smi lists {len(readings.chips)} of {expected_chips} expected chips"
        finding = Finding("chip_missing", FAIL, None, "this node", text)
        results.append(DeviceResult(None, FAIL, text, finding))
    return aggregate(name, results, ok_text)


def check_ecc(readings: NodeReadings) -> Check:
    """HBM double-bit (uncorrectable) errors and isolated pages (``npu-smi info -t ecc``)."""
    name = "hbm_ecc"
    if (missing := no_chips(name, readings)) is not None:
        return missing
    results: list[DeviceResult] = []
    for ref in readings.chips:
        reading = readings.ecc.get(ref, Reading(error="not read"))
        if not reading.ok:
            results.append(unknown_result(readings, ref, reading))
            continue
        fault = ecc_fault(readings.node, ref.npu, reading.value)
        if fault is not None:
            results.append(fault_result(readings, ref, fault))
        else:
            results.append(DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: no double-bit errors"))
    return aggregate(name, results, f"no HBM double-bit errors or isolated pages on {plural(len(results), 'chip')}",
                      "npu-smi must answer: try `npu-smi info -t ecc -i 0 -c 0` by hand")


