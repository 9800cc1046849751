"""The probe runner's pure parts: outcomes, stages and results, judged without a worker.

Real torch and gloo workers on the cpu backend: tests/integration/test_probe_runner.py.
"""

from __future__ import annotations

import argparse
import json
import os
import uuid
from pathlib import Path

import pytest

from agent.probes import cli as probe_cli
from agent.probes.lock import ProbeLock, idle_check
from agent.probes.metrics import ProbeMetrics
from agent.probes.records import ProbeResult, ProbeSettings
from agent.probes.runner import run_allreduce, run_gemm
from collectors.base import Sample, label_pairs
from collectors.catalogue import CATALOGUE


def settings(**overrides: object) -> ProbeSettings:
    base = {"backend": "cpu", "use_lock": False, "gemm_size": 128, "allreduce_bytes": 64 << 10,
            "warmup": 1, "iterations": 2, "deadline_s": 60.0, "term_grace_s": 1.0,
            "tag": f"npuwatch-test-{uuid.uuid4().hex}"}
    base.update(overrides)
    return ProbeSettings(**base)  # type: ignore[arg-type]


def value(samples: list[Sample], metric: str, **labels: str) -> float | None:
    wanted = label_pairs(**labels)
    for sample in samples:
        if sample.metric == metric and sample.labels == wanted:
            return sample.value
    return None


# --------------------------------------------------------------------------- GEMM


def test_gemm_below_a_measured_peak_fails_and_datasheet_peak_does_not() -> None:
    from agent.probes.records import GemmMeasurement
    from agent.probes.runner import _judge_gemm

    def judged(basis: str) -> ProbeResult:
        m = GemmMeasurement(device=0, npu=0, chip=0, model="910B3", dtype="fp16", size=8192, iterations=50,
                            seconds=1.0, flops=200e12, correct=True, residual_ratio=0.1, peak_flops=313.7e12,
                            peak_basis=basis, efficiency=200e12 / 313.7e12)
        result = ProbeResult(probe="gemm", outcome="pass", started_at=0.0, duration_s=1.0, gemm=[m])
        _judge_gemm(result, ProbeSettings())
        return result

    assert judged("measured").outcome == "fail"
    assert judged("datasheet").outcome == "pass"


# --------------------------------------------------------------------------- all-reduce


def assert_single_device_skip(result: ProbeResult) -> None:
    assert result.outcome == "skipped", result.message
    assert result.message == "1 device: an all-reduce needs at least 2"
    assert result.allreduce is None
    assert result.ranks == []  # no worker started
    assert result.exit_code == 3
    metrics = ProbeMetrics()
    metrics.record(result)
    bandwidths = [s for s in metrics.samples() if s.metric.startswith("npu_probe_allreduce_")]
    assert bandwidths == []
    assert value(metrics.samples(), "npuwatch_probe_runs_total", probe="allreduce", outcome="skipped") == 1.0


def test_allreduce_on_one_selected_device_is_skipped_without_bandwidth() -> None:
    assert_single_device_skip(run_allreduce(settings(devices=(0,))))


def test_allreduce_with_one_cpu_rank_is_skipped() -> None:
    assert_single_device_skip(run_allreduce(settings(cpu_ranks=1)))


def test_cli_allreduce_on_one_device_says_skipped(capsys: pytest.CaptureFixture[str]) -> None:
    code = probe_cli.main(parse("allreduce", "--backend", "cpu", "--devices", "0", "--no-lock", "--json"))
    out = json.loads(capsys.readouterr().out)
    assert (code, out["outcome"], out["allreduce"]) == (3, "skipped", None)
    assert out["message"] == "1 device: an all-reduce needs at least 2"


# --------------------------------------------------------------------------- skipped and error


def test_held_lock_skips_the_probe_without_starting_it(tmp_path: Path) -> None:
    lock_path = tmp_path / "probe.lock"
    probe = settings(use_lock=True, lock_path=str(lock_path), python="/nonexistent/python")
    with ProbeLock(lock_path):
        result = run_gemm(probe)
        other = run_allreduce(probe)
    assert (result.outcome, other.outcome) == ("skipped", "skipped")
    assert result.exit_code == 3
    assert "another probe" in result.message
    metrics = ProbeMetrics()
    metrics.record(result)
    samples = metrics.samples()
    assert value(samples, "npuwatch_probe_runs_total", probe="gemm", outcome="skipped") == 1.0
    assert value(samples, "npuwatch_probe_duration_seconds", probe="gemm") is None


def test_lock_is_exclusive_and_released(tmp_path: Path) -> None:
    from agent.probes.lock import ProbeBusy

    path = tmp_path / "sub" / "probe.lock"
    with ProbeLock(path), pytest.raises(ProbeBusy):
        ProbeLock(path).acquire()
    with ProbeLock(path) as again:
        assert again.held


