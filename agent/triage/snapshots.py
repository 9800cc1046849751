"""Local faults and addresses from saved tool readings: hccn_tool and npu-smi outputs, hccn.conf, rank tables.

``ToolReadings.judge`` calls the fault functions of ``agent.health.faults`` on the parsed records
(``collectors.hccn_*``, ``collectors.npu_smi_*``), the same ones ``npuwatch check`` and ``npuwatch
diagnose`` call on live readings, so a node's verdict and the cluster's come from one judgement.
A device is the id ``hccn_tool -i`` takes (the NPU's device id); a fault's ``detail`` is the
result's evidence: the command and what it said.

``recognise`` tells a saved tool output by its content when its file name says nothing, and
``device_from_name`` reads the device id from names such as ``hccn_tool_-i_3_-link_-g.txt``,
``link.3.txt``, ``npu3_optical.txt`` or ``dev-3``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from agent.health import faults
from agent.health.results import Result
from agent.health.thresholds import INCIDENT_LOOK_BACK_S
from agent.triage.evidence import Address, LocalFault
from agent.triage.node_config import NodeLimits
from collectors import (
    hccn_ip,
    hccn_link,
    hccn_link_stat,
    hccn_net_health,
    hccn_optical,
    hccn_stat,
    npu_smi_ecc,
    npu_smi_hccs,
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
from collectors.npu_smi_hccs import HccsRecord

__all__ = ["LINK_WINDOW_S", "ToolReadings", "conf_addresses", "device_from_name", "rank_table_addresses", "recognise"]

def _local(node: str, npu: int | None, result: Result, seen_at: float | None) -> LocalFault | None:
    """A fault function's result as triage's local fault (None when it found none)."""
    if result.kind is None:
        return None
    return LocalFault(node, npu, result.kind, result.evidence, at=result.at, seen_at=seen_at, until=result.until)


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
    ("hccs", re.compile(r"^\s*hccs health status\s*:", re.M | re.I)),
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
    ``ecc``, ``health``, ``hccs``, ``info`` (npu-smi info table), ``hccn_conf``; None for anything else."""
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

LINK_WINDOW_S = INCIDENT_LOOK_BACK_S  # link_stat changes this far back (the tool's own clock) count as flaps


@dataclass
class ToolReadings:
    """The saved tool outputs of one node, parsed as they come in; ``judge`` turns them into faults, with the
    node's own limits (``agent.triage.node_config``: its temperature, isolated pages and chip count).

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
    hccs: dict[int | None, tuple[HccsRecord, float | None]] = field(default_factory=dict)
    conf: dict[int, HccnConfEntry] = field(default_factory=dict)
    temperatures: dict[int, tuple[int, float, float | None]] = field(default_factory=dict)  # dev: npu, C, when
    chips_seen: tuple[int, float | None] | None = None  # the info table's chip count, and when
    limits: NodeLimits = field(default_factory=NodeLimits)  # the node's config (its bundle's config.json)

    def add(self, command: str, device: int | None, text: str, seen_at: float | None) -> None:
        """Parse one saved output; ``ParseError``/``ValueError`` for one that does not parse."""
        if command == "hccn_conf":
            self.conf.update(hccn_ip.parse_hccn_conf(text))
            return
        if command == "info":
            table = npu_smi_info.parse(text)
            self.chips_seen = (len(table.chips), seen_at)
            for chip in table.chips:
                dev = chip.phy_id if chip.phy_id is not None else chip.npu
                if chip.temperature_celsius is not None:
                    self.temperatures[dev] = (chip.npu, chip.temperature_celsius, seen_at)
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
        if command == "hccs":
            self.hccs[device] = (npu_smi_hccs.parse(text), seen_at)
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
        found: list[tuple[int | None, Result, float | None]] = []
        for device, (link, at) in sorted(self.links.items()):
            stat = self.link_stats.get(device)
            found.append((device, faults.link(link, device, link_stat=stat[0] if stat else None), at))
        for device, (record, at) in sorted(self.link_stats.items()):
            link_now = self.links.get(device)
            up_now = link_now[0].up if link_now is not None else True
            found.append((device, faults.flapping(record, device, window_s=LINK_WINDOW_S, up_now=up_now), at))
        for device, (optical, at) in sorted(self.optical.items()):
            found.append((device, faults.optics(optical, device), at))
        for device, samples in sorted(self.stats.items()):
            samples.sort(key=lambda sample: sample[1] or 0.0)
            first, last = samples[0], samples[-1]
            result = faults.error_counters(last[0], device)
            if len(samples) > 1 and first[1] is not None and last[1] is not None and last[1] > first[1]:
                rising = faults.rising_errors(first[0], last[0], device, seconds=last[1] - first[1])
                if rising.kind is not None:
                    result = replace(rising, at=last[1])
            found.append((device, result, last[1]))
        for device, (health, at) in sorted(self.net_health.items()):
            found.append((device, faults.net_health(health, device), at))
        for npu, (said, word, codes, at) in sorted(self.health.items(), key=lambda item: (item[0] is None, item[0])):
            if word:
                found.append((npu, faults.chip_health(word, codes, said=said), at))
        for npu, (hccs, at) in sorted(self.hccs.items(), key=lambda item: (item[0] is None, item[0])):
            found.append((npu, faults.hccs(hccs), at))
        limits = self.limits
        for npu, (ecc, at) in sorted(self.ecc.items(), key=lambda item: (item[0] is None, item[0])):
            found.append((npu, faults.hbm_ecc(ecc, max_pages=limits.max_isolated_pages,
                                              basis=limits.max_isolated_pages_basis), at))
        for device, (npu, celsius, at) in sorted(self.temperatures.items()):
            found.append((device, faults.temperature(celsius, max_celsius=limits.max_temperature,
                                                     basis=limits.max_temperature_basis, npu=npu), at))
        if self.chips_seen is not None and limits.expected_chips:
            found.append((None, faults.chip_count(self.chips_seen[0], limits.expected_chips), self.chips_seen[1]))
        local = [_local(node, npu, result, at) for npu, result, at in found]
        found_faults = [fault for fault in local if fault is not None]
        addresses = [ip_address(node, device, device, record) for device, record in sorted(self.ips.items())]
        addresses += conf_addresses(node, self.conf)
        found_faults.extend(self._ip_mismatches())
        return found_faults, addresses

    def _ip_mismatches(self) -> list[LocalFault]:
        """Each saved port address against the saved hccn.conf (a device the file does not list is not judged)."""
        results = [(device, faults.roce_ip(record, self.conf[device], device, conf_path=f"hccn.conf of {self.node}"))
                   for device, record in sorted(self.ips.items()) if device in self.conf]
        return [fault for fault in (_local(self.node, device, result, None) for device, result in results)
                if fault is not None]
