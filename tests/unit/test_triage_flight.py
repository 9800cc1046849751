"""Triage over flight-recorder dumps in torch_npu's format (fixtures).

The real 4-rank gloo jobs (``tests/support/fr_harness.py``), desync, complete and split over nodes:
tests/integration/test_triage_flight.py.
"""

from __future__ import annotations

import io
import json
from typing import Any

from agent.cli import build_parser
from agent.triage import command
from agent.triage.engine import analyze
from agent.triage.evidence import Evidence, FlightEntry, FlightRecord, RankFailure
from agent.triage.flight import analyze_flights
from tests.support import paths

FIXTURES = paths.FIXTURES / "flight_recorder"


def triage(*paths: str) -> tuple[int, dict[str, Any]]:
    args = build_parser().parse_args(["triage", "--json", "--jobs", "1", *paths])
    out = io.StringIO()
    code = command.main(args, out=out, err=io.StringIO())
    return code, json.loads(out.getvalue())


def test_torch_npu_dumps() -> None:
    """torch_npu's JSON dump (``profiling_name`` empty): rank 1 stopped before collective 4."""
    code, report = triage(str(FIXTURES))
    assert code == 2
    culprit = report["incidents"][0]["culprits"][0]
    assert (culprit["rank"], culprit["cause"]) == (1, "process_hang")
    assert culprit["evidence"][0] == "flight recorder: rank 1 last entered collective 3; rank 0 entered collective 4"


def _record(rank: int, ops: list[str], node: str = "n", sizes: str = "[[8]] Float") -> FlightRecord:
    entries = tuple(FlightEntry(seq, op, "completed", 1000.0 + seq, sizes) for seq, op in enumerate(ops, start=1))
    return FlightRecord(node, rank, "0", "default_pg", (0, 1), len(ops), None, entries)


def test_two_rank_desync_has_no_majority() -> None:
    (finding,) = analyze_flights([_record(0, ["all_reduce", "all_reduce"]), _record(1, ["all_reduce", "all_gather"])])
    assert finding.kind == "desync"
    assert sorted(c.rank for c in finding.culprits) == [0, 1]
    assert {c.score for c in finding.culprits} == {1.5}


def test_same_operation_other_shapes_is_a_desync() -> None:
    records = [_record(rank, ["all_reduce"]) for rank in range(3)]
    records.append(FlightRecord("n", 3, "0", "", (0, 1, 2, 3), 1, None,
                                (FlightEntry(1, "all_reduce", "completed", 1001.0, "[[4]] Float"),)))
    (finding,) = analyze_flights(records)
    (culprit,) = finding.culprits
    assert culprit.rank == 3
    assert culprit.text == ("flight recorder: at collective 1 rank 3 called all_reduce with [[4]] Float, "
                            "ranks 0-2 with [[8]] Float")


def test_flight_finding_joins_the_hccl_incident_of_its_size() -> None:
    evidence = Evidence()
    evidence.coverage("n")
    for rank in range(3):
        evidence.failures.append(RankFailure("n", 5000.0 + rank, "EI0002", "exec_timeout", "G", rank, 4, rank,
                                             "AllReduce"))
    for rank in range(4):
        evidence.flights.append(_record(rank, ["all_reduce"] * (4 if rank == 3 else 5)))
    evidence.flights = [FlightRecord(r.node, r.rank, r.group, r.group_desc, (0, 1, 2, 3), r.last_enqueued, None,
                                     r.entries) for r in evidence.flights]
    report = analyze(evidence)
    (incident,) = report.incidents
    assert incident.comm == "G"
    culprit = incident.culprits[0]
    assert (culprit.rank, culprit.cause) == (3, "process_hang")
    assert culprit.score > 4  # silence and the flight recorder agree
