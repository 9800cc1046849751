"""The copy probes (membw, h2d, p2p) and the sustained GEMM: real workers on the cpu backend, judging on
synthetic results, the expected-bandwidth table, the CLI and the watchdog.

On the cpu backend ``--devices 0,1,2`` are fake devices in host memory: the numbers are memory
copies, but every result keeps the shape it has on npu/cuda. Sizes are small and loops short.
"""

from __future__ import annotations

import math
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psutil
import pytest

from agent.probes.bandwidth import run_h2d, run_membw, run_p2p
from agent.probes.records import ProbeResult, ProbeSettings
from agent.probes.render import render
from agent.probes.sustained import run_sustained_gemm

needs_torch = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("torch") is None, reason="torch is not installed")


def settings(**overrides: object) -> ProbeSettings:
    """Real runs on a shared CI machine: a neighbour's burst can slow one honest copy cell several
    times over, so the peer threshold is loose here; the default one is tested on synthetic results."""
    base = {"backend": "cpu", "use_lock": False, "copy_bytes": 1 << 20, "warmup": 1, "iterations": 2,
            "repeats": 4, "min_peer_ratio": 0.2, "deadline_s": 90.0, "term_grace_s": 1.0,
            "tag": f"npuwatch-test-{uuid.uuid4().hex}"}
    base.update(overrides)
    return ProbeSettings(**base)  # type: ignore[arg-type]


def leftovers(tag: str) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if tag in " ".join(proc.info["cmdline"] or []):
                found.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def sane(rate: float) -> bool:
    return math.isfinite(rate) and rate > 0


# --------------------------------------------------------------------------- real workers, cpu backend


@needs_torch
@pytest.mark.slow
def test_membw_measures_every_device_read_plus_written() -> None:
    probe = settings(devices=(0, 1), repeats=2)
    result = run_membw(probe)
    assert result.outcome == "pass", result.message
    assert [(c.kind, c.device, c.peer) for c in result.bandwidth] == [("membw", 0, None), ("membw", 1, None)]
    for cell in result.bandwidth:
        assert cell.size_bytes == 1 << 20 and cell.iterations == 2 and cell.correct
        assert sane(cell.bytes_per_second)
        # read + written: twice the buffer per copy
        assert cell.bytes_per_second == pytest.approx(2 * cell.size_bytes * cell.iterations / cell.seconds)
        assert cell.peer_ratio is not None and sane(cell.peer_ratio)
    [report] = result.ranks
    raw = report.result["measurements"][0]  # type: ignore[index]
    assert len(raw["loop_seconds"]) == 2 and raw["seconds"] == min(raw["loop_seconds"])
    assert not leftovers(probe.tag or "")


@needs_torch
@pytest.mark.slow
def test_h2d_measures_both_directions() -> None:
    result = run_h2d(settings())
    assert result.outcome == "pass", result.message
    assert [(c.kind, c.device) for c in result.bandwidth] == [("h2d", 0), ("d2h", 0)]
    assert all(sane(c.bytes_per_second) and c.correct for c in result.bandwidth)
    assert all(c.pinned is False for c in result.bandwidth)  # no pinned memory without an accelerator
    assert "d2h" in render(result)


@needs_torch
@pytest.mark.slow
def test_p2p_matrix_has_every_ordered_pair() -> None:
    result = run_p2p(settings(devices=(0, 1, 2)))
    assert result.outcome == "pass", result.message
    pairs = [(c.device, c.peer) for c in result.bandwidth]
    assert sorted(pairs) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    assert all(c.kind == "p2p" and c.correct and sane(c.bytes_per_second) for c in result.bandwidth)
    assert "row: source, column: destination" in render(result)


@needs_torch
@pytest.mark.slow
def test_p2p_default_cpu_devices_are_the_cpu_ranks() -> None:
    result = run_p2p(settings(cpu_ranks=3))
    assert result.outcome == "pass", result.message
    assert len(result.bandwidth) == 6


@needs_torch
@pytest.mark.slow
def test_a_planted_slow_pair_is_flagged_and_only_it() -> None:
    """The worker sleeps 0.2 s after each timed copy 1 -> 2: a link at a small fraction of its peers'."""
    probe = settings(devices=(0, 1, 2), extra_env={"NPUWATCH_PROBE_SLOW_PAIR": "1:2:0.2"})
    result = run_p2p(probe)
    assert result.outcome == "fail", result.message
    assert [(c.device, c.peer) for c in result.bandwidth if c.flagged] == [(1, 2)]
    assert "device 1 -> 2" in result.message and "median" in result.message
    slow = next(c for c in result.bandwidth if c.flagged)
    assert slow.peer_ratio is not None and slow.peer_ratio < 0.2
    assert slow.seconds >= 2 * 0.2  # both timed copies of its fastest loop slept
    assert result.exit_code == 2


@needs_torch
@pytest.mark.slow
@pytest.mark.parametrize(("probe", "run", "hook"), [
    ("membw", run_membw, "membw"), ("h2d", run_h2d, "h2d"), ("p2p", run_p2p, "p2p:1")])
