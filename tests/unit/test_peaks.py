"""``agent.probes.peaks``: lookup order and matching rules, each with a case that fails when changed."""

from __future__ import annotations

import pytest

from agent.probes.peaks import (
    BUILTIN_BANDWIDTHS,
    BUILTIN_PEAKS,
    Bandwidth,
    Peak,
    lookup_bandwidth,
    lookup_peak,
    normalise_model,
)

T = 1e12


def test_only_measured_peaks_gate() -> None:
    assert Peak(1.0, "measured", "x").gates is True
    assert Peak(1.0, "datasheet", "x").gates is False


@pytest.mark.parametrize(("raw", "normal"), [
    ("Ascend910B3", "910B3"), ("ascend 910b3", "910B3"), ("NVIDIA H100-PCIe", "H100PCIE"),
    ("nvidia_a100\t80gb", "A10080GB"), ("", ""),
])
def test_normalise_model(raw: str, normal: str) -> None:
    assert normalise_model(raw) == normal


def test_exact_match_wins_over_a_contained_key() -> None:
    assert lookup_peak("NVIDIA H100 PCIe", "fp16") == BUILTIN_PEAKS["H100PCIE"]["fp16"]
    assert lookup_peak("H100", "fp16") == BUILTIN_PEAKS["H100"]["fp16"]


def test_the_longest_contained_key_wins() -> None:
    assert lookup_peak("NVIDIA H100 PCIe 80GB", "bf16") == BUILTIN_PEAKS["H100PCIE"]["bf16"]
    assert lookup_peak("NVIDIA H100 80GB HBM3", "bf16") == BUILTIN_PEAKS["H100"]["bf16"]


def test_no_model_no_peak_and_unknown_dtype_none() -> None:
    assert lookup_peak(None, "fp16") is None
    assert lookup_peak("", "fp16") is None
    assert lookup_peak("910B3", "fp8") is None
    assert lookup_peak("Quadro", "fp16") is None


def test_override_wins_and_counts_as_measured() -> None:
    overrides = {"ascend 910b3": {"fp16": 300e12}, "Z1": {"fp32": 5}}
    peak = lookup_peak("910B3", "fp16", overrides)
    assert peak == Peak(300e12, "measured", "config")
    assert lookup_peak("Z1 card", "fp32", overrides) == Peak(5.0, "measured", "config")
    assert isinstance(lookup_peak("Z1", "fp32", overrides).flops, float)  # type: ignore[union-attr]


def test_an_override_without_the_dtype_falls_back_to_the_builtin_table() -> None:
    overrides = {"910B3": {"fp32": 50e12}}
    assert lookup_peak("910B3", "fp16", overrides) == BUILTIN_PEAKS["910B3"]["fp16"]
    assert lookup_peak("910B3", "fp32", overrides) == Peak(50e12, "measured", "config")


def test_an_empty_table_key_is_never_contained() -> None:
    overrides = {"": {"fp16": 1.0}, "---": {"fp16": 2.0}}
    assert lookup_peak("910B3", "fp16", overrides) == BUILTIN_PEAKS["910B3"]["fp16"]


def test_longest_contained_key_not_the_alphabetically_last() -> None:
    overrides = {"Z9": {"fp16": 1.0}, "AB12": {"fp16": 2.0}}
    assert lookup_peak("card AB12 Z9", "fp16", overrides) == Peak(2.0, "measured", "config")


# --------------------------------------------------------------------------- bandwidth figures


def test_bandwidth_without_a_model_is_unknown() -> None:
    assert lookup_bandwidth(None, "membw") is None
    assert lookup_bandwidth("", "membw", {"": {"membw": 1.0}}) is None


def test_builtin_bandwidth_by_model_and_kind() -> None:
    assert lookup_bandwidth("Ascend910B3", "p2p") == BUILTIN_BANDWIDTHS["910B3"]["p2p"]
    assert lookup_bandwidth("NVIDIA H200", "membw") == BUILTIN_BANDWIDTHS["H200"]["membw"]
    assert lookup_bandwidth("910B3", "no-such-kind") is None
    assert lookup_bandwidth("Ascend 310P3", "membw") is None  # no figure for this model


def test_a_configured_bandwidth_is_measured_and_wins() -> None:
    figure = lookup_bandwidth("Ascend910B3", "membw", {"910b3": {"membw": 1400e9}})
    assert figure == Bandwidth(1400e9, "measured", "config")
    assert isinstance(figure.bytes_per_second, float) and figure.gates


def test_a_configured_model_without_the_kind_falls_back_to_the_builtin_figure() -> None:
    overrides = {"910B3": {"h2d": 20e9}}
    assert lookup_bandwidth("910B3", "p2p", overrides) == BUILTIN_BANDWIDTHS["910B3"]["p2p"]
    assert lookup_bandwidth("910B3", "h2d", overrides) == Bandwidth(20e9, "measured", "config")


def test_a_configured_figure_for_another_model_is_not_used() -> None:
    assert lookup_bandwidth("910B3", "membw", {"H200": {"membw": 1.0}}) == BUILTIN_BANDWIDTHS["910B3"]["membw"]
    assert lookup_bandwidth("Ascend 310P3", "membw", {"H200": {"membw": 1.0}}) is None


def test_a_configured_figure_reaches_a_model_the_builtin_table_lacks() -> None:
    figure = lookup_bandwidth("Ascend 310P3", "membw", {"310P3": {"membw": 2e11}})
    assert figure == Bandwidth(2e11, "measured", "config")
