"""`npuwatch check --level medium|long` on the demo node: the real probe workers on the cpu backend (under
the demo's probe interpreter, so its probe faults reach them), ascend-dmi through its fake, the idle
gate, the probe lock and the time budget.

CPU timings swing with the machine's load, so the fleet ratios here are wide (a healthy run is held to
20 % of a healthy median; against the median of a run of its own a minute before, 6 %: a load spike on a shared
2-core machine took a GEMM to 22 % of the run before it) and the faults are far beyond them (``probe_slow`` at 2 %
of the real speed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.check.baseline import from_reports
from agent.demo.node import DemoNode
from agent.probes.lock import ProbeLock
from tests.support.check_harness import CHIPS, by_name, check_config, failing_npus, run_check

MEDIUM = ("gemm", "hbm_bandwidth", "h2d_bandwidth", "d2h_bandwidth")
WIDE = {"check": {"fleet_min_nodes": 1, "fleet_fail_ratio": 0.2, "fleet_warn_ratio": 0.25, "min_peer_ratio": 0.1,
                  "max_throttle_drop": 1.0, "warn_throttle_drop": 1.0},
        "probes": {"deadline": "2m"}}
# the healthy and slow runs against the first run's median: a healthy run warns below 6 %, the slow one is at 2 %
AGAINST_FIRST = {**WIDE, "check": {**WIDE["check"], "fleet_fail_ratio": 0.05, "fleet_warn_ratio": 0.06}}


@pytest.fixture(scope="module")
def medium_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A healthy medium run, the baseline made from it, a run against it, and one with probes at 2 % speed."""
    base = tmp_path_factory.mktemp("medium")
    node = DemoNode(base / "demo").create(chips=CHIPS)
    config = check_config(AGAINST_FIRST)
    runs: dict[str, Any] = {"first": run_check(node.directory, config, level="medium", only=MEDIUM)}
    baseline = from_reports([("first", runs["first"][1])])
    path = base / "baseline.json"
    path.write_text(json.dumps(baseline.to_dict()))
    runs["baseline"] = baseline
    runs["healthy"] = run_check(node.directory, config, level="medium", only=MEDIUM, baseline=str(path))
    node.set_fault("probe_slow", factor=0.02)
    runs["slow"] = run_check(node.directory, config, level="medium", only=MEDIUM, baseline=str(path))
    return runs


def test_without_a_reference_a_bandwidth_is_reported_but_unknown_and_gemm_passes_on_correctness(
        medium_runs: dict[str, Any]) -> None:
    code, report = medium_runs["first"]
    checks = by_name(report)
    assert list(checks) == list(MEDIUM)
    assert checks["gemm"]["status"] == "PASS" and "product correct" in checks["gemm"]["basis"]
    for name in ("hbm_bandwidth", "h2d_bandwidth", "d2h_bandwidth"):
        assert checks[name]["status"] == "UNKNOWN", checks[name]
        measured = checks[name]["results"][0]
        assert measured["value"] > 0 and measured["unit"] == "bytes_per_second" and measured["measure"] == name
    assert code == 3
    assert report["duration_s"] < report["budget_s"]


def test_the_baseline_holds_every_measure_of_the_run(medium_runs: dict[str, Any]) -> None:
    measures = {measure for model in medium_runs["baseline"].models.values() for measure in model}
    assert {"hbm_bandwidth", "h2d_bandwidth", "d2h_bandwidth"} <= measures
    assert any(measure.startswith("gemm:") for measure in measures)


def test_a_healthy_node_passes_against_the_fleet_median(medium_runs: dict[str, Any]) -> None:
    code, report = medium_runs["healthy"]
    checks = by_name(report)
    assert {name: check["status"] for name, check in checks.items()} == dict.fromkeys(MEDIUM, "PASS"), checks
    for name in MEDIUM:
        assert "fleet median of 1" in checks[name]["basis"], checks[name]
    assert report["baseline"]["source"].startswith("file ") and code == 0


