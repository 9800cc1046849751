"""Each weight of ``agent.triage.weights.WEIGHTS`` pinned by what it does to a score: changing a weight is
its table line and its test here (the triage goldens then show the new ranking)."""

from __future__ import annotations

import pytest

from agent.triage.engine import analyze
from agent.triage.evidence import (
    Address,
    Blame,
    Evidence,
    FlightEntry,
    FlightRecord,
    LocalFault,
    OpProgress,
    RankFailure,
    RankSeen,
)
from agent.triage.faults import fault_weight
from agent.triage.flight import analyze_flights
from agent.triage.report import Culprit, Incident

T0 = 1_740_902_400.0
COMM = "g1"


def failures(*ranks: int, size: int, ops: dict[int, str] | None = None) -> list[RankFailure]:
    return [RankFailure(f"node-{rank}", T0 + rank, "EI0002", "exec_timeout", COMM, rank, size,
                        op=(ops or {}).get(rank), index=7 if ops else None) for rank in ranks]


def incident(evidence: Evidence) -> Incident:
    (found,) = analyze(evidence).incidents
    return found


def culprit(found: Incident, rank: int) -> Culprit:
    return next(c for c in found.culprits if c.rank == rank)


def test_blame_is_base_plus_share_times_the_share_of_reporters_naming_it() -> None:
    evidence = Evidence()
    evidence.failures.extend(failures(0, 1, 2, 3, size=4))
    evidence.blames.append(Blame("node-0", T0, "waited_on", COMM, 0, rank=3))
    assert culprit(incident(evidence), 3).score == 1.0 + 2.0 * (1 / 4)


def test_silence_is_shared_among_the_silent_ranks_and_one_silent_rank_is_named() -> None:
    evidence = Evidence()
    evidence.failures.extend(failures(0, 1, 2, size=4))
    found = incident(evidence)
    assert culprit(found, 3).score == 1.5
    assert found.named  # 1.5 reaches named_score
    evidence = Evidence()
    evidence.failures.extend(failures(0, 1, size=4))
    found = incident(evidence)
    assert {c.rank: c.score for c in found.culprits} == {2: 0.75, 3: 0.75}
    assert not found.named


def test_a_rank_in_another_collective_at_the_same_index_weighs_hccl_desync() -> None:
    evidence = Evidence()
    evidence.failures.extend(failures(0, 1, 2, size=3, ops={0: "AllReduce", 1: "AllReduce", 2: "Broadcast"}))
    top = incident(evidence).culprits[0]
    assert (top.rank, top.score, top.cause) == (2, 3.0, "desync")


def test_a_rank_whose_entry_log_stops_early_weighs_entry_behind() -> None:
    evidence = Evidence()
    evidence.failures.extend(failures(0, 1, size=2))
    evidence.progress.extend([OpProgress("node-0", COMM, 0, 40, "AllReduce", T0 - 5),
                              OpProgress("node-1", COMM, 1, 39, "AllReduce", T0 - 9)])
    top = incident(evidence).culprits[0]
    assert (top.rank, top.score, top.cause) == (1, 1.5, "process_hang")


def _placed(evidence: Evidence, size: int) -> None:
    evidence.ranks.extend(RankSeen(COMM, rank, f"node-{rank}", size, 0) for rank in range(size))


def test_each_other_kind_of_fault_corroborates_the_best_up_to_the_max() -> None:
    evidence = Evidence()
    evidence.failures.extend(failures(0, 1, size=2))
    _placed(evidence, 2)
    evidence.blames.append(Blame("node-0", T0, "waited_on", COMM, 0, rank=1))
    kinds = ["link_down", "optics_weak", "roce_error_counters", "chip_warning", "probe_slow"]
    evidence.faults.extend(LocalFault("node-1", 0, kind, kind, at=T0 - 60) for kind in kinds)
    best = fault_weight(evidence.faults[0])
    top = culprit(incident(evidence), 1)
    assert top.score == pytest.approx(1.0 + 2.0 * (1 / 2) + best + 0.6)  # 4 other kinds: 0.8, capped at 0.6
    assert top.cause == "link_down"  # at least strong_fault: the fault names the cause


def test_a_fault_on_a_member_nothing_points_at_counts_half() -> None:
    evidence = Evidence()
    evidence.failures.extend(failures(0, 1, size=2))
    _placed(evidence, 2)
    evidence.faults.append(LocalFault("node-1", 0, "link_down", "link down", at=T0 - 60))
    top = culprit(incident(evidence), 1)
    assert top.score == pytest.approx(0.5 * fault_weight(evidence.faults[0]))


