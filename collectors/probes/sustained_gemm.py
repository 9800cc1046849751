"""Sustained GEMM probe worker: matmuls on every device at once for minutes, FLOP/s per time window.

Run by path under the probe interpreter (standard library + torch only)::

    python collectors/probes/sustained_gemm.py --backend npu --duration 180 --window 10 --dtype bf16

A short GEMM probe sees a cold chip at its best. Held under load, a chip with a failing fan,
a clogged heat sink or a power cap slows down after a while; the probe keeps every selected
device busy for ``--duration`` seconds and reports FLOP/s per window of ``--window``
seconds, so throttling shows as a drop from the early windows to the late ones (the runner
judges the drop). All devices run together, as in training, so node-level power and
cooling limits take effect.

Per window and device: matmuls are queued in chunks (``--iterations`` per chunk, or sized
from a timed sample to ~50 ms of work), the host waits for every device after each chunk
and closes the window once ``--window`` seconds have passed; the window's time is measured
with device events on npu/cuda and the wall clock on cpu. Where the backend can read them
(torch.cuda with NVML), the SM clock, power draw and temperature of each device are sampled
at the end of every window; otherwise those keys are absent. The last product on every
device is checked with the GEMM probe's Freivalds test (``correct``).

Prints one JSON object on stdout (see ``_common`` for the protocol)::

    {"probe": "sustained_gemm", "status": "ok", "measurements": [{"device": 0, "model": ...,
     "dtype": "bf16", "size": 8192, "duration_s": ..., "window_s": 10.0, "chunk": ...,
     "correct": true, "residual_ratio": ..., "windows": [{"index": 0, "start_s": 0.0,
     "seconds": ..., "iterations": ..., "flops": ..., "clock_hz": ..., "power_watts": ...,
     "temperature_celsius": ...}, ...]}]}
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import _common as common
import gemm

DEFAULTS = {  # backend -> (size, dtype, duration_s, window_s, counts); counts.iterations: chunk (0: auto)
    "npu": (8192, "bf16", 180.0, 10.0, common.Counts(warmup=10, warmup_seconds=2.0, iterations=0, repeats=1)),
    "cuda": (8192, "bf16", 180.0, 10.0, common.Counts(warmup=10, warmup_seconds=2.0, iterations=0, repeats=1)),
    "cpu": (512, "fp32", 10.0, 1.0, common.Counts(warmup=2, warmup_seconds=0.0, iterations=0, repeats=1)),
}
_CHUNK_SECONDS = 0.05
# Backend module function -> (result key, factor to base units). torch.cuda reads NVML:
# clock_rate in MHz, power_draw in mW, temperature in degrees C. No such calls are known
# for torch_npu; on NPU nodes the agent's npu-smi collectors export these readings.
_TELEMETRY = {
    "cuda": (("clock_rate", "clock_hz", 1e6), ("power_draw", "power_watts", 1e-3),
             ("temperature", "temperature_celsius", 1.0)),
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="npuwatch sustained GEMM (throttling) probe worker")
    common.add_timing_arguments(parser)  # --iterations: matmuls per chunk; --repeats is unused
    parser.add_argument("--devices", default="all", help="'all' or comma-separated device indices")
    parser.add_argument("--size", type=int, default=0, help="matrix size n (0: backend default)")
    parser.add_argument("--dtype", default="", help="fp16, bf16 or fp32 (default per backend)")
    parser.add_argument("--duration", type=float, default=0.0, help="seconds under load (0: backend default)")
    parser.add_argument("--window", type=float, default=0.0, help="seconds per FLOP/s window (0: default)")
    return parser.parse_args(argv)


class Telemetry:
    """Clock, power and temperature per device through the backend, where it can read them."""

    def __init__(self, backend: common.Backend, notes: list[str]) -> None:
        self._notes = notes
        self._readers: dict[str, tuple[Callable[[int], Any], float]] = {}
        for function, key, factor in _TELEMETRY.get(backend.name, ()):
            reader = getattr(backend.module, function, None)
            if callable(reader):
                self._readers[key] = (reader, factor)

    def sample(self, device_index: int) -> dict[str, float]:
        readings: dict[str, float] = {}
        for key, (reader, factor) in list(self._readers.items()):
            try:
                value = float(reader(device_index)) * factor
            except Exception as exc:  # e.g. NVML bindings not installed: stop asking, say why once
                del self._readers[key]
                self._notes.append(f"{key} not readable: {type(exc).__name__}: {exc}")
                continue
            if math.isfinite(value):
                readings[key] = value
        return readings


class _Operands:
    """A, B, C of one device."""

    def __init__(self, backend: common.Backend, device_index: int, size: int, dtype: str) -> None:
        torch = backend.torch
        torch_dtype = getattr(torch, gemm.DTYPES[dtype])
        device = backend.device(device_index)
        self.a = torch.randn(size, size, device=device, dtype=torch_dtype)
        self.b = torch.randn(size, size, device=device, dtype=torch_dtype)
        self.c = torch.empty(size, size, device=device, dtype=torch_dtype)
        self._matmul = torch.matmul

    def product(self) -> None:
        self._matmul(self.a, self.b, out=self.c)


def chunk_size(backend: common.Backend, operands: _Operands, window_s: float) -> int:
    """Matmuls per chunk so that a chunk is ~50 ms of work (and at most a quarter window)."""
    sample = common.Counts(warmup=0, warmup_seconds=0.0, iterations=2, repeats=1)
    seconds, _ = common.best_of(backend, operands.product, sample)
    per_product = max(seconds / sample.iterations, 1e-9)
    return max(1, int(min(_CHUNK_SECONDS, window_s / 4) / per_product))


def run_windows(backend: common.Backend, operands: dict[int, _Operands], *, size: int, duration_s: float,
                window_s: float, chunk: int, telemetry: Telemetry) -> dict[int, list[dict[str, Any]]]:
    """FLOP/s per window per device, every device loaded at once, until ``duration_s`` has passed."""
    windows: dict[int, list[dict[str, Any]]] = {d: [] for d in operands}
    flop_per_product = 2.0 * size**3
    started = time.perf_counter()
    index = 0
    while index == 0 or time.perf_counter() - started < duration_s:
        window_start = time.perf_counter()
        timers = {}
        for device_index in operands:
            backend.set_device(device_index)
            timers[device_index] = backend.timer()
            timers[device_index].start()
        products = 0
        while products == 0 or time.perf_counter() - window_start < window_s:
            for device_index, ops in operands.items():
                backend.set_device(device_index)
                for _ in range(chunk):
                    ops.product()
            products += chunk
            for device_index in operands:
                backend.synchronize_device(device_index)
        for device_index in operands:
            backend.set_device(device_index)
            seconds = timers[device_index].stop()
            window = {"index": index, "start_s": window_start - started, "seconds": seconds, "iterations": products,
                      "flops": flop_per_product * products / seconds if seconds > 0 else 0.0}
            window.update(telemetry.sample(device_index))
            windows[device_index].append(window)
        common.report_stage("exec", progress=f"window {index}")
        index += 1
    return windows


def run(args: argparse.Namespace) -> dict[str, Any]:
    def validate() -> None:
        if args.dtype and args.dtype not in gemm.DTYPES:
            raise common.SetupError(f"unknown dtype {args.dtype!r}; expected {', '.join(gemm.DTYPES)}")
        if args.duration < 0 or args.window < 0:
            raise common.SetupError("--duration and --window must not be negative")

    def prepare(backend: common.Backend) -> dict[str, Any]:
        size, dtype, duration_s, window_s, counts = DEFAULTS[backend.name]
        return {"devices": common.select_devices(args.devices, backend), "size": args.size or size,
                "dtype": args.dtype or dtype, "duration_s": args.duration or duration_s,
                "window_s": args.window or window_s, "counts": common.resolve_counts(args, counts)}

    def execute(backend: common.Backend, plan: dict[str, Any], result: dict[str, Any]) -> None:
        torch = backend.torch
        operands = {}
        for device_index in plan["devices"]:
            backend.set_device(device_index)
            operands[device_index] = _Operands(backend, device_index, plan["size"], plan["dtype"])

        def all_devices_once() -> None:
            for device_index, ops in operands.items():
                backend.set_device(device_index)
                ops.product()

        def wait_for_all() -> None:
            for device_index in operands:
                backend.synchronize_device(device_index)

        counts = plan["counts"]
        common.warm_up(all_devices_once, wait_for_all, counts)
        first = plan["devices"][0]
        backend.set_device(first)
        chunk = counts.iterations or chunk_size(backend, operands[first], plan["window_s"])
        common.report_stage("exec", progress="warm-up")
        windows = run_windows(backend, operands, size=plan["size"], duration_s=plan["duration_s"],
                              window_s=plan["window_s"], chunk=chunk, telemetry=Telemetry(backend, result["notes"]))
        for device_index, ops in operands.items():
            backend.set_device(device_index)
            if common.corruption_requested("sustained_gemm") and device_index == first:
                gemm.corrupt_one_element(torch, ops.c)
            correct, residual_ratio = gemm.check_product(torch, ops.a, ops.b, ops.c, plan["dtype"])
            result["measurements"].append({
                "device": device_index, "model": backend.device_name(device_index), "dtype": plan["dtype"],
                "size": plan["size"], "duration_s": plan["duration_s"], "window_s": plan["window_s"], "chunk": chunk,
                "correct": correct, "residual_ratio": residual_ratio, "windows": windows[device_index]})

    return common.run_probe("sustained_gemm", args.backend, prepare, execute, validate=validate,
                            initial={"measurements": []})


def main(argv: list[str] | None = None) -> int:
    return common.worker_main(lambda: run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
