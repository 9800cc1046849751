"""Probe workers and the peak table: the checks that decide correct / incorrect, and the protocol."""

from __future__ import annotations

import importlib
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.probes.peaks import BUILTIN_PEAKS, lookup_peak, normalise_model

PROBES_DIR = Path(__file__).resolve().parents[1] / "collectors" / "probes"


# --------------------------------------------------------------------------- peaks


def test_910b3_fp16_peak_is_the_ascend_dmi_figure() -> None:
    peak = lookup_peak("Ascend910B3", "fp16")
    assert peak is not None
    assert peak.flops == pytest.approx(313.7e12)
    assert peak.gates


@pytest.mark.parametrize("name", ["910B3", "Ascend910B3", "ascend 910b3", "Ascend-910B3"])
def test_model_names_normalise_to_one_key(name: str) -> None:
    assert normalise_model(name) == "910B3"


def test_gpu_names_match_the_longest_contained_key() -> None:
    pcie = lookup_peak("NVIDIA H100 PCIe", "bf16")
    sxm = lookup_peak("NVIDIA H100 80GB HBM3", "bf16")
    assert pcie is not None and sxm is not None
    assert pcie.flops == pytest.approx(756e12)
    assert sxm.flops == pytest.approx(989.4e12)
    assert not sxm.gates  # datasheet figures report efficiency but never fail a probe


def test_config_override_wins_and_adds_models() -> None:
    overrides = {"910B3": {"fp16": 300e12}, "MyChip": {"fp32": 1e12}}
    assert lookup_peak("Ascend910B3", "fp16", overrides).flops == pytest.approx(300e12)  # type: ignore[union-attr]
    assert lookup_peak("Ascend910B3", "bf16", overrides).flops == pytest.approx(313.7e12)  # type: ignore[union-attr]
    added = lookup_peak("mychip", "fp32", overrides)
    assert added is not None and added.gates


def test_unknown_model_or_dtype_has_no_peak() -> None:
    assert lookup_peak("x86_64", "fp32") is None
    assert lookup_peak("910B3", "fp32") is None
    assert lookup_peak(None, "fp16") is None
    assert all(peak.flops > 1e12 for per_dtype in BUILTIN_PEAKS.values() for peak in per_dtype.values())


# --------------------------------------------------------------------------- worker internals


def _import_worker(name: str) -> Any:
    """A worker module, imported the way the worker scripts import each other (by directory)."""
    if name in sys.modules:
        return sys.modules[name]
    sys.path.insert(0, str(PROBES_DIR))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(PROBES_DIR))


@pytest.fixture(scope="module")
def worker_modules() -> tuple[object, object, object]:
    torch = pytest.importorskip("torch")
    return torch, _import_worker("gemm"), _import_worker("allreduce")


