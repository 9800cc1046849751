"""The RoCE checks every command runs: link, flaps, net_health, optics, packet errors, addresses against
/etc/hccn.conf.

Pure over the readings; one result per chip's port.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.core.humanize import duration, plural
from agent.health import faults
from agent.health.checks_chip import label, no_chip_list
from agent.health.node import read_hccn_conf
from agent.health.readings import QuickReadings, Reading, RoceReadings
from agent.health.results import CheckResult, Result, fold
from agent.health.settings import JudgeSettings
from agent.health.status import UNKNOWN
from collectors.base import ChipRef
from collectors.hccn_link import device_id

__all__ = ["check_net_health", "check_optics", "check_roce_errors", "check_roce_flaps", "check_roce_ip",
           "check_roce_link"]

_HINT = "hccn_tool must answer: try `hccn_tool -i 0 -link -g` by hand; a hang points at the driver"


def _per_port(name: str, readings: QuickReadings, judge: Callable[[ChipRef, RoceReadings, str], Result],
              ok_text: str, hint: str) -> CheckResult:
    missing = no_chip_list(name, readings)
    if missing is not None:
        return missing
    results = [judge(ref, roce, label(readings, ref)) for ref, roce in sorted(readings.node.roce.items())]
    return fold(name, results, ok_text.format(n=len(results)), hint, empty="no RoCE port read")


def _unknown(ref: ChipRef, where: str, reading: Reading) -> Result:
    return Result(UNKNOWN, f"{where}: {reading.error}", npu=ref.npu, chip=ref.chip)


def _where(ref: ChipRef) -> dict[str, Any]:
    return {"npu": ref.npu, "chip": ref.chip}


def check_roce_link(readings: QuickReadings, settings: JudgeSettings) -> CheckResult:
    def judge(ref: ChipRef, roce: RoceReadings, where: str) -> Result:
        if not roce.link.ok:
            return _unknown(ref, where, roce.link)
        stat = roce.link_stat.value if roce.link_stat.ok else None
        return faults.link(roce.link.value, device_id(ref), link_stat=stat, **_where(ref)).where(where)

    return _per_port("roce_link", readings, judge, "{n} ports UP", _HINT)


def check_roce_flaps(readings: QuickReadings, settings: JudgeSettings) -> CheckResult:
    window = settings.flap_window_s
    basis = f"{settings.flap_window_basis} ({duration(window)})"

    def judge(ref: ChipRef, roce: RoceReadings, where: str) -> Result:
        if not roce.link_stat.ok:
            return _unknown(ref, where, roce.link_stat)
        up_now = roce.link.ok and roce.link.value.up
        return faults.flapping(roce.link_stat.value, device_id(ref), window_s=window, up_now=up_now, basis=basis,
                               **_where(ref)).where(where)

    return _per_port("roce_flaps", readings, judge, f"no port flapped in the last {duration(window)} ({{n}} ports)",
                     _HINT)


def check_net_health(readings: QuickReadings, settings: JudgeSettings) -> CheckResult:
    def judge(ref: ChipRef, roce: RoceReadings, where: str) -> Result:
        if not roce.net_health.ok:
            return _unknown(ref, where, roce.net_health)
        return faults.net_health(roce.net_health.value, device_id(ref), **_where(ref)).where(where)

    return _per_port("net_health", readings, judge, "{n} ports report Success", _HINT)


def check_optics(readings: QuickReadings, settings: JudgeSettings) -> CheckResult:
    def judge(ref: ChipRef, roce: RoceReadings, where: str) -> Result:
        reading = faults.latest(roce.optical)
        if not reading.ok:
            return _unknown(ref, where, reading)
        return faults.optics(reading.value, device_id(ref), **_where(ref)).where(where)

    return _per_port("optics", readings, judge, "light on every lane, readings within thresholds on {n} modules",
                     _HINT)


def check_roce_errors(readings: QuickReadings, settings: JudgeSettings) -> CheckResult:
    """RoCE error counters (``hccn_tool -stat``) sampled twice: rising between the samples is what matters."""
    def judge(ref: ChipRef, roce: RoceReadings, where: str) -> Result:
        failed = next((reading for reading in roce.stat if not reading.ok), None)
        if failed is not None:
            return _unknown(ref, where, failed)
        if len(roce.stat) < 2:
            return Result(UNKNOWN, f"{where}: only one sample of the counters", npu=ref.npu, chip=ref.chip)
        seconds = max(1e-3, roce.stat[1].at - roce.stat[0].at)
        return faults.rising_errors(roce.stat[0].value, roce.stat[1].value, device_id(ref), seconds=seconds,
                                    **_where(ref)).where(where)

    return _per_port("roce_errors", readings, judge, "no error counter rose on {n} ports", _HINT)


def check_roce_ip(readings: QuickReadings, settings: JudgeSettings) -> CheckResult:
    """Each port's live address (``hccn_tool -ip``) against ``/etc/hccn.conf``; an address used twice fails."""
    name = "roce_ip"
    missing = no_chip_list(name, readings)
    if missing is not None:
        return missing
    conf_path = settings.hccn_conf
    entries, unusable = read_hccn_conf(conf_path)
    if unusable is not None:
        unusable += "; live addresses not compared"
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
        others = [other for other in owners.get(live.address, []) if other != ref]
        entry = entries.get(device_id(ref)) if entries is not None else None
        # Of a pair sharing an address, the port hccn.conf gives that address to is right; without a file that
        # says so, neither can be trusted.
        owns = entry is not None and entry.address == live.address and not any(
            entries is not None and (other_entry := entries.get(device_id(other))) is not None
            and other_entry.address == live.address for other in others)
        duplicate = label(readings, others[0]) if others and not owns else None
        if unusable is not None and duplicate is None:
            results.append(Result(UNKNOWN, f"{where}: {unusable}", npu=ref.npu, chip=ref.chip, value=live.address,
                                  basis=conf_path))
            continue
        results.append(faults.roce_ip(live, entry, device_id(ref), conf_path=conf_path, duplicate_of=duplicate,
                                      **_where(ref)).where(where))
    hint = (f"set collectors.hccn_tool.hccn_conf to the file that configures the RoCE ports ({unusable})"
            if unusable is not None else _HINT)
    return fold(name, results, f"{plural(len(results), 'port address', 'port addresses')} match {conf_path}", hint,
                empty="no RoCE port read")

