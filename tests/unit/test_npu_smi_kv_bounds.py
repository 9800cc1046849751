"""``npu-smi info -t <type>`` parsers against broken or hostile output: ranges, sentinels, caps.

Each impossible value must be dropped (no sample) and reported with its line in the
record's ``rejected``; the sentinels npu-smi really prints (``NA``, ``-``, ``Failed``;
see the corpus and FORMATS.md) must be absent without being reported.
"""

from __future__ import annotations

import pytest

from collectors import (
    npu_smi_board,
    npu_smi_common,
    npu_smi_ecc,
    npu_smi_hccs,
    npu_smi_hccs_bw,
    npu_smi_health,
    npu_smi_memory,
    npu_smi_power,
    npu_smi_temp,
    npu_smi_usages,
)
from collectors.base import ChipRef, CollectContext
from collectors.bounds import LIMITS
from collectors.npu_smi_kv import parse_blocks

CHIP = ChipRef(0, 0)
CTX = CollectContext()


def _kv(*pairs: tuple[str, str]) -> str:
    return "".join(f"\t{key:<40} : {value}\n" for key, value in pairs)


# --- ECC: "-1 means absent" and the other non-counts ----------------------------------------------

_ECC_OK = [
    ("HBM Single Bit Error Count", "0"), ("HBM Double Bit Error Count", "0"),
    ("HBM Single Bit Aggregate Total Err Cnt", "3"), ("HBM Double Bit Aggregate Total Err Cnt", "0"),
    ("HBM Single Bit Isolated Pages Count", "0"), ("HBM Double Bit Isolated Pages Count", "0"),
]


@pytest.mark.parametrize("printed", ["-1", "-7", "1.5", "1e30"])
def test_ecc_a_count_that_is_not_a_count_is_absent_and_reported(printed: str) -> None:
    text = _kv(*_ECC_OK[:2], ("HBM Single Bit Aggregate Total Err Cnt", printed), *_ECC_OK[3:])
    record = npu_smi_ecc.parse(text)
    assert record.hbm.single_bit_total_errors is None
    assert record.hbm.double_bit_total_errors == 0.0  # the other counters stay
    metrics = {(s.metric, dict(s.labels)["bit"]) for s in npu_smi_ecc.samples(record, CHIP, CTX)}
    assert ("npu_hbm_ecc_errors_total", "single") not in metrics  # no -1 sentinel exported
    assert ("npu_hbm_ecc_errors_total", "double") in metrics
    assert [r.line_no for r in record.rejected] == [3]
    assert printed in record.rejected[0].line


def test_ecc_na_is_absent_and_not_reported() -> None:
    text = _kv(*_ECC_OK[:2], ("HBM Single Bit Aggregate Total Err Cnt", "NA"), *_ECC_OK[3:])
    record = npu_smi_ecc.parse(text)
    assert record.hbm.single_bit_total_errors is None and record.rejected == ()


def test_ecc_the_largest_u32_is_a_count_not_a_sentinel() -> None:
    # npu-smi prints ECC counters with %u; no capture or source shows 0xffffffff as "not available".
    record = npu_smi_ecc.parse(_kv(("HBM Single Bit Error Count", "4294967295")))
    assert record.hbm.single_bit_errors == 4294967295.0 and record.rejected == ()


# --- real sentinels are absent, silently ----------------------------------------------------------


def test_temperature_failed_and_na_are_absent_without_a_rejection() -> None:
    text = _kv(("NPU Temperature (C)", "Failed"), ("SFP Temperature (C)", "NA"), ("HBM Temperature (C)", "-"))
    record = npu_smi_temp.parse(text)
    assert record.temperature_celsius is None
    assert [value for _, value in record.chip_sensors_celsius] == [None, None, None]
    assert record.rejected == ()


@pytest.mark.parametrize(("printed", "reason"), [
    ("65535", "65535 outside -40..150 C"),
    ("-273", "-273 outside"),
    ("0xffff", "'0xffff' is not a number"),
    ("hot", "'hot' is not a number"),
])
def test_temperature_sentinel_like_or_impossible_readings_are_rejected(printed: str, reason: str) -> None:
    record = npu_smi_temp.parse(_kv(("NPU Temperature (C)", "41"), ("LM75A_TE (C)", printed)))
    assert record.temperature_celsius == 41
    assert record.chip_sensors_celsius == (("NPU Temperature (C)", 41.0), ("LM75A_TE (C)", None))
    assert len(record.rejected) == 1 and reason in record.rejected[0].reason
    assert record.rejected[0].line_no == 2