# --------------------------------------------------------------------------- idle gate, metrics


def test_idle_check_names_the_busy_chips() -> None:
    idle = [Sample("npu_processes", label_pairs(npu=0, chip=0), 0.0),
            Sample("npu_aicore_utilization_ratio", label_pairs(npu=0, chip=0), 0.01)]
    assert idle_check(idle) is None
    busy = [*idle, Sample("npu_processes", label_pairs(npu=3, chip=0), 2.0),
            Sample("npu_aicore_utilization_ratio", label_pairs(npu=5, chip=0), 0.4)]
    reason = idle_check(busy, max_aicore_utilization=0.1)
    assert reason is not None
    assert "npu 3 chip 0: 2 process(es)" in reason
    assert "npu 5 chip 0: AI Core 40% busy" in reason
    assert idle_check(busy[-1:], max_aicore_utilization=0.5) is None


def test_metric_samples_follow_the_catalogue() -> None:
    from agent.probes.records import AllreduceMeasurement, GemmMeasurement

    metrics = ProbeMetrics()
    gemm = GemmMeasurement(device=1, npu=1, chip=0, model="910B3", dtype="fp16", size=8192, iterations=50,
                           seconds=1.0, flops=300e12, correct=True, residual_ratio=0.1, peak_flops=313.7e12,
                           peak_basis="measured", efficiency=300 / 313.7)
    ar = AllreduceMeasurement(scope="node", world_size=8, size_bytes=256 << 20, iterations=20,
                              seconds_per_iteration=0.01, algbw_bytes_per_second=2.7e10,
                              busbw_bytes_per_second=4.7e10, correct=True)
    metrics.record(ProbeResult(probe="gemm", outcome="pass", started_at=100.0, duration_s=5.0, gemm=[gemm]))
    metrics.record(ProbeResult(probe="allreduce", outcome="timeout", stage="exec", started_at=200.0,
                               duration_s=9.0, scope="node"))
    metrics.record(ProbeResult(probe="allreduce", outcome="pass", started_at=300.0, duration_s=9.0,
                               scope="node", allreduce=ar))
    samples = metrics.samples()
    for sample in samples:
        spec = CATALOGUE[sample.metric]
        assert tuple(name for name, _ in sample.labels) == spec.labels, sample
    efficiency = value(samples, "npu_probe_gemm_efficiency_ratio", npu="1", chip="0", dtype="fp16")
    assert efficiency == pytest.approx(300 / 313.7)
    assert value(samples, "npuwatch_probe_timeouts_total", probe="allreduce", stage="exec") == 1.0
    assert value(samples, "npuwatch_probe_runs_total", probe="allreduce", outcome="pass") == 1.0
    assert value(samples, "npuwatch_probe_last_success_timestamp_seconds", probe="allreduce") == 309.0
    # every counter exists from the start, at 0
    assert value(samples, "npuwatch_probe_runs_total", probe="gemm", outcome="error") == 0.0


# --------------------------------------------------------------------------- CLI


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="npuwatch probe")
    probe_cli.add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize(("outcome", "warnings", "code"), [
    ("pass", [], 0), ("pass", ["device 0 fp16 at 85% of the expected peak"], 1), ("fail", [], 2),
    ("timeout", [], 2), ("error", [], 3), ("skipped", [], 3)])
def test_cli_exit_codes_are_nagios_style(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                         outcome: str, warnings: list[str], code: int) -> None:
    seen: list[ProbeSettings] = []

    def fake_run(probe_settings: ProbeSettings, **_: object) -> ProbeResult:
        seen.append(probe_settings)
        return ProbeResult(probe="gemm", outcome=outcome, started_at=0.0, duration_s=0.1, warnings=warnings)

    monkeypatch.setattr(probe_cli, "run_gemm", fake_run)
    assert probe_cli.main(parse("gemm", "--backend", "cpu", "--devices", "0,2", "--deadline", "30")) == code
    assert (seen[0].devices, seen[0].deadline_s, seen[0].backend) == ((0, 2), 30.0, "cpu")
    assert outcome.upper() in capsys.readouterr().out


def test_runner_env_sets_short_hccl_timeouts_within_hccl_ranges() -> None:
    from agent.probes.runner import _worker_env

    env = _worker_env(ProbeSettings(connect_timeout_s=30, exec_timeout_s=90), "npu")
    assert (env["HCCL_CONNECT_TIMEOUT"], env["HCCL_EXEC_TIMEOUT"]) == ("120", "90")
    env = _worker_env(ProbeSettings(), "cpu")
    assert env["TORCH_DEVICE_BACKEND_AUTOLOAD"] == "0"
    assert "HCCL_CONNECT_TIMEOUT" not in env or env["HCCL_CONNECT_TIMEOUT"] == os.environ.get(
        "HCCL_CONNECT_TIMEOUT")