@pytest.fixture(autouse=True)
def seeded_torch() -> None:
    """Every random input of these tests is drawn from one fixed seed."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(20240611)


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_freivalds_accepts_a_true_product(worker_modules: tuple, dtype: str) -> None:
    torch, gemm, _ = worker_modules
    torch_dtype = getattr(torch, gemm.DTYPES[dtype])
    a = torch.randn(192, 160, dtype=torch_dtype)
    b = torch.randn(160, 176, dtype=torch_dtype)
    c = torch.matmul(a, b)
    correct, ratio = gemm.check_product(torch, a, b, c, dtype)
    assert correct
    assert ratio < 0.6  # comfortably inside the tolerance


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_freivalds_catches_one_wrong_element(worker_modules: tuple, dtype: str) -> None:
    torch, gemm, _ = worker_modules
    torch_dtype = getattr(torch, gemm.DTYPES[dtype])
    a = torch.randn(128, 128, dtype=torch_dtype)
    b = torch.randn(128, 128, dtype=torch_dtype)
    c = torch.matmul(a, b)
    # A sign-bit flip of an element of typical size (|C_ij| ~ sqrt(k)) must be seen.
    c[37, 101] = -c[37, 101] if abs(float(c[37, 101])) > 4.0 else c[37, 101] + 2 * math.sqrt(128)
    correct, ratio = gemm.check_product(torch, a, b, c, dtype)
    assert not correct
    assert ratio > 1.0


def test_freivalds_treats_nan_as_wrong(worker_modules: tuple) -> None:
    torch, gemm, _ = worker_modules
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    c = a @ b
    c[3, 3] = float("nan")
    assert gemm.check_product(torch, a, b, c, "fp32") == (False, math.inf)


def test_planted_corruption_is_caught(worker_modules: tuple) -> None:
    torch, gemm, _ = worker_modules
    a, b = torch.randn(96, 96), torch.randn(96, 96)
    c = a @ b
    gemm.corrupt_one_element(torch, c)
    assert not gemm.check_product(torch, a, b, c, "fp32")[0]


@pytest.mark.parametrize(("ranks", "factor"), [(2, 1.0), (3, 4 / 3), (4, 1.5), (8, 1.75)])
def test_busbw_is_nccl_tests_definition(worker_modules: tuple, ranks: int, factor: float) -> None:
    """busbw = algbw x 2(n-1)/n: 1 for 2 ranks, 4/3 for 3, 3/2 for 4."""
    _, _, allreduce = worker_modules
    assert allreduce.bus_bandwidth(100e9, ranks) == pytest.approx(100e9 * factor, rel=1e-12)


def test_busbw_of_one_rank_is_refused(worker_modules: tuple) -> None:
    _, _, allreduce = worker_modules
    with pytest.raises(ValueError, match="at least 2 ranks"):
        allreduce.bus_bandwidth(100e9, 1)


# --------------------------------------------------------------------------- Freivalds tolerance, both sides
#
# A rank-1 product (k = 1: C_ij = A_i0 * B_0j) keeps the fp32 accumulation term at its
# minimum, so the output-rounding term decides. Row values 1 + (m + 0.49) ulp round to
# nearest as 1 + m ulp: every element of the row is off by 0.49 ulp in the same direction,
# the worst a correctly rounded result can be. With x = 1 the row's residual is the sum of
# those errors. ``n`` is chosen so that this honest worst case sits at ~0.85 of the
# tolerance; ``planted_ulps`` more on one element takes it to ~1.13.

ROUNDING_CASES = {  # dtype -> (n, planted_ulps)
    "bf16": (48, 8),
    "fp16": (48, 8),
    "fp32": (108, 19),
}
ULP_AT_ONE = {"bf16": 2.0**-7, "fp16": 2.0**-10, "fp32": 2.0**-23}


def worst_honest_rounding(torch: Any, gemm: Any, dtype: str) -> tuple[Any, Any, Any, Any]:
    n, _ = ROUNDING_CASES[dtype]
    ulp = ULP_AT_ONE[dtype]
    exact = torch.tensor([[1.0 + (j % 4 + 0.49) * ulp for j in range(n)]], dtype=torch.float64)
    a = torch.ones(3, 1, dtype=torch.float64)
    c = (a @ exact).to(getattr(torch, gemm.DTYPES[dtype]))
    x = torch.ones(n, 1, dtype=torch.float64)
    return a, exact, c, x


def documented_ratio(c_row: list[float], exact_row: list[float], dtype: str, k: int) -> float:
    """|C·1 - A·(B·1)| / ((4 eps + 2 eps32 sqrt(k)) · sqrt(sum C_ij²)), from the docstring, in plain floats."""
    tolerance = (4.0 * ULP_AT_ONE[dtype] + 2.0 * 2.0**-23 * math.sqrt(k)) * math.sqrt(sum(v * v for v in c_row))
    return abs(math.fsum(c_row) - math.fsum(exact_row)) / tolerance


@pytest.mark.parametrize("dtype", sorted(ROUNDING_CASES))
def test_worst_honest_rounding_just_below_the_tolerance_is_accepted(worker_modules: tuple, dtype: str) -> None:
    torch, gemm, _ = worker_modules
    a, exact, c, x = worst_honest_rounding(torch, gemm, dtype)
    expected = documented_ratio([float(v) for v in c[0]], [float(v) for v in exact[0]], dtype, k=1)
    assert 0.8 < expected < 0.9  # the construction itself: honest, and close to the edge
    correct, ratio = gemm.check_product(torch, a, exact, c, dtype, vectors=x)
    assert correct
    assert ratio == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("dtype", sorted(ROUNDING_CASES))
def test_corruption_just_above_the_tolerance_is_caught(worker_modules: tuple, dtype: str) -> None:
    torch, gemm, _ = worker_modules
    a, exact, c, x = worst_honest_rounding(torch, gemm, dtype)
    _, planted_ulps = ROUNDING_CASES[dtype]
    c[1, 5] = float(c[1, 5]) - planted_ulps * ULP_AT_ONE[dtype]  # exactly representable
    row = [float(v) for v in c[1]]
    expected = documented_ratio(row, [float(v) for v in exact[0]], dtype, k=1)
    assert 1.1 < expected < 1.2
    correct, ratio = gemm.check_product(torch, a, exact, c, dtype, vectors=x)
    assert not correct
    assert ratio == pytest.approx(expected, rel=1e-6)


@settings(derandomize=True, max_examples=30, deadline=None)
@given(dtype=st.sampled_from(sorted(ROUNDING_CASES)), rows=st.integers(1, 48), k=st.integers(1, 256),
       cols=st.integers(1, 48), seed=st.integers(0, 2**31 - 1))
def test_reported_ratio_is_the_documented_tolerance(dtype: str, rows: int, k: int, cols: int, seed: int) -> None:
    """For any honest product: accepted, and the worst ratio is exactly the documented formula's."""
    torch = pytest.importorskip("torch")
    gemm = _import_worker("gemm")
    torch.manual_seed(seed)
    torch_dtype = getattr(torch, gemm.DTYPES[dtype])
    a = torch.randn(rows, k, dtype=torch_dtype)
    b = torch.randn(k, cols, dtype=torch_dtype)
    c = torch.matmul(a, b)
    x = gemm.freivalds_vectors(torch, cols)
    a64, b64, c64 = a.double(), b.double(), c.double()
    residual = (c64 @ x - a64 @ (b64 @ x)).abs()
    row_scale = ((c64 * c64) @ (x * x)).sqrt()
    factor = 4.0 * ULP_AT_ONE[dtype] + 2.0 * 2.0**-23 * math.sqrt(k)
    expected = float((residual / (factor * row_scale + 1e-30)).max())
    correct, ratio = gemm.check_product(torch, a, b, c, dtype, vectors=x)
    assert correct
    assert ratio == pytest.approx(expected, rel=1e-6, abs=1e-12)


