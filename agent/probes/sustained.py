"""The sustained GEMM probe: minutes of matmuls on every device, FLOP/s per window; throttling judged.

The worker (collectors/probes/sustained_gemm.py) loads every selected device at once and
reports FLOP/s per time window, with the SM clock, power and temperature where the backend
can read them. A chip that throttles under sustained load shows as a drop from its best
window to a later one: more than ``max_throttle_drop`` fails, more than
``warn_throttle_drop`` warns. The first window is never the "worst" one (it may still
include ramp-up), but it can be the best one: a chip that is fastest cold and then slows
down is exactly what this probe is for. The median window is also held against the GEMM
peak table like the short GEMM probe, and the last product is checked for correctness.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from typing import Any

from agent.probes.peaks import lookup_peak
from agent.probes.records import (
    EventHandler,
    ProbeResult,
    ProbeSettings,
    SustainedGemmMeasurement,
    SustainedWindow,
)
from agent.probes.runner import run_locked, run_single_worker

__all__ = ["judge_sustained", "run_sustained_gemm", "sustained_measurement"]

PROBE = "sustained_gemm"
_T = 1e12


def run_sustained_gemm(settings: ProbeSettings, on_event: EventHandler | None = None) -> ProbeResult:
    """Hold every selected device under GEMM load for ``sustained_s`` and judge the windows."""
    return run_locked(PROBE, settings, lambda: _run(settings, on_event))


def _run(settings: ProbeSettings, on_event: EventHandler | None) -> ProbeResult:
    if settings.gemm_dtypes and len(settings.gemm_dtypes) > 1:
        return ProbeResult(probe=PROBE, outcome="error", started_at=time.time(), duration_s=0.0,
                           message=f"the sustained GEMM runs one dtype, got {', '.join(settings.gemm_dtypes)}")
    args: list[str] = []
    if settings.gemm_size is not None:
        args += ["--size", str(settings.gemm_size)]
    if settings.gemm_dtypes:
        args += ["--dtype", settings.gemm_dtypes[0]]
    if settings.sustained_s is not None:
        args += ["--duration", str(settings.sustained_s)]
    if settings.window_s is not None:
        args += ["--window", str(settings.window_s)]
    result, payload = run_single_worker(PROBE, "sustained_gemm.py", args, settings, on_event)
    result.sustained = [sustained_measurement(raw, settings) for raw in payload.get("measurements", [])]
    if result.outcome == "pass":
        judge_sustained(result, settings)
    return result


def _window(raw: Mapping[str, Any]) -> SustainedWindow:
    def optional(key: str) -> float | None:
        return float(raw[key]) if raw.get(key) is not None else None

    return SustainedWindow(index=int(raw["index"]), start_s=float(raw["start_s"]), seconds=float(raw["seconds"]),
                           iterations=int(raw["iterations"]), flops=float(raw["flops"]),
                           clock_hz=optional("clock_hz"), power_watts=optional("power_watts"),
                           temperature_celsius=optional("temperature_celsius"))


def sustained_measurement(raw: Mapping[str, Any], settings: ProbeSettings) -> SustainedGemmMeasurement:
    windows = [_window(w) for w in raw.get("windows", [])]
    rates = [w.flops for w in windows] or [0.0]
    best = max(rates)
    later = windows[1:] or windows
    worst_window = min(later, key=lambda w: w.flops) if later else None
    worst = worst_window.flops if worst_window else 0.0
    median = statistics.median(rates)
    device = int(raw["device"])
    npu, chip = settings.chip_map.get(device, (device, 0))
    model = settings.model or str(raw.get("model", ""))
    dtype = str(raw["dtype"])
    peak = lookup_peak(model, dtype, settings.peaks)
    return SustainedGemmMeasurement(
        device=device, npu=npu, chip=chip, model=model, dtype=dtype, size=int(raw["size"]),
        duration_s=float(raw["duration_s"]), window_s=float(raw["window_s"]), windows=windows,
        best_flops=best, median_flops=median, worst_flops=worst,
        worst_window=worst_window.index if worst_window else 0,
        drop_ratio=1.0 - worst / best if best > 0 else 0.0, correct=bool(raw["correct"]),
        residual_ratio=float(raw["residual_ratio"]), peak_flops=peak.flops if peak else None,
        peak_basis=peak.basis if peak else None, efficiency=median / peak.flops if peak else None)


def _readings(window: SustainedWindow) -> list[str]:
    out = []
    if window.clock_hz is not None:
        out.append(f"{window.clock_hz / 1e9:.2f} GHz")
    if window.power_watts is not None:
        out.append(f"{window.power_watts:.0f} W")
    if window.temperature_celsius is not None:
        out.append(f"{window.temperature_celsius:.0f} °C")
    return out


def describe_drop(m: SustainedGemmMeasurement) -> str:
    """``device 0 fell 23%: window 7 at 600.0 TFLOP/s against 780.0 (1.98 GHz, 700 W -> 1.41 GHz, 700 W)``."""
    text = (f"device {m.device} fell {m.drop_ratio:.0%}: window {m.worst_window} at {m.worst_flops / _T:.3f} "
            f"TFLOP/s against {m.best_flops / _T:.3f}")
    best = max(m.windows, key=lambda w: w.flops, default=None)
    worst = next((w for w in m.windows if w.index == m.worst_window), None)
    if best is not None and worst is not None and (_readings(best) or _readings(worst)):
        text += f" ({', '.join(_readings(best))} -> {', '.join(_readings(worst))})"
    return text


def judge_sustained(result: ProbeResult, settings: ProbeSettings) -> None:
    """Set the outcome and message of a sustained GEMM run whose worker ran to the end."""
    measured = result.sustained
    if not measured or not all(m.windows for m in measured):
        result.outcome, result.message = "error", "the worker measured no window"
        return
    wrong = [m for m in measured if not m.correct]
    if wrong:
        result.outcome = "fail"
        result.message = "wrong product after sustained load on " + ", ".join(
            f"device {m.device} (residual {m.residual_ratio:.3g}x tolerance)" for m in wrong)
        return
    throttled = [m for m in measured if m.drop_ratio > settings.max_throttle_drop]
    if throttled:
        result.outcome = "fail"
        result.message = (f"throttling: more than {settings.max_throttle_drop:.0%} below the best window: "
                          + "; ".join(describe_drop(m) for m in throttled))
        return
    slow = [m for m in measured if m.peak_basis == "measured" and m.efficiency is not None
            and m.efficiency < settings.min_efficiency]
    if slow:
        result.outcome = "fail"
        result.message = f"below {settings.min_efficiency:.0%} of the expected peak under sustained load: " + ", ".join(
            f"device {m.device} {m.dtype} at {m.efficiency:.0%}" for m in slow if m.efficiency is not None)
        return
    if settings.warn_throttle_drop is not None:
        result.warnings += [describe_drop(m) for m in measured if m.drop_ratio > settings.warn_throttle_drop]
    if settings.warn_efficiency is not None:
        result.warnings += [f"device {m.device} {m.dtype} at {m.efficiency:.0%} of the expected peak"
                            for m in measured if m.peak_basis == "measured" and m.efficiency is not None
                            and m.efficiency < settings.warn_efficiency]
    windows = min(len(m.windows) for m in measured)
    result.message = (f"{len(measured)} device(s), {windows} windows, median "
                      + ", ".join(f"{m.median_flops / _T:.3f}" for m in measured)
                      + f" TFLOP/s, largest drop {max(m.drop_ratio for m in measured):.0%}")
