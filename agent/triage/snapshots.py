"""Local faults and addresses from tool readings: hccn_tool and npu-smi outputs, hccn.conf, rank tables.

The judging functions take parsed records (``collectors.hccn_*``, ``collectors.npu_smi_*``) and
return a ``LocalFault`` or ``None``; ``npuwatch diagnose`` calls the same functions on its live
readings, so a node's verdict and the cluster's come from one judgement. ``device`` is the id
``hccn_tool -i`` takes (the NPU's device id); the ``detail`` quotes the command and what it said.

``recognise`` tells a saved tool output by its content when its file name says nothing, and
``device_from_name`` reads the device id from names such as ``hccn_tool_-i_3_-link_-g.txt``,
``link.3.txt``, ``npu3_optical.txt`` or ``dev-3``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from agent.core.humanize import duration, plural
from agent.triage.evidence import Address, LocalFault
from collectors import (
    hccn_ip,
    hccn_link,
    hccn_link_stat,
    hccn_net_health,
    hccn_optical,
    hccn_stat,
    npu_smi_ecc,
    npu_smi_health,
    npu_smi_info,
)
from collectors.hccl.ranktable import RankTable
from collectors.hccn_ip import HccnConfEntry, IpRecord
from collectors.hccn_link import LinkRecord
from collectors.hccn_link_stat import LinkStatRecord
from collectors.hccn_net_health import NetHealthRecord
from collectors.hccn_optical import OpticalRecord
from collectors.hccn_stat import StatRecord
from collectors.npu_smi_ecc import EccRecord

__all__ = [
    "FLAP_DOWNS",
    "LINK_WINDOW_S",
    "NO_LIGHT_WATTS",
    "ToolReadings",
    "conf_addresses",
    "counters_fault",
    "device_from_name",
    "ecc_fault",
    "epoch",
    "flap_fault",
    "health_fault",
    "link_fault",
    "net_health_fault",
    "optics_fault",
    "rank_table_addresses",
    "recognise",
    "rising_counters_fault",
]

NO_LIGHT_WATTS = 1e-5  # 0.01 mW (-20 dBm): below any receiver's sensitivity
FLAP_DOWNS = 2  # link-down events in the window that make a port "flapping"


def hccn(device: int, command: str) -> str:
    return f"hccn_tool -i {device} -{command} -g"


def epoch(naive: datetime) -> float | None:
    """A naive local wall time (as hccn_tool prints it) in epoch seconds, read in this machine's zone."""
    try:
        return time.mktime(naive.timetuple())
    except (OverflowError, ValueError):
        return None


def _newest(record: LinkStatRecord | None, state: str) -> float | None:
    if record is None:
        return None
    times = [change.at for change in record.changes if change.state == state]
    return epoch(max(times)) if times else None


def link_fault(node: str, npu: int | None, device: int, record: LinkRecord, *,
               link_stat: LinkStatRecord | None = None, seen_at: float | None = None) -> LocalFault | None:
    """The port is DOWN now; dated by link_stat's newest LINK DOWN when that is newer than its newest UP."""
    if record.up:
        return None
    went_down = _newest(link_stat, hccn_link_stat.LINK_DOWN)
    came_up = _newest(link_stat, hccn_link_stat.LINK_UP)
    at = went_down if went_down is not None and (came_up is None or went_down >= came_up) else None
    return LocalFault(node, npu, "link_down", f"{hccn(device, 'link')} says {record.state}", at=at, seen_at=seen_at)


def flap_fault(node: str, npu: int | None, device: int, record: LinkStatRecord, *, window_s: float,
               up_now: bool, window_text: str, seen_at: float | None = None) -> LocalFault | None:
    """Link-down events within ``window_s`` of the tool's own clock: 2+ flapping, 1 (and up again) once."""
    changes = hccn_link_stat.changes_within(record, window_s)
    downs = sorted(change.at for change in changes if change.state == hccn_link_stat.LINK_DOWN)
    last = epoch(max(change.at for change in changes)) if changes else None
    if len(downs) >= FLAP_DOWNS:
        detail = (f"{hccn(device, 'link_stat')} shows {len(downs)} link-down events in the last {window_text}"
                  f" ({len(changes)} changes)")
        return LocalFault(node, npu, "link_flap", detail, at=epoch(downs[0]), seen_at=seen_at, until=last)
    if len(downs) == 1 and up_now:
        detail = f"{hccn(device, 'link_stat')} shows the link went down at {downs[0]:%Y-%m-%d %H:%M:%S}"
        return LocalFault(node, npu, "link_down_once", detail, at=epoch(downs[0]), seen_at=seen_at, until=last)
    return None


