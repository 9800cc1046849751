"""RoCE checks of ``npuwatch diagnose``: link, flaps, optics, packet errors, net_health, addresses.

Pure over ``NodeReadings``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from agent.core.humanize import plural
from agent.diagnose.judging import DeviceResult, aggregate, device_finding, fault_result, no_chips, unknown_result
from agent.diagnose.results import (
    FAIL,
    PASS,
    UNKNOWN,
    WARN,
    Check,
    window_text,
)
from agent.health.readings import NodeReadings, Reading, RoceReadings
from agent.triage.snapshots import flap_fault, link_fault, net_health_fault, optics_fault, rising_counters_fault
from collectors import (
    hccn_ip,
    hccn_link_stat,
    hccn_net_health,
    hccn_optical,
)
from collectors.base import ChipRef, ParseError
from collectors.hccn_link import device_id


def _roce_results(readings: NodeReadings, judge: Callable[[ChipRef, RoceReadings], DeviceResult]
                  ) -> list[DeviceResult]:
    return [judge(ref, roce) for ref, roce in readings.roce.items()]


_HCCN_HINT = "hccn_tool must answer: try `hccn_tool -i 0 -link -g` by hand; a hang points at the driver"


def _hccn(ref: ChipRef, command: str) -> str:
    return f"hccn_tool -i {device_id(ref)} -{command} -g"


def check_link(readings: NodeReadings) -> Check:
    """RoCE port state now (``hccn_tool -link``)."""
    name = "roce_link"
    if (missing := no_chips(name, readings)) is not None:
        return missing

    def judge(ref: ChipRef, roce: RoceReadings) -> DeviceResult:
        if not roce.link.ok:
            return unknown_result(readings, ref, roce.link)
        fault = link_fault(readings.node, ref.npu, device_id(ref), roce.link.value)
        if fault is None:
            return DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: UP")
        return fault_result(readings, ref, fault, text="link DOWN")

    results = _roce_results(readings, judge)
    return aggregate(name, results, f"{plural(len(results), 'port')} UP", _HCCN_HINT)


def check_flaps(readings: NodeReadings, window_s: float) -> Check:
    """Link changes in the recent window (``hccn_tool -link_stat``): a flapping port drops HCCL links."""
    name = "roce_flaps"
    if (missing := no_chips(name, readings)) is not None:
        return missing
    window = window_text(window_s)

    def judge(ref: ChipRef, roce: RoceReadings) -> DeviceResult:
        if not roce.link_stat.ok:
            return unknown_result(readings, ref, roce.link_stat)
        up_now = roce.link.ok and roce.link.value.up
        fault = flap_fault(readings.node, ref.npu, device_id(ref), roce.link_stat.value, window_s=window_s,
                           up_now=up_now, window_text=window)
        if fault is not None:
            return fault_result(readings, ref, fault)
        changes = hccn_link_stat.changes_within(roce.link_stat.value, window_s)
        return DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: {plural(len(changes), 'change')}")

    results = _roce_results(readings, judge)
    ok_text = f"no port flapped in the last {window} ({plural(len(results), 'port')})"
    return aggregate(name, results, ok_text, _HCCN_HINT)


def _latest(samples: Sequence[Reading]) -> Reading:
    for reading in reversed(samples):
        if reading.ok:
            return reading
    return samples[0]


def check_optics(readings: NodeReadings) -> Check:
    """Optical module: receive power per lane and the LOS/LoL flags (``hccn_tool -optical``)."""
    name = "optics"
    if (missing := no_chips(name, readings)) is not None:
        return missing

    def judge(ref: ChipRef, roce: RoceReadings) -> DeviceResult:
        reading = _latest(roce.optical)
        if not reading.ok:
            return unknown_result(readings, ref, reading)
        record: hccn_optical.OpticalRecord = reading.value
        rx = record.rx_power_watts
        fault = optics_fault(readings.node, ref.npu, device_id(ref), record)
        if fault is not None:
            return fault_result(readings, ref, fault)
        if not rx:
            return DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: no rx power readings")
        return DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: rx min {min(rx.values()) * 1e3:.3f} mW")

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
                return DeviceResult(ref.npu, UNKNOWN, f"{readings.label(ref)}: only one sample")
            return unknown_result(readings, ref, failed)
        seconds = max(1e-3, roce.stat[1].at - roce.stat[0].at)
        fault = rising_counters_fault(readings.node, ref.npu, device_id(ref), roce.stat[0].value,
                                      after=roce.stat[1].value, seconds=seconds)
        if fault is not None:
            return fault_result(readings, ref, fault)
        return DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: no error counter rose")

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
        record: hccn_net_health.NetHealthRecord = roce.net_health.value
        fault = net_health_fault(readings.node, ref.npu, device_id(ref), record)
        if fault is None:
            return DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: Success")
        return fault_result(readings, ref, fault)

    results = _roce_results(readings, judge)
    verb = "reports" if len(results) == 1 else "report"
    return aggregate(name, results, f"{plural(len(results), 'port')} {verb} Success", _HCCN_HINT)


def check_ip_config(readings: NodeReadings, hccn_conf: str) -> Check:
    """Each port's live address (``hccn_tool -ip``) against ``/etc/hccn.conf``; duplicates too."""
    name = "roce_ip"
    if (missing := no_chips(name, readings)) is not None:
        return missing
    live = {ref: roce.ip for ref, roce in readings.roce.items()}
    results: list[DeviceResult] = []
    owners: dict[str, list[ChipRef]] = {}
    for ref, reading in live.items():
        if reading.ok:
            owners.setdefault(reading.value.address, []).append(ref)
    for address, refs in owners.items():
        for ref in refs[1:] if len(refs) > 1 else ():
            detail = f"{_hccn(ref, 'ip')}: {address} is also the address of {readings.label(refs[0])}"
            results.append(device_finding(readings, ref, "ip_mismatch", FAIL, detail))
    try:
        conf_text = Path(hccn_conf).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        why = "missing" if isinstance(exc, FileNotFoundError) else (exc.strerror or str(exc))
        if results:
            return aggregate(name, results, "")
        return Check(name, UNKNOWN, f"{hccn_conf}: {why}; live addresses not compared",
                     "set collectors.hccn_tool.hccn_conf to the file that configures the RoCE ports")
    try:
        entries = hccn_ip.parse_hccn_conf(conf_text)
    except ParseError as exc:
        return Check(name, UNKNOWN, f"{hccn_conf}: unreadable: {exc}", "fix the file's syntax (key_N=value)")
    for ref, reading in live.items():
        if not reading.ok:
            results.append(unknown_result(readings, ref, reading))
            continue
        entry = entries.get(device_id(ref))
        if entry is None or entry.address is None:
            text = f"{readings.label(ref)}: no address_{device_id(ref)} in {hccn_conf}"
            results.append(DeviceResult(ref.npu, WARN, text))
            continue
        problems = hccn_ip.mismatches(reading.value, entry)
        if problems:
            results.append(device_finding(readings, ref, "ip_mismatch", FAIL, f"{_hccn(ref, 'ip')}: {problems[0]}"))
        else:
            results.append(DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: {reading.value.address}"))
    return aggregate(name, results, f"{plural(len(live), 'port address', 'port addresses')} match {hccn_conf}")
