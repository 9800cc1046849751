"""One function per fault: each takes a parsed tool record and returns the ``Result`` of its judgement.

Thresholds and statuses come from ``agent.health.thresholds``; a fault found carries its ``kind``,
a healthy reading is PASS with ``kind`` None. The evidence quotes the command and what it said,
without saying where: ``check`` and ``diagnose`` lead it with the chip's label, triage keeps it as
the fault's detail. ``device`` is the id ``hccn_tool -i`` takes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from agent.core.humanize import duration, plural
from agent.handling.escalation import HELD_LEVEL, ChipHistory, step
from agent.health.log_categories import fault_of
from agent.health.results import Result
from agent.health.status import PASS, UNKNOWN, WARN
from agent.health.thresholds import fault_kind
from collectors import hccn_ip, hccn_link_stat, hccn_stat, npu_smi_info
from collectors.fault_levels import FaultTable, default_table, judge_static
from collectors.hccl.classify import Event
from collectors.hccn_ip import HccnConfEntry, IpRecord
from collectors.hccn_link import LinkRecord
from collectors.hccn_link_stat import LinkStatRecord
from collectors.hccn_net_health import NetHealthRecord
from collectors.hccn_optical import OpticalRecord
from collectors.hccn_stat import StatRecord
from collectors.npu_smi_ecc import EccRecord
from collectors.npu_smi_hccs import HccsRecord

__all__ = [
    "LEVEL_ACTIONS",
    "LEVEL_KINDS",
    "chip_count",
    "chip_health",
    "device_lost",
    "epoch",
    "error_counters",
    "flapping",
    "gemm_probe",
    "handling_level",
    "hbm_ecc",
    "hccn_command",
    "hccs",
    "held_while_healthy",
    "latest",
    "link",
    "link_downs",
    "log_faults",
    "net_health",
    "optics",
    "repeat_offender",
    "rising_errors",
    "roce_ip",
    "signal_lost",
    "temperature",
    "version",
]


def hccn_command(device: int, command: str) -> str:
    return f"hccn_tool -i {device} -{command} -g"


def epoch(naive: datetime) -> float | None:
    """A naive local wall time (as hccn_tool prints it) in epoch seconds, read in this machine's zone."""
    try:
        return time.mktime(naive.timetuple())
    except (OverflowError, ValueError):
        return None


def latest(samples: Sequence[Any]) -> Any:
    """The newest sample that read (``.ok``), else the first: what a twice-read tool said last."""
    for reading in reversed(samples):
        if reading.ok:
            return reading
    return samples[0]


def _fault(kind: str, evidence: str, **fields: Any) -> Result:
    entry = fault_kind(kind)
    fields.setdefault("threshold", entry.threshold)
    fields.setdefault("unit", entry.unit)
    return Result(entry.status, evidence, kind=kind, **fields)


def _newest(record: LinkStatRecord | None, state: str) -> float | None:
    if record is None:
        return None
    times = [change.at for change in record.changes if change.state == state]
    return epoch(max(times)) if times else None


def link(record: LinkRecord, device: int, *, link_stat: LinkStatRecord | None = None, **where: Any) -> Result:
    """The port is DOWN now; dated by link_stat's newest LINK DOWN when that is newer than its newest UP."""
    if record.up:
        return Result(PASS, "link UP", value=record.state, threshold="UP", **where)
    went_down = _newest(link_stat, hccn_link_stat.LINK_DOWN)
    came_up = _newest(link_stat, hccn_link_stat.LINK_UP)
    at = went_down if went_down is not None and (came_up is None or went_down >= came_up) else None
    return _fault("link_down", f"{hccn_command(device, 'link')} says {record.state}", value=record.state,
                  at=at, **where)


