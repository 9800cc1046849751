"""The npu-smi ``-t <type>`` key : value block splitter, shared helpers and Source contracts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

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
from collectors.base import ChipRef, CollectContext, ParseError, ToolError
from collectors.bounds import LIMITS, Rejects
from collectors.catalogue import spec
from collectors.npu_smi_kv import KvBlock, chip_argv, chip_sample, one_record, parse_blocks, require_block
from tests.support import paths
from tests.support.invariants import assert_rejections_come_from, assert_values_within_bounds

FIXTURES = paths.FIXTURES / "npu_smi_kv"

PARSERS = (
    npu_smi_usages.parse, npu_smi_common.parse, npu_smi_power.parse, npu_smi_temp.parse,
    npu_smi_memory.parse, npu_smi_ecc.parse, npu_smi_health.parse, npu_smi_board.parse,
    npu_smi_hccs.parse, npu_smi_hccs_bw.parse,
)
SOURCES = {
    "npu_smi_usages": (npu_smi_usages, "usages", "usages"),
    "npu_smi_common": (npu_smi_common, "common", "usages"),
    "npu_smi_ecc": (npu_smi_ecc, "ecc", "health"),
    "npu_smi_health": (npu_smi_health, "health", "health"),
    "npu_smi_memory": (npu_smi_memory, "memory", "health"),
    "npu_smi_board": (npu_smi_board, "board", "health"),
    "npu_smi_hccs": (npu_smi_hccs, "hccs", "health"),
    "npu_smi_hccs_bw": (npu_smi_hccs_bw, "hccs-bw", "health"),
}


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- parse_blocks


def test_blocks_split_on_blank_lines_and_keep_keys_as_printed() -> None:
    blocks = parse_blocks(read("common_chip_id_first_mcu_last.txt"))
    assert [len(b.pairs) for b in blocks] == [2, 9, 2]
    assert blocks[0].pairs == (("NPU ID", "4"), ("Chip Count", "1"))
    assert blocks[1].pairs[0] == ("Chip ID", "0")
    assert blocks[1].chip_id == 0 and not blocks[1].is_mcu
    assert blocks[2].is_mcu and blocks[2].get(r"Temperature\s*\(C\)") == "41"
    assert blocks[2].line_no == 14


def test_split_at_first_colon_only() -> None:
    (block,) = parse_blocks("PCIe Bus Info : 0000:C1:00.0\nError Information : at 12:00:01 x")
    assert block.get("PCIe Bus Info") == "0000:C1:00.0"
    assert block.get("Error Information") == "at 12:00:01 x"


def test_tabs_spaces_and_trailing_whitespace_give_the_same_blocks() -> None:
    tab = "\tHBM Capacity(MB)   : 64  \n\tChip ID : 0\t\n"
    spaces = "        HBM Capacity(MB)   :   64\n        Chip ID : 0\n"
    bare = "HBM Capacity(MB):64\nChip ID:0"
    assert parse_blocks(tab) == parse_blocks(spaces) == parse_blocks(bare)
    assert parse_blocks(bare)[0].pairs == (("HBM Capacity(MB)", "64"), ("Chip ID", "0"))


def test_continuation_lines_extend_previous_value_across_blank_lines() -> None:
    blocks = parse_blocks(read("health_warning_continuations.txt"))
    chip = blocks[1]
    info = chip.get("Error Information")
    assert info is not None
    assert info.splitlines() == [
        "node type=HBM, sensor type=Memory, event state=correctable ECC at 12:00:01",
        "node type=TS, sensor type=Software, event state=op timeout",
    ]
    # the blank line before the continuation did not split the chip block
    assert chip.chip_id == 0 and chip.get(r"Health(\s*Status)?") == "Warning"


def test_repeated_key_starts_a_new_block_when_the_blank_separator_is_lost() -> None:
    blocks = parse_blocks(read("common_mcu_no_blank_separator.txt"))
    assert [b.is_mcu for b in blocks] == [False, False, True]
    assert blocks[2].pairs == (("Temperature(C)", "40"), ("Chip Name", "mcu"))


def test_chip_name_that_is_not_mcu_is_a_chip_block() -> None:
    (block,) = parse_blocks("NPU ID : 0\nChip ID : 0\nChip Name : 910A\nFirmware Version : 7.1")
    assert not block.is_mcu


def test_get_matches_whole_key_case_insensitively() -> None:
    block = KvBlock((("Aicore Freq(MHZ)", "1800"), ("Rated Power Dissipation(W)", "310")))
    assert block.number(r"Aicore\s*Freq\s*\(MHz\)") == 1800.0
    assert block.get(r"Power\s*Dissipation\s*\(W\)") is None  # no substring match
    assert block.get_all(r".*\(W\)") == [("Rated Power Dissipation(W)", "310")]


def test_lines_without_colon_are_ignored_and_proc_mem_lines_do_not_break() -> None:
    text = "NPU ID : 0\nProcess id:395864  Process name:power_test  Process memory(MB):5118\nNo process."
    (block,) = parse_blocks(text)
    assert block.get("NPU ID") == "0"
    assert block.get("Process id") == "395864  Process name:power_test  Process memory(MB):5118"


@pytest.mark.parametrize("name", ["error_invalid_card_id.txt", "error_no_pairs.txt"])
def test_error_output_raises_tool_error(name: str) -> None:
    with pytest.raises(ToolError):
        parse_blocks(read(name))


@pytest.mark.parametrize("text", [
    "",
    "\n\n   \n",
    "NPU ID : 0\nInvalid card id.\n",
    "Health Status : OK\n\tError parameter of -c\n",
    "Usage: npu-smi info <watch|proc|-h|-m|-l|-t type> [Options...]\n",
])
def test_error_text_or_no_pairs_is_a_tool_error_whatever_else_is_there(text: str) -> None:
    with pytest.raises(ToolError):
        parse_blocks(text)


@pytest.mark.parametrize("parse", PARSERS)
def test_every_parser_rejects_npu_smi_error_text(parse: object) -> None:
    with pytest.raises(ToolError):
        parse(read("error_invalid_card_id.txt"))  # type: ignore[operator]


@pytest.mark.parametrize("parse", PARSERS)
def test_every_parser_rejects_output_of_another_type(parse: object) -> None:
    # temp accepts nothing but temperature keys; the others must reject a foreign key.
    other_key = "Aicore Count" if parse is npu_smi_temp.parse else "Something Else"
    text = f"NPU ID : 0\n{other_key} : 8\n"
    with pytest.raises(ParseError):
        parse(text)  # type: ignore[operator]


# --- helpers


def test_one_record_accepts_bare_record_or_sequence() -> None:
    record = npu_smi_health.HealthRecord(health="OK")
    assert one_record(record, npu_smi_health.HealthRecord) is record
    assert one_record([record], npu_smi_health.HealthRecord) is record
    assert one_record([], npu_smi_health.HealthRecord) is None
    assert one_record(["x"], npu_smi_health.HealthRecord) is None


def test_chip_sample_refuses_labels_that_differ_from_the_catalogue() -> None:
    chip = ChipRef(1, 0)
    assert chip_sample("npu_hbm_ecc_errors_total", chip, 2, bit="single").labels == (
        ("npu", "1"), ("chip", "0"), ("bit", "single"))
    with pytest.raises(ValueError, match="catalogue"):
        chip_sample("npu_hbm_ecc_errors_total", chip, 2)
    with pytest.raises(KeyError):
        chip_sample("npu_no_such_metric", chip, 1)


# --- Sources


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_source_contract(name: str) -> None:
    module, type_name, group = SOURCES[name]
    source = module.SOURCE
    assert (source.name, source.tool, source.group, source.scope) == (name, "npu-smi", group, "chip")
    card_level = name == "npu_smi_board"
    expected = ["info", "-t", type_name, "-i", "3"] + ([] if card_level else ["-c", "1"])
    assert source.argv(ChipRef(3, 1)) == expected
    assert source.argv(ChipRef(5, 0, has_chip_id=False)) == ["info", "-t", type_name, "-i", "5"]
    with pytest.raises(ValueError):
        source.argv(None)


def test_sources_own_their_catalogue_metrics() -> None:
    for name, (module, _, _) in SOURCES.items():
        assert module.SOURCE.name == name
    for metric in ("npu_aivector_utilization_ratio", "npu_hbm_bandwidth_utilization_ratio"):
        assert spec(metric).source == "npu_smi_usages"
    assert spec("npu_aicore_frequency_hertz").source == "npu_smi_common"
    assert spec("npu_hccs_bandwidth_bytes_per_second").source == "npu_smi_hccs_bw"


def test_source_parse_returns_one_record_that_samples_accepts() -> None:
    source = npu_smi_usages.SOURCE
    records = source.parse(read("usages_910b_tab_chip_id_last.txt"))
    assert len(records) == 1
    out = source.samples(records, ChipRef(3, 0), CollectContext())
    assert {s.metric for s in out} == {
        "npu_aivector_utilization_ratio", "npu_aicpu_utilization_ratio",
        "npu_ctrlcpu_utilization_ratio", "npu_hbm_bandwidth_utilization_ratio"}
    assert source.samples([], ChipRef(3, 0), CollectContext()) == []


def test_argv_helper_omits_chip_for_card_level() -> None:
    assert chip_argv("board", ChipRef(2, 1), card_level=True) == ["info", "-t", "board", "-i", "2"]


# --- robustness: arbitrary text only returns a record or raises ParseError

_KEYS = st.sampled_from([
    "NPU ID", "Chip ID", "Chip Name", "Chip Count", "HBM Capacity(MB)", "Aicore Usage Rate(%)",
    "Aivector Usage Rate(%)", "Aicore curFreq(MHZ)", "Temperature (C)", "NPU Real-time Power(W)",
    "HBM Single Bit Error Count", "Health Status", "Error Code", "Firmware Version",
    "hccs error count", "hccs health status", "HBM Temperature(C)", "", "hccs link",
])
_VALUES = st.one_of(
    st.sampled_from(["0", "NA", "-", "mcu", "1e400", "nan", "-5", "[1 2 NA]", "[", "A402 8C03", "12.5"]),
    st.text(max_size=12),
)
_LINE = st.one_of(
    st.builds(lambda k, v, pad: f"{pad}{k} : {v}", _KEYS, _VALUES, st.sampled_from(["", "\t", "   "])),
    st.sampled_from(["", "total 1.0 2.0", "0 3.5 4.5",
                     "hccs link  tx_bandwidth(GB/S)  rx_bandwidth(GB/S)"]),
    st.text(max_size=30),
)


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(_LINE, max_size=12))
# Found by hypothesis: a key with no value on its own line, continued by " : mcu", is quoted as "Chip Count : mcu".
@example(lines=["NPU ID : 0", "NPU ID : 0", "NPU ID : 0", "Chip Count : ", " : mcu"])
def test_parsers_on_arbitrary_text_return_or_raise_parse_error(lines: list[str]) -> None:
    """Anything but ParseError is a bug; what parses keeps every value in its bound and rejects only input lines."""
    text = "\n".join(lines)
    for parse in PARSERS:
        try:
            record = parse(text)
        except ParseError:
            continue
        assert_values_within_bounds(record)
        assert_rejections_come_from(record, text)


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