def optics_fault(node: str, npu: int | None, device: int, record: OpticalRecord,
                 seen_at: float | None = None) -> LocalFault | None:
    """No light (LOS/LoL flags, or every lane below ``NO_LIGHT_WATTS``), else rx below the module's low threshold."""
    rx = record.rx_power_watts
    dark = bool(rx) and all(watts < NO_LIGHT_WATTS for watts in rx.values())
    if record.signal_lost or dark:
        flags = [key for key, value in record.flags.items() if value and key.startswith("rx")]
        rx_text = ", ".join(f"{watts * 1e3:.4f}" for _, watts in sorted(rx.items()))
        detail = f"{hccn(device, 'optical')}: rx power [{rx_text}] mW" + (f", {' '.join(flags)} set" if flags else "")
        return LocalFault(node, npu, "optics_dark", detail, seen_at=seen_at)
    low = record.thresholds.get("rxpower_low_watts")
    weak = sorted(lane for lane, watts in rx.items() if low is not None and watts < low)
    if weak and low is not None:
        detail = f"{hccn(device, 'optical')}: rx power below {low * 1e3:.4f} mW on lanes {', '.join(weak)}"
        return LocalFault(node, npu, "optics_weak", detail, seen_at=seen_at)
    return None


def counters_fault(node: str, npu: int | None, device: int, record: StatRecord,
                   seen_at: float | None = None) -> LocalFault | None:
    """Error counters above zero in one reading: since boot, so undated and weak."""
    errors = {key: value for key, value in record.counters.items() if hccn_stat.is_error_counter(key) and value > 0}
    if not errors:
        return None
    top = sorted(errors.items(), key=lambda item: -item[1])[:3]
    detail = f"{hccn(device, 'stat')}: " + ", ".join(f"{key} {value}" for key, value in top) + " (since boot)"
    return LocalFault(node, npu, "roce_error_counters", detail, seen_at=seen_at)


def rising_counters_fault(node: str, npu: int | None, device: int, before: StatRecord, *, after: StatRecord,
                          seconds: float, seen_at: float | None = None) -> LocalFault | None:
    """Error counters that rose between two readings ``seconds`` apart."""
    rising = {key: after.counters[key] - before.counters[key] for key in after.counters
              if key in before.counters and hccn_stat.is_error_counter(key)
              and after.counters[key] > before.counters[key]}
    if not rising:
        return None
    top = sorted(rising.items(), key=lambda item: -item[1])[:3]
    detail = (f"{hccn(device, 'stat')}: " + ", ".join(f"{key} +{delta}" for key, delta in top)
              + f" in {duration(seconds)}")
    return LocalFault(node, npu, "roce_errors_rising", detail, at=seen_at, seen_at=seen_at)


def net_health_fault(node: str, npu: int | None, device: int, record: NetHealthRecord,
                     seen_at: float | None = None) -> LocalFault | None:
    if record.healthy:
        return None
    kind = "net_health_init" if record.state.casefold() == "init" else "net_health"
    return LocalFault(node, npu, kind, f"{hccn(device, 'net_health')} says {record.state}", seen_at=seen_at)


def health_fault(node: str, npu: int | None, said: str, word: str | None, *, codes: tuple[str, ...] = (),
                 seen_at: float | None = None) -> LocalFault | None:
    """``said``: the command and what it printed. OK without codes is healthy; OK with codes or Warning warns;
    anything else (Alarm, Critical, an unknown word) is unhealthy."""
    if not word:
        return None
    state = npu_smi_info.health_state(word)
    if state == "ok" and not codes:
        return None
    kind = "chip_warning" if state in ("ok", "warning") else "chip_unhealthy"
    return LocalFault(node, npu, kind, said, seen_at=seen_at)


def ecc_fault(node: str, npu: int | None, record: EccRecord, seen_at: float | None = None) -> LocalFault | None:
    hbm = record.hbm
    double = hbm.double_bit_errors or 0
    double_pages = hbm.double_bit_isolated_pages or 0
    single_pages = hbm.single_bit_isolated_pages or 0
    if double > 0:
        detail = (f"npu-smi -t ecc: {plural(int(double), 'HBM double-bit error')}, "
                  f"{plural(int(double_pages), 'page')} isolated")
        return LocalFault(node, npu, "hbm_dbe", detail, seen_at=seen_at)
    if double_pages > 0 or single_pages > 0:
        detail = f"npu-smi -t ecc: {plural(int(double_pages + single_pages), 'HBM page')} isolated"
        return LocalFault(node, npu, "hbm_pages_isolated", detail, seen_at=seen_at)
    return None


