"""Culprit candidates of one incident: the ranks, NPUs, nodes and addresses the evidence points at, each
gathering its evidence; references to one place (a rank, its address, its NPU) join one candidate."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from agent.triage.evidence import LocalFault
from agent.triage.flight import FlightCulprit
from agent.triage.locate import Locator

__all__ = ["Candidate", "Candidates"]


@dataclass
class Candidate:
    node: str | None
    npu: int | None
    rank: int | None = None
    ip: str | None = None
    via: str = ""
    blamers: set[tuple[object, ...]] = field(default_factory=set)  # who blamed it: one key per reporting rank
    blamers_how: set[tuple[tuple[object, ...], str]] = field(default_factory=set)
    hows: Counter[str] = field(default_factory=Counter)  # blamers by how they blamed it
    first_blame: float | None = None
    silent: bool = False
    silent_observed: bool = False
    silence: float = 0.0
    flights: list[FlightCulprit] = field(default_factory=list)
    desync: list[str] = field(default_factory=list)
    behind: list[str] = field(default_factory=list)
    faults: list[LocalFault] = field(default_factory=list)
    member: bool = False  # pointed at only because it runs a rank of the communicator
    # the other ends of the links with errors that this endpoint shares, and how many such links there are
    shared_with: tuple[str, ...] = ()
    erroring_links: int = 0
    # the faults its peers logged on those links: its own, seen from the other end, when it logged none
    link_faults: list[LocalFault] = field(default_factory=list)

    @property
    def pointed(self) -> bool:
        return bool(self.blamers or self.silent or self.flights or self.desync or self.behind or self.shared_with)


class Candidates:
    def __init__(self, locator: Locator, comm: str | None, rank_size: int | None) -> None:
        self.locator = locator
        self.comm = comm
        self.rank_size = rank_size
        self.items: dict[tuple[object, ...], Candidate] = {}
        self.aliases: dict[tuple[object, ...], tuple[object, ...]] = {}
        self._by_place: dict[tuple[str | None, int | None], int] | None = None

    def get(self, *, node: str | None = None, npu: int | None = None, rank: int | None = None,
            ip: str | None = None, device: int | None = None) -> Candidate:
        via = ""
        if node is None and ip is not None:
            place = self.locator.where_ip(ip)
            if place is not None:
                node, npu, via = place.node, place.npu, place.via
                if rank is None and place.rank is not None and self.rank_size in (None, self.locator.table_size):
                    rank = place.rank
        if node is None and rank is not None:
            place = self.locator.where_rank(self.comm, rank, self.rank_size)
            if place is not None:
                node, npu, via = place.node, place.npu, place.via
        if node is not None and npu is None and device is not None:
            npu = device
        if node is not None and npu is not None and rank is None and self.comm is not None:
            rank = self._placed().get((node, npu))
        key: tuple[object, ...]
        if node is not None:
            key = ("at", node, npu)
        elif rank is not None:
            key = ("rank", rank)
        else:
            key = ("ip", ip)
        for alias in (("rank", rank), ("ip", ip)):
            if alias[1] is None or alias not in self.aliases:
                continue
            known = self.aliases[alias]
            if known == key or known not in self.items:
                continue
            if node is None:
                key = known  # a reference without a place joins the candidate that has one
            elif self.items[known].node is None:
                self._merge(self.items.pop(known), key, node, npu)
        candidate = self.items.get(key)
        if candidate is None:
            candidate = self.items[key] = Candidate(node, npu)
        candidate.rank = candidate.rank if candidate.rank is not None else rank
        candidate.ip = candidate.ip or ip
        candidate.via = candidate.via or via
        for alias in (("rank", candidate.rank), ("ip", candidate.ip)):
            if alias[1] is not None:
                self.aliases[alias] = key
        return candidate

    def _placed(self) -> dict[tuple[str | None, int | None], int]:
        if self._by_place is None:
            self._by_place = {(place.node, place.npu): rank
                              for rank, place in self.locator.ranks_of(self.comm or "").items()}
        return self._by_place

    def _merge(self, old: Candidate, key: tuple[object, ...], node: str, npu: int | None) -> None:
        target = self.items.setdefault(key, Candidate(node, npu))
        _absorb(target, old)

    def settle(self) -> list[Candidate]:
        """Fold a node-level candidate into the one NPU-level candidate of its node, when there is one."""
        by_node: dict[str, list[Candidate]] = defaultdict(list)
        for candidate in self.items.values():
            if candidate.node is not None and candidate.npu is not None:
                by_node[candidate.node].append(candidate)
        result = []
        for candidate in self.items.values():
            if candidate.node is not None and candidate.npu is None and len(by_node.get(candidate.node, [])) == 1:
                _absorb(by_node[candidate.node][0], candidate)
            else:
                result.append(candidate)
        return result


def _absorb(target: Candidate, old: Candidate) -> None:
    target.rank = target.rank if target.rank is not None else old.rank
    target.ip = target.ip or old.ip
    target.via = target.via or old.via
    target.blamers |= old.blamers
    for pair in old.blamers_how - target.blamers_how:
        target.blamers_how.add(pair)
        target.hows[pair[1]] += 1
    if old.first_blame is not None:
        target.first_blame = min(target.first_blame or old.first_blame, old.first_blame)
    target.silent = target.silent or old.silent
    target.silent_observed = target.silent_observed or old.silent_observed
    target.silence = max(target.silence, old.silence)
    target.flights.extend(old.flights)
    target.desync.extend(old.desync)
    target.behind.extend(old.behind)
    target.faults.extend(f for f in old.faults if f not in target.faults)
    target.member = target.member and old.member
    if len(old.shared_with) > len(target.shared_with):
        target.shared_with, target.erroring_links = old.shared_with, old.erroring_links
        target.link_faults = old.link_faults
