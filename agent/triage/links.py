"""The links with errors of one incident, and the endpoint they share.

A RoCE CQE error names both ends of a link: the port that logged it and the peer address it was
talking to. A port whose optic, cable or NIC is failing shows errors on every link it has, and each
of its peers logs errors on just the one link towards it. So when errors are reported on several
links, the endpoint on the most of them (at least two, and more than any other endpoint) is the
common part, whichever end each error was logged at; its peers are not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

from agent.triage.evidence import LocalFault
from agent.triage.locate import Locator

__all__ = ["Endpoint", "SharedEndpoint", "shared_endpoint"]

Endpoint = tuple[str, Optional[int]]  # (node, npu); Optional: an alias is evaluated at import, on 3.9 too


@dataclass(frozen=True)
class SharedEndpoint:
    endpoint: Endpoint
    peers: tuple[Endpoint, ...]  # the other ends of its links with errors, sorted
    links: int  # every link with errors in the incident, its own and others


def erroring_links(faults: Iterable[LocalFault], locator: Locator) -> set[frozenset[Endpoint]]:
    """Each link a RoCE fault names both ends of (a peer address no input places is left out)."""
    links: set[frozenset[Endpoint]] = set()
    for fault in faults:
        if fault.kind != "roce_cqe":
            continue
        here: Endpoint = (fault.node, fault.npu)
        for address in fault.peers:
            place = locator.where_ip(address)
            if place is None or place.node is None:
                continue
            there: Endpoint = (place.node, place.npu)
            if there != here:
                links.add(frozenset((here, there)))
    return links


def shared_endpoint(faults: Iterable[LocalFault], locator: Locator) -> SharedEndpoint | None:
    links = erroring_links(faults, locator)
    ends = Counter(end for link in links for end in link)
    if not ends:
        return None
    ranked = ends.most_common()
    top, count = ranked[0]
    if count < 2 or (len(ranked) > 1 and ranked[1][1] == count):
        return None
    peers = sorted((end for link in links if top in link for end in link if end != top),
                   key=lambda end: (end[0], -1 if end[1] is None else end[1]))
    return SharedEndpoint(top, tuple(peers), len(links))