# --- ranges, parser by parser ---------------------------------------------------------------------


def test_usages_out_of_range_rates_and_capacities_are_rejected() -> None:
    text = _kv(("HBM Capacity(MB)", "2097152"), ("HBM Usage Rate(%)", "4"), ("Aicore Usage Rate(%)", "250"),
               ("Aicpu Usage Rate(%)", "-1"), ("HBM Bandwidth Usage Rate(%)", "41"), ("Chip ID", "0"))
    record = npu_smi_usages.parse(text)
    assert (record.hbm_capacity_bytes, record.aicore_usage_ratio, record.aicpu_usage_ratio) == (None, None, None)
    assert (record.hbm_usage_ratio, record.hbm_bandwidth_usage_ratio) == (0.04, 0.41)
    assert [r.line_no for r in record.rejected] == [1, 3, 4]
    assert "HBM Capacity(MB) 2.19902e+12 outside 0..1.09951e+12 B" in record.rejected[0].reason
    names = {s.metric for s in npu_smi_usages.samples(record, CHIP, CTX)}
    assert names == {"npu_hbm_bandwidth_utilization_ratio"}


def test_common_frequencies_temperature_and_power_are_range_checked() -> None:
    text = _kv(("Aicore Freq(MHZ)", "1800"), ("Aicore curFreq(MHZ)", "20000"), ("Aicore Count", "99999"),
               ("Temperature(C)", "46"), ("NPU Real-time Power(W)", "-93.4"), ("Chip ID", "0"), ("", ""),
               ("Chip Name", "mcu"), ("Temperature(C)", "999"))
    text = text.replace("\t                                         : \n", "\n")
    record = npu_smi_common.parse(text)
    assert record.aicore_max_frequency_hertz == 1.8e9 and record.aicore_frequency_hertz is None
    assert record.aicore_count is None and record.power_watts is None
    assert record.temperature_celsius == 46 and record.mcu_temperature_celsius is None
    assert len(record.rejected) == 4
    out = npu_smi_common.samples(record, CHIP, CTX)
    assert [s.metric for s in out] == ["npu_aicore_max_frequency_hertz"]


@pytest.mark.parametrize("printed", ["-5", "4294967295", "2000.1"])
def test_power_out_of_range_is_rejected(printed: str) -> None:
    record = npu_smi_power.parse(_kv(("NPU ID", "0"), ("NPU Real-time Power(W)", printed)))
    assert record.power_watts is None
    assert [r.line_no for r in record.rejected] == [2]


def test_memory_hbm_temperature_out_of_range_exports_nothing() -> None:
    text = _kv(("HBM Capacity(MB)", "65536"), ("HBM Clock Speed(MHz)", "32000000"), ("HBM Temperature(C)", "200"),
               ("HBM Manufacturer ID", "0x5A\u00e9"))
    record = npu_smi_memory.parse(text)
    assert record.hbm_capacity_bytes == 65536 * (1 << 20)
    assert (record.hbm_clock_hertz, record.hbm_temperature_celsius, record.hbm_manufacturer_id) == (None, None, None)
    assert [r.line_no for r in record.rejected] == [4, 2, 3]
    assert npu_smi_memory.samples(record, CHIP, CTX) == []


def test_board_values_that_would_be_labels_must_be_printable_ascii() -> None:
    text = _kv(("NPU ID", "0"), ("Serial Number", "1025C90\u00e48791"), ("Software Version", "25.5.1"),
               ("Firmware Version", "7" * 65), ("Chip Count", "4096"))
    record = npu_smi_board.parse(text)
    assert (record.serial_number, record.firmware_version, record.chip_count) == (None, None, None)
    assert record.software_version == "25.5.1"
    assert npu_smi_board.inventory_labels(record) == {"firmware": "", "driver": "25.5.1", "serial": ""}
    assert sorted(r.line_no or 0 for r in record.rejected) == [2, 4, 5]


