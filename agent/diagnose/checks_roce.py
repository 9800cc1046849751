"""RoCE checks of ``npuwatch diagnose``: link, flaps, optics, packet errors, net_health, addresses.

Pure over ``NodeReadings``; each judgement is ``agent.health.faults``', as ``npuwatch check`` makes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from agent.core.humanize import plural
from agent.diagnose.judging import DeviceResult, aggregate, judged, no_chips, unknown_result
from agent.diagnose.results import Check, window_text
from agent.health import faults
from agent.health.readings import NodeReadings, RoceReadings
from agent.health.results import Result
from agent.health.status import UNKNOWN
from collectors import hccn_ip
from collectors.base import ChipRef, ParseError
from collectors.hccn_ip import HccnConfEntry
from collectors.hccn_link import device_id

__all__ = ["check_flaps", "check_ip_config", "check_link", "check_net_health", "check_optics",
           "check_packet_errors"]

_HCCN_HINT = "hccn_tool must answer: try `hccn_tool -i 0 -link -g` by hand; a hang points at the driver"


def _roce_results(readings: NodeReadings, judge: Callable[[ChipRef, RoceReadings], DeviceResult]
                  ) -> list[DeviceResult]:
    return [judge(ref, roce) for ref, roce in readings.roce.items()]


def check_link(readings: NodeReadings) -> Check:
    """RoCE port state now (``hccn_tool -link``)."""
    name = "roce_link"
    if (missing := no_chips(name, readings)) is not None:
        return missing

    def judge(ref: ChipRef, roce: RoceReadings) -> DeviceResult:
        if not roce.link.ok:
            return unknown_result(readings, ref, roce.link)
        stat = roce.link_stat.value if roce.link_stat.ok else None
        return judged(faults.link(roce.link.value, device_id(ref), link_stat=stat, npu=ref.npu, chip=ref.chip),
                      readings.label(ref))

    results = _roce_results(readings, judge)
    return aggregate(name, results, f"{plural(len(results), 'port')} UP", _HCCN_HINT)


def check_flaps(readings: NodeReadings, window_s: float) -> Check:
    """Link-down events in the recent window (``hccn_tool -link_stat``): a flapping port drops HCCL links."""
    name = "roce_flaps"
    if (missing := no_chips(name, readings)) is not None:
        return missing
    window = window_text(window_s)

    def judge(ref: ChipRef, roce: RoceReadings) -> DeviceResult:
        if not roce.link_stat.ok:
            return unknown_result(readings, ref, roce.link_stat)
        up_now = roce.link.ok and roce.link.value.up
        result = faults.flapping(roce.link_stat.value, device_id(ref), window_s=window_s, up_now=up_now,
                                 basis=f"diagnose --window ({window})", npu=ref.npu, chip=ref.chip)
        return judged(result, readings.label(ref))

    results = _roce_results(readings, judge)
    ok_text = f"no port flapped in the last {window} ({plural(len(results), 'port')})"
    return aggregate(name, results, ok_text, _HCCN_HINT)


def check_optics(readings: NodeReadings) -> Check:
    """Optical module: rx power per lane, the LOS/LoL flags and the module's thresholds (``hccn_tool -optical``)."""
    name = "optics"
    if (missing := no_chips(name, readings)) is not None:
        return missing

    def judge(ref: ChipRef, roce: RoceReadings) -> DeviceResult:
        reading = faults.latest(roce.optical)
        if not reading.ok:
            return unknown_result(readings, ref, reading)
        return judged(faults.optics(reading.value, device_id(ref), npu=ref.npu, chip=ref.chip), readings.label(ref))

    results = _roce_results(readings, judge)
    return aggregate(name, results, f"light on every lane, no LOS on {plural(len(results), 'module')}", _HCCN_HINT)


