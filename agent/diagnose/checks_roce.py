"""RoCE checks of ``npuwatch diagnose``: link, flaps, optics, packet errors, net_health, addresses.

Pure over ``NodeReadings``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from agent.diagnose.judging import DeviceResult, aggregate, device_finding, no_chips, unknown_result
from agent.diagnose.readings import NodeReadings, RoceReadings
from agent.diagnose.results import (
    FAIL,
    FLAP_DOWNS,
    NO_LIGHT_WATTS,
    PASS,
    UNKNOWN,
    WARN,
    Check,
    Reading,
    window_text,
)
from collectors import (
    hccn_ip,
    hccn_link_stat,
    hccn_net_health,
    hccn_optical,
    hccn_stat,
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
        if roce.link.value.up:
            return DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: UP")
        return device_finding(readings, ref, "link_down", FAIL, f"{_hccn(ref, 'link')} says {roce.link.value.state}",
                      text="link DOWN")

    results = _roce_results(readings, judge)
    return aggregate(name, results, f"{len(results)} ports UP", _HCCN_HINT)


def check_flaps(readings: NodeReadings, window_s: float) -> Check:
    """Link changes in the recent window (``hccn_tool -link_stat``): a flapping port drops HCCL links."""
    name = "roce_flaps"
    if (missing := no_chips(name, readings)) is not None:
        return missing
    window = window_text(window_s)

    def judge(ref: ChipRef, roce: RoceReadings) -> DeviceResult:
        if not roce.link_stat.ok:
            return unknown_result(readings, ref, roce.link_stat)
        changes = hccn_link_stat.changes_within(roce.link_stat.value, window_s)
        downs = sum(change.state == hccn_link_stat.LINK_DOWN for change in changes)
        up_now = roce.link.ok and roce.link.value.up
        if downs >= FLAP_DOWNS:
            detail = (f"{_hccn(ref, 'link_stat')} shows {downs} link-down events in the last {window}"
                      f" ({len(changes)} changes)")
            return device_finding(readings, ref, "link_flapping", FAIL, detail)
        if downs == 1 and up_now:
            when = next(c.at for c in changes if c.state == hccn_link_stat.LINK_DOWN)
            detail = f"{_hccn(ref, 'link_stat')} shows the link went down at {when:%Y-%m-%d %H:%M:%S}"
            return device_finding(readings, ref, "link_down_recently", WARN, detail)
        return DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: {len(changes)} changes")

    results = _roce_results(readings, judge)
    ok_text = f"no port flapped in the last {window} ({len(results)} ports)"
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
        low = record.thresholds.get("rxpower_low_watts")
        dark = bool(rx) and all(watts < NO_LIGHT_WATTS for watts in rx.values())
        if record.signal_lost or dark:
            flags = [key for key, value in record.flags.items() if value and key.startswith("rx")]
            rx_text = ", ".join(f"{watts * 1e3:.4f}" for _, watts in sorted(rx.items()))
            detail = f"{_hccn(ref, 'optical')}: rx power [{rx_text}] mW" + (
                f", {' '.join(flags)} set" if flags else "")
            return device_finding(readings, ref, "optics_no_light", FAIL, detail)
        weak = sorted(lane for lane, watts in rx.items() if low is not None and watts < low)
        if weak:
            assert low is not None
            detail = f"{_hccn(ref, 'optical')}: rx power below {low * 1e3:.4f} mW on lanes {', '.join(weak)}"
            return device_finding(readings, ref, "optics_weak", WARN, detail)
        if not rx:
            return DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: no rx power readings")
        return DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: rx min {min(rx.values()) * 1e3:.3f} mW")

    results = _roce_results(readings, judge)
    return aggregate(name, results, f"light on every lane, no LOS on {len(results)} modules", _HCCN_HINT)


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
        before, after = roce.stat[0].value.counters, roce.stat[1].value.counters
        seconds = max(1e-3, roce.stat[1].at - roce.stat[0].at)
        rising = {key: after[key] - before[key] for key in after
                  if key in before and hccn_stat.is_error_counter(key) and after[key] > before[key]}
        if rising:
            top = sorted(rising.items(), key=lambda item: -item[1])[:3]
            detail = (f"{_hccn(ref, 'stat')}: " + ", ".join(f"{key} +{delta}" for key, delta in top)
                      + f" in {seconds:.1f}s")
            return device_finding(readings, ref, "packet_errors", WARN, detail)
        return DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: no error counter rose")

    results = _roce_results(readings, judge)
    return aggregate(name, results, f"no error counter rose on {len(results)} ports", _HCCN_HINT)


def check_net_health(readings: NodeReadings) -> Check:
    """The NIC's own reachability test of its detect address (``hccn_tool -net_health``)."""
    name = "net_health"
    if (missing := no_chips(name, readings)) is not None:
        return missing

    def judge(ref: ChipRef, roce: RoceReadings) -> DeviceResult:
        if not roce.net_health.ok:
            return unknown_result(readings, ref, roce.net_health)
        record: hccn_net_health.NetHealthRecord = roce.net_health.value
        if record.healthy:
            return DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: Success")
        detail = f"{_hccn(ref, 'net_health')} says {record.state}"
        if record.state.casefold() == "init":
            return device_finding(readings, ref, "net_health_init", WARN, detail)
        return device_finding(readings, ref, "net_health", FAIL, detail)

    results = _roce_results(readings, judge)
    return aggregate(name, results, f"{len(results)} ports report Success", _HCCN_HINT)


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
    return aggregate(name, results, f"{len(live)} port addresses match {hccn_conf}")