def test_health_keeps_at_most_64_error_codes() -> None:
    codes = " ".join(f"{n:08X}" for n in range(100))
    record = npu_smi_health.parse(_kv(("Health Status", "Alarm"), ("Error Code", codes)))
    assert len(record.error_codes) == LIMITS["error_codes"] == 64
    assert record.error_codes[0] == "00000000"
    assert "100 error codes, more than 64" in record.rejected[0].reason
    out = npu_smi_health.samples(record, CHIP, CTX)
    assert len([s for s in out if s.metric == "npu_error_code_active"]) == 64
    assert [s.metric for s in out].count("npu_fault_handling") == 1  # the chip's one level, on top


def test_health_error_codes_from_continuation_lines_are_capped_too() -> None:
    text = _kv(("Health Status", "Alarm"), ("Error Code", "A4025021")) + "".join(
        f"\t{'':<30} : {n:08X}\n" for n in range(5000))
    record = npu_smi_health.parse(text)
    assert len(record.error_codes) == 64


def test_hccs_elements_must_be_counts_in_range_and_arrays_are_capped() -> None:
    text = _kv(("hccs health status", "OK"), ("hccs lane mode", "[4 99 4]"),
               ("hccs error count", "[0 -3 2.5 NA 7]"), ("hccs retry count", "[" + "0 " * 65 + "]"))
    record = npu_smi_hccs.parse(text)
    assert record.lane_modes == (4.0, None, 4.0)
    assert record.error_counts == (0.0, None, None, None, 7.0)
    assert record.retry_counts == ()
    reasons = [r.reason for r in record.rejected]
    assert reasons == ["'99' is not an integer in 0..64", "65 ports, more than 64",
                       "'-3' is not an integer in 0..1.84467e+19", "'2.5' is not an integer in 0..1.84467e+19"]
    out = npu_smi_hccs.samples(record, CHIP, CTX)
    assert {dict(s.labels).get("link") for s in out if s.metric == "npu_hccs_errors_total"} == {"0", "4"}
    assert not any(s.metric == "npu_hccs_retries_total" for s in out)


def test_hccs_bw_rates_duplicates_and_link_cap() -> None:
    header = "hccs link                      tx_bandwidth(GB/S)             rx_bandwidth(GB/S)\n"
    rows = "".join(f"{n:<35d} {1.5:<30.6f} {2.0:<30.6f}\n" for n in range(70))
    text = header + "0   3.0   4.0\n" + "1   -2.0   99999999.0\n" + rows
    record = npu_smi_hccs_bw.parse(text)
    assert len(record.links) == 64
    assert (record.links[0].tx_bytes_per_second, record.links[0].rx_bytes_per_second) == (3e9, 4e9)
    assert (record.links[1].tx_bytes_per_second, record.links[1].rx_bytes_per_second) == (None, None)
    reasons = [r.reason for r in record.rejected]
    assert reasons[:2] == ["bandwidth -2e+09 outside 0..1e+13 B/s", "bandwidth 1e+17 outside 0..1e+13 B/s"]
    assert reasons[2:4] == [f"link {n} printed twice; the first row is kept" for n in (0, 1)]
    assert reasons[-1] == "more than 64 links"
    out = npu_smi_hccs_bw.samples(record, CHIP, CTX)
    keys = [(s.metric, s.labels) for s in out]
    assert len(keys) == len(set(keys))  # no duplicate series


# --- line-level checks shared by every -t parser ---------------------------------------------------


def test_lines_with_control_characters_or_over_long_are_skipped_and_reported() -> None:
    from collectors.bounds import Rejects

    rejects = Rejects()
    text = _kv(("HBM Capacity(MB)", "65536"), ("Chip Name", "910B\x1b[2J"), ("Error Information", "x" * 2000))
    (block,) = parse_blocks(text, rejects)
    assert block.pairs == (("HBM Capacity(MB)", "65536"),)
    assert [(r.line_no, r.reason) for r in rejects.freeze()] == [
        (2, "control characters in a key : value line"), (3, "line longer than 1024 characters")]


def test_every_rejection_names_a_clipped_line() -> None:
    record = npu_smi_usages.parse(_kv(("HBM Capacity(MB)", "9" * 300), ("Chip ID", "0")))
    assert record.hbm_capacity_bytes is None
    assert record.rejected[0].line_no == 1 and len(record.rejected[0].line) == 80