def test_a_slow_node_fails_every_measurement_against_the_fleet_median(medium_runs: dict[str, Any]) -> None:
    code, report = medium_runs["slow"]
    checks = by_name(report)
    assert {name: check["status"] for name, check in checks.items()} == dict.fromkeys(MEDIUM, "FAIL"), checks
    for name in MEDIUM:
        result = checks[name]["results"][0]
        assert result["value"] < result["threshold"], result
        assert result["kind"] == "probe_failed", result
    assert report["verdict"]["status"] == "fail" and code == 2
    assert report["verdict"]["cause"] == "probe_failed" and report["verdict"]["summary"].startswith("probe failed")


@pytest.fixture
def node(tmp_path: Path) -> DemoNode:
    return DemoNode(tmp_path / "demo").create(chips=CHIPS)


@pytest.mark.parametrize(("probe", "check", "level", "words"), [
    ("gemm", "gemm", "medium", "wrong product"),
    ("membw", "hbm_bandwidth", "medium", "data corrupted"),
    ("h2d", "h2d_bandwidth", "medium", "data corrupted"),
    ("p2p", "p2p_bandwidth", "long", "data corrupted"),
    ("allreduce", "allreduce", "long", "wrong sums"),
])
def test_a_wrong_result_fails_its_check(node: DemoNode, probe: str, check: str, level: str, words: str) -> None:
    node.set_fault("probe_corrupt", probe=probe)
    code, report = run_check(node.directory, check_config(WIDE), level=level, only=(check,))
    result = by_name(report)[check]
    assert result["status"] == "FAIL" and words in result["evidence"], result
    assert {r["kind"] for r in result["results"] if r["status"] == "FAIL"} == {"probe_failed"}
    # the verdict names the probe fault and that probe's own runbook section
    section = {"gemm": "gemm", "allreduce": "allreduce"}.get(check, "bandwidth-checks")
    assert (report["verdict"]["cause"], report["verdict"]["check"]) == ("probe_failed", check)
    assert report["verdict"]["runbook"].endswith(f"/NPUCheckFailed.md#{section}"), report["verdict"]
    assert code == 2


def test_the_long_checks_pass_on_a_healthy_node(node: DemoNode) -> None:
    only = ("dmi_diag", "dmi_bandwidth", "allreduce", "p2p_bandwidth", "sustained_gemm")
    code, report = run_check(node.directory, check_config(WIDE), level="long", only=only)
    checks = by_name(report)
    assert {name for name in checks if name.startswith("dmi_diag_")} >= {"dmi_diag_hbm", "dmi_diag_network",
                                                                         "dmi_diag_cann", "dmi_diag_tdp"}
    assert {name: check["status"] for name, check in checks.items()} == dict.fromkeys(checks, "PASS"), checks
    pairs = by_name(report)["p2p_bandwidth"]["results"]
    assert {(r["npu"], r["peer"]) for r in pairs} == {(0, 1), (1, 0)}  # every ordered pair, not an average
    assert {r["measure"] for r in checks["dmi_bandwidth"]["results"]} == {
        "dmi_bandwidth:h2d", "dmi_bandwidth:d2h", "dmi_bandwidth:d2d", "dmi_bandwidth:p2p"}
    assert checks["sustained_gemm"]["duration_s"] >= 5
    assert code == 0 and report["duration_s"] < report["budget_s"]


def test_a_hot_chip_fails_the_sustained_gemm(node: DemoNode) -> None:
    node.set_fault("hot", chip=2, celsius=97)
    code, report = run_check(node.directory, check_config(WIDE), level="long", only=("sustained_gemm",))
    result = by_name(report)["sustained_gemm"]
    assert result["status"] == "FAIL" and failing_npus(result) == {2}
    hot = next(r for r in result["results"] if r["npu"] == 2 and r["unit"] == "celsius")
    assert (hot["value"], hot["threshold"]) == (97, 95.0)
    _, cooler = run_check(node.directory, check_config(merge_check(WIDE, max_temperature=98)), level="long",
                          only=("sustained_gemm",))
    # over the table's chip_hot still warns: check.max_temperature moves only the failing degrees
    assert by_name(cooler)["sustained_gemm"]["status"] == "WARN"
    assert {r["kind"] for r in by_name(cooler)["sustained_gemm"]["results"] if r["npu"] == 2} >= {"chip_hot"}
    assert code == 2


