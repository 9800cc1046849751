"""Quick checks of the chips: count, health and error codes, HBM ECC, HCCS, driver and firmware versions.

Pure: each takes the readings (``agent.check.readings.QuickReadings``) and the settings.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from agent.check.results import FAIL, PASS, UNKNOWN, WARN, CheckResult, Result, fold
from agent.check.settings import CheckSettings
from agent.health.readings import QuickReadings, Reading
from collectors import npu_smi_info
from collectors.base import ChipRef

__all__ = ["check_chip_count", "check_chip_health", "check_hbm_ecc", "check_hccs", "check_versions",
           "label", "no_chip_list"]

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


def check_chip_count(readings: QuickReadings, settings: CheckSettings) -> CheckResult:
    name = "chip_count"
    missing = no_chip_list(name, readings)
    if missing is not None:
        return missing
    seen, expected = len(readings.node.chips), settings.expected_chips
    if not expected:
        text = f"npu-smi lists {seen} chips; expected_chips is not set, so nothing to compare"
        result = Result(UNKNOWN, text, value=seen, unit="chips", basis="config expected_chips (unset)")
        return CheckResult(name, UNKNOWN, text, (result,), "set expected_chips in the config (0 = unknown)")
    status = PASS if seen == expected else FAIL if seen < expected else WARN
    text = f"npu-smi lists {seen} of {expected} expected chips"
    result = Result(status, text, value=seen, threshold=expected, unit="chips", basis="config expected_chips")
    hint = "" if status == PASS else "a chip gone from npu-smi needs dmesg and PCIe checks, then a reboot or repair"
    return CheckResult(name, status, text, (result,), hint)


def check_chip_health(readings: QuickReadings, settings: CheckSettings) -> CheckResult:
    """The health word (``-t health``, else the table's) and the active error codes of every chip."""
    name = "chip_health"
    missing = no_chip_list(name, readings)
    if missing is not None:
        return missing
    table = {(status.npu, status.chip): status for status in readings.node.table.value.chips}
    results = []
    for ref in readings.node.chips:
        reading = readings.node.health.get(ref, Reading(error="not read"))
        record = reading.value if reading.ok else None
        word = (record.health if record is not None else None) or table[(ref.npu, ref.chip)].health
        codes = list(record.error_codes) if record is not None else []
        state = npu_smi_info.health_state(word)
        shown = word + (f", error codes {' '.join(codes)}" if codes else "")
        where = label(readings, ref)
        if state == "ok" and not codes:
            results.append(_chip(ref, PASS, f"{where}: OK", value=word))
        elif state in ("ok", "warning"):
            results.append(_chip(ref, WARN, f"{where}: {shown}", value=word, threshold="OK"))
        else:
            results.append(_chip(ref, FAIL, f"{where}: {shown}", value=word, threshold="OK"))
    return fold(name, results, f"{len(results)} chips OK, no active error code",
                "look the codes up (npu-smi info -t health -i N) and in dmesg; reset or replace the chip")


def check_hbm_ecc(readings: QuickReadings, settings: CheckSettings) -> CheckResult:
    """No current HBM double-bit error, isolated pages at most ``check.max_isolated_pages``."""
    name = "hbm_ecc"
    missing = no_chip_list(name, readings)
    if missing is not None:
        return missing
    limit = settings.max_isolated_pages
    basis = "config check.max_isolated_pages"
    results = []
    for ref in readings.node.chips:
        where = label(readings, ref)
        reading = readings.node.ecc.get(ref, Reading(error="not read"))
        if not reading.ok:
            results.append(_chip(ref, UNKNOWN, f"{where}: {reading.error}"))
            continue
        hbm = reading.value.hbm
        double = int(hbm.double_bit_errors or 0)
        pages = int((hbm.double_bit_isolated_pages or 0) + (hbm.single_bit_isolated_pages or 0))
        fields = {"value": pages, "threshold": limit, "unit": "pages", "basis": basis}
        if double > 0:
            results.append(_chip(ref, FAIL, f"{where}: {double} HBM double-bit errors, {pages} pages isolated",
                                 **fields))
        elif pages > limit:
            results.append(_chip(ref, FAIL, f"{where}: {pages} HBM pages isolated (more than {limit})", **fields))
        elif pages > 0:
            results.append(_chip(ref, WARN, f"{where}: {pages} HBM pages isolated", **fields))
        else:
            results.append(_chip(ref, PASS, f"{where}: no double-bit error, no isolated page", **fields))
    uncorrectable = any(r.status == FAIL for r in results)
    return fold(name, results, f"no HBM double-bit error or isolated page on {len(results)} chips",
                "uncorrectable HBM errors or too many isolated pages: drain the node, reset the chip, replace it "
                "if they return" if uncorrectable else
                "pages were retired after earlier ECC errors: plan a chip check if the count grows")


def check_hccs(readings: QuickReadings, settings: CheckSettings) -> CheckResult:
    """HCCS health of every chip (``npu-smi info -t hccs``)."""
    name = "hccs"
    missing = no_chip_list(name, readings)
    if missing is not None:
        return missing
    results = []
    for ref in readings.node.chips:
        where = label(readings, ref)
        reading = readings.hccs.get(ref, Reading(error="not read"))
        health = reading.value.health if reading.ok else None
        if health is None:
            why = reading.error if not reading.ok else "npu-smi -t hccs prints no health status"
            results.append(_chip(ref, UNKNOWN, f"{where}: {why}"))
        elif health.strip().upper() == "OK":
            results.append(_chip(ref, PASS, f"{where}: OK", value=health, threshold="OK"))
        else:
            results.append(_chip(ref, FAIL, f"{where}: HCCS health {health}", value=health, threshold="OK"))
    return fold(name, results, f"HCCS healthy on {len(results)} chips",
                "check the HCCS error counters (npu-smi info -t hccs -i N); a persistent NOK needs a reset or repair")


def check_versions(readings: QuickReadings, settings: CheckSettings) -> CheckResult:
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
        values = {npu: pair[index] for npu, pair in found.items() if pair[index]}
        if not values:
            results.append(Result(UNKNOWN, f"no card prints a {what} version"))
            continue
        target = expected or Counter(values.values()).most_common(1)[0][0]
        basis = f"config check.expected_{what}" if expected else f"the {what} most cards run"
        odd = [(npu, value) for npu, value in sorted(values.items()) if value != target]
        results += [Result(FAIL, f"NPU {npu}: {what} {value}, not {target}", npu=npu, value=value, threshold=target,
                           basis=basis) for npu, value in odd]
        if not odd:
            results.append(Result(PASS, f"{what} {target} on {len(values)} cards", value=target, threshold=target,
                                  basis=basis))
    if banner and settings.expected_driver and banner != settings.expected_driver:
        results.append(Result(FAIL, f"npu-smi {banner}, not {settings.expected_driver}", value=banner,
                              threshold=settings.expected_driver, basis="config check.expected_driver"))
    drivers = sorted({pair[0] for pair in found.values() if pair[0]})
    firmwares = sorted({pair[1] for pair in found.values() if pair[1]})
    ok_text = f"driver {', '.join(drivers) or '?'}, firmware {', '.join(firmwares) or '?'} on {len(found)} cards"
    return fold(name, results, ok_text,
                "upgrade the odd card (or the node) to the fleet's versions; mixed versions break HCCL links")
