"""Equal scores at the top of an incident are a tie (agent.triage.ties): no culprit is named, whatever the
names or the order of the inputs, and the report says what evidence would break it."""

from __future__ import annotations

import pytest

from agent.triage.engine import analyze
from agent.triage.evidence import Address, Evidence, LocalFault, RankFailure, RankSeen
from agent.triage.render import render_text
from agent.triage.report import Incident

T0 = 1_740_902_400.0
COMM = "g1"


def evidence_of(names: list[str], *, read: bool = True) -> Evidence:
    """Four ranks, one per node, all timed out; the ports of ranks 0 and 1 logged CQE errors towards each other."""
    evidence = Evidence()
    for rank, node in enumerate(names):
        evidence.failures.append(RankFailure(node, T0 + rank, "EI0002", "exec_timeout", COMM, rank, 4))
        evidence.ranks.append(RankSeen(COMM, rank, node, 4, 0))
        evidence.addresses.append(Address(f"29.0.0.{rank}", node, 0))
        if read:
            evidence.coverage(node)
    for here, there in ((0, 1), (1, 0)):
        evidence.faults.append(LocalFault(names[here], 0, "roce_cqe", "cqe", at=T0 - 60, peers=(f"29.0.0.{there}",)))
    return evidence


def only(evidence: Evidence) -> Incident:
    (incident,) = analyze(evidence).incidents
    return incident


@pytest.mark.parametrize("names", [["node-a", "node-b", "node-c", "node-d"], ["node-z", "node-y", "node-x", "node-w"]])
def test_the_two_ends_of_one_erroring_link_are_a_tie_whichever_sorts_first(names: list[str]) -> None:
    incident = only(evidence_of(names))
    assert incident.tie is not None
    assert {(c.node, c.rank) for c in incident.tie.culprits} == {(names[0], 0), (names[1], 1)}
    assert not incident.named
    assert analyze(evidence_of(names)).exit_code == 3
    first, second = sorted(names[:2])
    assert incident.verdict.startswith(f"undecided: {first} NPU 0 (rank {names.index(first)}) and {second} NPU 0 "
                                       f"(rank {names.index(second)}) score 1.5 each (RoCE errors); ")
    breakers = incident.tie.would_break_it
    assert breakers[0].startswith("RoCE errors on another link of one of them")
    assert f"`hccn_tool -i 0 -optical -g` and `-link_stat -g` on {names[0]}" in breakers[1]
    assert f"on {names[1]}" in breakers[1]
    assert breakers[2].startswith("flight-recorder dumps, or HCCL_ENTRY_LOG_ENABLE=1 entry logs, of ranks 0-1")
    assert incident.to_dict()["tie"]["would_break_it"] == list(breakers)
    assert incident.to_dict()["tie"]["score"] == 1.5


def test_a_tied_node_whose_inputs_are_missing_asks_for_its_bundle() -> None:
    incident = only(evidence_of(["node-a", "node-b", "node-c", "node-d"], read=False))
    assert incident.tie is not None
    assert incident.tie.would_break_it[0] == ("the bundle of node-a, node-b (`npuwatch bundle` there): its logs and "
                                              "tool output are not in these inputs")


def test_the_tie_is_in_the_text_report_with_what_would_break_it() -> None:
    report = analyze(evidence_of(["node-a", "node-b", "node-c", "node-d"]))
    text = render_text(report)
    assert "note      tie: node-a NPU 0 (rank 0) and node-b NPU 0 (rank 1) score 1.5 each: nothing in these" in text
    assert "verdict: UNKNOWN undecided: node-a NPU 0 (rank 0) and node-b NPU 0 (rank 1)" in text


def test_a_lone_top_score_is_no_tie() -> None:
    evidence = evidence_of(["node-a", "node-b", "node-c", "node-d"])
    evidence.faults.append(LocalFault("node-b", 0, "optics_weak", "weak", at=T0 - 60))
    incident = only(evidence)
    assert incident.tie is None
    assert incident.named and incident.culprits[0].node == "node-b"