def flapping(record: LinkStatRecord, device: int, *, window_s: float, up_now: bool, basis: str | None = None,
             **where: Any) -> Result:
    """Link-down events within ``window_s`` of the tool's own clock, judged by ``link_downs``."""
    changes = hccn_link_stat.changes_within(record, window_s)
    downs = sorted(change.at for change in changes if change.state == hccn_link_stat.LINK_DOWN)
    last = epoch(max(change.at for change in changes)) if changes else None
    said = f"{hccn_command(device, 'link_stat')} shows"
    return link_downs(len(downs), device, window_s=window_s, up_now=up_now, said=said,
                      changes=len(changes), at=epoch(downs[0]) if downs else None, until=last, basis=basis, **where)


def link_downs(downs: int, device: int, *, window_s: float, up_now: bool, said: str | None = None,
               changes: int | None = None, at: float | None = None, until: float | None = None,
               basis: str | None = None, **where: Any) -> Result:
    """``downs`` link-down events in ``window_s``: the table's 2 or more flap, 1 (and up again) once.

    One down that is still down is not a flap: ``link`` judges it. ``said``: who counted them.
    """
    window = duration(window_s)
    said = said or f"the agent's npu_roce_link_up of NPU {where.get('npu', device)} shows"
    fields: dict[str, Any] = {"value": downs, "basis": basis or f"look-back {window}", **where}
    flap = fault_kind("link_flap")
    if downs >= int(flap.threshold or 2):
        counted = f" ({plural(changes, 'change')})" if changes is not None else ""
        return _fault("link_flap", f"{said} {downs} link-down events in the last {window}{counted}", at=at,
                      until=until, **fields)
    if downs == 1 and up_now:
        when = f", at {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(at))}" if at is not None else ""
        return _fault("link_down_once", f"{said} the link went down once{when}", at=at, until=until, **fields)
    return Result(PASS, f"{plural(downs, 'link-down event')} in the last {window}", threshold=flap.threshold,
                  unit=flap.unit, **fields)


def signal_lost(device: int, **where: Any) -> Result:
    """The module reports LOS/LoL (``npu_optical_signal_lost``): no light."""
    return _fault("optics_dark", f"{hccn_command(device, 'optical')}: no light (LOS/LoL set)",
                  basis="LOS/LoL flags", **where)


def _outside(record: OpticalRecord) -> list[str]:
    """Readings outside the module's own thresholds (``... High Thres`` / ``... Low Thres``), rx low aside."""
    thresholds = record.thresholds
    problems = []
    for direction, powers in (("rx", record.rx_power_watts), ("tx", record.tx_power_watts)):
        low, high = thresholds.get(f"{direction}power_low_watts"), thresholds.get(f"{direction}power_high_watts")
        for lane, watts in sorted(powers.items()):
            if direction == "tx" and low is not None and watts < low:
                problems.append(f"tx power lane {lane} {watts * 1e3:.4f} mW under {low * 1e3:.4f} mW")
            elif high is not None and watts > high:
                problems.append(f"{direction} power lane {lane} {watts * 1e3:.4f} mW over {high * 1e3:.4f} mW")
    celsius = record.temperature_celsius
    hot = thresholds.get("temp_high_celsius")
    if celsius is not None and hot is not None and celsius > hot:
        problems.append(f"module at {celsius:g} C, over {hot:g} C")
    return problems


def optics(record: OpticalRecord, device: int, **where: Any) -> Result:
    """No light (LOS/LoL, or every lane under the table's watts) fails; rx under the module's low threshold,
    or another reading outside the module's thresholds, warns."""
    rx = record.rx_power_watts
    low = record.thresholds.get("rxpower_low_watts")
    fields: dict[str, Any] = {"value": min(rx.values()) if rx else None, "unit": "watts", **where}
    dark_watts = float(fault_kind("optics_dark").threshold or 0.0)
    command = hccn_command(device, "optical")
    if record.signal_lost or (bool(rx) and all(watts < dark_watts for watts in rx.values())):
        flags = [key for key, value in record.flags.items() if value and key.startswith("rx")]
        rx_text = ", ".join(f"{watts * 1e3:.4f}" for _, watts in sorted(rx.items()))
        evidence = f"{command}: no light, rx power [{rx_text}] mW" + (f", {' '.join(flags)} set" if flags else "")
        return _fault("optics_dark", evidence, basis="LOS/LoL flags or every lane under 0.01 mW", **fields)
    weak = sorted(lane for lane, watts in rx.items() if low is not None and watts < low)
    if weak and low is not None:
        return _fault("optics_weak", f"{command}: rx power below {low * 1e3:.4f} mW on lanes {', '.join(weak)}",
                      threshold=low, basis="the module's rx power low threshold", **fields)
    problems = _outside(record)
    if problems:
        return _fault("optics_out_of_range", f"{command}: {problems[0]}", basis="the module's thresholds", **fields)
    if not rx:
        return Result(UNKNOWN, f"{command} prints no rx power", **where)
    return Result(PASS, f"rx min {min(rx.values()) * 1e3:.3f} mW", threshold=low,
                  basis="the module's rx power low threshold" if low is not None else None, **fields)


