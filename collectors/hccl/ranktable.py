"""HCCL rank table (the JSON file ``RANK_TABLE_FILE`` names; mind-cluster writes it as ``hccl.json``).

Version 1.0 (910, A2)::

    {"version": "1.0", "status": "completed", "server_count": "1",
     "server_list": [{"server_id": "10.0.0.1", "host_nic_ip": "reserve",
                      "device": [{"device_id": "0", "device_ip": "192.1.27.6", "rank_id": "0"}, ...]}]}

Version 1.2 (A3 SuperPoD) adds ``super_device_id`` per device and a top-level
``super_pod_list: [{"super_pod_id": "1", "server_list": [{"server_id": "10.0.0.1"}]}]``; servers may
carry ``host_ip`` / ``container_ip``. Numbers are usually strings; plain JSON integers are accepted too.
Unknown keys (``IsMindIEEPJob``, ``hardware_type``, ``device_port``, ...) are ignored.

Version 2.0 (950 SuperPoD) lists ranks, not servers::

    {"version": "2.0", "status": "completed", "rank_count": 2,
     "rank_list": [{"rank_id": 0, "local_id": 0, "device_id": 0,
                    "level_list": [{"net_layer": 0, "net_instance_id": "rack0-srv0", "net_type": "TOPO_FILE_DESC",
                                    "net_attr": "", "rank_addr_list": [{"addr_type": "EID", "addr": "...",
                                                                        "ports": ["0/1"], "plane_id": "0"}]},
                                   {"net_layer": 1, "net_instance_id": "pod0", "net_type": "CLOS", ...}]}, ...]}

A rank's place is its lowest network layer's instance (``server_id`` here) and its ``device_id``
(``local_id`` when absent); its addresses are UB endpoint ids (``eids``, no device IP), on the
``planes`` its address list names; ``net_instances`` are its instance per layer, lowest first. A
layer-0 instance may span several servers, so only rank ids and EIDs must be unique in 2.0.

Refused with a ``ParseError`` that names the JSON path: invalid JSON (Huawei's doc examples carry
``//`` comments), a missing ``server_id`` / ``device_id`` / ``rank_id`` (2.0: ``level_list``,
``net_layer``, ``net_instance_id``), an id that is not a non-negative integer, a rank id, a (server,
device) pair, a device IP or an EID used twice, a server in two super pods, a 2.0 ``rank_count``
other than the ranks listed, and a ``completed`` table without devices. The legacy ``group_list``
template is recognised and refused by name. Input over 64 MiB is refused unread (a 10k-rank table
is about 2 MB).

The per-device address file ``/etc/hccn.conf`` is parsed by ``collectors.hccn_ip.parse_hccn_conf``;
``hccn_conf_mismatches`` compares one server's device IPs with it.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from collectors.base import ParseError
from collectors.hccn_ip import HccnConfEntry

__all__ = [
    "MAX_RANK_TABLE_BYTES",
    "RankEntry",
    "RankTable",
    "hccn_conf_mismatches",
    "load",
    "parse",
]

MAX_RANK_TABLE_BYTES = 64 * 1024 * 1024

_UINT_RE = re.compile(r"^\d+$")


@dataclass(frozen=True)
class RankEntry:
    rank: int
    server_id: str
    device_id: int
    device_ip: str | None
    super_device_id: int | None = None
    super_pod_id: str | None = None
    host_ip: str | None = None
    container_ip: str | None = None
    local_id: int | None = None  # 2.0: the rank's index in its lowest layer
    eids: tuple[str, ...] = ()  # 2.0: its UB endpoint ids
    planes: tuple[str, ...] = ()  # 2.0: the network planes of those addresses
    net_instances: tuple[str, ...] = ()  # 2.0: its instance in each network layer, lowest first


@dataclass(frozen=True)
class RankTable:
    version: str
    status: str | None
    server_count: int | None
    entries: tuple[RankEntry, ...]  # sorted by rank

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def servers(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(entry.server_id for entry in self.entries))

    @cached_property
    def _by_rank(self) -> dict[int, RankEntry]:
        return {entry.rank: entry for entry in self.entries}

    @cached_property
    def _by_device_ip(self) -> dict[str, RankEntry]:
        return {entry.device_ip: entry for entry in self.entries if entry.device_ip is not None}

    def by_rank(self, rank: int) -> RankEntry | None:
        return self._by_rank.get(rank)

    def by_device_ip(self, device_ip: str) -> RankEntry | None:
        return self._by_device_ip.get(device_ip)

    def locate_rank(self, rank: int) -> tuple[str, int] | None:
        """rank -> (server_id, device_id)."""
        entry = self._by_rank.get(rank)
        return None if entry is None else (entry.server_id, entry.device_id)

    def locate_device_ip(self, device_ip: str) -> tuple[str, int, int] | None:
        """device IP -> (server_id, device_id, rank)."""
        entry = self._by_device_ip.get(device_ip)
        return None if entry is None else (entry.server_id, entry.device_id, entry.rank)

    def on_server(self, server_id: str) -> tuple[RankEntry, ...]:
        return tuple(entry for entry in self.entries if entry.server_id == server_id)


def _uint(value: object, where: str) -> int:
    if isinstance(value, bool):
        raise ParseError(f"{where}: {value!r} is not a non-negative integer")
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str) and _UINT_RE.match(value):
        return int(value)
    raise ParseError(f"{where}: {value!r} is not a non-negative integer")


def _optional_uint(value: object, where: str) -> int | None:
    return None if value is None or value == "" else _uint(value, where)


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ParseError(f"{where}: expected a non-empty string, got {value!r}")
    return value


def _id_text(value: object, where: str) -> str:
    """An identifier that may be written as a JSON number or a string."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _text(value, where)


