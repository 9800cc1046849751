"""Quick checks of the RoCE ports: link, flaps, net_health, optics, addresses against /etc/hccn.conf.

Pure over the readings; one result per chip's port.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.check.checks_chip import label, no_chip_list
from agent.check.settings import CheckSettings
from agent.core.humanize import duration
from agent.health import faults
from agent.health.readings import QuickReadings, Reading, RoceReadings
from agent.health.results import CheckResult, Result, fold
from agent.health.status import UNKNOWN
from collectors import hccn_ip
from collectors.base import ChipRef, ParseError
from collectors.hccn_link import device_id

__all__ = ["check_net_health", "check_optics", "check_roce_flaps", "check_roce_ip", "check_roce_link"]

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


def check_roce_link(readings: QuickReadings, settings: CheckSettings) -> CheckResult:
    def judge(ref: ChipRef, roce: RoceReadings, where: str) -> Result:
        if not roce.link.ok:
            return _unknown(ref, where, roce.link)
        stat = roce.link_stat.value if roce.link_stat.ok else None
        return faults.link(roce.link.value, device_id(ref), link_stat=stat, **_where(ref)).where(where)

    return _per_port("roce_link", readings, judge, "{n} ports UP",
                     "check the cable or optical module and the switch port (hccn_tool -i N -optical -g)")


def check_roce_flaps(readings: QuickReadings, settings: CheckSettings) -> CheckResult:
    window = settings.flap_window_s
    basis = f"{settings.flap_window_basis} ({duration(window)})"

    def judge(ref: ChipRef, roce: RoceReadings, where: str) -> Result:
        if not roce.link_stat.ok:
            return _unknown(ref, where, roce.link_stat)
        up_now = roce.link.ok and roce.link.value.up
        return faults.flapping(roce.link_stat.value, device_id(ref), window_s=window, up_now=up_now, basis=basis,
                               **_where(ref)).where(where)

    return _per_port("roce_flaps", readings, judge, f"no port flapped in the last {duration(window)} ({{n}} ports)",
                     "a flapping port breaks HCCL links mid-job: reseat or replace the module or cable")


def check_net_health(readings: QuickReadings, settings: CheckSettings) -> CheckResult:
    def judge(ref: ChipRef, roce: RoceReadings, where: str) -> Result:
        if not roce.net_health.ok:
            return _unknown(ref, where, roce.net_health)
        return faults.net_health(roce.net_health.value, device_id(ref), **_where(ref)).where(where)

    return _per_port("net_health", readings, judge, "{n} ports report Success",
                     "the port cannot reach its detect address: check netdetect in hccn.conf and the switch path")


def check_optics(readings: QuickReadings, settings: CheckSettings) -> CheckResult:
    def judge(ref: ChipRef, roce: RoceReadings, where: str) -> Result:
        reading = faults.latest(roce.optical)
        if not reading.ok:
            return _unknown(ref, where, reading)
        return faults.optics(reading.value, device_id(ref), **_where(ref)).where(where)

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
        others = [other for other in owners.get(live.address, []) if other != ref]
        results.append(faults.roce_ip(live, entries.get(device_id(ref)), device_id(ref), conf_path=conf_path,
                                      duplicate_of=label(readings, others[0]) if others else None,
                                      **_where(ref)).where(where))
    return fold(name, results, f"{len(results)} port addresses match {conf_path}", hint, empty="no RoCE port read")
