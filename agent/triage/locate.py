"""Where a rank or an address lives: node, NPU, and how that is known.

Sources, most specific first:

- an address a node itself reports: its hccn.conf / ``hccn_tool -ip`` (device IPs of its NPUs),
  its bundle manifest (host addresses), the ``deviceIp``/``server`` of its own init lines;
- the ranks a node's own logs say it runs (``RankSeen`` with a node);
- a rank table: rank -> (server, device, device IP). Its ``server_id`` becomes the node whose host
  addresses include it, else stays as written (the server's IP names a node without a bundle).
  Rank-table ranks are the job's global ranks: they locate a communicator's ranks only when the
  communicator is as large as the table (the world communicator).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.triage.evidence import Evidence

__all__ = ["Locator", "Place"]


@dataclass(frozen=True)
class Place:
    node: str | None
    npu: int | None = None
    rank: int | None = None
    via: str = ""  # how it is known: "hccn.conf of node-c", "rank table", "its init log"


class Locator:
    def __init__(self, evidence: Evidence) -> None:
        hosts: dict[str, str] = {}
        for address in evidence.addresses:
            if address.npu is None and address.node is not None and address.rank is None:
                hosts.setdefault(address.ip, address.node)
        self._hosts = hosts
        self._devices: dict[str, Place] = {}
        self._table: dict[int, Place] = {}
        table_ips: dict[str, Place] = {}
        for address in evidence.addresses:
            node = hosts.get(address.node, address.node) if address.node is not None else None
            if address.rank is not None:  # a rank table row
                place = Place(node, address.npu, address.rank, address.source or "rank table")
                self._table.setdefault(address.rank, place)
                table_ips.setdefault(address.ip, place)
            elif address.npu is not None and node is not None:
                self._devices.setdefault(address.ip, Place(node, address.npu, None, address.source))
        for ip, place in table_ips.items():
            self._devices.setdefault(ip, place)
        self._ranks: dict[tuple[str, int], Place] = {}
        self._sizes: dict[str, int] = {}
        for seen in evidence.ranks:
            if seen.rank_size is not None:
                self._sizes[seen.comm] = max(self._sizes.get(seen.comm, 0), seen.rank_size)
            if seen.node is None:
                continue
            place = Place(seen.node, seen.npu, seen.rank, seen.source or "its own log")
            current = self._ranks.get((seen.comm, seen.rank))
            if current is None or (current.npu is None and place.npu is not None):
                self._ranks[(seen.comm, seen.rank)] = place
            if seen.device_ip is not None:
                self._devices.setdefault(seen.device_ip, Place(seen.node, seen.npu, None, place.via))
            if seen.server_ip is not None:
                self._hosts.setdefault(seen.server_ip, seen.node)

    @property
    def table_size(self) -> int:
        return len(self._table)

    def comm_size(self, comm: str | None) -> int | None:
        return self._sizes.get(comm) if comm is not None else None

    def comms_at(self, node: str, npu: int) -> set[str]:
        """The communicators whose ranks the logs place on this NPU."""
        return {comm for (comm, _), place in self._ranks.items() if (place.node, place.npu) == (node, npu)}

    def ranks_of(self, comm: str) -> dict[int, Place]:
        return {rank: place for (c, rank), place in self._ranks.items() if c == comm}

    def node_of_host(self, ip: str) -> str | None:
        return self._hosts.get(ip)

    def where_ip(self, ip: str) -> Place | None:
        """A device address (-> node and NPU) or a host address (-> node)."""
        place = self._devices.get(ip)
        if place is not None:
            return place
        node = self._hosts.get(ip)
        return Place(node, None, None, "host address") if node is not None else None

    def where_rank(self, comm: str | None, rank: int, rank_size: int | None = None) -> Place | None:
        if comm is not None:
            place = self._ranks.get((comm, rank))
            if place is not None:
                return place
        size = rank_size if rank_size is not None else self.comm_size(comm)
        if self._table and (size is None or size == len(self._table)):
            return self._table.get(rank)
        return None