def _optional_ip(value: object, where: str) -> str | None:
    if value is None or value == "":
        return None
    text = _text(value, where)
    try:
        ipaddress.ip_address(text)
    except ValueError:
        raise ParseError(f"{where}: {text!r} is not an IP address") from None
    return text


def _required(obj: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in obj:
        raise ParseError(f"{where}: missing {key!r}")
    return obj[key]


def _objects(value: object, where: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise ParseError(f"{where}: expected a list of objects")
    return value


def _super_pods(document: Mapping[str, Any]) -> dict[str, str]:
    """server_id -> super_pod_id from ``super_pod_list`` (v1.2); {} when absent."""
    pods: dict[str, str] = {}
    if "super_pod_list" not in document:
        return pods
    for p, pod in enumerate(_objects(document["super_pod_list"], "super_pod_list")):
        where = f"super_pod_list[{p}]"
        pod_id = _id_text(_required(pod, "super_pod_id", where), f"{where}.super_pod_id")
        for s, server in enumerate(_objects(pod.get("server_list", []), f"{where}.server_list")):
            server_where = f"{where}.server_list[{s}].server_id"
            server_id = _text(_required(server, "server_id", server_where), server_where)
            if pods.setdefault(server_id, pod_id) != pod_id:
                raise ParseError(f"{server_where}: server {server_id} is in super pods {pods[server_id]} and {pod_id}")
    return pods


def _check_unique(entries: list[RankEntry]) -> None:
    ranks: dict[int, RankEntry] = {}
    places: dict[tuple[str, int], int] = {}
    ips: dict[str, int] = {}
    for entry in entries:
        if entry.rank in ranks:
            other = ranks[entry.rank]
            raise ParseError(f"rank_id {entry.rank} appears twice (server {other.server_id} device "
                             f"{other.device_id}, server {entry.server_id} device {entry.device_id})")
        ranks[entry.rank] = entry
        place = (entry.server_id, entry.device_id)
        if place in places:
            raise ParseError(f"server {entry.server_id} device {entry.device_id} has ranks "
                             f"{places[place]} and {entry.rank}")
        places[place] = entry.rank
        if entry.device_ip is not None:
            if entry.device_ip in ips:
                raise ParseError(f"device_ip {entry.device_ip} is used by ranks {ips[entry.device_ip]} "
                                 f"and {entry.rank}")
            ips[entry.device_ip] = entry.rank


def _decode(data: str | bytes, max_bytes: int) -> Mapping[str, Any]:
    if len(data) > max_bytes:
        raise ParseError(f"rank table is {len(data)} bytes, over the {max_bytes}-byte limit")
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise ParseError(f"rank table is not valid JSON: {error}") from None
    if not isinstance(document, dict):
        raise ParseError("rank table: the top level is not a JSON object")
    if "group_list" in document:
        raise ParseError("legacy rank table template (group_list) is not supported")
    return document


def _v2_entry(rank: Mapping[str, Any], where: str) -> RankEntry:
    """One ``rank_list`` item of a 2.0 table."""
    rank_id = _uint(_required(rank, "rank_id", where), f"{where}.rank_id")
    local_id = _optional_uint(rank.get("local_id"), f"{where}.local_id")
    device = rank.get("device_id")
    if device is not None:
        device_id = _uint(device, f"{where}.device_id")
    elif local_id is not None:
        device_id = local_id
    else:
        raise ParseError(f"{where}: missing 'device_id'")
    layers: list[tuple[int, str]] = []
    eids: list[str] = []
    planes: list[str] = []
    levels = _objects(_required(rank, "level_list", where), f"{where}.level_list")
    if not levels:
        raise ParseError(f"{where}.level_list: no network layer")
    for n, level in enumerate(levels):
        level_where = f"{where}.level_list[{n}]"
        layer = _uint(_required(level, "net_layer", level_where), f"{level_where}.net_layer")
        instance = _id_text(_required(level, "net_instance_id", level_where), f"{level_where}.net_instance_id")
        layers.append((layer, instance))
        for a, address in enumerate(_objects(level.get("rank_addr_list", []), f"{level_where}.rank_addr_list")):
            address_where = f"{level_where}.rank_addr_list[{a}]"
            text = _text(_required(address, "addr", address_where), f"{address_where}.addr")
            if str(address.get("addr_type", "EID")).upper() == "EID" and text not in eids:
                eids.append(text)
            plane = address.get("plane_id")
            if plane is not None and plane != "":
                plane_text = _id_text(plane, f"{address_where}.plane_id")
                if plane_text not in planes:
                    planes.append(plane_text)
    layers.sort()
    return RankEntry(rank=rank_id, server_id=layers[0][1], device_id=device_id, device_ip=None,
                     local_id=local_id, eids=tuple(eids), planes=tuple(planes),
                     net_instances=tuple(instance for _, instance in layers))


def _parse_v2(document: Mapping[str, Any], version: str, status: str | None) -> RankTable:
    entries = [_v2_entry(rank, f"rank_list[{r}]") for r, rank in enumerate(_objects(document["rank_list"],
                                                                                     "rank_list"))]
    if status == "completed" and not entries:
        raise ParseError("rank table is 'completed' but lists no rank")
    count = _optional_uint(document.get("rank_count"), "rank_count")
    if count is not None and status in (None, "completed") and count != len(entries):
        raise ParseError(f"rank_count is {count} but rank_list holds {len(entries)} ranks")
    ranks: dict[int, RankEntry] = {}
    eids: dict[str, int] = {}
    for entry in entries:
        if entry.rank in ranks:
            raise ParseError(f"rank_id {entry.rank} appears twice")
        ranks[entry.rank] = entry
        for eid in entry.eids:
            if eids.setdefault(eid, entry.rank) != entry.rank:
                raise ParseError(f"EID {eid} is used by ranks {eids[eid]} and {entry.rank}")
    return RankTable(version=version, status=status, server_count=None,
                     entries=tuple(sorted(entries, key=lambda entry: entry.rank)))


def parse(data: str | bytes, max_bytes: int = MAX_RANK_TABLE_BYTES) -> RankTable:
    document = _decode(data, max_bytes)
    version = _text(_required(document, "version", "rank table"), "version")
    status = document.get("status")
    if status is not None and not isinstance(status, str):
        raise ParseError(f"status: expected a string, got {status!r}")
    if "rank_list" in document:
        return _parse_v2(document, version, status)
    pods = _super_pods(document)
    entries: list[RankEntry] = []
    for s, server in enumerate(_objects(_required(document, "server_list", "rank table"), "server_list")):
        where = f"server_list[{s}]"
        server_id = _text(_required(server, "server_id", where), f"{where}.server_id")
        host_ip = _optional_ip(server.get("host_ip"), f"{where}.host_ip")
        container_ip = _optional_ip(server.get("container_ip"), f"{where}.container_ip")
        for d, device in enumerate(_objects(_required(server, "device", where), f"{where}.device")):
            device_where = f"{where}.device[{d}]"
            entries.append(RankEntry(
                rank=_uint(_required(device, "rank_id", device_where), f"{device_where}.rank_id"),
                server_id=server_id,
                device_id=_uint(_required(device, "device_id", device_where), f"{device_where}.device_id"),
                device_ip=_optional_ip(device.get("device_ip"), f"{device_where}.device_ip"),
                super_device_id=_optional_uint(device.get("super_device_id"), f"{device_where}.super_device_id"),
                super_pod_id=pods.get(server_id),
                host_ip=host_ip,
                container_ip=container_ip,
            ))
    if status == "completed" and not entries:
        raise ParseError("rank table is 'completed' but lists no device")
    _check_unique(entries)
    return RankTable(
        version=version,
        status=status,
        server_count=_optional_uint(document.get("server_count"), "server_count"),
        entries=tuple(sorted(entries, key=lambda entry: entry.rank)),
    )


def load(path: Path, max_bytes: int = MAX_RANK_TABLE_BYTES) -> RankTable:
    """Read and parse a rank table file, refusing one larger than ``max_bytes`` without reading it all."""
    with path.open("rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ParseError(f"{path}: larger than the {max_bytes}-byte limit for a rank table")
    return parse(data, max_bytes)


def hccn_conf_mismatches(table: RankTable, server_id: str, conf: Mapping[int, HccnConfEntry]) -> list[str]:
    """Where this server's rank-table device IPs disagree with ``/etc/hccn.conf`` ([] when they agree).

    ``conf`` is ``collectors.hccn_ip.parse_hccn_conf(text)``; its keys are the same physical device ids
    the rank table's ``device_id`` holds.
    """
    problems: list[str] = []
    for entry in table.on_server(server_id):
        configured = conf.get(entry.device_id)
        if configured is None or configured.address is None:
            problems.append(f"device {entry.device_id} (rank {entry.rank}): no address_{entry.device_id} in hccn.conf")
        elif entry.device_ip is not None and configured.address != entry.device_ip:
            problems.append(f"device {entry.device_id} (rank {entry.rank}): rank table device_ip {entry.device_ip} "
                            f"but hccn.conf address_{entry.device_id}={configured.address}")
    return problems
