"""Triage over flight-recorder dumps in torch_npu's format (fixtures).

A real 4-rank gloo job (``tests/support/fr_harness.py``): tests/integration/test_triage_flight.py.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agent.cli import build_parser
from agent.triage import command
from agent.triage.engine import analyze
from agent.triage.evidence import Evidence, FlightEntry, FlightRecord, RankFailure
from agent.triage.flight import analyze_flights
from tests.support import fr_harness, paths

FIXTURES = paths.FIXTURES / "flight_recorder"


def triage(*paths: str) -> tuple[int, dict[str, Any]]:
    args = build_parser().parse_args(["triage", "--json", "--jobs", "1", *paths])
    out = io.StringIO()
    code = command.main(args, out=out, err=io.StringIO())
    return code, json.loads(out.getvalue())


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, fr_harness.ScenarioRun]:
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("fr")
    return {scenario: fr_harness.run_scenario(scenario, root / f"gloo-{scenario}")
            for scenario in fr_harness.SCENARIOS}


def test_gloo_desync_names_the_rank_that_called_another_collective(
        runs: dict[str, fr_harness.ScenarioRun]) -> None:
    run = runs["desync"]
    code, report = triage(str(run.out_dir))
    assert code == 1, report
    (incident,) = report["incidents"]
    culprit = incident["culprits"][0]
    assert (culprit["rank"], culprit["cause"]) == (run.faulty_rank, "desync")
    assert culprit["evidence"][0] == (f"flight recorder: at collective {run.collectives} rank 3 called broadcast, "
                                      "ranks 0-2 called all_reduce")
    assert "called different collectives" in report["verdict"]


def test_gloo_complete_run_is_no_incident(runs: dict[str, fr_harness.ScenarioRun]) -> None:
    code, report = triage(str(runs["complete"].out_dir))
    assert code == 0
    assert report["incidents"] == []


def test_dumps_of_one_job_split_over_nodes(runs: dict[str, fr_harness.ScenarioRun], tmp_path: Path) -> None:
    """Each rank's dump on its own node: the culprit is named with the node it ran on."""
    run = runs["hang"]
    for rank in range(run.world_size):
        node = tmp_path / f"node-{rank}"
        node.mkdir()
        shutil.copy(run.pickle_dump(rank), node / f"nccl_trace_rank_{rank}")
    code, report = triage(*(str(tmp_path / f"node-{rank}") for rank in range(run.world_size)))
    assert code == 1
    culprit = report["incidents"][0]["culprits"][0]
    assert (culprit["node"], culprit["rank"], culprit["cause"]) == ("node-3", 3, "process_hang")


def test_torch_npu_dumps() -> None:
    """torch_npu's JSON dump (``profiling_name`` empty): rank 1 stopped before collective 4."""
    code, report = triage(str(FIXTURES))
    assert code == 1
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
