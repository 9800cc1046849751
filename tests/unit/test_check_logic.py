"""The pure parts of `npuwatch check`: selection, folding, verdicts and exit codes, the one-line message,
judging against references and fleet medians, baselines, samples, and the agent's schedule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.check import levels
from agent.check.baseline import FORMAT, BaselineError, from_reports, load_baseline, parse_baseline
from agent.check.job import BUSY_RETRY_S, CheckSchedule
from agent.check.metrics import report_samples
from agent.check.references import Reference, Thresholds, judge, references_for
from agent.check.report import EXIT_CODES, MESSAGE_LIMIT, LevelReport
from agent.check.runner import RunOptions
from agent.core.config import build_config
from agent.health.results import CheckResult, Result, fold
from agent.health.status import FAIL, PASS, UNKNOWN, WARN, worst

# ----------------------------------------------------------------------------- selection


def test_levels_are_cumulative() -> None:
    quick, medium, full = (levels.checks_of(level) for level in levels.LEVELS)
    assert set(quick) < set(medium) < set(full)
    assert "gemm" not in quick and "sustained_gemm" not in medium and "p2p_bandwidth" in full
    assert levels.BUDGET_S == {"quick": 10.0, "medium": 120.0, "long": 900.0}


def test_only_condition_and_skip_narrow_the_selection() -> None:
    assert levels.select("quick", only=("roce_link", "hbm_ecc")) == ["hbm_ecc", "roce_link"]
    assert levels.select("medium", condition="NPUMemoryHealthy") == ["hbm_ecc", "hbm_bandwidth"]
    assert levels.select("quick", condition="NPUMemoryHealthy") == ["hbm_ecc"]
    assert "hccs" not in levels.select("quick", skip=("hccs",))
    assert levels.select("long", only=("dmi_diag_hbm",)) == ["dmi_diag"]
    assert levels.dmi_items_wanted(("dmi_diag_hbm",), ("dmi_diag_edp",)) == ({"hbm"}, {"edp"})
    assert levels.dmi_items_wanted(("dmi_diag",), ()) == (None, set())


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"only": ("roce_lnk",)}, "unknown check 'roce_lnk'"),
    ({"only": ("gemm",)}, "gemm not in level quick"),
    ({"condition": "NPUFine"}, "unknown condition 'NPUFine'"),
    ({"skip": ("nope",)}, "unknown check 'nope'"),
])
def test_a_bad_selection_names_the_problem(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(levels.SelectionError, match=message):
        levels.select("quick", **kwargs)


def test_every_condition_names_known_checks() -> None:
    known = {spec.name for spec in levels.CHECKS}
    for group in levels.CONDITIONS.values():
        assert set(group) <= known


# ----------------------------------------------------------------------------- verdicts


def test_worst_orders_fail_unknown_warn_pass() -> None:
    assert worst([PASS, WARN]) == WARN
    assert worst([WARN, UNKNOWN]) == UNKNOWN
    assert worst([UNKNOWN, FAIL, PASS]) == FAIL
    assert worst([]) == PASS


def test_fold_shows_what_did_not_pass_worst_first() -> None:
    check = fold("x", [Result(PASS, "a"), Result(WARN, "b"), Result(FAIL, "c")], "all good")
    assert (check.status, check.evidence) == (FAIL, "c; b")
    assert fold("x", [Result(PASS, "a")], "all good").evidence == "all good"
    assert fold("x", [], "all good").status == UNKNOWN  # nothing checked is not a pass


def _report(*statuses: str, level: str = "quick") -> LevelReport:
    checks = [CheckResult(f"c{i}", status, f"evidence {i} " + "x" * 100, (Result(status, "e", npu=i),))
              for i, status in enumerate(statuses)]
    return LevelReport(level=level, checks=checks, started_at=1000.0, duration_s=2.0, budget_s=10.0, node="n1",
                       chips=len(statuses))


@pytest.mark.parametrize(("statuses", "verdict", "nagios", "npd"), [
    ((PASS, PASS), "ok", 0, 0),
    ((PASS, WARN), "warn", 1, 0),
    ((PASS, FAIL, WARN), "fail", 2, 1),
    ((PASS, UNKNOWN), "unknown", 3, 2),
    ((WARN, UNKNOWN), "unknown", 3, 2),
    ((UNKNOWN, FAIL), "fail", 2, 1),
])
def test_verdict_and_exit_codes_in_both_styles(statuses: tuple[str, ...], verdict: str, nagios: int,
                                               npd: int) -> None:
    report = _report(*statuses)
    assert report.verdict == verdict
    assert (report.exit_code("nagios"), report.exit_code("npd")) == (nagios, npd)
    assert report.to_dict("npd")["exit_code"] == npd and report.to_dict()["exit_codes"] == "nagios"


def test_no_check_at_all_is_unknown() -> None:
    assert _report().verdict == "unknown"
    assert set(EXIT_CODES) == {"nagios", "npd"}


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from([PASS, WARN, FAIL, UNKNOWN]), max_size=6),
       st.text(min_size=0, max_size=300))
def test_the_message_is_one_line_of_at_most_80_characters(statuses: list[str], evidence: str) -> None:
    report = _report(*statuses)
    if report.checks:
        first = report.checks[0]
        report.checks[0] = CheckResult(first.name, first.status, evidence.replace("\n", " ").replace("\r", " "),
                                       first.results)
    message = report.message()
    assert len(message) <= MESSAGE_LIMIT
    assert "\n" not in message
    assert message.split(" ", 1)[0].rstrip(":") in ("OK", "FAIL", "WARN", "UNKNOWN")


# ----------------------------------------------------------------------------- references


T = Thresholds(fail_ratio=0.8, warn_ratio=0.9, fleet_fail_ratio=0.85, fleet_warn_ratio=0.92, fleet_min_nodes=3)


@pytest.mark.parametrize(("value", "status"), [
    (100.0, PASS), (90.0, PASS), (89.9, WARN), (80.0, WARN), (79.9, FAIL),
])
def test_a_reference_figure_judges_on_both_sides_of_each_ratio(value: float, status: str) -> None:
    verdict = judge(value, [Reference(100.0, "ref", True)], T)
    assert verdict.status == status
    assert verdict.threshold == pytest.approx(80.0)


@pytest.mark.parametrize(("value", "status"), [(92.0, PASS), (91.9, WARN), (85.0, WARN), (84.9, FAIL)])
def test_a_fleet_median_judges_with_its_own_ratios(value: float, status: str) -> None:
    assert judge(value, [Reference(100.0, "fleet", True, fleet=True)], T).status == status


def test_the_worst_reference_decides_and_datasheets_never_fail() -> None:
    fleet, peak = Reference(100.0, "fleet", True, fleet=True), Reference(200.0, "peak", True)
    verdict = judge(150.0, [fleet, peak], T)
    assert (verdict.status, verdict.basis) == (FAIL, "80% of peak")
    assert judge(1.0, [Reference(100.0, "datasheet", False)], T).status == UNKNOWN
    assert judge(1.0, [], T).status == UNKNOWN


def test_reference_lookup_prefers_config_then_the_built_in_tables() -> None:
    hbm = references_for("Ascend910B3", "hbm_bandwidth", configured=None, peaks=None, fleet=None)
    assert [r.value for r in hbm] == [1538e9] and hbm[0].gates
    assert [r.value for r in references_for("910B3", "p2p_bandwidth", configured=None, peaks=None, fleet=None)] \
        == [26.2e9]
    assert [r.value for r in references_for("910B3", "h2d_bandwidth", configured=None, peaks=None, fleet=None)] \
        == [24.8e9]
    assert [r.value for r in references_for("910B3", "dmi_bandwidth:d2d", configured=None, peaks=None,
                                            fleet=None)] == [1538e9]
    configured = references_for("910B3", "hbm_bandwidth", configured={"910b3": {"hbm_bandwidth": 1e12}},
                                peaks=None, fleet=None)
    assert [r.value for r in configured] == [1e12] and "config" in configured[0].basis
    gemm = references_for("910B3", "gemm:fp16", configured=None, peaks=None, fleet=None)
    assert gemm[0].value == pytest.approx(313.7e12)
    assert references_for("x86_64", "hbm_bandwidth", configured=None, peaks=None, fleet=None) == []


# ----------------------------------------------------------------------------- baselines


def _document(node: str, values: dict[str, float], model: str = "910B3") -> dict[str, Any]:
    return {"node": node, "checks": [{"name": "x", "results": [
        {"measure": measure, "model": model, "value": value} for measure, value in values.items()]}]}


def test_a_baseline_from_reports_takes_the_median_over_every_chip_and_counts_nodes() -> None:
    baseline = from_reports([
        ("a.json", _document("a", {"hbm_bandwidth": 100.0})),
        ("b.json", _document("b", {"hbm_bandwidth": 300.0})),
        ("c.json", _document("c", {"hbm_bandwidth": 200.0, "gemm:fp16": 5.0})),
    ])
    entry = baseline.models["910B3"]["hbm_bandwidth"]
    assert (entry.median, entry.nodes, entry.unit) == (200.0, 3, "bytes_per_second")
    assert baseline.models["910B3"]["gemm:fp16"].unit == "flop_per_second"
    assert baseline.reference("Ascend910B3", "hbm_bandwidth", 3) is not None
    assert baseline.reference("910B3", "hbm_bandwidth", 4) is None  # too few nodes behind it
    assert baseline.reference("910B3", "gemm:fp16", 2) is None
    assert baseline.reference("310P3", "hbm_bandwidth", 1) is None


def test_a_baseline_round_trips_through_its_file(tmp_path: Path) -> None:
    baseline = from_reports([("a", _document("a", {"p2p_bandwidth": 2.5e10}))])
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(baseline.to_dict()))
    loaded = load_baseline(path)
    assert loaded.models == baseline.models
    assert loaded.source == f"file {path}"
    reference = loaded.reference("910B3", "p2p_bandwidth", 1)
    assert reference is not None and reference.fleet and reference.value == 2.5e10


@pytest.mark.parametrize(("document", "problem"), [
    ({"format": "other"}, "not an npuwatch baseline"),
    ({"format": FORMAT, "models": []}, "must map model names"),
    ({"format": FORMAT, "models": {"910B3": {"hbm_bandwidth": {"median": -1, "nodes": 3}}}}, "median"),
    ({"format": FORMAT, "models": {"910B3": {"hbm_bandwidth": {"median": 1.0, "nodes": 0}}}}, "nodes"),
])
def test_a_bad_baseline_is_refused_with_its_place(document: dict[str, Any], problem: str) -> None:
    with pytest.raises(BaselineError, match=problem):
        parse_baseline(document, "b.json")


def test_an_unreadable_baseline_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match="not JSON"):
        (tmp_path / "b.json").write_text("{")
        load_baseline(tmp_path / "b.json")
    with pytest.raises(BaselineError):
        load_baseline(tmp_path / "missing.json")


# ----------------------------------------------------------------------------- samples


def test_samples_carry_pass_fail_and_leave_unknown_out() -> None:
    checks = [
        CheckResult("roce_link", FAIL, "e", (Result(PASS, "a", npu=0, chip=0), Result(FAIL, "b", npu=1, chip=0),
                                              Result(UNKNOWN, "c", npu=2, chip=0))),
        CheckResult("chip_count", PASS, "e", (Result(PASS, "n"),)),
        CheckResult("hbm_bandwidth", PASS, "e", (Result(PASS, "m", npu=0, chip=0, value=1.5e12,
                                                        unit="bytes_per_second", measure="hbm_bandwidth",
                                                        model="910B3"),)),
        CheckResult("gemm", WARN, "e", (Result(WARN, "g", npu=0, chip=0, value=3e14, unit="flop_per_second",
                                               measure="gemm:fp16", model="910B3"),)),
    ]
    report = LevelReport(level="medium", checks=checks, started_at=100.0, duration_s=5.0, budget_s=120.0, node="n")
    values = {(s.metric, s.labels): s.value for s in report_samples(report)}

    def result(check: str, npu: str) -> float | None:
        return values.get(("npu_check_result", (("level", "medium"), ("check", check), ("npu", npu),
                                                ("chip", "0" if npu else ""))))

    assert (result("roce_link", "0"), result("roce_link", "1"), result("roce_link", "2")) == (1.0, 0.0, None)
    assert result("chip_count", "") == 1.0
    assert result("gemm", "0") == 1.0  # a warning is not a failure
    assert values[("npu_check_verdict", (("level", "medium"), ("verdict", "fail")))] == 1.0
    assert values[("npu_check_verdict", (("level", "medium"), ("verdict", "ok")))] == 0.0
    assert values[("npu_check_last_run_timestamp_seconds", (("level", "medium"),))] == 105.0
    assert values[("npu_check_bandwidth_bytes_per_second", (
        ("level", "medium"), ("measure", "hbm_bandwidth"), ("model", "910B3"), ("npu", "0"), ("chip", "0"),
        ("peer", "")))] == 1.5e12
    assert values[("npu_check_flops", (("level", "medium"), ("measure", "gemm:fp16"), ("model", "910B3"),
                                       ("npu", "0"), ("chip", "0")))] == 3e14


def test_every_sample_is_in_the_catalogue_with_its_labels() -> None:
    from collectors.catalogue import CATALOGUE

    report = _report(PASS, FAIL)
    report.checks.append(CheckResult("p2p_bandwidth", PASS, "e", (
        Result(PASS, "p", npu=0, chip=0, peer=1, value=2e10, unit="bytes_per_second", measure="p2p_bandwidth",
               model="910B3"),)))
    for sample in report_samples(report):
        spec = CATALOGUE[sample.metric]
        assert tuple(name for name, _ in sample.labels) == spec.labels, sample


# ----------------------------------------------------------------------------- the agent's schedule


class FakeRunner:
    def __init__(self, skipped: str | None = None) -> None:
        self.runs: list[str] = []
        self.skipped = skipped

    def __call__(self, config: Any, options: RunOptions) -> LevelReport:
        self.runs.append(options.level)
        report = _report(PASS, level=options.level)
        report.skipped = self.skipped if options.level != "quick" else None
        return report


def _schedule(clock: list[float], runner: FakeRunner, **levels_config: Any) -> CheckSchedule:
    config = build_config({"check": {"schedule": levels_config}})
    return CheckSchedule(config, clock=lambda: clock[0], runner=runner)


def test_quick_runs_after_its_first_run_delay_then_every_interval() -> None:
    clock, runner = [1000.0], FakeRunner()
    schedule = _schedule(clock, runner, quick={"enabled": True, "first_run": "1m", "interval": "5m"})
    assert schedule.collect() == [] and runner.runs == []
    clock[0] = 1060.0
    samples = schedule.collect()
    assert runner.runs == ["quick"] and any(s.metric == "npu_check_result" for s in samples)
    clock[0] = 1200.0
    schedule.collect()
    assert runner.runs == ["quick"]  # not due again before the interval
    clock[0] = 1361.0
    schedule.collect()
    assert runner.runs == ["quick", "quick"]


def test_every_level_is_off_by_default_and_the_longest_due_level_runs_first() -> None:
    clock, runner = [0.0], FakeRunner()
    assert _schedule(clock, runner).levels == []
    schedule = _schedule(clock, runner, quick={"enabled": True, "first_run": "0s"},
                         medium={"enabled": True, "first_run": "0s"})
    schedule.collect()
    schedule.collect()
    assert runner.runs == ["medium", "quick"]


def test_a_busy_node_postpones_medium_and_keeps_the_last_results() -> None:
    clock, runner = [0.0], FakeRunner(skipped="devices busy: NPU 0 chip 0: process 1 (python3)")
    schedule = _schedule(clock, runner, medium={"enabled": True, "first_run": "0s"})
    assert schedule.collect() == []  # nothing stored from a run that did not run
    assert schedule.due(clock[0] + BUSY_RETRY_S - 1) == []
    assert schedule.due(clock[0] + BUSY_RETRY_S) == ["medium"]


def test_no_level_scheduled_means_no_job() -> None:
    from agent.check.job import check_job

    assert check_job(build_config({})) is None
    job = check_job(build_config({"check": {"schedule": {"quick": {"enabled": True}}}}))
    assert job is not None and job.name == "check" and job.max_age_s is None


# ----------------------------------------------------------------------------- sustained GEMM judging


def _measurement(drop: float, correct: bool = True) -> Any:
    from agent.probes.records import SustainedGemmMeasurement, SustainedWindow

    best = 100e12
    windows = [SustainedWindow(index=0, start_s=0.0, seconds=1.0, iterations=10, flops=best),
               SustainedWindow(index=1, start_s=1.0, seconds=1.0, iterations=10, flops=best * (1 - drop))]
    return SustainedGemmMeasurement(
        device=0, npu=0, chip=0, model="910B3", dtype="fp16", size=512, duration_s=2.0, window_s=1.0,
        windows=windows, best_flops=best, median_flops=best * (1 - drop / 2), worst_flops=best * (1 - drop),
        worst_window=1, drop_ratio=drop, correct=correct, residual_ratio=0.1)


def _fake_run(**check: Any) -> Any:
    from types import SimpleNamespace

    from agent.check.settings import CheckSettings

    return SimpleNamespace(settings=CheckSettings(**check), baseline=None)


@pytest.mark.parametrize(("drop", "status"), [(0.05, PASS), (0.051, WARN), (0.15, WARN), (0.151, FAIL)])
def test_a_sustained_drop_is_judged_on_both_sides_of_its_thresholds(drop: float, status: str) -> None:
    from types import SimpleNamespace

    from agent.check.checks_probe import _sustained_results

    settings = SimpleNamespace(max_throttle_drop=0.15, warn_throttle_drop=0.05)
    results = _sustained_results(_fake_run(), _measurement(drop), "NPU 0", settings)
    assert results[0].status == status and results[0].unit == "ratio"
    assert results[1].measure == "sustained_gemm:fp16"  # its rate is a measurement too


def test_a_wrong_product_after_sustained_load_fails() -> None:
    from types import SimpleNamespace

    from agent.check.checks_probe import _sustained_results

    settings = SimpleNamespace(max_throttle_drop=0.15, warn_throttle_drop=0.05)
    results = _sustained_results(_fake_run(), _measurement(0.0, correct=False), "NPU 0", settings)
    assert [r.status for r in results] == [FAIL]


@pytest.mark.parametrize(("temperature", "clock", "statuses"), [
    (85.0, 1800e6, [PASS, PASS]),
    (94.0, 1800e6, [WARN, PASS]),  # over the table's chip_hot
    (95.0, 1800e6, [WARN, PASS]),  # at chip_too_hot, not over it: the one comparison of agent.health.faults
    (95.5, 1800e6, [FAIL, PASS]),
    (60.0, 1619e6, [PASS, WARN]),  # under 90 % of the rated 1800 MHz while busy
    (60.0, 1620e6, [PASS, PASS]),
])
def test_the_watch_judges_heat_and_a_busy_clock(temperature: float, clock: float, statuses: list[str]) -> None:
    from agent.check.checks_probe import _watch_results
    from agent.check.watch import ChipWatch
    from collectors.npu_smi_common import CommonRecord

    seen = ChipWatch()
    seen.add(CommonRecord(aicore_usage_ratio=0.9, aicore_max_frequency_hertz=1800e6, aicore_frequency_hertz=clock,
                          temperature_celsius=temperature, power_watts=300.0))
    seen.add(CommonRecord(aicore_usage_ratio=0.1, aicore_frequency_hertz=800e6, temperature_celsius=50.0))
    results = _watch_results(_fake_run(), 0, 0, "NPU 0", seen)
    assert [r.status for r in results] == statuses
    assert results[0].value == temperature  # the hottest sample; the idle 800 MHz one is not a throttle


def test_a_reload_keeps_the_results_and_the_due_times_of_unchanged_levels() -> None:
    from agent.check.job import ScheduleState

    clock, runner, state = [0.0], FakeRunner(), ScheduleState()
    levels_config = {"quick": {"enabled": True, "first_run": "0s", "interval": "5m"}}
    config = build_config({"check": {"schedule": levels_config}})
    CheckSchedule(config, clock=lambda: clock[0], runner=runner, state=state).collect()
    assert runner.runs == ["quick"]
    clock[0] = 100.0
    reloaded = CheckSchedule(config, clock=lambda: clock[0], runner=runner, state=state)
    assert any(s.metric == "npu_check_result" for s in reloaded.collect())  # results survive the reload
    assert runner.runs == ["quick"]  # and the level is not run again before its interval
    changed = build_config({"check": {"schedule": {"quick": {"enabled": True, "first_run": "10s",
                                                             "interval": "1m"}}}})
    again = CheckSchedule(changed, clock=lambda: clock[0], runner=runner, state=state)
    assert again.due(109.0) == [] and again.due(110.0) == ["quick"]  # a new schedule starts over
    off = build_config({"check": {"schedule": {"quick": {"enabled": False}}}})
    assert CheckSchedule(off, clock=lambda: clock[0], runner=runner, state=state).collect() == []


def test_each_agent_has_its_own_schedule_state(tmp_path: Path) -> None:
    from agent.check.job import agent_state

    one = build_config({"state_dir": str(tmp_path / "a")})
    other = build_config({"state_dir": str(tmp_path / "b")})
    assert agent_state(one) is agent_state(build_config({"state_dir": str(tmp_path / "a")}))
    assert agent_state(one) is not agent_state(other)


def test_a_device_check_leaves_the_later_checks_their_least_time() -> None:
    import time as clock_module

    from agent.check.device import MIN_SECONDS, DeviceRun

    seen: dict[str, float] = {}

    def runner(name: str) -> Any:
        def run(device_run: DeviceRun) -> list[CheckResult]:
            seen[name] = device_run.remaining()
            return [CheckResult(name, PASS, "ran", (Result(PASS, "ran"),))]
        return run

    names = ["dmi_diag", "allreduce", "sustained_gemm"]
    run = DeviceRun(config=None, settings=None, readings=None, baseline=None, tools=None,  # type: ignore[arg-type]
                    deadline=clock_module.monotonic() + 900.0)
    checks: list[CheckResult] = []
    run._run_all(names, checks, {name: runner(name) for name in names})
    assert [check.name for check in checks] == names
    held = MIN_SECONDS["allreduce"] + MIN_SECONDS["sustained_gemm"]
    assert 900.0 - 5.0 - held - 1.0 < seen["dmi_diag"] <= 900.0 - 5.0 - held
    assert seen["sustained_gemm"] > seen["dmi_diag"]  # the last check gets what is left


def test_the_agents_quick_level_is_its_own_judgement_with_no_tool_run() -> None:
    """check.schedule.quick in the agent reports the agent's judgement of the round; the medium level still runs."""
    clock, runner = [0.0], FakeRunner()
    judged = _report(FAIL)
    levels_config = {"quick": {"enabled": True, "first_run": "0s", "interval": "5m"},
                     "medium": {"enabled": True, "first_run": "1m", "interval": "1h"}}
    schedule = CheckSchedule(build_config({"check": {"schedule": levels_config}}), clock=lambda: clock[0],
                             runner=runner, quick=lambda: judged)
    samples = schedule.collect()
    assert runner.runs == []  # no tool run for the quick level
    assert any(s.metric == "npu_check_verdict" and dict(s.labels) == {"level": "quick", "verdict": "fail"}
               and s.value == 1.0 for s in samples)
    clock[0] = 60.0
    schedule.collect()
    assert runner.runs == ["medium"]