def merge_check(base: dict[str, Any], **check: Any) -> dict[str, Any]:
    return {**base, "check": {**base["check"], **check}}


def test_an_ascend_dmi_item_that_fails_is_its_own_failing_check(node: DemoNode) -> None:
    node.set_fault("hbm_dbe", chip=3)
    code, report = run_check(node.directory, check_config(WIDE), level="long", only=("dmi_diag",))
    checks = by_name(report)
    assert checks["dmi_diag_hbm"]["status"] == "FAIL" and failing_npus(checks["dmi_diag_hbm"]) == {3}
    assert checks["dmi_diag_hbmStress"]["status"] == "FAIL"
    assert checks["dmi_diag_network"]["status"] == "PASS"
    assert code == 2
    _, one = run_check(node.directory, check_config(WIDE), level="long", only=("dmi_diag_network",))
    assert list(by_name(one)) == ["dmi_diag_network"]


def test_a_crashing_ascend_dmi_leaves_its_checks_unknown(node: DemoNode) -> None:
    node.set_fault("ascend_dmi_crash")
    code, report = run_check(node.directory, check_config(WIDE), level="long", only=("dmi_diag", "dmi_bandwidth"))
    assert {c["name"]: c["status"] for c in report["checks"]} == {"dmi_diag": "UNKNOWN", "dmi_bandwidth": "UNKNOWN"}
    assert code == 3


def test_ascend_dmi_bandwidth_below_its_reference_fails(node: DemoNode) -> None:
    config = check_config(merge_check(WIDE, references={"910B3": {"dmi_bandwidth:h2d": 40e9}}))
    code, report = run_check(node.directory, config, level="long", only=("dmi_bandwidth",))
    result = by_name(report)["dmi_bandwidth"]
    failed = [r for r in result["results"] if r["status"] == "FAIL"]
    assert result["status"] == "FAIL" and {r["measure"] for r in failed} == {"dmi_bandwidth:h2d"}
    assert all(r["threshold"] == pytest.approx(0.8 * 40e9) for r in failed) and code == 2


def test_the_all_reduce_below_its_minimum_bus_bandwidth_fails(node: DemoNode) -> None:
    config = check_config({**WIDE, "probes": {**WIDE["probes"], "allreduce": {"min_bus_bandwidth": 1e15}}})
    _, report = run_check(node.directory, config, level="long", only=("allreduce",))
    result = by_name(report)["allreduce"]
    assert result["status"] == "FAIL" and result["threshold"] == 1e15


def test_busy_npus_keep_the_device_checks_from_running(node: DemoNode) -> None:
    node.set_fault("process", chip=1)
    code, report = run_check(node.directory, check_config(WIDE), level="medium", only=("chip_health", "gemm"))
    checks = by_name(report)
    assert checks["chip_health"]["status"] == "PASS"
    assert checks["gemm"]["status"] == "UNKNOWN" and "devices busy" in checks["gemm"]["evidence"]
    assert report["skipped"].startswith("devices busy") and code == 3


def test_a_held_probe_lock_keeps_the_device_checks_from_running(node: DemoNode) -> None:
    config = check_config(WIDE)
    run_check(node.directory, config, only=("chip_count",))  # the demo setup creates DIR/state
    with ProbeLock(node.directory / "state" / "probe.lock"):
        code, report = run_check(node.directory, config, level="medium", only=("gemm",))
    assert by_name(report)["gemm"]["status"] == "UNKNOWN" and "another probe holds" in report["skipped"]
    assert code == 3


def test_a_check_that_no_longer_fits_the_budget_is_unknown(node: DemoNode, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.check import runner

    monkeypatch.setitem(runner.BUDGET_S, "medium", 12.0)  # 5 s reserve: 7 s left, gemm needs 15
    code, report = run_check(node.directory, check_config(WIDE), level="medium", only=("gemm",))
    gemm = by_name(report)["gemm"]
    assert gemm["status"] == "UNKNOWN" and "of the level's budget left" in gemm["evidence"]
    assert code == 3
