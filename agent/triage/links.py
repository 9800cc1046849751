"""The links with errors of one incident, and the endpoint they share.

A RoCE CQE error names both ends of a link: the port that logged it and the peer address it was
talking to. A port whose optic, cable or NIC is failing shows errors on every link it has, and each
of its peers logs errors on just the one link towards it. So when errors are reported on several
links, the endpoint on the most of them (at least two, and more than any other endpoint) is the
common part, whichever end each error was logged at; its peers are not. When no one port is on the
most links but one node is (the links lead to several of its ports, or to its host address), that
node is the shared endpoint.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

from agent.triage.evidence import LocalFault
from agent.triage.locate import Locator

__all__ = ["UNPLACED", "Endpoint", "SharedEndpoint", "shared_endpoint", "unplaced"]

Endpoint = tuple[str, Optional[int]]  # (node, npu); Optional: an alias is evaluated at import, on 3.9 too


@dataclass(frozen=True)
class SharedEndpoint:
    endpoint: Endpoint
    peers: tuple[Endpoint, ...]  # the other ends of its links with errors, sorted
    links: int  # every link with errors in the incident, its own and others


# The node of an endpoint that only a peer address names (no input places it): ``unplaced(address)``.
UNPLACED = "address "


def unplaced(address: str) -> str:
    return UNPLACED + address


def erroring_links(faults: Iterable[LocalFault], locator: Locator) -> set[frozenset[Endpoint]]:
    """Each link a RoCE fault names both ends of (a peer address no input places is an endpoint of its own:
    the errors of several ports towards one server address name it)."""
    links: set[frozenset[Endpoint]] = set()
    for fault in faults:
        if fault.kind != "roce_cqe":
            continue
        here: Endpoint = (fault.node, fault.npu)
        for address in fault.peers:
            place = locator.where_ip(address)
            there: Endpoint = (unplaced(address), None) if place is None or place.node is None else (
                place.node, place.npu)
            if there != here:
                links.add(frozenset((here, there)))
    return links


def _most(ends: Counter[Endpoint]) -> Endpoint | None:
    """The endpoint on the most links: at least two, and more than any other."""
    ranked = ends.most_common(2)
    if not ranked or ranked[0][1] < 2 or (len(ranked) > 1 and ranked[1][1] == ranked[0][1]):
        return None
    return ranked[0][0]


def _sorted(ends: Iterable[Endpoint]) -> tuple[Endpoint, ...]:
    return tuple(sorted(set(ends), key=lambda end: (end[0], -1 if end[1] is None else end[1])))


def shared_endpoint(faults: Iterable[LocalFault], locator: Locator) -> SharedEndpoint | None:
    """The port the links with errors share; else the node they all lead to (several ports of one peer node,
    or its host address, each on one link: the node's switch side or the node itself is the common part)."""
    links = erroring_links(faults, locator)
    top = _most(Counter(end for link in links for end in link))
    if top is not None:
        return SharedEndpoint(top, _sorted(end for link in links if top in link for end in link if end != top),
                              len(links))
    node_links = [link for link in links if len({end[0] for end in link}) == 2]  # a link within a node: no
    nodes: Counter[Endpoint] = Counter((node, None) for link in node_links for node in {end[0] for end in link})
    shared = _most(nodes)
    if shared is None:
        return None
    peers = _sorted(end for link in node_links if shared[0] in {e[0] for e in link} for end in link
                    if end[0] != shared[0])
    return SharedEndpoint(shared, peers, len(links))