def test_corrupted_copy_fails_the_probe(probe: str, run: Any, hook: str) -> None:
    result = run(settings(devices=(0, 1), extra_env={"NPUWATCH_PROBE_CORRUPT": hook}))
    assert result.outcome == "fail", result.message
    assert "data corrupted" in result.message
    bad = [(c.kind, c.device, c.peer) for c in result.bandwidth if not c.correct]
    expected = {"membw": [("membw", 0, None), ("membw", 1, None)],
                "h2d": [("h2d", 0, None), ("d2h", 0, None), ("h2d", 1, None), ("d2h", 1, None)],
                "p2p": [("p2p", 1, 0)]}[probe]
    assert bad == expected


@needs_torch
@pytest.mark.slow
def test_p2p_on_one_device_is_skipped() -> None:
    for probe in (settings(devices=(0,)), settings(cpu_ranks=1)):
        result = run_p2p(probe)
        assert result.outcome == "skipped", result.message
        assert result.message == "1 device: a device-to-device copy needs at least 2"
        assert result.bandwidth == [] and result.exit_code == 3


@needs_torch
@pytest.mark.slow
def test_sustained_gemm_reports_flops_per_window() -> None:
    # The cpu of a shared CI machine "throttles" whenever a neighbour runs: the drop is not judged here.
    probe = settings(gemm_size=96, sustained_s=1.6, window_s=0.4, max_throttle_drop=1.0, warn_throttle_drop=None)
    result = run_sustained_gemm(probe)
    assert result.outcome == "pass", result.message
    [m] = result.sustained
    assert (m.device, m.dtype, m.size, m.window_s, m.correct) == (0, "fp32", 96, 0.4, True)
    assert len(m.windows) >= 4
    assert [w.index for w in m.windows] == list(range(len(m.windows)))
    for window in m.windows:
        assert sane(window.flops) and window.iterations > 0
        assert window.seconds >= 0.4 * 0.9
        assert window.flops == pytest.approx(2 * 96**3 * window.iterations / window.seconds)
        assert (window.clock_hz, window.power_watts, window.temperature_celsius) == (None, None, None)
    starts = [w.start_s for w in m.windows]
    assert starts == sorted(starts) and starts[-1] < 1.6
    assert m.best_flops == max(w.flops for w in m.windows)
    assert "TFLOP/s per window" in render(result)
    raw = result.ranks[0].result["measurements"][0]["windows"][0]  # type: ignore[index]
    assert not {"clock_hz", "power_watts", "temperature_celsius"} & set(raw)  # absent, never 0 or -1


@needs_torch
@pytest.mark.slow
def test_sustained_gemm_checks_the_last_product() -> None:
    probe = settings(gemm_size=64, sustained_s=0.3, window_s=0.1, max_throttle_drop=1.0,
                     extra_env={"NPUWATCH_PROBE_CORRUPT": "sustained_gemm"})
    result = run_sustained_gemm(probe)
    assert result.outcome == "fail", result.message
    assert "wrong product after sustained load on device 0" in result.message


@needs_torch
@pytest.mark.slow
def test_watchdog_kills_every_new_worker() -> None:
    """Stalled in exec: the no-progress watchdog; stalled in connect: the outer deadline. Killed, reaped."""
    runs = {
        "membw": (run_membw, settings(stall_s=3.0, extra_env={"NPUWATCH_PROBE_STALL": "exec"})),
        "h2d": (run_h2d, settings(stall_s=3.0, extra_env={"NPUWATCH_PROBE_STALL": "exec"})),
        "p2p": (run_p2p, settings(stall_s=3.0, extra_env={"NPUWATCH_PROBE_STALL": "exec"})),
        "sustained_gemm": (run_sustained_gemm, settings(deadline_s=12.0, sustained_s=60.0,
                                                        extra_env={"NPUWATCH_PROBE_STALL": "connect"})),
    }

    def timed(run: Any, probe: ProbeSettings) -> tuple[ProbeResult, float]:
        start = time.monotonic()
        return run(probe), time.monotonic() - start

    with ThreadPoolExecutor(max_workers=len(runs)) as pool:
        futures = {name: pool.submit(timed, run, probe) for name, (run, probe) in runs.items()}
        outcomes = {name: future.result() for name, future in futures.items()}
    for name, (result, elapsed) in outcomes.items():
        probe = runs[name][1]
        assert result.probe == name
        assert result.outcome == "timeout", (name, result.message)
        assert result.exit_code == 2
        [report] = result.ranks
        assert report.killed and report.returncode is not None
        assert not leftovers(probe.tag or "")
        if name == "sustained_gemm":
            assert result.stage == "connect" and "12 s deadline" in result.message
            assert 12.0 <= elapsed < 40.0
        else:
            assert result.stage == "exec" and "3 s without progress" in result.message


# --------------------------------------------------------------------------- judging, synthetic results


# --------------------------------------------------------------------------- expected bandwidth table


# --------------------------------------------------------------------------- CLI


# --------------------------------------------------------------------------- workers stay Python 3.8
