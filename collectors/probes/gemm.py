"""GEMM probe worker: per device, time a square matmul and check the product.

Run by path under the probe interpreter (standard library + torch only)::

    python collectors/probes/gemm.py --backend npu --devices 0,1 --size 8192 --dtypes fp16,bf16

For every (device, dtype): fresh random inputs, a warm-up (``--warmup`` products and at
least ``--warmup-seconds``: clocks ramp up under load), then ``--repeats`` timed loops of
``--iterations`` products (device events on npu/cuda, wall clock on cpu); FLOP/s is
2·n³·iterations / seconds of the fastest loop. The last product is then checked on the
host in float64 with Freivalds' test: C·x against A·(B·x) for two random vectors x with |x_j| in [1, 2]. That
sees every element of C at O(n²) cost; the tolerance per row scales with the dtype's
rounding and the row's magnitude, so it holds for any n. A mismatch is a wrong result,
which the runner reports as a failed probe: silent data corruption is the fault a large
fleet fears most.

Prints one JSON object on stdout (see ``_common`` for the protocol).
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

import _common as common

DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}
# Machine epsilon of the output dtype; products accumulate in fp32 on every backend.
_EPS = {"fp16": 2.0**-10, "bf16": 2.0**-7, "fp32": 2.0**-23}
_EPS_ACCUMULATE = 2.0**-23
_HOST_BLOCK_ROWS = 1024
DEFAULTS = {  # backend -> (size, dtypes, counts)
    "npu": (8192, ("fp16", "bf16"), common.Counts(warmup=10, warmup_seconds=1.0, iterations=50, repeats=3)),
    "cuda": (8192, ("fp16", "bf16"), common.Counts(warmup=10, warmup_seconds=1.0, iterations=50, repeats=3)),
    "cpu": (1024, ("fp32",), common.Counts(warmup=2, warmup_seconds=0.0, iterations=5, repeats=3)),
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="npuwatch GEMM probe worker")
    common.add_timing_arguments(parser)
    parser.add_argument("--devices", default="all", help="'all' or comma-separated device indices")
    parser.add_argument("--size", type=int, default=0, help="matrix size n (0: backend default)")
    parser.add_argument("--dtypes", default="", help="comma-separated: fp16,bf16,fp32 (default per backend)")
    return parser.parse_args(argv)


def row_tolerance_factor(dtype: str, k: int) -> float:
    """Allowed |C·x - A·(B·x)|_i as a multiple of sqrt(sum_j (C_ij·x_j)²).

    Output rounding contributes about 0.3·eps per element, fp32 accumulation about
    eps32·sqrt(k); both are summed over the row with random signs, hence the row norm.
    The factors leave a margin of more than 10 standard deviations.
    """
    return 4.0 * _EPS[dtype] + 2.0 * _EPS_ACCUMULATE * math.sqrt(k)


def _host_product(torch: Any, matrix: Any, vectors: Any) -> tuple[Any, Any]:
    """(matrix @ vectors, sqrt((matrix * matrix) @ (vectors * vectors))) in float64.

    A block of rows at a time, so an 8192² fp16 matrix never exists in float64 at once.
    """
    rows = matrix.shape[0]
    product = torch.empty(rows, vectors.shape[1], dtype=torch.float64)
    norm = torch.empty(rows, vectors.shape[1], dtype=torch.float64)
    squared_vectors = vectors * vectors
    for start in range(0, rows, _HOST_BLOCK_ROWS):
        block = matrix[start:start + _HOST_BLOCK_ROWS].to(torch.float64)
        product[start:start + _HOST_BLOCK_ROWS] = block @ vectors
        norm[start:start + _HOST_BLOCK_ROWS] = (block * block) @ squared_vectors
    return product, norm.sqrt()


def freivalds_vectors(torch: Any, n_cols: int) -> Any:
    """Two random float64 columns with |x_j| in [1, 2] and random signs (torch's seeded generator)."""
    magnitude = torch.rand(n_cols, 2, dtype=torch.float64) + 1.0
    sign = torch.randint(0, 2, (n_cols, 2), dtype=torch.float64) * 2.0 - 1.0
    return magnitude * sign


def check_product(torch: Any, a: Any, b: Any, c: Any, dtype: str, *, vectors: Any = None) -> tuple[bool, float]:
    """Freivalds' test of c == a @ b on the host; returns (correct, worst residual / tolerance).

    ``vectors`` (n_cols x m, float64) replaces the random test vectors, for tests.
    """
    a_host, b_host, c_host = a.cpu(), b.cpu(), c.cpu()
    x = freivalds_vectors(torch, b_host.shape[1]) if vectors is None else vectors
    expected = _host_product(torch, a_host, _host_product(torch, b_host, x)[0])[0]
    got, row_scale = _host_product(torch, c_host, x)
    tolerance = row_tolerance_factor(dtype, a_host.shape[1]) * row_scale + 1e-30
    ratio = (got - expected).abs() / tolerance
    # NaN or inf anywhere in C makes the ratio NaN: ``not <= 1`` counts it as wrong.
    correct = bool((ratio <= 1.0).all().item())
    worst = float(ratio.max().item()) if correct else float(ratio.nan_to_num(nan=math.inf).max().item())
    return correct, worst


def corrupt_one_element(torch: Any, c: Any) -> None:
    """Test hook: flip the sign of one element and push it 8 standard deviations further."""
    k = c.shape[0]
    flat = c.view(-1)
    index = int(torch.randint(0, flat.numel(), (1,)).item())
    value = float(flat[index].item())
    flat[index] = -value - math.copysign(8.0 * math.sqrt(k), value)


def measure(backend: common.Backend, device_index: int, dtype: str, *, size: int,
            counts: common.Counts) -> dict[str, Any]:
    torch = backend.torch
    device = backend.device(device_index)
    torch_dtype = getattr(torch, DTYPES[dtype])
    a = torch.randn(size, size, device=device, dtype=torch_dtype)
    b = torch.randn(size, size, device=device, dtype=torch_dtype)
    c = torch.empty(size, size, device=device, dtype=torch_dtype)

    def product() -> None:
        torch.matmul(a, b, out=c)

    common.warm_up(product, backend.synchronize, counts)
    seconds, loops = common.best_of(backend, product, counts)
    if common.corruption_requested("gemm"):
        corrupt_one_element(torch, c)
    correct, residual_ratio = check_product(torch, a, b, c, dtype)
    return {
        "device": device_index,
        "model": backend.device_name(device_index),
        "dtype": dtype,
        "size": size,
        "iterations": counts.iterations,
        "repeats": counts.repeats,
        "seconds": seconds,
        "loop_seconds": loops,
        "flops": 2.0 * size**3 * counts.iterations / seconds if seconds > 0 else 0.0,
        "correct": correct,
        "residual_ratio": residual_ratio,
    }


def _device_list(spec: str, backend: common.Backend) -> list[int]:
    # One real device on cpu: GEMM FLOP/s of fake devices sharing the cores would only repeat it.
    return [0] if backend.name == "cpu" else common.select_devices(spec, backend)


def run(args: argparse.Namespace) -> dict[str, Any]:
    requested_dtypes = tuple(d for d in args.dtypes.split(",") if d)

    def validate() -> None:
        unknown = [d for d in requested_dtypes if d not in DTYPES]
        if unknown:
            raise common.SetupError(f"unknown dtype(s) {unknown}; expected {', '.join(DTYPES)}")

    def prepare(backend: common.Backend) -> tuple[list[int], int, tuple[str, ...], common.Counts]:
        size, dtypes, counts = DEFAULTS[backend.name]
        return (_device_list(args.devices, backend), args.size or size, requested_dtypes or dtypes,
                common.resolve_counts(args, counts))

    def execute(backend: common.Backend, plan: tuple[list[int], int, tuple[str, ...], common.Counts],
                result: dict[str, Any]) -> None:
        devices, size, dtypes, counts = plan
        for device_index in devices:
            backend.set_device(device_index)
            for dtype in dtypes:
                result["measurements"].append(measure(backend, device_index, dtype, size=size, counts=counts))
                common.report_stage("exec", progress=f"device {device_index} {dtype}")

    return common.run_probe("gemm", args.backend, prepare, execute, validate=validate, initial={"measurements": []})


def main(argv: list[str] | None = None) -> int:
    return common.worker_main(lambda: run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
