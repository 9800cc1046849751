"""``npuwatch diagnose`` without the fake tools: log checks, flags, probe progress, causes and their runbooks.

Against the demo node's fake tools, run as real subprocesses: tests/integration/test_diagnose.py.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import pytest

from agent.core.config import build_config
from agent.demo.node import DemoNode
from agent.diagnose import engine as diagnose
from agent.diagnose.evidence import remote_culprit
from agent.triage.engine import analyze
from agent.triage.evidence import Address, Blame, Evidence, NodeCoverage, RankFailure
from tests.support.diagnose_harness import GAP_S, by_name, make_config
from tests.support.paths import REPO


@pytest.fixture
def node(tmp_path: Path) -> DemoNode:
    return DemoNode(tmp_path / "demo").create(chips=4)


# No library search (``ldconfig -p`` is a process): these read a node with no npu-smi and no DCMI.
NO_DCMI = {"dcmi": {"enabled": False}}


def test_only_old_logs_pass_as_in_check(tmp_path: Path) -> None:
    """A log directory whose every file is older than the window: an idle node writes no log, so no error
    in the window is no error (``npuwatch check``'s hccl_errors judges it the same way)."""
    log_dir = tmp_path / "log" / "debug" / "plog"
    log_dir.mkdir(parents=True)
    old_plog = log_dir / "plog-7_20250101000000000.log"
    old_plog.write_text("[ERROR] HCCL(7,python3):2025-01-01-00:00:00.000.000 [x.cc:1] [7]old error\n")
    old = time.time() - 3 * 3600
    os.utime(old_plog, (old, old))
    config = build_config({"collectors": {"npu_smi": {"path": str(tmp_path / "no-such-npu-smi")}, **NO_DCMI,
                                          "hccl_logs": {"paths": [str(tmp_path / "log")]}}})
    report = diagnose.diagnose(config, diagnose.DiagnoseOptions(sample_gap_s=GAP_S)).to_dict()
    logs = by_name(report)["hccl_errors"]
    assert logs["status"] == "PASS"
    assert logs["evidence"] == (f"no log file under {tmp_path / 'log'} was written in the last 2 h "
                                "(1 older file not read)")


def test_remote_culprit_ignores_this_nodes_addresses() -> None:
    """The triage engine's best culprit off this node: a blamed local address places a local NPU."""
    def report(local: bool) -> Any:
        evidence = Evidence()
        evidence.coverage("here")
        evidence.failures.append(RankFailure("here", 1000.0, "EI0002", "exec_timeout", "G", 0, 16, 0))
        for peer in range(3):
            evidence.blames.append(Blame("here", 990.0 + peer, "waited_on", "G", 0, 3, "29.1.3.13", pid=peer))
        evidence.blames.append(Blame("here", 995.0, "lost", "G", 0, 12, "29.7.0.15"))
        if local:
            evidence.addresses.append(Address("29.1.3.13", "here", 3))
        return analyze(evidence)

    culprit = remote_culprit(report(local=True), "here")
    assert culprit is not None and (culprit.rank, culprit.ip) == (12, "29.7.0.15")
    culprit = remote_culprit(report(local=False), "here")
    assert culprit is not None and (culprit.rank, culprit.ip) == (3, "29.1.3.13")
    assert remote_culprit(analyze(Evidence(nodes={"here": NodeCoverage("here")})), "here") is None


def test_missing_npu_smi_cannot_check(tmp_path: Path) -> None:
    config = build_config({
        "collectors": {"npu_smi": {"path": str(tmp_path / "no-such-npu-smi")}, **NO_DCMI,
                       "hccl_logs": {"paths": [str(tmp_path)]}},
    })
    report = diagnose.diagnose(config, diagnose.DiagnoseOptions(sample_gap_s=GAP_S))
    assert report.exit_code == 3
    assert report.verdict.status == "unknown"
    assert "npu-smi: not found" in report.verdict.text
    # an empty log directory: nothing written in the window, so no error in it
    assert by_name(report.to_dict())["hccl_errors"]["status"] == "PASS"


class _FakeResult:
    def __init__(self, outcome: str, message: str = "", stage: str | None = None) -> None:
        self.outcome, self.message, self.stage = outcome, message, stage
        self.warnings: list[str] = []
        self.gemm: list[Any] = []
        self.allreduce = None


# ----------------------------------------------------------------------------- what a person reads


def test_an_empty_log_directory_passes_and_says_what_it_did_not_find(tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    paths = [str(tmp_path / "log"), str(tmp_path / "no-cann-logs")]
    config = build_config({"collectors": {"npu_smi": {"path": str(tmp_path / "no-such-npu-smi")}, **NO_DCMI,
                                          "hccl_logs": {"paths": paths}}})
    report = diagnose.diagnose(config, diagnose.DiagnoseOptions(sample_gap_s=GAP_S)).to_dict()
    logs = by_name(report)["hccl_errors"]
    assert logs["status"] == "PASS"
    assert logs["evidence"] == (f"no log file under {tmp_path / 'log'} was written in the last 2 h "
                                f"(no directory at {tmp_path / 'no-cann-logs'})")


def test_no_log_directory_says_where_and_what_to_set(tmp_path: Path) -> None:
    config = build_config({"collectors": {"npu_smi": {"path": str(tmp_path / "no-such-npu-smi")}, **NO_DCMI,
                                          "hccl_logs": {"paths": [str(tmp_path / "nowhere")]}}})
    logs = by_name(diagnose.diagnose(config, diagnose.DiagnoseOptions(sample_gap_s=GAP_S)).to_dict())["hccl_errors"]
    assert logs["status"] == "UNKNOWN"
    assert logs["evidence"] == f"no CANN log directory at {tmp_path / 'nowhere'}"
    assert "$ASCEND_PROCESS_LOG_PATH" in logs["hint"] and "collectors.hccl_logs.paths" in logs["hint"]


def test_window_and_gap_flags_take_durations() -> None:
    from agent.cli import build_parser

    args = build_parser().parse_args(["diagnose", "--window", "28h", "--sample-gap", "500ms"])
    options = diagnose.DiagnoseOptions.from_args(args)
    assert (options.window_s, options.sample_gap_s) == (100800.0, 0.5)
    assert diagnose.DiagnoseOptions.from_args(argparse.Namespace(window=7200, sample_gap=3)).window_s == 7200.0


def test_probe_progress_names_the_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.probes import runner as probe_runner

    def gemm(settings: Any, on_event: Any = None) -> _FakeResult:
        on_event({"kind": "start", "workers": 2})
        on_event({"kind": "stage", "worker": 0, "stage": "exec"})
        on_event({"kind": "stage", "worker": 1, "stage": "setup"})
        return _FakeResult("error", "no torch")

    def allreduce(settings: Any, scope: str = "node", on_event: Any = None) -> _FakeResult:
        return _FakeResult("error", "no torch")

    monkeypatch.setattr(probe_runner, "run_gemm", gemm)
    monkeypatch.setattr(probe_runner, "run_allreduce", allreduce)
    said: list[str] = []
    checks = diagnose.probe_checks(make_config(tmp_path), said.append)
    assert [c.status for c in checks] == ["UNKNOWN", "UNKNOWN"]
    assert said == ["probe_gemm: starting", "probe_gemm: starting", "probe_gemm: exec 1/2",
                    "probe_gemm: exec 1/2, setup 1/2", "probe_allreduce: starting"]


def test_every_cause_has_a_next_step_and_a_runbook_that_exists() -> None:
    """Each cause a verdict can name says what to do and links an alert runbook of this repository."""
    from agent.health.thresholds import FAULT_KINDS
    from agent.health.verdict import RUNBOOK_BASE, VERDICT_CAUSES, runbook_url

    for cause, (action, alert) in VERDICT_CAUSES.items():
        assert action, cause
        if alert is not None:
            assert (REPO / "alerts" / "runbooks" / f"{alert}.md").is_file(), cause
    for kind in FAULT_KINDS.values():
        url = runbook_url(kind.runbook_alert)
        assert url is not None and url.startswith(RUNBOOK_BASE), kind.kind
        assert (REPO / "alerts" / "runbooks" / url[len(RUNBOOK_BASE):]).is_file(), url
    assert runbook_url(FAULT_KINDS["link_down"].runbook_alert) == RUNBOOK_BASE + "NPURoCELinkDown.md"
    # the same pages the alert rules link
    rules = "".join(path.read_text() for path in (REPO / "alerts").glob("*.rules.yml"))
    assert f"runbook_url: {RUNBOOK_BASE}NPURoCELinkDown.md" in rules