def error_counters(record: StatRecord, device: int, **where: Any) -> Result:
    """Error counters above zero in one reading: since boot, so undated and weak."""
    errors = {key: value for key, value in record.counters.items() if hccn_stat.is_error_counter(key) and value > 0}
    if not errors:
        return Result(PASS, "no error counter above zero", value=0, **where)
    top = sorted(errors.items(), key=lambda item: -item[1])[:3]
    evidence = f"{hccn_command(device, 'stat')}: " + ", ".join(f"{k} {v}" for k, v in top) + " (since boot)"
    return _fault("roce_error_counters", evidence, value=sum(errors.values()), **where)


def rising_errors(before: StatRecord, after: StatRecord, device: int, *, seconds: float, **where: Any) -> Result:
    """Error counters that rose between two readings ``seconds`` apart."""
    rising = {key: after.counters[key] - before.counters[key] for key in after.counters
              if after.counters[key] > before.counters.get(key, after.counters[key])
              and hccn_stat.is_error_counter(key)}
    if not rising:
        return Result(PASS, "no error counter rose", value=0, threshold=0, unit="errors", **where)
    top = sorted(rising.items(), key=lambda item: -item[1])[:3]
    evidence = (f"{hccn_command(device, 'stat')}: " + ", ".join(f"{key} +{delta}" for key, delta in top)
                + f" in {duration(seconds)}")
    return _fault("roce_errors_rising", evidence, value=sum(rising.values()), **where)


def net_health(record: NetHealthRecord, device: int, **where: Any) -> Result:
    if record.healthy:
        return Result(PASS, "Success", value=record.state, threshold="Success", **where)
    kind = "net_health_init" if record.state.casefold() == "init" else "net_health"
    evidence = f"{hccn_command(device, 'net_health')} says {record.state}"
    if kind == "net_health_init":
        evidence += " (no detect address configured)"
    return _fault(kind, evidence, value=record.state, **where)


def roce_ip(live: IpRecord, entry: HccnConfEntry | None, device: int, *, conf_path: str,
            duplicate_of: str | None = None, **where: Any) -> Result:
    """The port's live address against its ``conf_path`` (hccn.conf) entry; ``duplicate_of`` names another port
    with the same address (the caller says which of a pair is the duplicate), which fails whatever the file says.

    A difference fails; an entry without an address (or none) is UNKNOWN unless its netmask already differs.
    """
    fields: dict[str, Any] = {"value": live.address, "threshold": entry.address if entry is not None else None,
                              "basis": conf_path, **where}
    command = hccn_command(device, "ip")
    if duplicate_of is not None:
        return _fault("ip_mismatch", f"{command}: {live.address} is also the address of {duplicate_of}", **fields)
    problems = hccn_ip.mismatches(live, entry) if entry is not None else []
    if problems:
        return _fault("ip_mismatch", f"{command}: {problems[0]}", **fields)
    if entry is None or entry.address is None:
        return Result(UNKNOWN, f"no address_{device} in {conf_path}", **fields)
    return Result(PASS, live.address, **fields)


