"""The chip checks every command runs: count, health and error codes, HBM ECC, HCCS, temperature, driver and
firmware versions.

Pure: each takes the readings (``agent.health.readings.QuickReadings``) and the settings; a fault's hint is its
kind's (``agent.health.thresholds``), so every command gives the same advice for the same fault.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from agent.health import faults
from agent.health.readings import QuickReadings, Reading
from agent.health.results import CheckResult, Result, fold
from agent.health.settings import JudgeSettings
from agent.health.status import PASS, UNKNOWN, WARN
from agent.health.thresholds import fault_kind
from collectors.base import ChipRef
from collectors.npu_smi_kv import chip_argv

__all__ = ["check_chip_count", "check_chip_health", "check_hbm_ecc", "check_hccs", "check_temperature",
           "check_versions", "label", "no_chip_list"]

_NPU_SMI_HINT = "npu-smi must answer first: run `npu-smi info` by hand and check dmesg for dcmi errors"


def label(readings: QuickReadings, ref: ChipRef) -> str:
    return readings.node.label(ref)


def no_chip_list(name: str, readings: QuickReadings) -> CheckResult | None:
    table = readings.node.table
    if table.ok:
        return None
    return CheckResult(name, UNKNOWN, f"no chip list: {table.error}", (Result(UNKNOWN, str(table.error)),),
                       _NPU_SMI_HINT)


def _chip(ref: ChipRef, status: str, evidence: str, **fields: Any) -> Result:
    return Result(status, evidence, npu=ref.npu, chip=ref.chip, **fields)


def check_chip_count(readings: QuickReadings, settings: JudgeSettings) -> CheckResult:
    name = "chip_count"
    missing = no_chip_list(name, readings)
    if missing is not None:
        return missing
    result = faults.chip_count(len(readings.node.chips), settings.expected_chips)
    hint = {PASS: "",
            WARN: "npu-smi lists more chips than expected_chips: set it to the chips this node has"}.get(
        result.status, fault_kind("chip_missing").hint)
    return CheckResult(name, result.status, result.evidence, (result,), hint)


def _per_chip(name: str, readings: QuickReadings, judge: Callable[[ChipRef, Any], Result | list[Result]],
              ok_text: Callable[[int], str]) -> CheckResult:
    """The results of every listed chip, ``judge(ref, its row of the npu-smi info table)``; UNKNOWN without a chip
    list."""
    missing = no_chip_list(name, readings)
    if missing is not None:
        return missing
    table = {(status.npu, status.chip): status for status in readings.node.table.value.chips}
    results = []
    for ref in readings.node.chips:
        judged = judge(ref, table.get((ref.npu, ref.chip)))
        results += [result.where(label(readings, ref)) for result in (judged if isinstance(judged, list) else [judged])]
    return fold(name, results, ok_text(len(readings.node.chips)))


def _read(reading: Reading, ref: ChipRef, judge: Callable[[Any], Result]) -> Result:
    """The reading judged, or UNKNOWN with why it was not read."""
    return judge(reading.value) if reading.ok else _chip(ref, UNKNOWN, str(reading.error))


def check_chip_health(readings: QuickReadings, settings: JudgeSettings) -> CheckResult:
    """The health word (``-t health``, else the table's) and the active error codes of every chip; with the agent's
    fault history, a chip held while it reads healthy and a chip that faults again and again."""
    now = time.time()

    def judge(ref: ChipRef, row: Any) -> list[Result]:
        reading = readings.node.health.get(ref, Reading(error="not read"))
        record = reading.value if reading.ok else None
        word = (record.health if record is not None else None) or row.health
        codes = list(record.error_codes) if record is not None else []
        said = f"{' '.join(['npu-smi', *chip_argv('health', ref)])} says {word} {' '.join(codes)}".strip()
        history = readings.node.histories.get(ref)
        found: list[Result | None] = [faults.chip_health(
            word, codes, said=said, table=settings.fault_table, held=readings.node.held.get(ref), history=history,
            basis=readings.node.history_note or None, npu=ref.npu, chip=ref.chip)]
        if reading.ok:
            found.append(faults.held_while_healthy(word, codes, history, now, npu=ref.npu, chip=ref.chip))
        found.append(faults.repeat_offender(history, now, npu=ref.npu, chip=ref.chip))
        return [result for result in found if result is not None]

    note = f" ({readings.node.history_note})" if readings.node.history_note else ""
    return _per_chip("chip_health", readings, judge, lambda n: f"{n} chips OK, no error code that needs handling{note}")


def check_hbm_ecc(readings: QuickReadings, settings: JudgeSettings) -> CheckResult:
    """No current HBM double-bit error, isolated pages at most ``check.max_isolated_pages``."""
    return _per_chip("hbm_ecc", readings, lambda ref, _: _read(
        readings.node.ecc.get(ref, Reading(error="not read")), ref,
        lambda record: faults.hbm_ecc(record, max_pages=settings.max_isolated_pages,
                                      basis=settings.max_isolated_pages_basis, npu=ref.npu, chip=ref.chip)),
        lambda n: f"no HBM double-bit error or isolated page on {n} chips")


def check_hccs(readings: QuickReadings, settings: JudgeSettings) -> CheckResult:
    """HCCS health of every chip (``npu-smi info -t hccs``)."""
    return _per_chip("hccs", readings, lambda ref, _: _read(
        readings.hccs.get(ref, Reading(error="not read")), ref,
        lambda record: faults.hccs(record, npu=ref.npu, chip=ref.chip)), lambda n: f"HCCS healthy on {n} chips")


def check_temperature(readings: QuickReadings, settings: JudgeSettings) -> CheckResult:
    """Each chip's temperature in ``npu-smi info`` under the warning and failing degrees of the table."""
    return _per_chip("temperature", readings, lambda ref, row: faults.temperature(
        row.temperature_celsius, max_celsius=settings.max_temperature, basis=settings.max_temperature_basis,
        npu=ref.npu, chip=ref.chip), lambda n: f"{n} chips at most {fault_kind('chip_hot').threshold:g} C")


def check_versions(readings: QuickReadings, settings: JudgeSettings) -> CheckResult:
    """One driver and one firmware version on every card (``-t board``), equal to the expected ones when set."""
    name = "versions"
    missing = no_chip_list(name, readings)
    if missing is not None:
        return missing
    results: list[Result] = []
    found: dict[int, tuple[str | None, str | None]] = {}
    for npu, reading in sorted(readings.boards.items()):
        if not reading.ok:
            results.append(Result(UNKNOWN, f"NPU {npu}: {reading.error}", npu=npu))
            continue
        found[npu] = (reading.value.software_version, reading.value.firmware_version)
    if not found:
        return fold(name, results, "", empty="no card answered npu-smi info -t board")
    banner = readings.node.table.value.version
    for index, (what, expected) in enumerate((("driver", settings.expected_driver),
                                               ("firmware", settings.expected_firmware))):
        values: dict[int, str] = {npu: str(pair[index]) for npu, pair in found.items() if pair[index]}
        if not values:
            results.append(Result(UNKNOWN, f"no card prints a {what} version"))
            continue
        target: str = expected or Counter(values.values()).most_common(1)[0][0]
        basis = f"config check.expected_{what}" if expected else f"the {what} most cards run"
        odd = [(npu, value) for npu, value in sorted(values.items()) if value != target]
        results += [faults.version(what, value, target, basis=basis, npu=npu).where(f"NPU {npu}") for npu, value in odd]
        if not odd:
            results.append(Result(PASS, f"{what} {target} on {len(values)} cards", value=target, threshold=target,
                                  basis=basis))
    if banner and settings.expected_driver and banner != settings.expected_driver:
        results.append(faults.version("driver", banner, settings.expected_driver, basis="config check.expected_driver")
                       .where("npu-smi"))
    drivers = sorted({pair[0] for pair in found.values() if pair[0]})
    firmwares = sorted({pair[1] for pair in found.values() if pair[1]})
    ok_text = f"driver {', '.join(drivers) or '?'}, firmware {', '.join(firmwares) or '?'} on {len(found)} cards"
    return fold(name, results, ok_text)
