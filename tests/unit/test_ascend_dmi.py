"""ascend-dmi parsers and sources (synthetic fixtures under tests/fixtures/ascend_dmi/)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors import ascend_dmi
from collectors.ascend_dmi import BandwidthResult, FlopsResult
from collectors.base import CollectContext, ParseError, ToolError
from collectors.catalogue import CATALOGUE
from tests.support import paths

FIXTURES = paths.FIXTURES / "ascend_dmi"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_flops_table_two_devices_with_na_power() -> None:
    results = ascend_dmi.parse_flops(fixture("flops_fp16_two_devices.txt"))
    assert results == [
        FlopsResult(device=0, dtype="fp16", flops=pytest.approx(302.371e12), power_watts=pytest.approx(361.2),
                    execute_times=1_200_000_000, duration_seconds=pytest.approx(15.873)),
        FlopsResult(device=1, dtype="fp16", flops=pytest.approx(299.937e12), power_watts=None,
                    execute_times=1_200_000_000, duration_seconds=pytest.approx(16.002)),
    ]


def test_flops_with_prompt_echo_and_giga_prefix() -> None:
    (result,) = ascend_dmi.parse_flops(fixture("flops_int8_prompt.txt"))
    assert result.device == 2
    assert result.dtype == "int8"
    assert result.flops == pytest.approx(950.5e9)
    assert result.execute_times == 10_000


def test_flops_json_matches_the_text_table() -> None:
    from_json = ascend_dmi.parse_flops(fixture("flops.json"))
    from_text = ascend_dmi.parse_flops(fixture("flops_fp16_two_devices.txt"))
    assert [(r.device, r.dtype, r.flops) for r in from_json] == [
        (r.device, r.dtype, pytest.approx(r.flops)) for r in from_text]
    assert from_json[0].power_watts == 361.2
    assert from_json[1].power_watts is None


def test_bandwidth_table_keeps_best_size_per_path() -> None:
    results = ascend_dmi.parse_bandwidth(fixture("bw_table.txt"))
    by_path = {r.path: r for r in results}
    assert sorted(by_path) == ["d2d", "d2h", "h2d"]
    assert by_path["h2d"].bytes_per_second == pytest.approx(24.51e9)
    assert by_path["h2d"].size_bytes == 536870912
    assert by_path["d2d"].bytes_per_second == pytest.approx(1402.7e9)


def test_bandwidth_path_from_section_title_and_binary_units() -> None:
    results = ascend_dmi.parse_bandwidth(fixture("bw_sections.txt"))
    assert {(r.device, r.path) for r in results} == {(0, "p2p"), (1, "p2p")}
    zero = next(r for r in results if r.device == 0)
    assert zero.bytes_per_second == pytest.approx(30720.0 * 2**20)


def test_bandwidth_json() -> None:
    results = ascend_dmi.parse_bandwidth(fixture("bw.json"))
    assert results == [
        BandwidthResult(device=3, path="h2d", bytes_per_second=pytest.approx(24.51e9)),
        BandwidthResult(device=3, path="d2h", bytes_per_second=pytest.approx(23.88e9)),
    ]


def test_json_nested_device_is_inherited_and_unit_in_value() -> None:
    text = json.dumps({"card_id": 4, "chips": [{"type": "int8", "result": "120.5 TOPS"}]})
    flops, bandwidth = ascend_dmi.parse_json(text)
    assert flops == [FlopsResult(device=4, dtype="int8", flops=pytest.approx(120.5e12))]
    assert bandwidth == []


@pytest.mark.parametrize("text", ["{", "[]", '{"device": 0}', '{"dtype": "fp16", "tflops": 3}'])
def test_json_without_results_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        ascend_dmi.parse_json(text)


def test_samples_use_catalogue_labels_and_dedupe() -> None:
    records = [
        FlopsResult(device=0, dtype="fp16", flops=1e12),
        FlopsResult(device=0, dtype="fp16", flops=2e12),  # a later run wins
        BandwidthResult(device=1, path="h2d", bytes_per_second=3e9),
    ]
    out = ascend_dmi.samples(records, None, CollectContext())
    for sample in out:
        assert tuple(name for name, _ in sample.labels) == CATALOGUE[sample.metric].labels
    assert {(s.metric, s.labels): s.value for s in out} == {
        ("npu_dmi_flops", (("npu", "0"), ("dtype", "fp16"))): 2e12,
        ("npu_dmi_bandwidth_bytes_per_second", (("npu", "1"), ("path", "h2d"))): 3e9,
    }


def test_sources_are_opt_in_node_scope() -> None:
    flops, bw = ascend_dmi.SOURCES
    assert (flops.name, bw.name) == ("ascend_dmi_flops", "ascend_dmi_bw")
    for source in ascend_dmi.SOURCES:
        assert source.tool == "ascend-dmi"
        assert source.group == "dmi"
        assert source.scope == "node"
        assert source.default_enabled is False
    assert flops.argv(None) == ["-f", "-t", "fp16", "-q"]
    assert bw.argv(None) == ["--bw", "-q"]
    assert ascend_dmi.flops_source("int8").argv(None) == ["-f", "-t", "int8", "-q"]
    records = flops.parse(fixture("flops_fp16_two_devices.txt"))
    assert len(flops.samples(records, None, CollectContext())) == 2


def test_supports_json_from_help() -> None:
    assert ascend_dmi.supports_json(fixture("help_json.txt")) is True
    assert ascend_dmi.supports_json(fixture("help_plain.txt")) is False
    assert ascend_dmi.supports_json("--format <normal>") is False


@pytest.mark.parametrize("parse", [ascend_dmi.parse_flops, ascend_dmi.parse_bandwidth])
def test_errors(parse: object) -> None:
    with pytest.raises(ToolError, match="printed nothing"):
        parse("")  # type: ignore[operator]
    with pytest.raises(ToolError):
        parse(fixture("error_device.txt"))  # type: ignore[operator]
    with pytest.raises(ParseError) as info:
        parse("hello\nworld\n")  # type: ignore[operator]
    assert not isinstance(info.value, ToolError)


def test_table_without_rows_or_with_bad_rows() -> None:
    header = "Device  Execute Times  Duration(ms)  TFLOPS@FP16  Power(W)\n"
    with pytest.raises(ParseError, match="no device rows"):
        ascend_dmi.parse_flops(header)
    with pytest.raises(ParseError, match="columns") as info:
        ascend_dmi.parse_flops(header + "0  1  2\n")
    assert info.value.line_no == 2
    with pytest.raises(ParseError, match="not a number"):
        ascend_dmi.parse_flops(header + "0  10  20  fast  5\n")
    with pytest.raises(ParseError, match="transfer path"):
        ascend_dmi.parse_bandwidth("Device  Size(Bytes)  Bandwidth(GB/s)\n0  1024  3.5\n")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_text_parses_or_raises_parse_error(text: str) -> None:
    for parse in (ascend_dmi.parse_flops, ascend_dmi.parse_bandwidth):
        try:
            results = parse(text)
        except ParseError:
            continue
        _assert_plausible(results)
        assert len(results) <= len(text.splitlines())  # a result per device row, never more


def _assert_plausible(results: list[Any]) -> None:
    """Every result a parse returns is a measurement: a finite rate >= 0 of a device id >= 0, a known path."""
    for result in results:
        assert result.device >= 0
        if isinstance(result, FlopsResult):
            assert math.isfinite(result.flops) and result.flops >= 0, result
            assert result.dtype == result.dtype.lower()
        else:
            assert math.isfinite(result.bytes_per_second) and result.bytes_per_second >= 0, result
            assert result.path in ("h2d", "d2h", "d2d", "p2p"), result


@settings(max_examples=150, deadline=None)
@given(st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=True)
    | st.sampled_from(["fp16", "h2d", "3 TFLOPS", "1,000 GB/s", "NA", "12"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(
            ["device", "device_id", "dtype", "type", "tflops", "path", "bandwidth", "power", "x"]),
        children, max_size=5),
    max_leaves=20,
))
def test_any_json_parses_or_raises_parse_error(document: object) -> None:
    try:
        flops, bandwidth = ascend_dmi.parse_json(json.dumps(document))
    except ParseError:
        return
    _assert_plausible([*flops, *bandwidth])


def test_non_finite_rates_are_rejected() -> None:
    header = "Device  Execute Times  Duration(ms)  PFLOPS@FP16  Power(W)\n"
    with pytest.raises(ParseError, match="not a number"):
        ascend_dmi.parse_flops(header + "0  1  2  " + "9" * 305 + "  5\n")
    with pytest.raises(ParseError):
        ascend_dmi.parse_json('[{"device": 0, "dtype": "fp16", "tflops": NaN}]')
    with pytest.raises(ParseError):  # a negative rate is no measurement (found by the property test below)
        ascend_dmi.parse_json('[{"device": 0, "dtype": "fp16", "tflops": -3}]')
    with pytest.raises(ParseError):
        ascend_dmi.parse_json('[{"device": 0, "path": "h2d", "bandwidth": "-1 GB/s"}]')