def ip_address(node: str, npu: int | None, device: int, record: IpRecord) -> Address:
    return Address(record.address, node, npu if npu is not None else device, source=f"hccn_tool -ip of {node}")


def conf_addresses(node: str, entries: Mapping[int, HccnConfEntry]) -> list[Address]:
    return [Address(entry.address, node, device, source=f"hccn.conf of {node}")
            for device, entry in sorted(entries.items()) if entry.address]


def rank_table_addresses(table: RankTable) -> list[Address]:
    """One address per rank: its device IP (or, without one, a placeholder of its server and device)."""
    return [Address(entry.device_ip or f"{entry.server_id}#{entry.device_id}", entry.server_id, entry.device_id,
                    entry.rank, source="rank table") for entry in table.entries]


# ----------------------------------------------------------------------------- recognising saved outputs

_RECOGNISERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("link_stat", re.compile(r"^\s*(?:\[devid \d+\])?\s*link up count\s*:", re.M | re.I)),
    ("link", re.compile(r"^\s*(?:\[devid \d+\])?\s*link status\s*:\s*\w+\s*$", re.M | re.I)),
    ("net_health", re.compile(r"^\s*(?:\[devid \d+\])?\s*net health status\s*:", re.M | re.I)),
    ("optical", re.compile(r"^\s*(?:optical info\s*:|[RT]x Power\s*\d*\s*:)", re.M | re.I)),
    ("ip", re.compile(r"^\s*ipaddr\s*:\s*\d", re.M)),
    ("stat", re.compile(r"^\s*(?:packet statistics|roce_\w+_num\s*:\s*\d+$)", re.M)),
    ("ecc", re.compile(r"^\s*HBM\s+(?:Single|Double)\s+Bit", re.M)),
    ("health", re.compile(r"^\s*Health(?: Status)?\s*:\s*\S+.*\n(?:.*\n)*?\s*Error Code\s*:", re.M)),
    ("info", re.compile(r"^\|\s*npu-smi\s+\S+\s+Version:", re.M)),
    ("hccn_conf", re.compile(r"^\s*address_\d+\s*=\s*\d", re.M)),
)
_DEVID_RE = re.compile(r"^\s*\[devid (\d+)\]", re.M)
_NAME_DEVICE_RES = (
    re.compile(r"(?:^|[^a-z])-?i[_ ]+(\d+)(?:[^\d]|$)"),
    re.compile(r"(?:dev(?:ice)?|npu|chip)[-_ ]?(\d+)(?:[^\d]|$)", re.I),
    re.compile(r"\.(\d+)(?:\.\d+)?\.(?:txt|out|log)$"),
)


def recognise(text: str) -> str | None:
    """Which saved output this is: ``link``, ``link_stat``, ``net_health``, ``optical``, ``ip``, ``stat``,
    ``ecc``, ``health``, ``info`` (npu-smi info table), ``hccn_conf``; None for anything else."""
    head = text[:65536]
    for name, pattern in _RECOGNISERS:
        if pattern.search(head):
            return name
    return None


def device_from_name(name: str, text: str = "") -> int | None:
    """The device id a saved output is about: ``[devid N]`` in its text, else a number in its name."""
    match = _DEVID_RE.search(text[:4096])
    if match is not None:
        return int(match.group(1))
    for pattern in _NAME_DEVICE_RES:
        found = pattern.search(name)
        if found is not None:
            return int(found.group(1))
    return None


# ----------------------------------------------------------------------------- a node's saved readings

LINK_WINDOW_S = 7200.0  # link_stat changes this far back (the tool's own clock) count as flaps


