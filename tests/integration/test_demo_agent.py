"""The agent on a demo node: what the demo overrides, npu_info from the first scrape, counters across
restarts, the probe schedule and the demo's probe interpreter."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.core.config import build_config
from agent.daemon.assemble import AgentBundle, build_agent
from agent.demo import node as demo_node
from agent.demo.node import DEMO_PROBE_SCHEDULE, PROBE_PYTHON, DemoNode, demo_overrides
from agent.demo.plog import HcclTimeout, append_plog, hccl_timeout_lines
from agent.probes.records import ProbeSettings
from agent.probes.runner import run_allreduce, run_gemm
from tests.support.agent_harness import demo_bundle, fast_config

Labels = tuple[tuple[str, str], ...]


def scrape(bundle: AgentBundle) -> dict[tuple[str, Labels], float]:
    out = {}
    for family in text_string_to_metric_families(bundle.agent.cache.render().body.decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def infos(values: dict[tuple[str, Labels], float]) -> dict[tuple[str, str], Labels]:
    """(npu, chip) -> the npu_info label set."""
    found = {}
    for (name, labels), _ in values.items():
        if name == "npu_info":
            named = dict(labels)
            found[(named["npu"], named["chip"])] = labels
    return found


# ---------------------------------------------------------------- npu_info


@pytest.mark.parametrize("order", [
    ("inventory", "info", "usages", "health", "roce", "info", "health", "info"),  # the scheduler's start order
    ("health", "inventory", "info", "info", "health", "info"),  # the board runs before any chip is known
])
def test_npu_info_never_changes_its_labels_from_the_first_scrape(tmp_path: Path, order: tuple[str, ...]) -> None:
    bundle = demo_bundle(tmp_path, chips=4)
    seen: dict[tuple[str, str], set[Labels]] = {}
    try:
        for group in order:
            bundle.agent.collect_group(group)
            for chip, labels in infos(scrape(bundle)).items():
                seen.setdefault(chip, set()).add(labels)
    finally:
        bundle.agent.stop()
    assert sorted(seen) == [(str(npu), "0") for npu in range(4)]
    for chip, label_sets in seen.items():
        assert len(label_sets) == 1, (chip, label_sets)  # one series per chip, never an empty-then-filled one
        labels = dict(next(iter(label_sets)))
        assert labels["firmware"] and labels["driver"] and labels["serial"], labels


def test_npu_info_does_not_wait_for_a_disabled_board_source(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path, {"collectors": {"npu_smi": {"disable": ["npu_smi_board"]}}}, chips=2)
    try:
        bundle.agent.collect_group("info")
        found = infos(scrape(bundle))
    finally:
        bundle.agent.stop()
    assert sorted(found) == [("0", "0"), ("1", "0")]  # board facts are known to be unavailable
    assert dict(found[("0", "0")])["firmware"] == ""


# ---------------------------------------------------------------- counters across an agent restart


def test_counters_never_go_down_across_clear_and_agent_restart(tmp_path: Path) -> None:
    first = demo_bundle(tmp_path, chips=2)
    assert first.demo is not None
    first.demo.set_fault("hbm_dbe", chip=1, interval_s=1)
    first.demo.set_fault("link_down", chip=1)
    time.sleep(2.1)
    first.agent.collect_once()
    before = scrape(first)
    first.agent.stop()
    first.demo.clear_all()  # while the agent is down, like a repair
    second = demo_bundle(tmp_path, chips=2)  # the agent starts again on the same --demo-dir
    try:
        second.agent.collect_once()
        after = scrape(second)
    finally:
        second.agent.stop()
    chip = (("chip", "0"), ("npu", "1"))
    dbe = (("bit", "double"), *chip)
    assert before[("npu_hbm_ecc_errors_total", dbe)] >= 3
    assert after[("npu_hbm_ecc_errors_total", dbe)] >= before[("npu_hbm_ecc_errors_total", dbe)]
    assert after[("npu_hbm_ecc_current_errors", dbe)] == 0
    ups = "npu_roce_link_up_transitions_total"
    assert after[(ups, chip)] == before[(ups, chip)] + 1
    last_change = "npu_roce_link_last_change_timestamp_seconds"
    assert after[(last_change, chip)] > before[(last_change, chip)]
    assert after[("npu_roce_link_up", chip)] == 1


# ---------------------------------------------------------------- what the demo overrides


def write_job_plog(root: Path) -> None:
    event = HcclTimeout(group="10.0.0.1%eth0_60000_0_1", rank=0, rank_size=2, device=0, at=time.time() - 30,
                        pid=777, local_ip="10.0.0.1")
    append_plog(root, 777, event.at, hccl_timeout_lines(event))


def test_demo_adds_its_log_dir_to_the_configured_paths(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    job_logs = tmp_path / "job-logs"
    write_job_plog(job_logs)
    caplog.set_level(logging.INFO, logger="agent.demo.node")
    bundle = demo_bundle(tmp_path, {"collectors": {"hccl_logs": {"enabled": True, "paths": [str(job_logs)]}}})
    demo_log = str(tmp_path / "demo" / "log")
    try:
        assert list(bundle.agent.config.collectors.hccl_logs.paths) == [str(job_logs), demo_log]
        said = [r.getMessage() for r in caplog.records if "HCCL/CANN logs" in r.getMessage()]
        assert said == [f"demo: HCCL/CANN logs are read from {demo_log} as well as the configured {job_logs}"]
        bundle.agent.run_internal_by_name("hccl_logs")
        counts = {dict(labels)["category"]: value for (name, labels), value in scrape(bundle).items()
                  if name == "npu_hccl_errors_total"}
        assert counts.get("exec_timeout") == 1  # the plog in the configured path was read
        assert bundle.demo is not None
        bundle.demo.set_fault("hccl_timeout", chip=3)  # and the demo's own log fault lands in its dir
        bundle.agent.run_internal_by_name("hccl_logs")
        counts = {dict(labels)["category"]: value for (name, labels), value in scrape(bundle).items()
                  if name == "npu_hccl_errors_total"}
        assert counts.get("exec_timeout") == 2
    finally:
        bundle.agent.stop()


def test_roce_cqe_fault_is_counted_as_roce_cqe(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path, {"collectors": {"hccl_logs": {"enabled": True}}}, chips=2)
    assert bundle.demo is not None
    try:
        bundle.demo.set_fault("roce_cqe", chip=1)
        bundle.agent.run_internal_by_name("hccl_logs")
        counts = {dict(labels)["category"]: value for (name, labels), value in scrape(bundle).items()
                  if name == "npu_hccl_errors_total"}
    finally:
        bundle.agent.stop()
    assert counts.get("roce_cqe", 0) >= 1


def config_with(extra: dict[str, Any]) -> Any:
    return build_config(fast_config(extra))


def test_demo_without_torch_turns_its_probes_off_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(demo_node, "torch_installed", lambda: False)
    caplog.set_level(logging.INFO)
    bundle = build_agent(config_with({"probes": {"enabled": True}}), tmp_path / "demo", 2)
    try:
        assert bundle.agent.config.probes.enabled is False
    finally:
        bundle.agent.stop()
    told = [r for r in caplog.records if "probes are off" in r.getMessage()]
    assert len(told) == 1
    assert told[0].levelno == logging.INFO  # said by `run`; one-shot --demo commands log warnings only
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in told[0].getMessage()


def test_demo_with_torch_runs_its_probes_under_the_demo_interpreter(tmp_path: Path) -> None:
    node = DemoNode(tmp_path / "demo").open()
    config = config_with({"probes": {"enabled": True, "python": "/opt/train/bin/python"}})
    overrides = demo_overrides(node.directory, node.bin_dir, config, torch_found=True)
    assert "probes.enabled" not in overrides  # torch is there: the config decides
    assert overrides["probes.python"] == str(node.bin_dir / PROBE_PYTHON)
    off = demo_overrides(node.directory, node.bin_dir, config_with({"probes": {"enabled": False}}), torch_found=False)
    assert "probes.enabled" not in off  # nothing to turn off, nothing to say


def test_demo_probes_never_meet_on_the_lock_and_both_report_within_three_minutes(tmp_path: Path) -> None:
    node = DemoNode(tmp_path / "demo").open()
    config = config_with({"probes": {"enabled": True, "gemm": {"cron": "0 * * * *"}}})
    overrides = demo_overrides(node.directory, node.bin_dir, config, torch_found=True)
    cpu_probe_s = 20.0  # a demo GEMM or all-reduce on a busy 2-core CPU, generously
    runs: dict[str, list[float]] = {}
    for probe in ("gemm", "allreduce"):
        assert overrides[f"probes.{probe}.cron"] is None  # the demo's schedule wins over the config's
        assert overrides[f"probes.{probe}.jitter"] == 0.0
        first, interval = overrides[f"probes.{probe}.first_run"], overrides[f"probes.{probe}.interval"]
        assert first + cpu_probe_s <= 180
        runs[probe] = [first + k * interval for k in range(30)]  # the first hour
    for gemm in runs["gemm"]:
        for allreduce in runs["allreduce"]:
            assert abs(gemm - allreduce) >= cpu_probe_s, (gemm, allreduce)


def test_the_running_agent_schedules_both_demo_probes_at_their_offsets(tmp_path: Path) -> None:
    from agent.probes.job import schedule_probes

    bundle = build_agent(config_with({"probes": {"enabled": True}, "web": {"enabled": False}}), tmp_path / "demo", 2)
    agent = bundle.agent
    try:
        agent.start(serve_http=False)
        schedule_probes(agent)
        now = time.time()
        jobs = {job.id: job.next_run_time.timestamp() for job in agent._scheduler.get_jobs()  # type: ignore[union-attr]
                if job.id.startswith("timed:probe:")}
    finally:
        agent.stop()
    assert set(jobs) == {"timed:probe:gemm", "timed:probe:allreduce"}
    for probe, schedule in DEMO_PROBE_SCHEDULE.items():
        assert abs(jobs[f"timed:probe:{probe}"] - now - schedule["first_run"]) < 2, (probe, jobs)


# ---------------------------------------------------------------- the demo's probe interpreter


def probe_settings(node: DemoNode) -> ProbeSettings:
    return ProbeSettings(python=str(node.tool_path(PROBE_PYTHON)), backend="cpu", gemm_size=192, use_lock=False,
                         deadline_s=120.0, iterations=3, warmup=1, allreduce_bytes=1 << 16)


def test_probe_faults_reach_the_workers(tmp_path: Path) -> None:
    node = DemoNode(tmp_path / "demo").create(chips=2)
    settings = probe_settings(node)
    healthy = run_gemm(settings)
    assert healthy.outcome == "pass", healthy.message
    node.set_fault("probe_corrupt", probe="gemm")
    corrupt = run_gemm(settings)
    assert corrupt.outcome == "fail" and not corrupt.gemm[0].correct
    assert run_allreduce(settings).outcome == "pass"  # only the GEMM was asked to corrupt
    node.clear_fault("probe_corrupt")
    node.set_fault("probe_corrupt", probe="allreduce")
    wrong_sums = run_allreduce(settings)
    assert wrong_sums.outcome == "fail" and wrong_sums.allreduce is not None and not wrong_sums.allreduce.correct
    node.clear_all()
    node.set_fault("probe_error")
    broken = run_gemm(settings)
    assert broken.outcome == "error" and "torch" in broken.message, broken.message


def test_probe_slow_scales_the_measured_speed(tmp_path: Path) -> None:
    node = DemoNode(tmp_path / "demo").create(chips=2)
    settings = probe_settings(node)
    healthy = max(run_gemm(settings).gemm[0].flops for _ in range(2))
    node.set_fault("probe_slow", factor=0.01)  # 100x: no load swing on a shared machine hides it
    slow = run_gemm(settings)
    stderr = [line for rank in slow.ranks for line in rank.stderr_tail]
    assert slow.gemm[0].flops < 0.4 * healthy, (slow.gemm[0].flops, healthy, stderr)
