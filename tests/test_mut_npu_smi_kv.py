"""What every ``npu-smi info -t <type>`` parser shares, checked for each (bench/mutation.py).

- output without any of its keys is a ParseError naming the output type;
- a hostile line (control characters) next to good keys is reported in ``rejected``;
- with several chip blocks (310P Duo card output) ``chip`` picks the block by ``Chip ID``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
from collectors.base import ChipRef, ParseError, ToolError
from collectors.bounds import LIMITS, Rejects
from collectors.npu_smi_kv import KvBlock, chip_argv, one_record, parse_blocks, require_block


@dataclass(frozen=True)
class Case:
    parse: Callable[..., Any]
    what: str
    key: str  # "Key : {value}"
    read: Callable[[Any], Any]
    values: tuple[str, str]  # printed for chip 0 and chip 1
    expected: tuple[Any, Any]

    def __str__(self) -> str:
        return self.what


CASES = [
    Case(npu_smi_common.parse, "common", "Aicore Count : {}", lambda r: r.aicore_count, ("24", "20"), (24.0, 20.0)),
    Case(npu_smi_usages.parse, "usages", "Aicpu Usage Rate(%) : {}", lambda r: r.aicpu_usage_ratio, ("40", "5"),
         (0.4, 0.05)),
    Case(npu_smi_ecc.parse, "ecc", "HBM Single Bit Error Count : {}", lambda r: r.hbm.single_bit_errors, ("3", "7"),
         (3.0, 7.0)),
    Case(npu_smi_health.parse, "health", "Health Status : {}", lambda r: r.health, ("OK", "Warning"),
         ("OK", "Warning")),
    Case(npu_smi_memory.parse, "memory", "HBM Temperature(C) : {}", lambda r: r.hbm_temperature_celsius,
         ("41", "52"), (41.0, 52.0)),
    Case(npu_smi_board.parse, "board", "Serial Number : {}", lambda r: r.serial_number, ("S0", "S1"), ("S0", "S1")),
    Case(npu_smi_hccs.parse, "hccs", "HCCS Health Status : {}", lambda r: r.health, ("OK", "Error"),
         ("OK", "Error")),
    Case(npu_smi_power.parse, "power", "NPU Real-time Power(W) : {}", lambda r: r.power_watts, ("93.5", "70"),
         (93.5, 70.0)),
    Case(npu_smi_temp.parse, "temperature", "NPU Temperature(C) : {}", lambda r: r.temperature_celsius,
         ("45", "61"), (45.0, 61.0)),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_output_without_its_keys_is_a_parse_error_naming_the_type(case: Case) -> None:
    with pytest.raises(ParseError) as caught:
        case.parse("Unrelated Key : 1\nOther : 2\n")
    assert str(caught.value).startswith(f"no {case.what} keys in npu-smi output")
    assert caught.value.line_no == 1
    assert caught.value.line == "Unrelated Key: 1"


@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_hostile_line_beside_good_keys_is_reported(case: Case) -> None:
    text = case.key.format(case.values[0]) + "\nBad\x1b[2J Key : 1\n"
    record = case.parse(text)
    assert case.read(record) == case.expected[0]
    reasons = [rejection.reason for rejection in record.rejected]
    assert "control characters in a key : value line" in reasons
    assert any(rejection.line_no == 2 for rejection in record.rejected)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_chip_picks_the_block_with_that_chip_id(case: Case) -> None:
    text = "".join(f"{case.key.format(value)}\nChip ID : {chip}\n\n" for chip, value in enumerate(case.values))
    assert case.read(case.parse(text, 1)) == case.expected[1]
    assert case.read(case.parse(text, 0)) == case.expected[0]
    assert case.read(case.parse(text)) == case.expected[0]


# One key per parser that yields a sample, for the samples() mappers.
SAMPLED = [
    (npu_smi_common, "Aicore cur Freq(MHZ) : 1800\n", "npu_aicore_frequency_hertz", 1.8e9),
    (npu_smi_usages, "Aicpu Usage Rate(%) : 40\n", "npu_aicpu_utilization_ratio", 0.4),
    (npu_smi_ecc, "HBM Single Bit Error Count : 3\n", "npu_hbm_ecc_current_errors", 3.0),
    (npu_smi_health, "Health Status : Warning\nError Code : 80E18005\n", "npu_error_code_active", 1.0),
    (npu_smi_memory, "HBM Temperature(C) : 41\n", "npu_hbm_temperature_celsius", 41.0),
    (npu_smi_hccs, "HCCS Health Status : OK\n", "npu_hccs_healthy", 1.0),
]


@pytest.mark.parametrize(("module", "text", "metric", "value"), SAMPLED, ids=lambda p: getattr(p, "__name__", ""))
def test_samples_need_a_chip_and_a_record(module: Any, text: str, metric: str, value: float) -> None:
    record = module.parse(text)
    chip = ChipRef(3, 1)
    found = [s for s in module.samples([record], chip) if s.metric == metric]
    assert found and found[0].value == value
    assert dict(found[0].labels)["npu"] == "3" and dict(found[0].labels)["chip"] == "1"
    assert module.samples([record], None) == []
    assert module.samples([], chip) == []
    assert module.samples(["not a record"], chip) == []


def test_a_fractional_ecc_count_is_rejected_by_name() -> None:
    record = npu_smi_ecc.parse("HBM Single Bit Error Count : 1.5\nHBM Double Bit Error Count : 2\n")
    assert record.hbm.single_bit_errors is None
    assert record.hbm.double_bit_errors == 2.0
    assert [(r.line_no, r.line, r.reason) for r in record.rejected] == [
        (1, "HBM Single Bit Error Count : 1.5", "ECC count is not an integer")]


def test_ecc_keeps_ddr_and_hbm_apart() -> None:
    record = npu_smi_ecc.parse("DDR Single Bit Error Count : 4\nHBM Single Bit Error Count : 6\n")
    assert (record.ddr.single_bit_errors, record.hbm.single_bit_errors) == (4.0, 6.0)


@pytest.mark.parametrize("module", [npu_smi_common, npu_smi_usages, npu_smi_ecc, npu_smi_health, npu_smi_memory,
                                    npu_smi_board, npu_smi_hccs],
                         ids=lambda m: m.__name__)
def test_parse_records_is_a_one_element_list_of_parse(module: Any) -> None:
    case = next(c for c in CASES if c.parse is module.parse)
    text = case.key.format(case.values[0]) + "\n"
    assert module.parse_records(text) == [module.parse(text)]


def test_error_codes_up_to_the_limit_are_all_kept() -> None:
    limit = LIMITS["error_codes"]
    codes = [f"{n:08X}" for n in range(limit + 1)]
    line_at_limit = "Error Code : " + " ".join(codes[:limit])
    kept = npu_smi_health.parse(f"Health Status : Alarm\n{line_at_limit}\n")
    assert kept.error_codes == tuple(codes[:limit])
    assert kept.rejected == ()
    over = npu_smi_health.parse("Health Status : Alarm\nError Code : " + " ".join(codes) + "\n")
    assert over.error_codes == tuple(codes[:limit])
    (rejection,) = over.rejected
    assert rejection.reason == f"{limit + 1} error codes, more than {limit}; the first {limit} are kept"
    assert rejection.line_no == 2


def test_memory_scales_mb_and_mhz_and_keeps_the_manufacturer() -> None:
    record = npu_smi_memory.parse("DDR Capacity(MB) : 2\nDDR Clock Speed(MHz) : 3\nHBM Capacity(MB) : 4\n"
                                  "HBM Clock Speed(MHz) : 5\nHBM Manufacturer ID : 0x1\n")
    assert (record.ddr_capacity_bytes, record.ddr_clock_hertz) == (2 * 2**20, 3e6)
    assert (record.hbm_capacity_bytes, record.hbm_clock_hertz) == (4 * 2**20, 5e6)
    assert record.hbm_manufacturer_id == "0x1"


def test_an_unprintable_manufacturer_is_rejected_by_name() -> None:
    record = npu_smi_memory.parse("HBM Temperature(C) : 40\nHBM Manufacturer ID : " + "x" * 65 + "\n")
    assert record.hbm_manufacturer_id is None
    (rejection,) = record.rejected
    assert rejection.reason == "HBM Manufacturer ID is not printable ASCII of bounded length"
    assert rejection.line_no == 2


def test_board_rejections_name_the_value_and_the_line() -> None:
    record = npu_smi_board.parse("Serial Number : S\x7fN\nChip Count : 1.5\nModel : " + "m" * 65 + "\n")
    assert (record.serial_number, record.chip_count, record.model) == (None, None, None)
    assert sorted((r.line_no, r.reason) for r in record.rejected) == [
        (1, "control characters in a key : value line"),
        (2, "Chip Count is not an integer"),
        (3, "board value is not printable ASCII of at most 64 characters"),
    ]
    assert npu_smi_board.parse("Chip Count : 2\n").chip_count == 2


def test_hccs_port_count_limit_is_inclusive_and_rejections_name_the_line() -> None:
    limit = LIMITS["links"]
    at_limit = npu_smi_hccs.parse("HCCS Health Status : OK\nHCCS Error Count : " + " ".join(["1"] * limit) + "\n")
    assert at_limit.error_counts == (1.0,) * limit
    assert at_limit.rejected == ()
    over = npu_smi_hccs.parse("HCCS Health Status : OK\nHCCS Error Count : " + " ".join(["1"] * (limit + 1)) + "\n")
    assert over.error_counts == ()
    (rejection,) = over.rejected
    assert (rejection.line_no, rejection.reason) == (2, f"{limit + 1} ports, more than {limit}")
    assert rejection.line.startswith("HCCS Error Count : 1 1")


def test_hccs_junk_elements_are_rejected_and_na_elements_are_not() -> None:
    record = npu_smi_hccs.parse("HCCS Health Status : OK\nHCCS Retry Count : [3 NA abc 1.5 -1]\n")
    assert record.retry_counts == (3.0, None, None, None, None)
    assert [(r.line_no, r.line, r.reason) for r in record.rejected] == [
        (2, "HCCS Retry Count : [3 NA abc 1.5 -1]", f"{token!r} is not an integer in 0..{2**64 - 1:g}")
        for token in ("abc", "1.5", "-1")]


HCCS_BW_HEADER = "hccs link    rx_bandwidth(GB/S)    tx_bandwidth(GB/S)\n"


def test_hccs_bw_reads_the_column_order_from_the_header() -> None:
    text = ("junk before\n" + HCCS_BW_HEADER + "0   1.5   2.000000\n1   NA   abc\n0   9   9\n"
            "2   20000   0\nTotal   1.5   2\n")
    record = npu_smi_hccs_bw.parse(text)
    assert record.links == (npu_smi_hccs_bw.LinkBandwidth(0, 2e9, 1.5e9),
                            npu_smi_hccs_bw.LinkBandwidth(1, None, None),
                            npu_smi_hccs_bw.LinkBandwidth(2, 0.0, None))
    assert (record.total_tx_bytes_per_second, record.total_rx_bytes_per_second) == (2e9, 1.5e9)
    assert [(r.line_no, r.reason) for r in record.rejected] == [
        (4, "'abc' is not a bandwidth in GB/S"),
        (5, "link 0 printed twice; the first row is kept"),
        (6, "bandwidth 2e+13 outside 0..1e+13 B/s"),
    ]
    assert npu_smi_hccs_bw.parse_records(text) == [record]


def test_hccs_bw_link_limit_is_inclusive() -> None:
    limit = LIMITS["links"]
    rows = "".join(f"{link} 1 1\n" for link in range(limit + 1))
    record = npu_smi_hccs_bw.parse("xlink link tx_bandwidth(GB/S) rx_bandwidth(GB/S)\n" + rows)
    assert [link.link for link in record.links] == list(range(limit))
    (rejection,) = record.rejected
    assert (rejection.line_no, rejection.reason) == (limit + 2, f"more than {limit} links")


def test_hccs_bw_refuses_hostile_lines_and_needs_a_header_and_rows() -> None:
    limit = LIMITS["line_chars"]
    at_limit = "1" + " " * (limit - 4) + "2 2"
    over_limit = "3" + " " * (limit - 3) + "2 2"
    record = npu_smi_hccs_bw.parse(HCCS_BW_HEADER + f"0 1 1\n{at_limit}\n2\x1b 1 1\n{over_limit}\n4 1 1\n")
    assert [link.link for link in record.links] == [0, 1, 4]
    assert [(r.line_no, r.reason) for r in record.rejected] == [(4, "line too long or with control characters"),
                                                                 (5, "line too long or with control characters")]
    with pytest.raises(ParseError) as no_header:
        npu_smi_hccs_bw.parse("\n  0 1 1\n")
    assert str(no_header.value).startswith("no 'hccs link tx_bandwidth(GB/S) rx_bandwidth(GB/S)' header")
    assert (no_header.value.line_no, no_header.value.line) == (2, "0 1 1")
    with pytest.raises(ParseError, match=r"^hccs-bw header without link rows"):
        npu_smi_hccs_bw.parse(HCCS_BW_HEADER)
    assert npu_smi_hccs_bw.parse(HCCS_BW_HEADER + "total 1 2\n").links == ()


def test_hccs_bw_samples_per_link_and_direction() -> None:
    record = npu_smi_hccs_bw.parse(HCCS_BW_HEADER + "0 1 NA\n3 NA 2\n")
    chip = ChipRef(1, 0)
    got = [(dict(s.labels)["link"], dict(s.labels)["direction"], s.value)
           for s in npu_smi_hccs_bw.samples([record], chip)]
    assert got == [("0", "rx", 1e9), ("3", "tx", 2e9)]
    assert all(s.metric == "npu_hccs_bandwidth_bytes_per_second" for s in npu_smi_hccs_bw.samples(record, chip))
    assert npu_smi_hccs_bw.samples([record], None) == []
    assert npu_smi_hccs_bw.samples([], chip) == []


# --------------------------------------------------------------------------- npu_smi_kv itself


def test_kv_line_length_limit_is_inclusive_and_later_lines_still_parse() -> None:
    limit = LIMITS["line_chars"]
    at_limit = "Long Key : " + "v" * (limit - len("Long Key : "))
    over = "Over Key : " + "v" * (limit + 1 - len("Over Key : "))
    rejects = Rejects()
    (block,) = parse_blocks(f"{at_limit}\n{over}\nBad\x07 : 1\nAfter : 2\n", rejects)
    assert block.get("Long Key") == "v" * (limit - len("Long Key : "))
    assert block.get("Over Key") is None
    assert block.get("After") == "2"
    assert [(r.line_no, r.reason) for r in rejects.freeze()] == [
        (2, f"line longer than {limit} characters"), (3, "control characters in a key : value line")]
    assert rejects.freeze()[1].line == "Bad\\x07 : 1"
    assert rejects.freeze()[0].line.startswith("Over Key : vvv")


def test_parse_blocks_without_a_rejects_collector_still_skips_hostile_lines() -> None:
    (block,) = parse_blocks("Bad\x1b : 1\nGood : 2\n")
    assert block.pairs == (("Good", "2"),)


def test_an_empty_value_with_empty_continuations_stays_empty() -> None:
    (block,) = parse_blocks("Key :\n : \nNext : 1\n")
    assert block.pairs == (("Key", ""), ("Next", "1"))
    (joined,) = parse_blocks("Key :\n : first\n : second\n")
    assert joined.get("Key") == "first\nsecond"


def test_output_without_key_value_lines_is_a_tool_error_naming_the_first_line() -> None:
    with pytest.raises(ToolError) as caught:
        parse_blocks("\n\n  just a header  \nmore\n")
    assert str(caught.value).startswith("no 'key : value' lines in npu-smi output")
    assert (caught.value.line_no, caught.value.line) == (1, "  just a header  ")
    with pytest.raises(ToolError) as empty:
        parse_blocks("")
    assert (empty.value.line_no, empty.value.line) == (None, None)


def test_npu_smi_error_text_is_a_tool_error_naming_its_line() -> None:
    with pytest.raises(ToolError) as caught:
        parse_blocks("Key : 1\n  Usage: npu-smi info <options>\n")
    assert str(caught.value).startswith("npu-smi reported an error instead of data")
    assert (caught.value.line_no, caught.value.line) == (2, "Usage: npu-smi info <options>")


def test_require_block_on_no_blocks_names_no_line() -> None:
    with pytest.raises(ParseError) as caught:
        require_block([], ("x",), "board")
    assert str(caught.value) == "no board keys in npu-smi output"
    assert (caught.value.line_no, caught.value.line) == (None, None)


def test_checked_judges_only_the_first_matching_key() -> None:
    block = KvBlock((("Power A", "90"), ("Power B", "junk")), 1, (1, 2))
    rejects = Rejects()
    assert block.checked(r"Power\s*[AB]", "power_watts", rejects) == 90.0
    assert rejects.freeze() == ()
    assert block.checked_all(r"Power\s*[AB]", "power_watts", rejects) == [("Power A", 90.0), ("Power B", None)]
    (rejection,) = rejects.freeze()
    assert (rejection.line_no, rejection.line, rejection.reason) == (2, "Power B : junk",
                                                                     "Power B: 'junk' is not a number")


def test_a_block_without_line_numbers_reports_none() -> None:
    block = KvBlock((("Power", "junk"), ("Temp", "1")))
    rejects = Rejects()
    assert block.checked("Power", "power_watts", rejects) is None
    assert rejects.freeze()[0].line_no is None
    assert block.where("Temp") == (None, "Temp : 1")
    assert block.where("Absent") == (None, "")
    partial = KvBlock((("A", "1"), ("B", "x")), 1, (5,))
    assert partial.where("B") == (None, "B : x")
    assert partial.where("A") == (5, "A : 1")


@pytest.mark.parametrize("absent", ["", "NA", "na", "N/A", "n/a", "-", "--"])
def test_text_treats_na_like_cells_as_absent(absent: str) -> None:
    assert KvBlock((("Serial", absent),)).text("Serial") is None
    assert KvBlock((("Serial", "S1"),)).text("Serial") == "S1"


def test_one_record_accepts_the_record_or_a_sequence_holding_it() -> None:
    record = npu_smi_usages.UsagesRecord()
    assert one_record(record, npu_smi_usages.UsagesRecord) is record
    assert one_record(["x", record], npu_smi_usages.UsagesRecord) is record
    assert one_record(5, npu_smi_usages.UsagesRecord) is None
    assert one_record("text", npu_smi_usages.UsagesRecord) is None


def test_chip_argv_needs_a_chip() -> None:
    with pytest.raises(ValueError, match=r"^npu-smi -t usages is a per-chip source and needs a chip$"):
        chip_argv("usages", None)
    assert chip_argv("usages", ChipRef(2, 1)) == ["info", "-t", "usages", "-i", "2", "-c", "1"]
    assert chip_argv("board", ChipRef(2, 1), card_level=True) == ["info", "-t", "board", "-i", "2"]
    assert chip_argv("usages", ChipRef(2, 0, has_chip_id=False)) == ["info", "-t", "usages", "-i", "2"]


def test_hccs_bw_rejections_carry_their_line() -> None:
    limit = LIMITS["links"]
    rows = "".join(f"{link} 1 1\n" for link in range(limit)) + "0 2 2\n99 abc 1\n100 1 1\nbad\x1b 1 1\n"
    record = npu_smi_hccs_bw.parse(HCCS_BW_HEADER + rows)
    assert [(r.line, r.reason) for r in record.rejected] == [
        ("0 2 2", "link 0 printed twice; the first row is kept"),
        ("99 abc 1", "'abc' is not a bandwidth in GB/S"),
        ("99 abc 1", f"more than {limit} links"),
        ("100 1 1", f"more than {limit} links"),
        ("bad\\x1b 1 1", "line too long or with control characters"),
    ]


def test_lines_without_a_colon_are_skipped_not_the_end() -> None:
    (block,) = parse_blocks("Key : 1\nNo process in device.\nOther : 2\n")
    assert block.pairs == (("Key", "1"), ("Other", "2"))
