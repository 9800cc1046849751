"""Quick checks of the RoCE ports: link, flaps, net_health, optics, addresses against /etc/hccn.conf.

Pure over the readings; one result per chip's port.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent.check.checks_chip import label, no_chip_list
from agent.check.results import FAIL, PASS, UNKNOWN, WARN, CheckResult, Result, fold
from agent.check.settings import CheckSettings
from agent.health.readings import QuickReadings, Reading, RoceReadings
from agent.triage.snapshots import NO_LIGHT_WATTS
from collectors import hccn_ip, hccn_link_stat, hccn_optical
from collectors.base import ChipRef, ParseError
from collectors.hccn_link import device_id

__all__ = ["check_net_health", "check_optics", "check_roce_flaps", "check_roce_ip", "check_roce_link"]

_HINT = "hccn_tool must answer: try `hccn_tool -i 0 -link -g` by hand; a hang points at the driver"


def _hccn(ref: ChipRef, command: str) -> str:
    return f"hccn_tool -i {device_id(ref)} -{command} -g"


def _per_port(name: str, readings: QuickReadings, judge: Callable[[ChipRef, RoceReadings, str], Result],
              ok_text: str, hint: str) -> CheckResult:
    missing = no_chip_list(name, readings)
    if missing is not None:
        return missing
    results = [judge(ref, roce, label(readings, ref)) for ref, roce in sorted(readings.node.roce.items())]
    return fold(name, results, ok_text.format(n=len(results)), hint, empty="no RoCE port read")


def _unknown(ref: ChipRef, where: str, reading: Reading) -> Result:
    return Result(UNKNOWN, f"{where}: {reading.error}", npu=ref.npu, chip=ref.chip)


def check_roce_link(readings: QuickReadings, settings: CheckSettings) -> CheckResult:
    def judge(ref: ChipRef, roce: RoceReadings, where: str) -> Result:
        if not roce.link.ok:
            return _unknown(ref, where, roce.link)
        state = roce.link.value.state
        status = PASS if roce.link.value.up else FAIL
        return Result(status, f"{where}: link {state}", npu=ref.npu, chip=ref.chip, value=state, threshold="UP")

    return _per_port("roce_link", readings, judge, "{n} ports UP",
                     "check the cable or optical module and the switch port (hccn_tool -i N -optical -g)")


def check_roce_flaps(readings: QuickReadings, settings: CheckSettings) -> CheckResult:
    window = settings.flap_window_s

    def judge(ref: ChipRef, roce: RoceReadings, where: str) -> Result:
        if not roce.link_stat.ok:
            return _unknown(ref, where, roce.link_stat)
        changes = hccn_link_stat.changes_within(roce.link_stat.value, window)
        downs = sum(change.state == hccn_link_stat.LINK_DOWN for change in changes)
        fields: dict[str, Any] = {"npu": ref.npu, "chip": ref.chip, "value": downs, "threshold": 0,
                                  "unit": "link-down events", "basis": f"config check.flap_window ({window:g}s)"}
        if downs:
            text = f"{where}: {downs} link-down events in the last {window:g}s ({_hccn(ref, 'link_stat')})"
            return Result(FAIL, text, **fields)
        return Result(PASS, f"{where}: no link-down event", **fields)

    return _per_port("roce_flaps", readings, judge, f"no port went down in the last {window:g}s ({{n}} ports)",
                     "a flapping port breaks HCCL links mid-job: reseat or replace the module or cable")


def check_net_health(readings: QuickReadings, settings: CheckSettings) -> CheckResult:
    def judge(ref: ChipRef, roce: RoceReadings, where: str) -> Result:
        if not roce.net_health.ok:
            return _unknown(ref, where, roce.net_health)
        record = roce.net_health.value
        fields: dict[str, Any] = {"npu": ref.npu, "chip": ref.chip, "value": record.state, "threshold": "Success"}
        if record.healthy:
            return Result(PASS, f"{where}: Success", **fields)
        if record.state.casefold() == "init":
            return Result(WARN, f"{where}: net_health Init (no detect address configured)",
                          **fields)
        return Result(FAIL, f"{where}: net_health {record.state}", **fields)

    return _per_port("net_health", readings, judge, "{n} ports report Success",
                     "the port cannot reach its detect address: check netdetect in hccn.conf and the switch path")


def _latest(samples: Sequence[Reading]) -> Reading:
    for reading in reversed(samples):
        if reading.ok:
            return reading
    return samples[0]


def _outside(record: hccn_optical.OpticalRecord) -> list[str]:
    """Readings outside the module's own thresholds (``... High Thres`` / ``... Low Thres``)."""
    thresholds = record.thresholds
    problems = []
    for direction, powers in (("rx", record.rx_power_watts), ("tx", record.tx_power_watts)):
        low, high = thresholds.get(f"{direction}power_low_watts"), thresholds.get(f"{direction}power_high_watts")
        for lane, watts in sorted(powers.items()):
            if low is not None and watts < low:
                problems.append(f"{direction} power lane {lane} {watts * 1e3:.4f} mW under {low * 1e3:.4f} mW")
            elif high is not None and watts > high:
                problems.append(f"{direction} power lane {lane} {watts * 1e3:.4f} mW over {high * 1e3:.4f} mW")
    celsius = record.temperature_celsius
    hot = thresholds.get("temp_high_celsius")
    if celsius is not None and hot is not None and celsius > hot:
        problems.append(f"module at {celsius:g} C, over {hot:g} C")
    return problems