# What each handling level asks of the SRE, in a few words (docs/fault-codes.md has the long form): the
# one place `npuwatch top` and anything else that names a level's action read it.
LEVEL_ACTIONS: dict[str, str] = {
    "ManuallySeparateNPU": "out of service until repaired",
    "SeparateNPU": "isolate the chip now",
    "PreSeparateNPU": "isolate it after the job",
    "RestartNPU": "reset the chip",
    "FreeRestartNPU": "reset the chip when idle",
    "RestartBusiness": "restart the job",
    "RestartRequest": "retry the step",
    "SubHealthFault": "sub-health: watch it",
    "NotHandleFault": "no action",
}


# What each handling level (collectors.fault_levels, docs/fault-codes.md) is judged as: a fault kind, whose status
# is the thresholds table's, or None for a level that passes.
LEVEL_KINDS: dict[str, str | None] = {
    "ManuallySeparateNPU": "chip_fault_isolate",
    "SeparateNPU": "chip_fault_isolate",
    "PreSeparateNPU": "chip_fault_drain",
    "RestartNPU": "chip_fault_reset",
    "FreeRestartNPU": "chip_fault_reset",
    "RestartBusiness": "chip_warning",
    "RestartRequest": "chip_warning",
    "SubHealthFault": "chip_warning",
    "NotHandleFault": None,
}


def handling_level(level: str | None, said: str, **where: Any) -> Result:
    """A chip's handling level (the agent's ``npu_fault_handling``, its history included) as the fault it is."""
    kind = LEVEL_KINDS.get(level or "NotHandleFault")
    if kind is None:
        return Result(PASS, f"{said}: {level or 'NotHandleFault'}", value=level, threshold="OK", **where)
    return _fault(kind, f"{said}: {level}", value=level, **where)


def chip_health(word: str | None, codes: Sequence[str] = (), *, said: str, table: FaultTable | None = None,
                held: Mapping[str, float] | None = None, history: ChipHistory | None = None, **where: Any) -> Result:
    """``said``: the command and what it printed. A ManuallySeparateNPU the agent's history holds for the chip
    (``held``: code -> since) decides first: it stays until ``npuwatch faults clear``, whatever the chip says now.
    Else, with active codes, the most severe handling level among them decides (``LEVEL_KINDS``; ``table``: the
    packaged one by default): with the chip's ``history`` in the agent's fault history as the agent escalates it
    (repeated and lasting codes; the history is only read), else from this one reading. Without codes the health
    word decides: OK is healthy, Warning warns, anything else (Alarm, Critical, an unknown word) is unhealthy."""
    if held:
        code, since = min(held.items(), key=lambda item: (item[1], item[0]))
        npu = where.get("npu")
        clear = f"npuwatch faults clear --npu {npu}" if npu is not None else "npuwatch faults clear"
        return _fault(LEVEL_KINDS[HELD_LEVEL] or "chip_fault_isolate",
                      f"{said}; the agent holds {code} as {HELD_LEVEL} since "
                      f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since))} (it repeated): repair the chip, "
                      f"then `{clear}`", value=HELD_LEVEL, **where)
    escalating = history is not None and bool(codes or history.raised or history.lasting)
    if codes or escalating:
        if history is not None and escalating:  # as the agent judges it, without writing its history
            judged = step(table or default_table(), history, word, codes, time.time())[1]
        else:
            judged = judge_static(table or default_table(), word, codes)
        level = judged.chip or "NotHandleFault"
        deciding = next((code for code in codes if judged.codes[code] == level), None)
        kind = LEVEL_KINDS[level]
        if kind is None:
            return Result(PASS, f"{' '.join(codes)}: {level}", value=level, threshold="OK", **where)
        if deciding is None:
            return _fault(kind, f"{said}; the agent's history raises the chip to {level} (repeated or lasting codes)",
                          value=level, **where)
        return _fault(kind, f"{said}: {deciding} is {level}", value=level, **where)
    if not word:
        return Result(UNKNOWN, f"{said}: no health word", **where)
    state = npu_smi_info.health_state(word)
    if state == "ok":
        return Result(PASS, "OK", value=word, threshold="OK", **where)
    kind = "chip_warning" if state == "warning" else "chip_unhealthy"
    return _fault(kind, said, value=word, **where)


