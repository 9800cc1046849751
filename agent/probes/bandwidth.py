"""The copy probes: device memory (membw), host link (h2d), chip-to-chip matrix (p2p); runs and judging.

Each probe is one worker process (collectors/probes/{membw,h2d,p2p}.py) under the probe lock
and the same watchdog as the GEMM probe. Its cells (a device, a direction of a device's host
link, or an ordered pair of devices) are judged three ways:

- the data must arrive intact, else ``fail``;
- against the model's expected figure (agent/probes/peaks.py ``BUILTIN_BANDWIDTHS``, or
  ``ProbeSettings.bandwidths``): below ``min_efficiency`` of a *measured* figure fails,
  below ``warn_efficiency`` warns; datasheet figures only report efficiency;
- against the other cells of the same kind in the same run: below ``min_peer_ratio`` of
  their median fails, so one slow link among 56 P2P pairs is found even on a model with no
  expected figure.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from agent.probes.peaks import lookup_bandwidth
from agent.probes.records import BandwidthMeasurement, EventHandler, ProbeResult, ProbeSettings
from agent.probes.runner import run_locked, run_single_worker

__all__ = ["bandwidth_measurements", "judge_bandwidth", "run_h2d", "run_membw", "run_p2p"]

_G = 1e9


def run_membw(settings: ProbeSettings, on_event: EventHandler | None = None) -> ProbeResult:
    """Device memory copy bandwidth (bytes read + written per second) of every selected device."""
    return run_locked("membw", settings, lambda: _run_copy_probe("membw", settings, on_event))


def run_h2d(settings: ProbeSettings, on_event: EventHandler | None = None) -> ProbeResult:
    """Host-to-device and device-to-host bandwidth of every selected device."""
    return run_locked("h2d", settings, lambda: _run_copy_probe("h2d", settings, on_event))


def run_p2p(settings: ProbeSettings, on_event: EventHandler | None = None) -> ProbeResult:
    """The copy bandwidth matrix over every ordered pair of devices (cpu: ``cpu_ranks`` fake devices)."""
    return run_locked("p2p", settings, lambda: _run_copy_probe("p2p", settings, on_event))


def _run_copy_probe(probe: str, settings: ProbeSettings, on_event: EventHandler | None) -> ProbeResult:
    args = ["--size-bytes", str(settings.copy_bytes)] if settings.copy_bytes is not None else []
    if probe == "p2p" and settings.devices is None and settings.backend == "cpu":
        args += ["--devices", ",".join(str(d) for d in range(settings.cpu_ranks))]
    result, payload = run_single_worker(probe, f"{probe}.py", args, settings, on_event)
    result.bandwidth = bandwidth_measurements(probe, payload, settings)
    if result.outcome != "pass":
        return result
    if payload.get("skipped"):
        result.outcome, result.message = "skipped", str(payload["skipped"])
        return result
    judge_bandwidth(result, settings)
    return result


def bandwidth_measurements(probe: str, payload: Mapping[str, Any],
                           settings: ProbeSettings) -> list[BandwidthMeasurement]:
    """The worker's cells as measurements, with expected figures and ratios to their peers."""
    cells = []
    for raw in payload.get("pairs" if probe == "p2p" else "measurements", []):
        device = int(raw["src"] if probe == "p2p" else raw["device"])
        peer = int(raw["dst"]) if probe == "p2p" else None
        kind = str(raw.get("direction", probe))
        model = settings.model or str(raw.get("model") or payload.get("model") or "")
        npu, chip = settings.chip_map.get(device, (device, 0))
        peer_npu, peer_chip = settings.chip_map.get(peer, (peer, 0)) if peer is not None else (None, None)
        rate = float(raw["bytes_per_second"])
        expected = lookup_bandwidth(model, kind, settings.bandwidths)
        pinned = raw.get("pinned")
        cells.append(BandwidthMeasurement(
            kind=kind, device=device, npu=npu, chip=chip, model=model, size_bytes=int(raw["size_bytes"]),
            iterations=int(raw["iterations"]), seconds=float(raw["seconds"]), bytes_per_second=rate,
            correct=bool(raw["correct"]), peer=peer, peer_npu=peer_npu, peer_chip=peer_chip,
            pinned=None if pinned is None else bool(pinned),
            expected_bytes_per_second=expected.bytes_per_second if expected else None,
            expected_basis=expected.basis if expected else None,
            efficiency=rate / expected.bytes_per_second if expected else None))
    return _with_peer_ratios(cells)


def _with_peer_ratios(cells: Sequence[BandwidthMeasurement]) -> list[BandwidthMeasurement]:
    medians = {}
    for kind in {c.kind for c in cells}:
        rates = [c.bytes_per_second for c in cells if c.kind == kind]
        if len(rates) >= 2:
            medians[kind] = statistics.median(rates)
    return [dataclasses.replace(c, peer_ratio=c.bytes_per_second / medians[c.kind])
            if medians.get(c.kind) else c for c in cells]


def _rate(value: float) -> str:
    return f"{value / _G:.2f} GB/s"


def judge_bandwidth(result: ProbeResult, settings: ProbeSettings) -> None:
    """Set the outcome and message of a copy probe whose worker ran to the end."""
    cells = result.bandwidth
    if not cells:
        result.outcome, result.message = "error", "the worker measured nothing"
        return
    corrupted = [c for c in cells if not c.correct]
    if corrupted:
        result.outcome = "fail"
        result.message = "data corrupted in the copy: " + ", ".join(c.where for c in corrupted)
        return
    cells = result.bandwidth = [dataclasses.replace(c, flagged=_slow_reason(c, settings)) for c in cells]
    slow = [c.flagged for c in cells if c.flagged]
    if slow:
        result.outcome = "fail"
        result.message = f"{len(slow)} slow: " + "; ".join(slow)
        return
    if settings.warn_efficiency is not None:
        result.warnings += [
            f"{c.where} at {c.efficiency:.0%} of the expected {_rate(c.expected_bytes_per_second or 0.0)}"
            for c in cells
            if c.expected_basis == "measured" and c.efficiency is not None
            and c.efficiency < settings.warn_efficiency]
    rates = [c.bytes_per_second for c in cells]
    result.message = f"{len(cells)} cell(s), data intact, {_rate(min(rates))} to {_rate(max(rates))}"


def _slow_reason(cell: BandwidthMeasurement, settings: ProbeSettings) -> str | None:
    if (cell.expected_basis == "measured" and cell.efficiency is not None
            and cell.efficiency < settings.min_efficiency):
        return (f"{cell.where} at {_rate(cell.bytes_per_second)}, {cell.efficiency:.0%} of the expected "
                f"{_rate(cell.expected_bytes_per_second or 0.0)}")
    if cell.peer_ratio is not None and cell.peer_ratio < settings.min_peer_ratio:
        median = cell.bytes_per_second / cell.peer_ratio
        return (f"{cell.where} at {_rate(cell.bytes_per_second)}, {cell.peer_ratio:.0%} of the median "
                f"{_rate(median)} of its {cell.kind} peers")
    return None