def test_a_fault_below_strong_fault_does_not_name_the_cause_over_a_lost_heartbeat() -> None:
    evidence = Evidence()
    evidence.failures.extend(failures(0, 1, size=2))
    _placed(evidence, 2)
    evidence.blames.append(Blame("node-0", T0, "lost", COMM, 0, rank=1))
    evidence.faults.append(LocalFault("node-1", 0, "roce_error_counters", "counters", at=T0 - 60))
    assert culprit(incident(evidence), 1).cause == "process_exit"


def _record(rank: int, ops: list[str], group_ranks: tuple[int, ...] = (0, 1, 2)) -> FlightRecord:
    entries = tuple(FlightEntry(seq, op, "completed", T0 + seq, "[[8]] Float") for seq, op in enumerate(ops, start=1))
    return FlightRecord("n", rank, "0", "default_pg", group_ranks, len(ops), None, entries)


def test_flight_recorder_weights_the_rank_furthest_behind_and_the_odd_one_out() -> None:
    (hang,) = analyze_flights([_record(0, ["all_reduce"] * 5), _record(1, ["all_reduce"] * 5),
                               _record(2, ["all_reduce"] * 3)])
    assert {c.rank: c.score for c in hang.culprits} == {2: 3.0}
    (desync,) = analyze_flights([_record(0, ["all_reduce"] * 2), _record(1, ["all_reduce"] * 2),
                                 _record(2, ["all_reduce", "all_gather"])])
    assert {c.rank: c.score for c in desync.culprits} == {2: 3.0}


def test_a_rank_without_a_flight_recorder_dump_weighs_flight_no_dump() -> None:
    (finding,) = analyze_flights([_record(0, ["all_reduce"] * 5), _record(1, ["all_reduce"] * 3)])
    assert {c.rank: c.score for c in finding.culprits}.get(2) == 1.0


def test_one_other_kind_of_fault_adds_fault_corroboration() -> None:
    evidence = Evidence()
    evidence.failures.extend(failures(0, 1, size=2))
    _placed(evidence, 2)
    evidence.blames.append(Blame("node-0", T0, "waited_on", COMM, 0, rank=1))
    evidence.faults.extend([LocalFault("node-1", 0, "link_down", "down", at=T0 - 60),
                            LocalFault("node-1", 0, "optics_weak", "weak", at=T0 - 60)])
    top = culprit(incident(evidence), 1)
    assert top.score == pytest.approx(1.0 + 2.0 * (1 / 2) + fault_weight(evidence.faults[0]) + 0.2)


def _four_ports_one_link_each_way(evidence: Evidence, shared: int, peers: list[int]) -> None:
    """Rank r on node-r NPU 0 at 29.0.0.r; CQE errors logged at both ends of each link shared <-> peer."""
    evidence.addresses.extend(Address(f"29.0.0.{rank}", f"node-{rank}", 0) for rank in range(4))
    evidence.faults.append(LocalFault(f"node-{shared}", 0, "roce_cqe", "cqe", at=T0 - 60,
                                      peers=tuple(f"29.0.0.{peer}" for peer in peers)))
    evidence.faults.extend(LocalFault(f"node-{peer}", 0, "roce_cqe", "cqe", at=T0 - 60, peers=(f"29.0.0.{shared}",))
                           for peer in peers)


def test_the_endpoint_every_erroring_link_shares_weighs_shared_endpoint_over_its_peers() -> None:
    evidence = Evidence()
    evidence.failures.extend(failures(0, 1, 2, 3, size=4))
    _placed(evidence, 4)
    _four_ports_one_link_each_way(evidence, shared=2, peers=[0, 1, 3])
    found = incident(evidence)
    top = found.culprits[0]
    # Every port has the same fault; only the links tell the shared one apart (its peers sort before it).
    assert (top.node, top.score) == ("node-2", 1.5 + fault_weight(evidence.faults[0]))
    assert all(c.score == fault_weight(evidence.faults[0]) * 0.5 for c in found.culprits[1:])
    assert any(line.startswith("shared endpoint: every one of the 3 links with RoCE errors ends at node-2 NPU 0 "
                               "(the other ends: node-0 NPU 0, node-1 NPU 0, node-3 NPU 0)") for line in top.evidence)
    assert found.named and found.tie is None


def test_an_endpoint_on_as_many_erroring_links_as_another_shares_nothing() -> None:
    evidence = Evidence()
    evidence.failures.extend(failures(0, 1, 2, 3, size=4))
    _placed(evidence, 4)
    _four_ports_one_link_each_way(evidence, shared=0, peers=[1])
    _four_ports_one_link_each_way(evidence, shared=2, peers=[3])
    found = incident(evidence)
    assert {c.score for c in found.culprits} == {fault_weight(evidence.faults[0]) * 0.5}
    assert not any("shared endpoint" in line for c in found.culprits for line in c.evidence)