def held_while_healthy(word: str | None, codes: Sequence[str], history: ChipHistory | None, now: float, *,
                       min_s: float | None = None, **where: Any) -> Result | None:
    """A chip the agent holds (a manual separation) that has read OK with no code for ``min_s`` (the table's by
    default) since its held codes last went away; None when it is not held, or not healthy that long."""
    if history is None or not history.held or codes or npu_smi_info.health_state(word or "") != "ok":
        return None
    entry = fault_kind("held_while_healthy")
    limit = float(min_s if min_s is not None else entry.threshold or 0.0)
    gone = [history.cleared.get(code) for code in history.held]
    if any(at is None for at in gone):
        return None  # a held code with no recorded recovery: not known to be healthy since
    healthy_s = now - max(at for at in gone if at is not None)
    if healthy_s < limit:
        return None
    held = ", ".join(sorted(history.held))
    return _fault("held_while_healthy", f"held for {held} ({HELD_LEVEL}) while it has read {word} with no code for "
                                        f"{duration(healthy_s)}", value=round(healthy_s), **where)


def repeat_offender(history: ChipHistory | None, now: float, *, times: int | None = None,
                    window_s: float | None = None, **where: Any) -> Result | None:
    """A chip that faulted ``times`` times (the table's by default) within ``window_s``: to repair, not reset."""
    entry = fault_kind("repeat_offender")
    limit = int(times if times is not None else entry.threshold or 0)
    window = float(window_s if window_s is not None else entry.window_s or 0.0)
    faulted = sorted(at for at in (history.faults if history is not None else ()) if now - at <= window)
    if limit <= 0 or len(faulted) < limit:
        return None
    evidence = (f"the agent's fault history: {len(faulted)} faults in the last {duration(window)}, the first "
                f"{duration(now - faulted[0])} ago")
    return _fault("repeat_offender", evidence, value=len(faulted), at=faulted[-1], **where)


def gemm_probe(correct: bool, efficiency: float | None, dtype: str, *, fail_below: float, warn_below: float,
               **where: Any) -> Result:
    """The agent's last GEMM probe of a chip: a wrong product or a rate under ``fail_below`` of its peak fails
    (``probe_failed``), under ``warn_below`` warns (``probe_slow``): the probe limits' reference shares."""
    fields: dict[str, Any] = {"value": efficiency, "unit": "ratio", "measure": f"gemm:{dtype}", **where}
    if not correct:
        return _fault("probe_failed", f"the GEMM probe's {dtype} product was wrong", **fields)
    if efficiency is None:
        return Result(PASS, f"GEMM probe {dtype} correct (no peak to compare with)", **fields)
    rate = f"GEMM probe {dtype} at {efficiency:.0%} of peak"
    if efficiency < fail_below:
        return _fault("probe_failed", f"{rate}, under {fail_below:.0%}", threshold=fail_below, **fields)
    if efficiency < warn_below:
        return _fault("probe_slow", f"{rate}, under {warn_below:.0%}", threshold=warn_below, **fields)
    return Result(PASS, rate, threshold=fail_below, **fields)


def hbm_ecc(record: EccRecord, *, max_pages: int | None = None, basis: str | None = None, **where: Any) -> Result:
    """A double-bit error fails; more isolated pages than ``max_pages`` (default: the table's) fails; any warns."""
    hbm = record.hbm
    double = int(hbm.double_bit_errors or 0)
    pages = int((hbm.double_bit_isolated_pages or 0) + (hbm.single_bit_isolated_pages or 0))
    limit = int(max_pages if max_pages is not None else fault_kind("hbm_pages_over").threshold or 0)
    fields: dict[str, Any] = {"value": pages, "unit": "pages", **where}
    if double > 0:
        return _fault("hbm_dbe", f"npu-smi -t ecc: {plural(double, 'HBM double-bit error')}, "
                                 f"{plural(pages, 'page')} isolated", **fields, threshold=limit, basis=basis)
    if pages > limit:
        return _fault("hbm_pages_over", f"npu-smi -t ecc: {plural(pages, 'HBM page')} isolated (more than {limit})",
                      **fields, threshold=limit, basis=basis)
    if pages > 0:
        return _fault("hbm_pages_isolated", f"npu-smi -t ecc: {plural(pages, 'HBM page')} isolated", **fields,
                      threshold=limit, basis=basis)
    return Result(PASS, "no double-bit error, no isolated page", threshold=limit, basis=basis, **fields)


