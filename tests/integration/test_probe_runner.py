"""The probe runner on the cpu backend with real torch and gloo: outcomes, stages, no orphans.

Sizes are tiny and deadlines short: these tests are about the machinery, not the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from agent.probes import cli as probe_cli
from agent.probes.lock import ProbeLock
from agent.probes.metrics import ProbeMetrics
from agent.probes.records import ProbeResult, ProbeSettings
from agent.probes.runner import run_allreduce, run_gemm
from collectors.base import Sample, label_pairs

needs_torch = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("torch") is None, reason="torch is not installed")


def settings(**overrides: object) -> ProbeSettings:
    base = {"backend": "cpu", "use_lock": False, "gemm_size": 128, "allreduce_bytes": 64 << 10,
            "warmup": 1, "iterations": 2, "deadline_s": 60.0, "term_grace_s": 1.0,
            "tag": f"npuwatch-test-{uuid.uuid4().hex}"}
    base.update(overrides)
    return ProbeSettings(**base)  # type: ignore[arg-type]


def leftovers(tag: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if tag in " ".join(proc.info["cmdline"] or []):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def value(samples: list[Sample], metric: str, **labels: str) -> float | None:
    wanted = label_pairs(**labels)
    for sample in samples:
        if sample.metric == metric and sample.labels == wanted:
            return sample.value
    return None


def fake_python(tmp_path: Path, modules: dict[str, str]) -> str:
    """A probe interpreter whose torch (and torch_npu) are the given stand-ins."""
    site = tmp_path / "site"
    for name, source in modules.items():
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text(source)
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


# --------------------------------------------------------------------------- GEMM


@needs_torch
@pytest.mark.slow
def test_gemm_passes_and_exports_flops_and_correct() -> None:
    metrics = ProbeMetrics()
    events: list[dict[str, object]] = []
    probe = settings(peaks={"x86_64": {"fp32": 1.0}, "aarch64": {"fp32": 1.0}})
    result = run_gemm(probe, on_event=events.append)
    metrics.record(result)
    assert result.outcome == "pass", result.message
    stage_events = [e for e in events if e["kind"] == "stage"]
    assert [e["stage"] for e in stage_events if "progress" not in e] == ["setup", "connect", "exec", "done"]
    assert [e["progress"] for e in stage_events if "progress" in e] == ["device 0 fp32"]
    [report] = result.ranks
    assert (report.returncode, report.killed, report.result["status"]) == (0, False, "ok")  # type: ignore[index]
    assert result.exit_code == 0
    [m] = result.gemm
    assert (m.dtype, m.size, m.correct, m.npu, m.chip) == ("fp32", 128, True, 0, 0)
    assert m.flops > 0
    [raw] = report.result["measurements"]  # type: ignore[index]
    assert len(raw["loop_seconds"]) == raw["repeats"] == 3  # the worker's default: fastest of 3 loops
    assert m.seconds == min(raw["loop_seconds"])
    assert m.flops == pytest.approx(2 * 128**3 * 2 / m.seconds)
    samples = metrics.samples()
    assert value(samples, "npu_probe_gemm_correct", npu="0", chip="0", dtype="fp32") == 1.0
    assert value(samples, "npu_probe_gemm_flops", npu="0", chip="0", dtype="fp32") == pytest.approx(m.flops)
    assert m.efficiency is not None and m.efficiency > 1  # against the configured 1 FLOP/s "peak"
    assert value(samples, "npuwatch_probe_runs_total", probe="gemm", outcome="pass") == 1.0
    assert value(samples, "npuwatch_probe_last_success_timestamp_seconds", probe="gemm") == pytest.approx(
        result.started_at + result.duration_s)
    assert probe.tag in result.ranks[0].argv
    assert not leftovers(probe.tag or "")


@needs_torch
@pytest.mark.slow
def test_planted_gemm_corruption_fails_the_probe() -> None:
    metrics = ProbeMetrics()
    result = run_gemm(settings(extra_env={"NPUWATCH_PROBE_CORRUPT": "gemm"}))
    metrics.record(result)
    assert result.outcome == "fail"
    assert result.exit_code == 2
    assert "wrong product" in result.message
    assert [m.correct for m in result.gemm] == [False]
    samples = metrics.samples()
    assert value(samples, "npu_probe_gemm_correct", npu="0", chip="0", dtype="fp32") == 0.0
    assert value(samples, "npuwatch_probe_runs_total", probe="gemm", outcome="fail") == 1.0
    assert value(samples, "npuwatch_probe_last_success_timestamp_seconds", probe="gemm") is None


# --------------------------------------------------------------------------- all-reduce


@needs_torch
@pytest.mark.slow
@pytest.mark.parametrize("ranks", [2, 4])
def test_allreduce_sums_are_correct(ranks: int) -> None:
    metrics = ProbeMetrics()
    # A timed warm-up: rank 0's clock decides when it ends, for every rank (else they deadlock).
    result = run_allreduce(settings(cpu_ranks=ranks, warmup_s=0.3, repeats=2))
    metrics.record(result)
    assert result.outcome == "pass", result.message
    ar = result.allreduce
    assert ar is not None
    assert (ar.world_size, ar.size_bytes, ar.correct) == (ranks, 64 << 10, True)
    assert ar.algbw_bytes_per_second == pytest.approx(ar.size_bytes / ar.seconds_per_iteration)
    assert ar.busbw_bytes_per_second == pytest.approx(ar.algbw_bytes_per_second * 2 * (ranks - 1) / ranks)
    assert [r.result["status"] for r in result.ranks if r.result] == ["ok"] * ranks
    assert [r.result["repeats"] for r in result.ranks if r.result] == [2] * ranks
    # every rank reports rank 0's timing: one consistent result
    assert len({r.result["busbw_bytes_per_second"] for r in result.ranks if r.result}) == 1
    samples = metrics.samples()
    assert value(samples, "npu_probe_allreduce_correct", scope="node") == 1.0
    assert value(samples, "npu_probe_allreduce_bus_bandwidth_bytes_per_second", scope="node",
                 size_bytes=str(64 << 10)) == pytest.approx(ar.busbw_bytes_per_second)


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


def test_allreduce_on_an_auto_discovered_single_gpu_is_skipped(tmp_path: Path) -> None:
    """The node of the report: ``auto`` finds one cuda device (a stand-in torch says so)."""
    one_gpu = ("__version__ = '0-fake'\n"
               "class cuda:\n    is_available = staticmethod(lambda: True)\n"
               "    device_count = staticmethod(lambda: 1)\n"
               "    get_device_name = staticmethod(lambda index: 'NVIDIA H200')\n")
    python = fake_python(tmp_path, {"torch": one_gpu})
    result = run_allreduce(settings(python=python, backend="auto"))
    assert result.backend == "cuda"
    assert_single_device_skip(result)


def test_allreduce_worker_refuses_a_world_of_one() -> None:
    """Run by hand with WORLD_SIZE=1, the worker reports an error instead of a no-op "bandwidth"."""
    import subprocess

    from agent.probes.runner import _WORKER_DIR

    env = dict(os.environ, RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="1")
    proc = subprocess.run([sys.executable, str(_WORKER_DIR / "allreduce.py"), "--backend", "cpu"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    result = json.loads(proc.stdout)
    assert (proc.returncode, result["status"]) == (3, "error")
    assert "at least 2 ranks" in result["message"]
    assert "busbw_bytes_per_second" not in result


@needs_torch
@pytest.mark.slow
def test_a_stalled_rank_is_killed_at_the_deadline_with_its_stage() -> None:
    """Rank 1 hangs on entering connect (one run) or exec (the other run, concurrently).

    The no-progress watchdog (``stall_s``) counts from the stage report, so a torch import
    slowed down by a busy machine cannot make the test flaky; the overall deadline stays long.
    """
    metrics = ProbeMetrics()
    stall = 3.0
    runs = {stage: settings(deadline_s=60.0, stall_s=stall, extra_env={"NPUWATCH_PROBE_STALL": f"{stage}:1"})
            for stage in ("connect", "exec")}

    def timed(probe: ProbeSettings) -> tuple[ProbeResult, float]:
        start = time.monotonic()
        return run_allreduce(probe), time.monotonic() - start

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {stage: pool.submit(timed, probe) for stage, probe in runs.items()}
        outcomes = {stage: future.result() for stage, future in futures.items()}
    for stage, (result, elapsed) in outcomes.items():
        metrics.record(result)
        assert result.outcome == "timeout", result.message
        assert result.stage == stage
        assert result.exit_code == 2
        assert stall <= elapsed < 45.0
        assert "3 s without progress" in result.message
        assert [r.stage for r in result.ranks] == [stage, stage]  # both ranks got there and hung
        assert all(r.killed and r.returncode is not None for r in result.ranks)  # killed and reaped
        assert not leftovers(runs[stage].tag or "")
    samples = metrics.samples()
    assert value(samples, "npuwatch_probe_timeouts_total", probe="allreduce", stage="connect") == 1.0
    assert value(samples, "npuwatch_probe_timeouts_total", probe="allreduce", stage="exec") == 1.0
    assert value(samples, "npuwatch_probe_runs_total", probe="allreduce", outcome="timeout") == 2.0
    assert value(samples, "npuwatch_probe_timeouts_total", probe="gemm", stage="exec") == 0.0


# --------------------------------------------------------------------------- skipped and error


def test_missing_torch_is_an_error_not_a_failure(tmp_path: Path) -> None:
    python = fake_python(tmp_path, {"torch": "raise ImportError(\"No module named 'torch'\")\n"})
    metrics = ProbeMetrics()
    gemm = run_gemm(settings(python=python))
    allreduce = run_allreduce(settings(python=python))
    for result in (gemm, allreduce):
        metrics.record(result)
        assert result.outcome == "error", result.message
        assert "cannot import torch" in result.message
        assert result.exit_code == 3
    samples = metrics.samples()
    assert value(samples, "npuwatch_probe_runs_total", probe="gemm", outcome="error") == 1.0
    assert value(samples, "npuwatch_probe_runs_total", probe="gemm", outcome="fail") == 0.0
    assert value(samples, "npu_probe_gemm_correct", npu="0", chip="0", dtype="fp32") is None


def test_torch_npu_import_error_is_an_error_and_auto_falls_back(tmp_path: Path) -> None:
    fake_torch = ("__version__ = '0-fake'\n"
                  "class cuda:\n    is_available = staticmethod(lambda: False)\n"
                  "    device_count = staticmethod(lambda: 0)\n")
    python = fake_python(tmp_path, {
        "torch": fake_torch,
        "torch_npu": "raise ImportError('libhccl.so: cannot open shared object file')\n"})
    result = run_gemm(settings(python=python, backend="npu"))
    assert result.outcome == "error"
    assert "cannot import torch_npu" in result.message and "libhccl.so" in result.message
    # auto: npu ruled out, the reason kept; the discovery resolves to cpu
    from agent.probes.runner import _discover

    found = _discover(settings(python=python, backend="auto"))
    assert (found["status"], found["backend"]) == ("ok", "cpu")
    assert any("npu ruled out" in note and "libhccl.so" in note for note in found["notes"])


# --------------------------------------------------------------------------- idle gate, metrics


# --------------------------------------------------------------------------- CLI


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="npuwatch probe")
    probe_cli.add_arguments(parser)
    return parser.parse_args(list(argv))


@needs_torch
@pytest.mark.slow
def test_cli_gemm_json_pass_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code = probe_cli.main(parse("gemm", "--backend", "cpu", "--size", "96", "--iterations", "2", "--no-lock",
                                "--json"))
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert (out["outcome"], out["exit_code"], out["gemm"][0]["size"]) == ("pass", 0, 96)


def test_cli_error_and_skipped_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    python = fake_python(tmp_path, {"torch": "raise ImportError('no torch here')\n"})
    assert probe_cli.main(parse("gemm", "--backend", "cpu", "--python", python, "--no-lock")) == 3
    assert "ERROR" in capsys.readouterr().out
    lock = tmp_path / "lock"
    with ProbeLock(lock):
        assert probe_cli.main(parse("allreduce", "--backend", "cpu", "--lock-file", str(lock))) == 3
    assert "SKIPPED" in capsys.readouterr().out
    assert probe_cli.main(parse("allreduce", "--scope", "cluster", "--nnodes", "2")) == 3  # no --master