@dataclass
class ToolReadings:
    """The saved tool outputs of one node, parsed as they come in; ``judge`` turns them into faults.

    ``add`` takes the command (``recognise``'s names), the device id (``hccn_tool -i``) or, for
    npu-smi, the chip's device id as the caller maps it, and the time the output was taken.
    """

    node: str
    links: dict[int, tuple[LinkRecord, float | None]] = field(default_factory=dict)
    link_stats: dict[int, tuple[LinkStatRecord, float | None]] = field(default_factory=dict)
    optical: dict[int, tuple[OpticalRecord, float | None]] = field(default_factory=dict)
    stats: dict[int, list[tuple[StatRecord, float | None]]] = field(default_factory=dict)
    net_health: dict[int, tuple[NetHealthRecord, float | None]] = field(default_factory=dict)
    ips: dict[int, IpRecord] = field(default_factory=dict)
    health: dict[int | None, tuple[str, str | None, tuple[str, ...], float | None]] = field(default_factory=dict)
    ecc: dict[int | None, tuple[EccRecord, float | None]] = field(default_factory=dict)
    conf: dict[int, HccnConfEntry] = field(default_factory=dict)

    def add(self, command: str, device: int | None, text: str, seen_at: float | None) -> None:
        """Parse one saved output; ``ParseError``/``ValueError`` for one that does not parse."""
        if command == "hccn_conf":
            self.conf.update(hccn_ip.parse_hccn_conf(text))
            return
        if command == "info":
            table = npu_smi_info.parse(text)
            for chip in table.chips:
                dev = chip.phy_id if chip.phy_id is not None else chip.npu
                if dev not in self.health:
                    self.health[dev] = (f"npu-smi info says {chip.health} for NPU {chip.npu} chip {chip.chip}",
                                        chip.health, (), seen_at)
            return
        if command == "health":
            record = npu_smi_health.parse(text)
            said = f"npu-smi info -t health says {record.health or '?'} {' '.join(record.error_codes)}".strip()
            self.health[device] = (said, record.health, record.error_codes, seen_at)
            return
        if command == "ecc":
            self.ecc[device] = (npu_smi_ecc.parse(text), seen_at)
            return
        if device is None:
            raise ValueError(f"hccn_tool -{command} output without a device id")
        if command == "link":
            self.links[device] = (hccn_link.parse(text), seen_at)
        elif command == "link_stat":
            self.link_stats[device] = (hccn_link_stat.parse(text), seen_at)
        elif command == "optical":
            self.optical[device] = (hccn_optical.parse(text), seen_at)
        elif command == "stat":
            self.stats.setdefault(device, []).append((hccn_stat.parse(text), seen_at))
        elif command == "net_health":
            self.net_health[device] = (hccn_net_health.parse(text), seen_at)
        elif command == "ip":
            self.ips[device] = hccn_ip.parse(text)
        else:
            raise ValueError(f"unknown tool output {command!r}")

    def judge(self) -> tuple[list[LocalFault], list[Address]]:
        node = self.node
        faults: list[LocalFault] = []
        for device, (link, at) in sorted(self.links.items()):
            stat = self.link_stats.get(device)
            fault = link_fault(node, device, device, link, link_stat=stat[0] if stat else None, seen_at=at)
            if fault is not None:
                faults.append(fault)
        for device, (record, at) in sorted(self.link_stats.items()):
            link_now = self.links.get(device)
            up_now = link_now[0].up if link_now is not None else True
            fault = flap_fault(node, device, device, record, window_s=LINK_WINDOW_S, up_now=up_now, window_text="2h",
                               seen_at=at)
            if fault is not None:
                faults.append(fault)
        for device, (optical, at) in sorted(self.optical.items()):
            fault = optics_fault(node, device, device, optical, seen_at=at)
            if fault is not None:
                faults.append(fault)
        for device, samples in sorted(self.stats.items()):
            samples.sort(key=lambda sample: sample[1] or 0.0)
            first, last = samples[0], samples[-1]
            fault = None
            if len(samples) > 1 and first[1] is not None and last[1] is not None and last[1] > first[1]:
                fault = rising_counters_fault(node, device, device, first[0], after=last[0],
                                              seconds=last[1] - first[1], seen_at=last[1])
            fault = fault or counters_fault(node, device, device, last[0], seen_at=last[1])
            if fault is not None:
                faults.append(fault)
        for device, (health, at) in sorted(self.net_health.items()):
            fault = net_health_fault(node, device, device, health, seen_at=at)
            if fault is not None:
                faults.append(fault)
        for npu, (said, word, codes, at) in sorted(self.health.items(), key=lambda item: (item[0] is None, item[0])):
            fault = health_fault(node, npu, said, word, codes=codes, seen_at=at)
            if fault is not None:
                faults.append(fault)
        for npu, (ecc, at) in sorted(self.ecc.items(), key=lambda item: (item[0] is None, item[0])):
            fault = ecc_fault(node, npu, ecc, seen_at=at)
            if fault is not None:
                faults.append(fault)
        addresses = [ip_address(node, device, device, record) for device, record in sorted(self.ips.items())]
        addresses += conf_addresses(node, self.conf)
        faults.extend(self._ip_mismatches())
        return faults, addresses

    def _ip_mismatches(self) -> list[LocalFault]:
        faults = []
        for device, record in sorted(self.ips.items()):
            entry = self.conf.get(device)
            if entry is None:
                continue
            problems = hccn_ip.mismatches(record, entry)
            if problems:
                faults.append(LocalFault(self.node, device, "ip_mismatch", f"{hccn(device, 'ip')}: {problems[0]}"))
        return faults
