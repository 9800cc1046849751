"""``npuwatch demo fleet hccl-hang``: one coordinated HCCL hang over several demo nodes, whose logs
the scanner turns into the incident series that name the culprit (agent.demo.fleet)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli import main
from agent.demo.node import DemoNode


def make_fleet(tmp_path: Path, count: int = 4, chips: int = 2) -> list[Path]:
    dirs = [tmp_path / f"node-{index}" for index in range(1, count + 1)]
    for directory in dirs:
        DemoNode(directory).create(chips=chips)
    return dirs


def fleet(*args: str) -> int:
    return main(["demo", "fleet", "hccl-hang", *args])


def test_diagnose_on_a_victim_reads_the_job_log_beside_the_cann_layout(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The demo adds its job-log glob to the config; diagnose (like the agent) reads it in addition
    to the CANN layout, not instead of it: EI0002 is only in the job log, task_exec_timeout only in
    the plogs."""
    import argparse

    from agent.core.config import build_config
    from agent.diagnose import engine as diagnose

    dirs = make_fleet(tmp_path, count=2)
    assert fleet("--culprit", "node-2", "--npu", "1", *map(str, dirs)) == 0
    capsys.readouterr()
    config = build_config({"collectors": {"npu_smi": {"timeout": "3s"}, "hccn_tool": {"timeout": "3s"}}})
    args = argparse.Namespace(json=True, probes=False, verbose=False, sample_gap=0.2)
    diagnose.main(args, config, dirs[0])
    report = json.loads(capsys.readouterr().out)
    logs = next(check for check in report["checks"] if check["name"] == "hccl_errors")
    assert "EI0002" in logs["evidence"] and "task_exec_timeout" in logs["evidence"], logs["evidence"]
