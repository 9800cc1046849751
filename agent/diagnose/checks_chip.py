"""Chip checks of ``npuwatch diagnose``: the chip count, health and codes, HBM ECC, HCCS, temperature.

Pure over ``NodeReadings``; each judgement is ``agent.health.faults``', as ``npuwatch check`` makes it.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent.core.humanize import plural
from agent.diagnose.judging import DeviceResult, aggregate, judged, no_chips, unknown_result
from agent.diagnose.results import Check
from agent.health import faults
from agent.health.readings import NodeReadings, Reading
from agent.health.thresholds import threshold_of
from collectors.base import ChipRef
from collectors.fault_levels import FaultTable
from collectors.npu_smi_kv import chip_argv

__all__ = ["check_chip_count", "check_chip_health", "check_ecc", "check_hccs", "check_temperature"]


def check_chip_count(readings: NodeReadings, expected_chips: int) -> Check:
    """The chips npu-smi lists against ``expected_chips`` (a chip gone from the list fails)."""
    name = "chip_count"
    if (missing := no_chips(name, readings)) is not None:
        return missing
    result = judged(faults.chip_count(len(readings.chips), expected_chips), "this node")
    return aggregate(name, [result], result.result.evidence,
                     "npu-smi no longer lists the chip: check dmesg and PCIe; a reboot or repair is needed")


def check_chip_health(readings: NodeReadings, fault_table: FaultTable | None = None) -> Check:
    """Health word of each chip (``npu-smi info`` and ``-t health``) and the handling level of its active error codes
    (``fault_table``: the packaged one by default)."""
    name = "chip_health"
    if (missing := no_chips(name, readings)) is not None:
        return missing
    table = {(status.npu, status.chip): status for status in readings.table.value.chips}
    results: list[DeviceResult] = []
    for ref in readings.chips:
        reading = readings.health.get(ref, Reading(error="not read"))
        record = reading.value if reading.ok else None
        word = (record.health if record is not None else None) or table[(ref.npu, ref.chip)].health
        codes = list(record.error_codes) if record is not None else []
        said = f"{' '.join(['npu-smi', *chip_argv('health', ref)])} says {word} {' '.join(codes)}".strip()
        results.append(judged(faults.chip_health(word, codes, said=said, table=fault_table, held=readings.held.get(ref),
                                                 npu=ref.npu, chip=ref.chip), readings.label(ref)))
    return aggregate(name, results, f"{plural(len(readings.chips), 'chip')} OK, no error codes")


def check_ecc(readings: NodeReadings, max_pages: int | None = None) -> Check:
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
        results.append(judged(faults.hbm_ecc(reading.value, max_pages=max_pages, npu=ref.npu, chip=ref.chip),
                              readings.label(ref)))
    return aggregate(name, results, f"no HBM double-bit errors or isolated pages on {plural(len(results), 'chip')}",
                     "npu-smi must answer: try `npu-smi info -t ecc -i 0 -c 0` by hand")


def check_hccs(readings: NodeReadings, hccs: Mapping[ChipRef, Reading]) -> Check:
    """HCCS health of every chip (``npu-smi info -t hccs``)."""
    name = "hccs"
    if (missing := no_chips(name, readings)) is not None:
        return missing
    results: list[DeviceResult] = []
    for ref in readings.chips:
        reading = hccs.get(ref, Reading(error="not read"))
        if not reading.ok:
            results.append(unknown_result(readings, ref, reading))
        else:
            results.append(judged(faults.hccs(reading.value, npu=ref.npu, chip=ref.chip), readings.label(ref)))
    return aggregate(name, results, f"HCCS healthy on {plural(len(results), 'chip')}",
                     "npu-smi must answer: try `npu-smi info -t hccs -i 0 -c 0` by hand")


def check_temperature(readings: NodeReadings) -> Check:
    """Each chip's temperature in ``npu-smi info`` against the thresholds table."""
    name = "temperature"
    if (missing := no_chips(name, readings)) is not None:
        return missing
    table = {(status.npu, status.chip): status for status in readings.table.value.chips}
    results = [judged(faults.temperature(table[(ref.npu, ref.chip)].temperature_celsius, npu=ref.npu, chip=ref.chip),
                      readings.label(ref)) for ref in readings.chips]
    return aggregate(name, results, f"{plural(len(results), 'chip')} under {threshold_of('chip_hot').threshold:g} C")
