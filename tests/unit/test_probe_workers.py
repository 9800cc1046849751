"""Probe workers and the peak table: the checks that decide correct / incorrect, and the protocol."""

from __future__ import annotations

import importlib
import json
import math
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.probes.peaks import BUILTIN_PEAKS, lookup_peak, normalise_model
from tests.support.paths import REPO

PROBES_DIR = REPO / "collectors" / "probes"


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


@pytest.fixture(scope="module")
def workers() -> Iterator[tuple[Any, Any, Any]]:
    # Imported under their package names (mutmut matches mutants by module name); the workers' own
    # ``import _common`` still needs their directory on the path.
    sys.path.insert(0, str(PROBES_DIR))
    try:
        import collectors.probes._common as common
        from collectors.probes import allreduce, gemm
    finally:
        sys.path.remove(str(PROBES_DIR))
    yield common, gemm, allreduce


# --------------------------------------------------------------------------- _common: test hooks


@pytest.mark.parametrize("case", [
    ("", "exec", 0, False),
    ("   ", "exec", 0, False),
    ("exec", "exec", 0, True),
    ("exec", "exec", 5, True),          # no rank: every rank
    (" exec ", "exec", 0, True),        # surrounding blanks ignored
    ("exec:1", "exec", 1, True),
    ("exec:1", "exec", 0, False),
    ("exec:1", "exec", 2, False),
    ("connect", "exec", 0, False),
    ("exec:", "exec", 3, True),         # empty rank: every rank
])
def test_hook_matches_stage_and_rank(workers: tuple[Any, Any, Any], monkeypatch: pytest.MonkeyPatch,
                                     case: tuple[str, str, int, bool]) -> None:
    common, _, _ = workers
    spec, wanted, rank, expected = case
    monkeypatch.setenv(common.CORRUPT_ENV, spec)
    assert common.corruption_requested(wanted, rank) is expected


