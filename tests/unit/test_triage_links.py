"""The endpoint the links with RoCE errors share: one port, or one peer node (issue 31, section 3)."""

from __future__ import annotations

from agent.triage.engine import analyze
from agent.triage.evidence import Address, Evidence, LocalFault, RankFailure
from agent.triage.links import shared_endpoint
from agent.triage.locate import Locator

T0 = 1_740_902_400.0


def _evidence(links: list[tuple[str, int, str]]) -> Evidence:
    """Each (node, npu, peer device address): a CQE error logged on that port towards the address."""
    evidence = Evidence()
    for npu in range(4):
        evidence.addresses.append(Address(f"29.0.9.{npu}", "node-peer", npu))
        for node in ("node-a", "node-b", "node-c"):
            evidence.addresses.append(Address(f"29.0.{ord(node[-1]) - 96}.{npu}", node, npu))
    for node, npu, peer in links:
        evidence.faults.append(LocalFault(node, npu, "roce_cqe", "cqe", at=T0 - 60, peers=(peer,)))
    return evidence


def test_links_to_several_ports_of_one_peer_node_share_that_node() -> None:
    evidence = _evidence([("node-a", 0, "29.0.9.0"), ("node-b", 1, "29.0.9.1"), ("node-c", 2, "29.0.9.2")])
    shared = shared_endpoint(evidence.faults, Locator(evidence))
    assert shared is not None
    assert shared.endpoint == ("node-peer", None)
    assert shared.peers == (("node-a", 0), ("node-b", 1), ("node-c", 2))
    assert shared.links == 3


def test_one_shared_port_still_wins_over_its_node() -> None:
    evidence = _evidence([("node-a", 0, "29.0.9.3"), ("node-b", 1, "29.0.9.3"), ("node-c", 2, "29.0.9.1")])
    shared = shared_endpoint(evidence.faults, Locator(evidence))
    assert shared is not None and shared.endpoint == ("node-peer", 3)


def test_two_nodes_on_every_link_share_nothing() -> None:
    evidence = _evidence([("node-a", 0, "29.0.9.0"), ("node-a", 1, "29.0.9.1")])
    assert shared_endpoint(evidence.faults, Locator(evidence)) is None


def test_the_shared_peer_node_leads_the_incident() -> None:
    evidence = _evidence([("node-a", 0, "29.0.9.0"), ("node-b", 1, "29.0.9.1"), ("node-c", 2, "29.0.9.2")])
    evidence.failures.extend(RankFailure(node, T0, "EI0002", "exec_timeout", "g", rank, 4)
                             for rank, node in enumerate(("node-a", "node-b", "node-c", "node-peer")))
    (incident,) = analyze(evidence).incidents
    top = incident.culprits[0]
    assert (top.node, top.cause) == ("node-peer", "roce_errors")
    assert top.score > incident.culprits[1].score
    assert any(line.startswith("shared endpoint:") for line in top.evidence)


def test_errors_of_several_ports_towards_one_unplaced_server_address_name_it() -> None:
    evidence = _evidence([("node-a", 0, "10.9.9.9"), ("node-a", 1, "10.9.9.9"), ("node-b", 2, "10.9.9.9")])
    evidence.failures.extend(RankFailure(node, T0, "EI0002", "exec_timeout", "g", rank, 4)
                             for rank, node in enumerate(("node-a", "node-a", "node-b", "node-c")))
    shared = shared_endpoint(evidence.faults, Locator(evidence))
    assert shared is not None and shared.endpoint == ("address 10.9.9.9", None)
    (incident,) = analyze(evidence).incidents
    top = incident.culprits[0]
    assert (top.ip, top.cause) == ("10.9.9.9", "roce_errors")
    assert top.score > incident.culprits[1].score