def hccs(record: HccsRecord, **where: Any) -> Result:
    health = record.health
    if health is None:
        return Result(UNKNOWN, "npu-smi -t hccs prints no health status", **where)
    if health.strip().upper() == "OK":
        return Result(PASS, "OK", value=health, threshold="OK", **where)
    return _fault("hccs_unhealthy", f"npu-smi -t hccs: HCCS health {health}", value=health, **where)


def temperature(celsius: float | None, *, max_celsius: float | None = None, basis: str | None = None,
                **where: Any) -> Result:
    """The chip's temperature (``npu-smi info``) against the table's warning and failing degrees (``max_celsius``,
    ``check.max_temperature``, replaces the failing one): over the limit, not at it."""
    if celsius is None:
        return Result(UNKNOWN, "npu-smi info prints no temperature", **where)
    limits = (("chip_too_hot", max_celsius if max_celsius is not None else fault_kind("chip_too_hot").threshold),
              ("chip_hot", fault_kind("chip_hot").threshold))
    for kind, threshold in limits:
        limit = float(threshold or 0.0)
        if celsius > limit:
            return _fault(kind, f"npu-smi info: {celsius:g} C, over {limit:g} C", value=celsius, threshold=limit,
                          basis=basis if kind == "chip_too_hot" else None, **where)
    hot = fault_kind("chip_hot")
    return Result(PASS, f"{celsius:g} C", value=celsius, threshold=hot.threshold, unit=hot.unit, **where)


def device_lost(npu: int, said: str, **fields: Any) -> Result:
    """The kernel log says the driver lost the device's heartbeat (``said``: where it says so)."""
    return _fault("device_lost", f"{said}: its heartbeat was lost", npu=npu, **fields)


def log_faults(events: Sequence[Event], fields: Mapping[str, Any]) -> list[Result]:
    """The local faults the logs' incidents are (an OOM, an AI Core exception, a device that dropped out:
    ``agent.health.log_categories``), one result per kind with its count and first code."""
    found: dict[str, list[Event]] = {}
    for event in events:
        kind = fault_of(event.category, event.code)
        if kind is not None:
            found.setdefault(kind.kind, []).append(event)
    return [_fault(kind, f"the logs show {plural(len(seen), fault_kind(kind).label + ' incident')} "
                         f"(first {seen[0].code} at {seen[0].source}:{seen[0].line_no})",
                   **{**fields, "value": len(seen), "unit": "incidents"})
            for kind, seen in sorted(found.items(), key=lambda item: -fault_kind(item[0]).weight)]


def version(what: str, value: str, target: str, *, basis: str, **where: Any) -> Result:
    """One card's ``what`` (driver or firmware) version against the one the node should run."""
    if value == target:
        return Result(PASS, f"{what} {value}", value=value, threshold=target, basis=basis, **where)
    return _fault("firmware_mismatch", f"{what} {value}, not {target}", value=value, threshold=target, basis=basis,
                  **where)


def chip_count(seen: int, expected: int) -> Result:
    """``npu-smi`` lists ``seen`` chips of ``expected`` (0: not set, nothing to compare: a default config must not
    make every node unknown; the evidence says what to set)."""
    basis = "config expected_chips"
    if not expected:
        return Result(PASS, f"npu-smi lists {seen} chips (expected_chips is not set, so a missing chip is not seen)",
                      value=seen, unit="chips", basis=basis + " (unset)")
    text = f"npu-smi lists {seen} of {expected} expected chips"
    if seen < expected:
        return _fault("chip_missing", text, value=seen, threshold=expected, basis=basis)
    return Result(PASS if seen == expected else WARN, text, value=seen, threshold=expected, unit="chips",
                  basis=basis)