def test_corruption_hook_reads_its_own_variable(workers: tuple[Any, Any, Any],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    common, _, _ = workers
    monkeypatch.delenv(common.CORRUPT_ENV, raising=False)
    monkeypatch.setenv(common.STALL_ENV, "gemm")
    assert common.corruption_requested("gemm") is False
    monkeypatch.setenv(common.CORRUPT_ENV, "gemm")
    assert common.corruption_requested("gemm") is True


def test_corruption_hook_rank_defaults_to_zero(workers: tuple[Any, Any, Any],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    common, _, _ = workers
    monkeypatch.setenv(common.CORRUPT_ENV, "gemm:0")
    assert common.corruption_requested("gemm") is True
    monkeypatch.setenv(common.CORRUPT_ENV, "gemm:1")
    assert common.corruption_requested("gemm") is False


def test_stall_hook_returns_at_once_when_not_requested(workers: tuple[Any, Any, Any],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    common, _, _ = workers
    slept: list[float] = []
    monkeypatch.setattr(common.time, "sleep", slept.append)
    monkeypatch.setenv(common.STALL_ENV, "exec:1")
    common.stall_if_requested("exec", 0)
    common.stall_if_requested("connect", 1)
    monkeypatch.setenv(common.CORRUPT_ENV, "exec")
    monkeypatch.delenv(common.STALL_ENV)
    common.stall_if_requested("exec")
    assert slept == []


def test_stall_hook_sleeps_for_ever_when_requested(workers: tuple[Any, Any, Any],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    common, _, _ = workers
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 3:
            raise InterruptedError

    monkeypatch.setattr(common.time, "sleep", sleep)
    monkeypatch.setenv(common.STALL_ENV, "exec")
    with pytest.raises(InterruptedError):
        common.stall_if_requested("exec")
    assert slept == [3600, 3600, 3600]


@pytest.mark.parametrize(("exc", "expected"), [
    (TimeoutError("x"), True),                      # by the type's name
    (RuntimeError("Connection timed out"), True),
    (RuntimeError("Timeout waiting for peers"), True),
    (RuntimeError("TIMED OUT"), True),
    (RuntimeError("connection refused"), False),
    (RuntimeError("timed"), False),
    (RuntimeError("time out"), False),
])
def test_looks_like_timeout(workers: tuple[Any, Any, Any], exc: BaseException, expected: bool) -> None:
    common, _, _ = workers
    assert common.looks_like_timeout(exc) is expected


# --------------------------------------------------------------------------- _common: the protocol


def test_emit_result_writes_one_sorted_json_line(workers: tuple[Any, Any, Any],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    common, _, _ = workers
    common.emit_result({"b": 1, "a": [2.5]})
    out, err = capsys.readouterr()
    assert out == '{"a": [2.5], "b": 1}\n'
    assert err == ""


def test_report_stage_writes_a_prefixed_json_line_to_stderr(workers: tuple[Any, Any, Any],
                                                            capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    common, _, _ = workers
    monkeypatch.setattr(common.time, "time", lambda: 1234.5)
    common.report_stage("connect", 3, peers=2)
    common.report_stage("setup")
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 2
    assert all(line.startswith("@npuwatch-stage {") for line in lines)
    assert lines[0] == '@npuwatch-stage {"peers": 2, "rank": 3, "stage": "connect", "time": 1234.5}'
    assert json.loads(lines[1][len(common.STAGE_PREFIX):]) == {"rank": 0, "stage": "setup", "time": 1234.5}


# --------------------------------------------------------------------------- gemm and allreduce maths


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_row_tolerance_is_output_rounding_plus_accumulation(workers: tuple[Any, Any, Any], dtype: str) -> None:
    _, gemm, _ = workers
    eps = {"fp16": 2.0**-10, "bf16": 2.0**-7, "fp32": 2.0**-23}[dtype]
    for k in (1, 64, 8192):
        assert gemm.row_tolerance_factor(dtype, k) == pytest.approx(4.0 * eps + 2.0 * 2.0**-23 * math.sqrt(k),
                                                                    rel=1e-12)


@pytest.mark.parametrize(("world_size", "factor"), [(2, 1.0), (4, 1.5), (8, 1.75), (16, 1.875)])
def test_bus_bandwidth_is_algbw_times_two_n_minus_one_over_n(workers: tuple[Any, Any, Any], world_size: int,
                                                             factor: float) -> None:
    _, _, allreduce = workers
    assert allreduce.bus_bandwidth(40e9, world_size) == pytest.approx(40e9 * factor, rel=1e-12, abs=0.0)


@pytest.mark.parametrize("world_size", [1, 0, -2])
def test_bus_bandwidth_refuses_fewer_than_two_ranks(workers: tuple[Any, Any, Any], world_size: int) -> None:
    _, _, allreduce = workers
    with pytest.raises(ValueError, match=f"at least 2 ranks, got {world_size}"):
        allreduce.bus_bandwidth(40e9, world_size)


# --------------------------------------------------------------------------- gemm: Freivalds on the host


@pytest.fixture(scope="module")
def torch() -> Any:
    return pytest.importorskip("torch")


def test_host_product_in_blocks_is_the_float64_product_and_row_norm(workers: tuple[Any, Any, Any], torch: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _, gemm, _ = workers
    monkeypatch.setattr(gemm, "_HOST_BLOCK_ROWS", 2)
    generator = torch.Generator().manual_seed(7)
    matrix = torch.randn(5, 4, generator=generator, dtype=torch.float32)
    vectors = torch.randn(4, 2, generator=generator, dtype=torch.float64)
    product, norm = gemm._host_product(torch, matrix, vectors)
    assert product.dtype == norm.dtype == torch.float64
    assert torch.allclose(product, matrix.double() @ vectors, rtol=1e-12, atol=1e-12)
    assert torch.allclose(norm, ((matrix.double() ** 2) @ (vectors ** 2)).sqrt(), rtol=1e-12, atol=1e-12)


def test_check_product_ratio_is_against_the_row_tolerance(workers: tuple[Any, Any, Any], torch: Any) -> None:
    _, gemm, _ = workers
    torch.manual_seed(3)
    a = torch.randn(64, 48, dtype=torch.float32)
    b = torch.randn(48, 32, dtype=torch.float32)
    c = a @ b
    correct, worst = gemm.check_product(torch, a, b, c, "fp32")
    assert correct is True
    assert 0.0 <= worst < 0.5
    c[5, 7] += 1.0  # far beyond fp32 rounding of a 48-term row
    wrong, ratio = gemm.check_product(torch, a, b, c, "fp32")
    assert wrong is False
    assert ratio > 100.0
    c[5, 7] = float("inf")
    assert gemm.check_product(torch, a, b, c, "fp32") == (False, math.inf)


def test_check_product_uses_the_vectors_it_is_given(workers: tuple[Any, Any, Any], torch: Any) -> None:
    """Zero test vectors see no error at all: proof that the given vectors, not random ones, were used."""
    _, gemm, _ = workers
    torch.manual_seed(11)
    a, b = torch.randn(8, 6, dtype=torch.float64), torch.randn(6, 4, dtype=torch.float64)
    c = a @ b
    c[2, 3] += 5.0
    assert gemm.check_product(torch, a, b, c, "fp32", vectors=torch.zeros(4, 2, dtype=torch.float64)) == (True, 0.0)
    assert gemm.check_product(torch, a, b, c, "fp32")[0] is False


def test_a_zeroed_row_of_the_product_is_wrong(workers: tuple[Any, Any, Any], torch: Any) -> None:
    """A row of C that came back all zero has no scale of its own: only the tiny floor stands for it."""
    _, gemm, _ = workers
    torch.manual_seed(12)
    a, b = torch.randn(8, 6, dtype=torch.float64), torch.randn(6, 4, dtype=torch.float64)
    c = a @ b
    c[3] = 0.0
    correct, worst = gemm.check_product(torch, a, b, c, "fp32")
    assert correct is False and worst > 1e20


@pytest.mark.parametrize(("multiple", "correct"), [(0.5, True), (0.9, True), (1.2, False), (1.5, False)])
def test_an_error_is_judged_against_exactly_one_row_tolerance(workers: tuple[Any, Any, Any], torch: Any,
                                                              multiple: float, correct: bool) -> None:
    _, gemm, _ = workers
    a = torch.arange(1, 49, dtype=torch.float64).reshape(6, 8) % 7 - 3
    b = torch.arange(1, 41, dtype=torch.float64).reshape(8, 5) % 5 - 2
    c = a @ b
    ones = torch.ones(5, 2, dtype=torch.float64)
    row_scale = float(c[4].pow(2).sum().sqrt())
    c[4, 2] += multiple * gemm.row_tolerance_factor("fp32", 8) * row_scale
    judged, worst = gemm.check_product(torch, a, b, c, "fp32", vectors=ones)
    assert judged is correct
    assert worst == pytest.approx(multiple, rel=1e-3)


def test_corrupt_one_element_flips_and_pushes_one_element(workers: tuple[Any, Any, Any], torch: Any) -> None:
    _, gemm, _ = workers
    torch.manual_seed(5)
    c = torch.full((16, 16), 2.0, dtype=torch.float64)
    before = c.clone()
    gemm.corrupt_one_element(torch, c)
    changed = (c != before).nonzero()
    assert len(changed) == 1
    row, col = changed[0].tolist()
    assert c[row, col].item() == pytest.approx(-2.0 - 8.0 * math.sqrt(16))
    negative = torch.full((9, 9), -1.0, dtype=torch.float64)
    gemm.corrupt_one_element(torch, negative)
    assert sorted(set(negative.flatten().tolist())) == [-1.0, pytest.approx(1.0 + 8.0 * 3.0)]


def test_stall_hook_rank_defaults_to_zero(workers: tuple[Any, Any, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    common, _, _ = workers

    def sleep(seconds: float) -> None:
        raise InterruptedError

    monkeypatch.setattr(common.time, "sleep", sleep)
    monkeypatch.setenv(common.STALL_ENV, "exec:0")
    with pytest.raises(InterruptedError):
        common.stall_if_requested("exec")
    with pytest.raises(InterruptedError):
        common.stall_if_requested("exec", 0)
    common.stall_if_requested("exec", 1)


# --------------------------------------------------------------------------- membw, p2p, sustained GEMM: host maths


@pytest.fixture(scope="module")
def copy_workers() -> Iterator[tuple[Any, Any, Any]]:
    sys.path.insert(0, str(PROBES_DIR))
    try:
        from collectors.probes import membw, p2p, sustained_gemm
    finally:
        sys.path.remove(str(PROBES_DIR))
    yield membw, p2p, sustained_gemm


def test_p2p_measures_every_ordered_pair_once(copy_workers: tuple[Any, Any, Any]) -> None:
    _, p2p, _ = copy_workers
    assert p2p.ordered_pairs([0, 1, 2]) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    assert p2p.ordered_pairs([4]) == []


def test_membw_corruption_flips_every_bit_of_the_middle_element(copy_workers: tuple[Any, Any, Any],
                                                                 torch: Any) -> None:
    membw, _, _ = copy_workers
    buffer = torch.tensor([5, 6, 7, 8, 9], dtype=torch.int32)
    before = buffer.clone()
    membw.corrupt_one_element(buffer)
    assert buffer.tolist() == [5, 6, ~7, 8, 9]
    assert membw.copies_match(torch, buffer, before) is False
    assert membw.copies_match(torch, before.clone(), before) is True


def test_membw_buffer_is_random_int32_of_the_size_asked(copy_workers: tuple[Any, Any, Any], torch: Any) -> None:
    membw, _, _ = copy_workers
    torch.manual_seed(4)
    buffer = membw.random_buffer(torch, 4096, "cpu")
    assert (buffer.dtype, buffer.numel()) == (torch.int32, 4096)
    assert int(buffer.min()) < -(2**30) and int(buffer.max()) > 2**30  # spans the whole int32 range
    assert membw.random_buffer(torch, 8, "meta").device.type == "meta"  # made on the device asked for


@pytest.mark.parametrize(("per_product_s", "window_s", "chunk"), [
    (0.001, 60.0, 50),     # 50 ms of work
    (0.001, 0.1, 25),      # a quarter of a short window
    (0.2, 60.0, 1),        # one product is already longer than a chunk
    (0.0, 60.0, 50_000_000),  # an instant product: bounded by the 1 ns floor
])
def test_sustained_gemm_chunk_is_about_fifty_ms_of_work(copy_workers: tuple[Any, Any, Any],
                                                        monkeypatch: pytest.MonkeyPatch, per_product_s: float,
                                                        window_s: float, chunk: int) -> None:
    _, _, sustained = copy_workers
    seen: list[Any] = []

    def best_of(backend: Any, run_once: Any, counts: Any) -> tuple[float, list[float]]:
        assert backend is the_backend and run_once == operands.product
        seen.append((counts.warmup, counts.warmup_seconds, counts.iterations, counts.repeats))
        return per_product_s * counts.iterations, [per_product_s * counts.iterations]

    class Operands:
        def product(self) -> None:
            raise AssertionError("timed through best_of only")

    the_backend, operands = object(), Operands()
    monkeypatch.setattr(sustained.common, "best_of", best_of)
    assert sustained.chunk_size(the_backend, operands, window_s) == chunk
    assert seen == [(0, 0.0, 2, 1)]
