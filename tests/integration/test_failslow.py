"""Fail-slow detection end to end: a small scenario through the simulator and alerts/failslow.rules.yml on a
real engine (bench/failslow.py: VictoriaMetrics + vmalert's replay). The faulty rank, port and host are named
with their cause, within a minute, and the job-wide events around them (warm-up, checkpoint, evaluation,
restart, noisy readings, scrape jitter, PFC bursts) page nobody."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO

SCENARIO = {
    "name": "test-128",
    "job": "train-128",
    "nodes": 8, "npus_per_node": 16, "tp": 8, "pp": 4, "dp": 4,
    "step_s": 2.0, "duration_s": 1500, "seed": 3, "util_noise": 0.03,
    "events": [
        {"kind": "checkpoint", "start": 150, "end": 210},
        {"kind": "compute_slow", "start": 270, "end": 450, "ranks": [37], "factor": 1.2},
        {"kind": "eval", "start": 500, "end": 560},
        {"kind": "link_slow", "start": 620, "end": 800, "pair": [90, 106], "factor": 1.5},
        {"kind": "restart", "start": 860, "end": 920},
        {"kind": "host_slow", "start": 1140, "end": 1320, "node": 6, "factor": 2.0},
    ],
}


def _run(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO / "bench" / "failslow.py"), "--scenario", str(path), "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def test_the_slow_rank_port_and_host_are_named_and_no_decoy_pages(tmp_path: Path) -> None:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(SCENARIO), encoding="utf-8")
    result = _run(path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    named = sorted((a["cause"], a["node"], a["rank"], a["npu"]) for a in report["alerts"])
    assert named == [("compute", "node-0002", "37", "5"), ("host", "node-0006", "", ""),
                     ("link", "node-0005", "90", "10")], report["alerts"]
    assert all(a["job"] == "train-128" for a in report["alerts"])
    assert report["precision"] == 1.0 and report["recall"] == 1.0 and report["false_pages"] == 0
    assert all(0 < fault["ttd_s"] <= 60 for fault in report["faults"]), report["faults"]


def test_a_scenario_that_does_not_add_up_is_refused_by_its_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**SCENARIO, "dp": 3}), encoding="utf-8")
    result = _run(path)
    assert result.returncode == 2
    assert "tp x pp x dp must equal nodes x npus_per_node" in result.stderr
