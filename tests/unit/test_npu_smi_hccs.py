"""``npu-smi info -t hccs`` and ``-t hccs-bw``: golden records and samples."""

from __future__ import annotations

import pytest

from collectors.base import ChipRef, CollectContext, ParseError, ToolError
from collectors.npu_smi_hccs import HccsRecord, parse, parse_array, samples
from collectors.npu_smi_hccs_bw import HccsBandwidthRecord, LinkBandwidth
from collectors.npu_smi_hccs_bw import parse as parse_bw
from collectors.npu_smi_hccs_bw import samples as bw_samples
from tests.support import paths

FIXTURES = paths.FIXTURES / "npu_smi_kv"
CHIP = ChipRef(0, 1)


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_parse_array() -> None:
    assert parse_array("[0            17           3]") == (0.0, 17.0, 3.0)
    assert parse_array("[4                    4                    ]") == (4.0, 4.0)
    assert parse_array("[1  NA  -2]") == (1.0, None, None)
    assert parse_array("5") == (5.0,)
    assert parse_array(None) == parse_array("[]") == ()


def test_hccs_golden_full_nok() -> None:
    assert parse(read("hccs_nok_full.txt")) == HccsRecord(
        health="NOK",
        lane_modes=(4.0, 4.0, 0.0),
        link_speeds_gbps=(224.0, 224.0, 0.0),
        tx_packets=(100.0, 200.0, 0.0),
        tx_bytes=(2000.0, 4000.0, 0.0),
        rx_packets=(110.0, None, 0.0),
        rx_bytes=(2200.0, None, 0.0),
        retry_counts=(0.0, 17.0, 0.0),
        error_counts=(0.0, 3.0, 0.0),
    )


def test_hccs_samples_health_and_per_link_counters() -> None:
    out = samples([parse(read("hccs_nok_full.txt"))], CHIP, CollectContext())
    got = {(s.metric, dict(s.labels).get("link")): s.value for s in out}
    assert got == {
        ("npu_hccs_healthy", None): 0.0,
        ("npu_hccs_errors_total", "0"): 0.0, ("npu_hccs_errors_total", "1"): 3.0,
        ("npu_hccs_errors_total", "2"): 0.0,
        ("npu_hccs_retries_total", "0"): 0.0, ("npu_hccs_retries_total", "1"): 17.0,
        ("npu_hccs_retries_total", "2"): 0.0,
    }
    assert [s.labels for s in out if s.metric == "npu_hccs_errors_total"][1] == (
        ("npu", "0"), ("chip", "1"), ("link", "1"))


def test_hccs_ok_and_xlink_variant() -> None:
    record = parse("\txlink health status             : OK\n\txlink error count : [0 1]\n")
    assert record.healthy is True and record.error_counts == (0.0, 1.0)
    out = samples(record, CHIP, CollectContext())
    assert [s.value for s in out if s.metric == "npu_hccs_healthy"] == [1.0]


def test_hccs_bw_golden_source_format() -> None:
    g = 1e9
    assert parse_bw(read("hccs_bw_three_links.txt")) == HccsBandwidthRecord(
        links=(LinkBandwidth(0, 12.5 * g, 0.25 * g), LinkBandwidth(1, 3.0 * g, 4.125 * g),
               LinkBandwidth(2, 0.0, 0.0)),
        total_tx_bytes_per_second=15.5 * g, total_rx_bytes_per_second=4.375 * g,
    )


def test_hccs_bw_column_order_comes_from_the_header() -> None:
    record = parse_bw(read("hccs_bw_xlink_rx_first.txt"))
    assert record.links == (LinkBandwidth(0, tx_bytes_per_second=2.5e9, rx_bytes_per_second=1.5e9),)


def test_hccs_bw_samples_per_link_and_direction_without_total() -> None:
    out = bw_samples([parse_bw(read("hccs_bw_three_links.txt"))], CHIP, CollectContext())
    assert len(out) == 6
    assert {s.metric for s in out} == {"npu_hccs_bandwidth_bytes_per_second"}
    assert out[0].labels == (("npu", "0"), ("chip", "1"), ("link", "0"), ("direction", "tx"))
    assert out[0].value == 12.5e9 and out[1].value == 0.25e9
    assert "total" not in {dict(s.labels)["link"] for s in out}


def test_hccs_bw_errors() -> None:
    with pytest.raises(ToolError):
        parse_bw(read("error_invalid_card_id.txt"))
    with pytest.raises(ParseError, match="header"):
        parse_bw("0  1.0  2.0\ntotal 1.0 2.0\n")
    with pytest.raises(ParseError, match="rows"):
        parse_bw("hccs link  tx_bandwidth(GB/S)  rx_bandwidth(GB/S)\n")
    na = parse_bw("hccs link tx_bandwidth(GB/S) rx_bandwidth(GB/S)\n0 NA -1.0\n")
    assert na.links == (LinkBandwidth(0, None, None),)
    assert bw_samples(na, CHIP, CollectContext()) == []
