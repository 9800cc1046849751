"""Triage over flight-recorder dumps: a real 4-rank gloo job (``tests/support/fr_harness.py``) and torch_npu's format.

The gloo runs are real ``torch.distributed`` jobs on the CPU: one rank sleeps instead of entering
collective N (hang) or calls broadcast where the others call all_reduce (desync); every rank
dumps its flight recorder. Triage reads the run directory as one node.
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
from tests.support import fr_harness


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


def test_gloo_hang_names_the_rank_that_never_entered(runs: dict[str, fr_harness.ScenarioRun]) -> None:
    run = runs["hang"]
    for rank in range(run.world_size):
        assert run.json_dump(rank).is_file() and run.pickle_dump(rank).is_file(), run.log(rank)
    code, report = triage(str(run.out_dir))
    assert code == 2, report
    (incident,) = report["incidents"]
    assert incident["comm"] == "process group 0 (default_pg)"
    assert incident["rank_size"] == run.world_size
    assert incident["reporting_ranks"] == [0, 1, 2]
    assert incident["silent_ranks"] == [run.faulty_rank]
    culprit = incident["culprits"][0]
    assert (culprit["node"], culprit["rank"], culprit["cause"]) == ("gloo-hang", run.faulty_rank, "process_hang")
    assert culprit["evidence"][0] == (f"flight recorder: rank 3 last entered collective {run.collectives - 1}; "
                                      f"ranks 0-2 entered all_reduce collective {run.collectives}")
    assert len(incident["culprits"]) == 1


def test_gloo_desync_names_the_rank_that_called_another_collective(
        runs: dict[str, fr_harness.ScenarioRun]) -> None:
    run = runs["desync"]
    code, report = triage(str(run.out_dir))
    assert code == 2, report
    (incident,) = report["incidents"]
    culprit = incident["culprits"][0]
    assert (culprit["rank"], culprit["cause"]) == (run.faulty_rank, "desync")
    assert culprit["evidence"][0] == (f"flight recorder: at collective {run.collectives} rank 3 called broadcast, "
                                      "ranks 0-2 called all_reduce")
    assert "called different collectives" in report["verdict"]["text"]


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
    assert code == 2
    culprit = report["incidents"][0]["culprits"][0]
    assert (culprit["node"], culprit["rank"], culprit["cause"]) == ("node-3", 3, "process_hang")
