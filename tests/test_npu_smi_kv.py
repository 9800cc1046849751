"""The npu-smi ``-t <type>`` key : value block splitter, shared helpers and Source contracts."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given, settings
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
from collectors.catalogue import spec
from collectors.npu_smi_kv import KvBlock, chip_argv, chip_sample, one_record, parse_blocks

FIXTURES = Path(__file__).parent / "fixtures" / "npu_smi_kv"

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
def test_parsers_on_arbitrary_text_return_or_raise_parse_error(lines: list[str]) -> None:
    text = "\n".join(lines)
    for parse in PARSERS:
        with contextlib.suppress(ParseError):
            parse(text)