def check_optics(readings: QuickReadings, settings: CheckSettings) -> CheckResult:
    def judge(ref: ChipRef, roce: RoceReadings, where: str) -> Result:
        reading = _latest(roce.optical)
        if not reading.ok:
            return _unknown(ref, where, reading)
        record = reading.value
        rx = record.rx_power_watts
        low = record.thresholds.get("rxpower_low_watts")
        fields: dict[str, Any] = {"npu": ref.npu, "chip": ref.chip, "value": min(rx.values()) if rx else None,
                                  "threshold": low, "unit": "watts",
                                  "basis": "the module's rx power low threshold" if low is not None else None}
        dark = bool(rx) and all(watts < NO_LIGHT_WATTS for watts in rx.values())
        if record.signal_lost or dark:
            return Result(FAIL, f"{where}: no light (LOS/LoL set or rx power under 0.01 mW)",
                          **fields)
        problems = _outside(record)
        if problems:
            return Result(WARN, f"{where}: {problems[0]}", **fields)
        if not rx:
            return Result(UNKNOWN, f"{where}: the module prints no rx power", npu=ref.npu, chip=ref.chip)
        return Result(PASS, f"{where}: rx min {min(rx.values()) * 1e3:.3f} mW", **fields)

    return _per_port("optics", readings, judge, "light on every lane, readings within thresholds on {n} modules",
                     "clean the fibre ends, reseat or swap the module; check the far end")


def check_roce_ip(readings: QuickReadings, settings: CheckSettings) -> CheckResult:
    """Each port's live address (``hccn_tool -ip``) against ``/etc/hccn.conf``; an address used twice fails."""
    name = "roce_ip"
    missing = no_chip_list(name, readings)
    if missing is not None:
        return missing
    conf_path = settings.hccn_conf
    hint = f"reapply the address from {conf_path} (hccn_tool -i N -ip -s address ... netmask ...)"
    try:
        entries = hccn_ip.parse_hccn_conf(Path(conf_path).read_text(encoding="utf-8", errors="replace"))
    except OSError as exc:
        why = "missing" if isinstance(exc, FileNotFoundError) else (exc.strerror or str(exc))
        text = f"{conf_path}: {why}; live addresses not compared"
        return CheckResult(name, UNKNOWN, text, (Result(UNKNOWN, text),),
                           "set collectors.hccn_tool.hccn_conf to the file that configures the RoCE ports")
    except ParseError as exc:
        text = f"{conf_path}: unreadable: {exc}"
        return CheckResult(name, UNKNOWN, text, (Result(UNKNOWN, text),), "fix the file's syntax (key_N=value)")
    owners: dict[str, list[ChipRef]] = {}
    for ref, roce in readings.node.roce.items():
        if roce.ip.ok:
            owners.setdefault(roce.ip.value.address, []).append(ref)
    results = []
    for ref, roce in sorted(readings.node.roce.items()):
        where = label(readings, ref)
        if not roce.ip.ok:
            results.append(_unknown(ref, where, roce.ip))
            continue
        live = roce.ip.value
        entry = entries.get(device_id(ref))
        others = [other for other in owners.get(live.address, []) if other != ref]
        fields: dict[str, Any] = {"npu": ref.npu, "chip": ref.chip, "value": live.address,
                  "threshold": entry.address if entry is not None else None, "basis": conf_path}
        if others:
            results.append(Result(FAIL, f"{where}: {live.address} is also the address of "
                                        f"{label(readings, others[0])}", **fields))
        elif entry is None or entry.address is None:
            results.append(Result(UNKNOWN, f"{where}: no address_{device_id(ref)} in {conf_path}",
                                  **fields))
        elif hccn_ip.mismatches(live, entry):
            results.append(Result(FAIL, f"{where}: {hccn_ip.mismatches(live, entry)[0]}",
                                  **fields))
        else:
            results.append(Result(PASS, f"{where}: {live.address}", **fields))
    return fold(name, results, f"{len(results)} port addresses match {conf_path}", hint, empty="no RoCE port read")
