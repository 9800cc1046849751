"""Probe counters and last results survive an agent restart (state_dir/probes.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.probes.metrics import ProbeMetrics
from agent.probes.records import AllreduceMeasurement, GemmMeasurement, ProbeResult
from tests.support.agent_harness import demo_bundle

GEMM = GemmMeasurement(device=0, npu=0, chip=0, model="cpu", dtype="fp32", size=128, iterations=3, seconds=0.01,
                       flops=1.5e11, correct=True, residual_ratio=0.1, efficiency=None)
ALLREDUCE = AllreduceMeasurement(scope="node", world_size=2, size_bytes=65536, iterations=5,
                                 seconds_per_iteration=0.001, algbw_bytes_per_second=6.5e7,
                                 busbw_bytes_per_second=6.5e7, correct=True)


def values(metrics: ProbeMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.metric, s.labels): s.value for s in metrics.samples()}


def test_counters_and_last_results_come_back(tmp_path: Path) -> None:
    state = tmp_path / "probes.json"
    first = ProbeMetrics(state)
    first.record(ProbeResult("gemm", "pass", started_at=1000.0, duration_s=2.0, gemm=[GEMM]))
    first.record(ProbeResult("allreduce", "timeout", started_at=1100.0, duration_s=9.0, stage="exec"))
    first.record(ProbeResult("allreduce", "pass", started_at=1200.0, duration_s=3.0, scope="node",
                             allreduce=ALLREDUCE))
    first.record(ProbeResult("gemm", "skipped", started_at=1300.0, duration_s=0.0))
    second = ProbeMetrics(state)
    assert values(second) == values(first)
    restored = values(second)
    assert restored[("npuwatch_probe_last_success_timestamp_seconds", (("probe", "gemm"),))] == 1002.0
    assert restored[("npuwatch_probe_runs_total", (("probe", "gemm"), ("outcome", "skipped")))] == 1.0
    assert restored[("npuwatch_probe_timeouts_total", (("probe", "allreduce"), ("stage", "exec")))] == 1.0
    assert [p.name for p in tmp_path.iterdir()] == ["probes.json"]  # no temp file left


@pytest.mark.parametrize("text", ["not json", '{"version": 1, "runs": [["gemm"]]}', '{"version": 1}', "[]"])
def test_a_broken_state_file_starts_from_zero(tmp_path: Path, text: str) -> None:
    state = tmp_path / "probes.json"
    state.write_text(text)
    metrics = ProbeMetrics(state)
    assert values(metrics) == values(ProbeMetrics())
    metrics.record(ProbeResult("gemm", "pass", started_at=10.0, duration_s=1.0, gemm=[GEMM]))
    assert json.loads(state.read_text())["last_success"] == {"gemm": 11.0}  # and is written anew


def test_an_unwritable_state_keeps_counting_in_memory(tmp_path: Path) -> None:
    metrics = ProbeMetrics(tmp_path / "no-such-dir" / "probes.json")
    metrics.record(ProbeResult("gemm", "pass", started_at=10.0, duration_s=1.0, gemm=[GEMM]))
    assert values(metrics)[("npuwatch_probe_runs_total", (("probe", "gemm"), ("outcome", "pass")))] == 1.0


def test_a_restarted_agent_exports_the_last_success(tmp_path: Path) -> None:
    extra = {"state_dir": str(tmp_path / "state"), "probes": {"enabled": True}}
    bundle = demo_bundle(tmp_path, extra, chips=2)
    bundle.agent.probe_metrics.record(ProbeResult("gemm", "pass", started_at=500.0, duration_s=1.0, gemm=[GEMM]))
    bundle.agent.stop()
    again = demo_bundle(tmp_path, extra, chips=2)
    again.agent.run_internal_by_name("probes")
    body = again.agent.cache.render().body.decode()
    assert 'npuwatch_probe_last_success_timestamp_seconds{probe="gemm"} 501.0' in body
    again.agent.stop()
