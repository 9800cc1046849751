"""``agent.triage.engine.analyze`` over hand-built evidence records (no files): scoring and incidents."""

from __future__ import annotations

import time

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
    Window,
)

T0 = 1_761_300_000.0
COMM = "29.1.0.10%enp_60000_0_1761275812718970"


def cluster(nodes: int = 2, npus: int = 4) -> Evidence:
    """Ranks placed node after node, NPU after NPU; each NPU's device IP in hccn.conf terms."""
    evidence = Evidence()
    for n in range(nodes):
        node = f"node-{chr(ord('a') + n)}"
        evidence.coverage(node).saw(T0 - 3600)
        evidence.coverage(node).saw(T0 + 3600)
        for npu in range(npus):
            rank = n * npus + npu
            evidence.ranks.append(RankSeen(COMM, rank, node, nodes * npus, npu, source="init log"))
            evidence.addresses.append(Address(f"29.{n + 1}.{npu}.{10 + npu}", node, npu, source="hccn.conf"))
    return evidence


def timeouts(evidence: Evidence, ranks: list[int], at: float = T0, npus: int = 4) -> None:
    for rank in ranks:
        node = f"node-{chr(ord('a') + rank // npus)}"
        evidence.failures.append(RankFailure(node, at + rank, "EI0002", "exec_timeout", COMM, rank,
                                             len({s.rank for s in evidence.ranks}), rank % npus, "AllReduce", 21))


def test_no_failure_is_no_incident() -> None:
    report = analyze(cluster())
    assert (report.status, report.exit_code, report.incidents) == ("none", 0, ())


def test_nothing_read_is_unreadable() -> None:
    evidence = Evidence(problems=["x.tar.gz: not a gzip file"])
    report = analyze(evidence)
    assert report.exit_code == 3
    assert "not a gzip file" in report.verdict


def test_link_down_on_a_blamed_npu_wins() -> None:
    evidence = cluster()
    timeouts(evidence, [0, 1, 2, 3, 4, 6, 7])
    for rank in (0, 1, 2, 3, 4, 6, 7):
        node = "node-a" if rank < 4 else "node-b"
        evidence.blames.append(Blame(node, T0 - 60, "lost", COMM, rank, ip="29.2.1.11"))
    evidence.faults.append(LocalFault("node-b", 1, "link_down", "hccn_tool -i 1 -link -g says DOWN",
                                      at=T0 - 400, seen_at=T0 + 900))
    evidence.faults.append(LocalFault("node-a", 2, "roce_error_counters", "roce_rx_err_pkt_num 3", seen_at=T0))
    report = analyze(evidence)
    assert report.exit_code == 2
    (incident,) = report.incidents
    assert incident.silent_ranks == (5,)
    assert incident.reporting_ranks == (0, 1, 2, 3, 4, 6, 7)
    top = incident.culprits[0]
    assert (top.node, top.npu, top.rank, top.cause) == ("node-b", 1, 5, "link_down")
    assert top.score > 8
    assert " -> " in top.evidence[0] and "29.2.1.11 is node-b NPU 1" in top.evidence[0]
    assert all(c.score < top.score for c in incident.culprits[1:])


def test_silence_alone_names_a_hung_rank_when_its_logs_go_on() -> None:
    evidence = cluster()
    timeouts(evidence, [0, 1, 2, 4, 5, 6, 7])
    report = analyze(evidence)
    top = report.incidents[0].culprits[0]
    assert (top.node, top.npu, top.rank, top.cause) == ("node-a", 3, 3, "process_hang")
    assert report.exit_code == 2


def test_every_rank_reporting_and_nothing_else_is_unknown() -> None:
    evidence = cluster()
    timeouts(evidence, list(range(8)))
    report = analyze(evidence)
    assert report.exit_code == 3
    assert report.incidents[0].culprits == ()
    assert "culprit unknown" in report.verdict


