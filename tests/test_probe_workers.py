"""Probe workers and the peak table: the checks that decide correct / incorrect, and the protocol."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.fixture(scope="module")
def worker_modules() -> tuple[object, object, object]:
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(PROBES_DIR))
    try:
        import allreduce
        import gemm
    finally:
        sys.path.remove(str(PROBES_DIR))
    return torch, gemm, allreduce


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


def test_busbw_is_nccl_tests_definition(worker_modules: tuple) -> None:
    _, _, allreduce = worker_modules
    assert allreduce.bus_bandwidth(100e9, 8) == pytest.approx(175e9)
    assert allreduce.bus_bandwidth(100e9, 2) == pytest.approx(100e9)
    assert allreduce.bus_bandwidth(100e9, 1) == 0.0


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