# --------------------------------------------------------------------------- timing recipe


class _ScriptedTimer:
    def __init__(self, durations: list[float]) -> None:
        self._durations = durations

    def start(self) -> None:
        pass

    def stop(self) -> float:
        return self._durations.pop(0)


class _ScriptedBackend:
    """A stand-in backend whose timed loops last the given seconds."""

    def __init__(self, durations: list[float]) -> None:
        self._durations = list(durations)
        self.synchronized = 0

    def timer(self) -> _ScriptedTimer:
        return _ScriptedTimer(self._durations)

    def synchronize(self) -> None:
        self.synchronized += 1


def test_warm_up_runs_the_iterations_and_the_seconds_whichever_is_longer() -> None:
    common = _import_worker("_common")
    calls: list[float] = []
    waits: list[int] = []
    counts = common.Counts(warmup=3, warmup_seconds=0.0, iterations=1, repeats=1)
    assert common.warm_up(lambda: calls.append(0.0), lambda: waits.append(1), counts) == 3
    assert len(waits) == 1  # no timed part: one wait at the end
    import time

    start = time.perf_counter()
    counts = common.Counts(warmup=2, warmup_seconds=0.3, iterations=1, repeats=1)
    done = common.warm_up(lambda: time.sleep(0.02), lambda: waits.append(1), counts)
    assert time.perf_counter() - start >= 0.3
    assert done >= 10  # went on past the 2 iterations until 0.3 s had passed


def test_best_of_reports_the_fastest_loop_and_every_loop() -> None:
    common = _import_worker("_common")
    backend = _ScriptedBackend([0.30, 0.10, 0.20])
    runs: list[int] = []
    counts = common.Counts(warmup=0, warmup_seconds=0.0, iterations=4, repeats=3)
    assert common.best_of(backend, lambda: runs.append(1), counts) == (0.10, [0.30, 0.10, 0.20])
    assert len(runs) == 12


# --------------------------------------------------------------------------- protocol


def test_worker_reports_bad_arguments_as_error_before_importing_torch() -> None:
    proc = subprocess.run(
        [sys.executable, str(PROBES_DIR / "gemm.py"), "--backend", "cpu", "--dtypes", "fp8"],
        capture_output=True, text=True, timeout=60, check=False)
    result = json.loads(proc.stdout)
    assert proc.returncode == 3
    assert result["status"] == "error"
    assert "fp8" in result["message"]
    assert "backend" not in result  # torch was never loaded
    stages = [json.loads(line.split(" ", 1)[1])["stage"] for line in proc.stderr.splitlines()
              if line.startswith("@npuwatch-stage ")]
    assert stages == ["setup"]