def check_packet_errors(readings: NodeReadings) -> Check:
    """RoCE error counters (``hccn_tool -stat``) sampled twice: rising now is what matters."""
    name = "roce_errors"
    if (missing := no_chips(name, readings)) is not None:
        return missing

    def judge(ref: ChipRef, roce: RoceReadings) -> DeviceResult:
        if len(roce.stat) < 2 or not roce.stat[0].ok or not roce.stat[1].ok:
            failed = next((r for r in roce.stat if not r.ok), None)
            if failed is None:
                return DeviceResult(Result(UNKNOWN, f"{readings.label(ref)}: only one sample", npu=ref.npu,
                                           chip=ref.chip))
            return unknown_result(readings, ref, failed)
        seconds = max(1e-3, roce.stat[1].at - roce.stat[0].at)
        result = faults.rising_errors(roce.stat[0].value, roce.stat[1].value, device_id(ref), seconds=seconds,
                                      npu=ref.npu, chip=ref.chip)
        return judged(result, readings.label(ref))

    results = _roce_results(readings, judge)
    return aggregate(name, results, f"no error counter rose on {plural(len(results), 'port')}", _HCCN_HINT)


def check_net_health(readings: NodeReadings) -> Check:
    """The NIC's own reachability test of its detect address (``hccn_tool -net_health``)."""
    name = "net_health"
    if (missing := no_chips(name, readings)) is not None:
        return missing

    def judge(ref: ChipRef, roce: RoceReadings) -> DeviceResult:
        if not roce.net_health.ok:
            return unknown_result(readings, ref, roce.net_health)
        return judged(faults.net_health(roce.net_health.value, device_id(ref), npu=ref.npu, chip=ref.chip),
                      readings.label(ref))

    results = _roce_results(readings, judge)
    verb = "reports" if len(results) == 1 else "report"
    return aggregate(name, results, f"{plural(len(results), 'port')} {verb} Success", _HCCN_HINT)


def check_ip_config(readings: NodeReadings, hccn_conf: str) -> Check:
    """Each port's live address (``hccn_tool -ip``) against ``/etc/hccn.conf``; a port with an earlier port's
    address is a duplicate."""
    name = "roce_ip"
    if (missing := no_chips(name, readings)) is not None:
        return missing
    live = {ref: roce.ip for ref, roce in readings.roce.items()}
    first_owner: dict[str, ChipRef] = {}
    duplicate_of: dict[ChipRef, str] = {}
    for ref, reading in live.items():
        if reading.ok:
            owner = first_owner.setdefault(reading.value.address, ref)
            if owner != ref:
                duplicate_of[ref] = readings.label(owner)

    def judge(ref: ChipRef, entries: Mapping[int, HccnConfEntry]) -> DeviceResult:
        result = faults.roce_ip(live[ref].value, entries.get(device_id(ref)), device_id(ref), conf_path=hccn_conf,
                                duplicate_of=duplicate_of.get(ref), npu=ref.npu, chip=ref.chip)
        return judged(result, readings.label(ref))

    try:
        conf_text = Path(hccn_conf).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        why = "missing" if isinstance(exc, FileNotFoundError) else (exc.strerror or str(exc))
        if duplicate_of:
            return aggregate(name, [judge(ref, {}) for ref in duplicate_of], "")
        text = f"{hccn_conf}: {why}; live addresses not compared"
        return Check(name, UNKNOWN, text, "set collectors.hccn_tool.hccn_conf to the file that configures the RoCE "
                     "ports", results=(Result(UNKNOWN, text),))
    try:
        entries = hccn_ip.parse_hccn_conf(conf_text)
    except ParseError as exc:
        text = f"{hccn_conf}: unreadable: {exc}"
        return Check(name, UNKNOWN, text, "fix the file's syntax (key_N=value)", results=(Result(UNKNOWN, text),))
    results = [judge(ref, entries) if reading.ok else unknown_result(readings, ref, reading)
               for ref, reading in live.items()]
    return aggregate(name, results, f"{plural(len(live), 'port address', 'port addresses')} match {hccn_conf}")