def test_window_drops_an_old_incident_and_keeps_the_new() -> None:
    evidence = cluster()
    timeouts(evidence, [0, 1, 2, 4, 5, 6, 7], at=T0 - 86400)
    timeouts(evidence, [0, 1, 2, 3, 4, 5, 7], at=T0)
    assert len(analyze(evidence).incidents) == 2
    report = analyze(evidence, Window(T0 - 3600, None))
    (incident,) = report.incidents
    assert incident.culprits[0].rank == 6


def test_flight_recorder_hang_without_logs() -> None:
    evidence = Evidence()
    evidence.coverage("job")
    for rank in range(4):
        last = 4 if rank == 3 else 5
        entries = tuple(FlightEntry(seq, "all_reduce", "scheduled", T0 + seq, "[[3, 4]] Float")
                        for seq in range(1, last + 1))
        evidence.flights.append(FlightRecord("job", rank, "0", "default_pg", (0, 1, 2, 3), last, None, entries))
    report = analyze(evidence)
    (incident,) = report.incidents
    top = incident.culprits[0]
    assert (top.node, top.rank, top.cause) == ("job", 3, "process_hang")
    assert incident.silent_ranks == (3,)
    assert report.exit_code == 2


def test_entry_log_names_the_rank_that_issued_fewer_collectives() -> None:
    evidence = cluster()
    timeouts(evidence, list(range(8)), at=T0 + 1800)
    for rank in range(8):
        node = "node-a" if rank < 4 else "node-b"
        issued = 40 if rank == 6 else 41
        # rank 6's plog rotated: its count is split over two files of the same process
        parts = [issued - 10, 10] if rank == 6 else [issued]
        for part in parts:
            evidence.progress.append(OpProgress(node, COMM, rank, part, "AllReduce", T0 + (0 if rank == 6 else 5),
                                                pid=100 + rank))
    report = analyze(evidence)
    top = report.incidents[0].culprits[0]
    assert (top.node, top.npu, top.rank, top.cause) == ("node-b", 2, 6, "process_hang")
    assert top.evidence[0] == ("entry log: rank 6 issued 40 collectives (the last, AllReduce, at "
                               f"{time.strftime('%H:%M:%S', time.localtime(T0))}); ranks 0-5,7 issued 41")


def test_without_an_incident_the_local_faults_lead_status_first_as_check_leads() -> None:
    """A WARN out-of-memory in the logs weighs more than a FAIL hot chip, yet the FAIL leads, as in ``check``; the
    verdict is check's object with the node, and the exit status its status's (2)."""
    evidence = cluster()
    evidence.faults.append(LocalFault("node-a", 2, "device_oom", "out of memory", at=T0))
    evidence.faults.append(LocalFault("node-b", 3, "chip_too_hot", "96 C", seen_at=T0))
    evidence.faults.append(LocalFault("node-b", 1, "chip_warning", "npu-smi says Warning", seen_at=T0))
    report = analyze(evidence)
    lead = report.to_dict()["verdict"]
    assert (report.status, report.exit_code) == ("none", 2)
    assert (lead["status"], lead["cause"], lead["npu"], lead["node"], lead["check"]) == (
        "fail", "chip_too_hot", 3, "node-b", "temperature")
    assert lead["text"] == "chip too hot on node-b NPU 3 (96 C)"
    assert [(f["node"], f["npu"], f["kind"], f["status"]) for f in report.to_dict()["findings"]] == [
        ("node-b", 3, "chip_too_hot", "fail"), ("node-a", 2, "device_oom", "warn"),
        ("node-b", 1, "chip_warning", "warn")]
    warned = analyze(Evidence(faults=[LocalFault("node-a", 2, "device_oom", "out of memory", at=T0)],
                              nodes=cluster().nodes))
    assert (warned.lead.status if warned.lead else None, warned.exit_code) == ("warn", 1)
    quiet = analyze(cluster())
    assert (quiet.lead.status if quiet.lead else None, quiet.exit_code) == ("ok", 0)
