"""``collectors.npu_smi_info``: the Source a test builds itself (bench/mutation.py).

mutmut switches a mutant on after the modules are imported, so ``SOURCE = make_source()`` at
import time never sees one; this builds the Source inside the test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from collectors import npu_smi_info
from collectors._text import MIB
from collectors.base import CollectContext, ParseError
from collectors.bounds import LIMITS, Rejection, clip
from collectors.npu_smi_info import make_source, parse, samples
from collectors.npu_smi_info_records import InfoTable, NpuProcess

FIXTURES = Path(__file__).parent / "fixtures" / "npu_smi_tables"


def test_make_source_fields_parse_and_samples() -> None:
    source = make_source(max_chips=64)
    assert (source.name, source.tool, source.group, source.scope) == ("npu_smi_info", "npu-smi", "info", "node")
    assert source.argv(None) == ["info"]
    text = (FIXTURES / "info_910b3_x2_procs.txt").read_text()
    records = source.parse(text)
    assert records == (parse(text),)
    ctx = CollectContext()
    assert source.samples(records, None, ctx) == samples(records[0], None, ctx)
    assert source.samples([*records, *records], None, ctx) == samples(records[0], None, ctx) * 2


def test_make_source_refuses_more_chips_than_its_cap() -> None:
    text = (FIXTURES / "info_910b3_x2_procs.txt").read_text()
    chips = len(parse(text).chips)
    assert len(make_source(max_chips=chips).parse(text)[0].chips) == chips
    with pytest.raises(ParseError, match=rf"^{chips} chips, more than max_chips={chips - 1}"):
        make_source(max_chips=chips - 1).parse(text)


def test_npu_info_waits_for_the_board_and_falls_back_to_inventory_bus_ids() -> None:
    table = parse((FIXTURES / "info_910b3_x2_procs.txt").read_text())
    chip = replace(table.chips[0], bus_id=None)
    key = (chip.npu, chip.chip)
    other = (chip.npu + 1, chip.chip)

    def info(inventory: dict[Any, Any]) -> list[dict[str, str]]:
        out = npu_smi_info._chip_samples(chip, CollectContext(inventory=inventory))
        return [dict(s.labels) for s in out if s.metric == "npu_info"]

    pending = {npu_smi_info.EVERY_CHIP: {npu_smi_info.BOARD_PENDING: "1"}}
    assert info(pending) == []
    assert info({**pending, other: {npu_smi_info.BOARD_ANSWERED: "1"}}) == []
    answered = info({**pending, key: {npu_smi_info.BOARD_ANSWERED: "1", "bus_id": "0000:C1:00.0"}})
    assert len(answered) == 1 and answered[0]["bus_id"] == "0000:C1:00.0"
    assert len(info({})) == 1


def test_a_chip_without_hbm_still_reports_its_ddr() -> None:
    table = parse((FIXTURES / "info_910b3_x2_procs.txt").read_text())
    chip = replace(table.chips[0], hbm_used_bytes=0.0, hbm_total_bytes=0.0, memory_used_bytes=1.0,
                   memory_total_bytes=2.0)
    metrics = {s.metric: s.value for s in npu_smi_info._chip_samples(chip, CollectContext())}
    assert "npu_hbm_total_bytes" not in metrics
    assert (metrics["npu_memory_used_bytes"], metrics["npu_memory_total_bytes"]) == (1.0, 2.0)


# --- small synthetic tables: one behaviour each (bench/mutation.py survivors) ------------------------

_NPU_HEADER = "| NPU Name | Health | Power(W) Temp(C) Hugepages-Usage(page) |"
_CHIP_HEADER = "| Chip | Bus-Id | AICore(%) Memory-Usage(MB) HBM-Usage(MB) |"
_NPU0 = "| 0 910B3 | OK | 101.3 41 0 / 0 |"
_CHIP0 = "| 0 | 0000:C1:00.0 | 37 0 / 0 100 / 200 |"
_NPU1 = "| 1 910B3 | OK | 96.0 44 0 / 0 |"
_CHIP1 = "| 0 | 0000:01:00.0 | 12 0 / 0 300 / 400 |"
_PROCESS_HEADER = "| NPU Chip | Process id | Process name | Process memory(MB) |"


def _text(*rows: str) -> str:
    return "\n".join(rows) + "\n"


def _rejected(rows: Sequence[str], line_no: int, reason: str) -> Rejection:
    """The Rejection of row ``line_no`` (1-based) of ``rows``, its line clipped as Rejects clips it."""
    return Rejection(line_no, clip(rows[line_no - 1].strip()), reason)


def _ids(table: InfoTable) -> list[tuple[int, int]]:
    return [(chip.npu, chip.chip) for chip in table.chips]


def test_an_id_beyond_the_id_bound_rejects_its_row_and_the_bound_itself_passes() -> None:
    rows = [_NPU_HEADER, _CHIP_HEADER, "| 2147483648 910B3 | OK | 90.0 40 0 / 0 |", _CHIP0,
            "| 2147483647 910B3 | OK | 90.0 40 0 / 0 |", _CHIP0]
    table = parse(_text(*rows))
    assert _ids(table) == [(2147483647, 0)]
    assert table.rejected == (
        _rejected(rows, 3, "npu-smi info row rejected: NPU ID 2147483648 is beyond any id npu-smi prints"),
    )


def test_a_name_of_two_words_is_rejected_naming_the_joined_name() -> None:
    rows = [_NPU_HEADER, _CHIP_HEADER, "| 0 Ascend 910 | OK | 90.0 40 0 / 0 |", _CHIP0, _NPU1, _CHIP1]
    table = parse(_text(*rows))
    assert _ids(table) == [(1, 0)]
    assert table.rejected == (
        _rejected(rows, 3, "npu-smi info row rejected: Name 'Ascend 910' is not a chip name "
                           "(printable ASCII, at most 32 characters)"),
    )


def test_header_columns_in_another_order_map_the_values_by_name() -> None:
    rows = ["| NPU Name | Health | Temp(C) Power(W) Hugepages-Usage(page) |",
            "| Chip | Bus-Id | AICore(%) HBM-Usage(MB) Memory-Usage(MB) |",
            "| 0 910B3 | OK | 41 101.3 12 / 64 |",
            "| 0 | 0000:C1:00.0 | 37 100 / 200 300 / 400 |"]
    (chip,) = parse(_text(*rows)).chips
    assert (chip.temperature_celsius, chip.power_watts) == (41.0, 101.3)
    assert (chip.hugepages_used, chip.hugepages_total) == (12.0, 64.0)
    assert (chip.hbm_used_bytes, chip.hbm_total_bytes) == (100 * MIB, 200 * MIB)
    assert (chip.memory_used_bytes, chip.memory_total_bytes) == (300 * MIB, 400 * MIB)


def test_unknown_header_columns_keep_their_slots_a_usage_column_as_a_pair() -> None:
    # Voltage(V) is an unknown scalar, Spare-Usage(MB) an unknown "used / total" pair.
    rows = ["| NPU Name | Health | Power(W) Voltage(V) Temp(C) Spare-Usage(MB) Hugepages-Usage(page) |",
            _CHIP_HEADER, "| 0 910B3 | OK | 101.3 12.0 41 5 / 10 7 / 64 |", _CHIP0]
    table = parse(_text(*rows))
    assert table.rejected == ()
    (chip,) = table.chips
    assert (chip.power_watts, chip.temperature_celsius) == (101.3, 41.0)
    assert (chip.hugepages_used, chip.hugepages_total) == (7.0, 64.0)


def test_an_npu_line_without_its_chip_line_takes_the_lowest_free_chip_index() -> None:
    after_chip_1 = parse(_text(_NPU_HEADER, _CHIP_HEADER, _NPU0, "| 1 | 0000:C1:00.0 | 37 0 / 0 100 / 200 |",
                               "| 0 910B3 | OK | 90.0 40 0 / 0 |", _NPU1, _CHIP1))
    assert [(c.npu, c.chip, c.power_watts) for c in after_chip_1.chips] == [(0, 1, 101.3), (0, 0, 90.0), (1, 0, 96.0)]
    after_chip_0 = parse(_text(_NPU_HEADER, _CHIP_HEADER, _NPU0, _CHIP0, "| 0 910B3 | OK | 90.0 40 0 / 0 |"))
    cut = after_chip_0.chips[1]
    assert (cut.npu, cut.chip, cut.has_chip_id, cut.power_watts, cut.bus_id) == (0, 1, True, 90.0, None)


def test_an_npu_line_without_its_chip_line_skips_every_taken_index() -> None:
    table = parse(_text(_NPU_HEADER, _CHIP_HEADER, _NPU0, _CHIP0, _NPU0, "| 1 | 0000:C1:00.0 | 37 0 / 0 100 / 200 |",
                        "| 0 910B3 | OK | 90.0 40 0 / 0 |"))
    assert [(c.npu, c.chip, c.power_watts) for c in table.chips] == [(0, 0, 101.3), (0, 1, 101.3), (0, 2, 90.0)]


def test_a_chip_listed_twice_is_rejected_on_its_chip_line() -> None:
    rows = [_NPU_HEADER, _CHIP_HEADER, _NPU0, _CHIP0, "| 0 910B3 | OK | 90.0 40 0 / 0 |",
            "| 0 | 0000:C1:00.0 | 99 0 / 0 100 / 200 |"]
    table = parse(_text(*rows))
    assert [(c.npu, c.chip, c.power_watts) for c in table.chips] == [(0, 0, 101.3)]
    assert table.rejected == (_rejected(rows, 6, "npu 0 chip 0 is listed twice; the first row is kept"),)


def _second_ids(chip_header: str | None, name: str) -> tuple[int | None, int | None]:
    rows = [_NPU_HEADER, *([chip_header] if chip_header else []), f"| 0 {name} | OK | 90.0 40 0 / 0 |",
            "| 0 5 | 0000:C1:00.0 | 37 0 / 0 100 / 200 |"]
    (chip,) = parse(_text(*rows)).chips
    return chip.phy_id, chip.device_id


def test_the_second_chip_id_is_what_the_chip_header_names() -> None:
    assert _second_ids("| Chip Phy-ID | Bus-Id | AICore(%) Memory-Usage(MB) HBM-Usage(MB) |", "310P3") == (5, None)
    assert _second_ids("| Chip Device | Bus-Id | AICore(%) Memory-Usage(MB) HBM-Usage(MB) |", "Ascend910") \
        == (None, 5)
    # A header naming neither: the second id is nobody's.
    assert _second_ids(_CHIP_HEADER, "Ascend910") == (None, None)
    assert _second_ids(_CHIP_HEADER, "310P3") == (None, None)
    # Only a header of three cells or more names the id column.
    assert _second_ids("| Chip Phy-ID | Bus-Id AICore(%) Memory-Usage(MB) HBM-Usage(MB) |", "310P3") == (None, None)


def test_without_a_chip_header_the_second_chip_id_follows_the_product_name() -> None:
    assert _second_ids(None, "Ascend910B") == (5, None)
    assert _second_ids(None, "310P3") == (None, 5)


def test_a_chip_line_of_three_ids_is_rejected_and_its_npu_line_kept_alone() -> None:
    rows = [_NPU_HEADER, _CHIP_HEADER, _NPU0, "| 0 1 2 | 0000:C1:00.0 | 37 0 / 0 100 / 200 |"]
    table = parse(_text(*rows))
    (chip,) = table.chips
    assert (chip.npu, chip.chip, chip.has_chip_id, chip.power_watts) == (0, 0, True, 101.3)
    assert (chip.aicore_ratio, chip.hbm_used_bytes, chip.bus_id) == (None, None, None)
    assert table.rejected == (_rejected(rows, 4, "npu-smi info row rejected: neither an NPU line nor a chip line"),)


def test_a_chip_line_of_one_id_and_a_bad_bus_id_drops_its_chip() -> None:
    rows = [_NPU_HEADER, _CHIP_HEADER, _NPU0, "| 0 | 0000:C1:00 | 37 0 / 0 100 / 200 |", _NPU1, _CHIP1]
    table = parse(_text(*rows))
    assert _ids(table) == [(1, 0)]
    assert table.rejected == (
        _rejected(rows, 4, "npu-smi info row rejected: Bus-Id '0000:C1:00' is neither a PCI address nor NA"),
    )


def test_an_npu_line_with_a_numeric_name_and_na_health_is_an_npu_line() -> None:
    # Chip-shaped too (integer ids, NA in the middle): its two scalars make it an NPU line.
    table = parse(_text(_NPU_HEADER, _CHIP_HEADER, "| 0 310 | NA | 12.5 40 0 / 0 |", _CHIP0))
    (chip,) = table.chips
    assert (chip.npu, chip.chip, chip.name, chip.health, chip.power_watts, chip.aicore_ratio) == \
        (0, 0, "310", "NA", 12.5, 0.37)
    assert table.rejected == ()


def test_a_chip_shaped_line_after_an_npu_line_is_its_chip_line_whatever_its_scalars() -> None:
    rows = [_NPU_HEADER, _CHIP_HEADER, _NPU0, "| 0 5 | NA | 37 12 0 / 0 |", _NPU1, _CHIP1]
    table = parse(_text(*rows))
    assert _ids(table) == [(1, 0)]
    assert table.rejected == (_rejected(rows, 4, "npu-smi info row rejected: 3 values for 3 columns"),)


def test_rows_without_a_letter_or_digit_are_decoration() -> None:
    table = parse(_text(_NPU_HEADER, _CHIP_HEADER, "| --- | --- | --- |", _NPU0, _CHIP0,
                        _PROCESS_HEADER, "|  |  |  |  |", "| 0 0 | 77 | python | 10 |"))
    assert table.rejected == ()
    assert _ids(table) == [(0, 0)]
    assert [(p.pid, p.name) for p in table.processes] == [(77, "python")]


def test_a_row_of_exactly_the_line_limit_is_parsed_one_more_character_is_rejected() -> None:
    limit = LIMITS["line_chars"]
    at_limit = _NPU0[:-1].ljust(limit - 1) + "|"
    over = _NPU1[:-1].ljust(limit) + "|"
    assert (len(at_limit), len(over)) == (limit, limit + 1)
    rows = [_NPU_HEADER, _CHIP_HEADER, at_limit, _CHIP0, over, _CHIP1]
    table = parse(_text(*rows))
    assert _ids(table) == [(0, 0)]
    assert table.rejected == (_rejected(rows, 5, f"line longer than {limit} characters"),)


def test_control_characters_reject_the_row() -> None:
    rows = [_NPU_HEADER, _CHIP_HEADER, _NPU0, _CHIP0, "| 1 910B3 | OK\x07 | 96.0 44 0 / 0 |", _CHIP1]
    table = parse(_text(*rows))
    assert _ids(table) == [(0, 0)]
    assert table.rejected == (_rejected(rows, 5, "control characters in a table row"),)


def test_only_a_single_cell_row_is_a_banner() -> None:
    table = parse(_text("| npu-smi 24.1.rc2 Version: 24.1.rc2.2 |", _NPU_HEADER, _CHIP_HEADER, _NPU0, _CHIP0,
                        _PROCESS_HEADER, "| 0 0 | 4242 | npu-smi | 12 |"))
    assert table.version == "24.1.rc2.2"
    assert [(p.pid, p.name) for p in table.processes] == [(4242, "npu-smi")]


def test_a_version_that_is_not_printable_ascii_is_rejected() -> None:
    rows = ["| npu-smi 24.1.rc2 Version: 24.1.rc2.\u00e9 |", _NPU_HEADER, _CHIP_HEADER, _NPU0, _CHIP0]
    table = parse(_text(*rows))
    assert table.version is None
    assert table.rejected == (_rejected(rows, 1, "npu-smi version is not printable ASCII"),)


def test_a_stray_text_row_mentioning_health_is_rejected_not_taken_for_the_header() -> None:
    rows = [_NPU_HEADER, _CHIP_HEADER, "| health check pending |", _NPU0, _CHIP0]
    table = parse(_text(*rows))
    assert _ids(table) == [(0, 0)]
    assert table.rejected == (_rejected(rows, 3, "npu-smi info row rejected: NPU ID 'health' is not an integer"),)


def test_an_npu_line_of_two_cells_and_a_chip_line_of_one_cell() -> None:
    two_cells = parse(_text(_NPU_HEADER, _CHIP_HEADER, "| 0 910B3 | OK |", _CHIP0))
    (chip,) = two_cells.chips
    assert (chip.health, chip.power_watts, chip.aicore_ratio) == ("OK", None, 0.37)
    assert two_cells.rejected == ()
    one_cell = parse(_text(_NPU_HEADER, _CHIP_HEADER, _NPU0, "| 0 |"))
    (chip,) = one_cell.chips
    assert (chip.npu, chip.chip, chip.has_chip_id, chip.bus_id, chip.aicore_ratio) == (0, 0, True, None, None)
    assert one_cell.rejected == ()


def test_used_over_total_is_rejected_on_its_line() -> None:
    rows = [_NPU_HEADER, _CHIP_HEADER, _NPU0, "| 0 | 0000:C1:00.0 | 37 0 / 0 70000 / 65536 |"]
    table = parse(_text(*rows))
    (chip,) = table.chips
    assert (chip.hbm_used_bytes, chip.hbm_total_bytes) == (None, None)
    assert table.rejected == (_rejected(rows, 4, "HBM-Usage(MB) used 70000 exceeds total 65536"),)


def test_a_pair_with_a_glued_na_total_keeps_its_used_side() -> None:
    table = parse(_text(_NPU_HEADER, _CHIP_HEADER, "| 0 910B3 | OK | 101.3 41 5/N/A |", _CHIP0))
    (chip,) = table.chips
    assert (chip.hugepages_used, chip.hugepages_total) == (5.0, None)
    assert table.rejected == ()


def test_process_rows_off_the_layout_are_rejected_with_their_reason() -> None:
    rows = [_NPU_HEADER, _CHIP_HEADER, _NPU0, _CHIP0, _PROCESS_HEADER,
            "| 0 0 | 77 | python |",
            "| 0 0 0 | 77 | python | 10 |",
            "| 0 x | 77 | python | 10 |",
            "| 0 0 | 78 | pyth\u00f6n | 10 |",
            "| 0 0 | 79 | python | 2000000 |",
            "| 0 0 | 80 | python | 10 | 0 |",
            "| 0 0 | 81 | python | 10 | abc |"]
    table = parse(_text(*rows))
    assert table.processes == (
        NpuProcess(npu=0, chip=0, pid=78, name="", memory_bytes=10 * MIB, container_pid=None),
        NpuProcess(npu=0, chip=0, pid=79, name="python", memory_bytes=None, container_pid=None),
        NpuProcess(npu=0, chip=0, pid=80, name="python", memory_bytes=10 * MIB, container_pid=None),
        NpuProcess(npu=0, chip=0, pid=81, name="python", memory_bytes=10 * MIB, container_pid=None),
    )
    assert table.rejected == (
        _rejected(rows, 6, "npu-smi info process row rejected: 3 cells where a process row has at least 4"),
        _rejected(rows, 7, "npu-smi info process row rejected: '0 0 0' is not 'NPU [Chip]'"),
        _rejected(rows, 8, "npu-smi info process row rejected: NPU/chip id 'x' is not an integer"),
        _rejected(rows, 9, "process name is not printable ASCII of at most 64 characters; exported empty"),
        _rejected(rows, 10, "Process memory(MB) 2e+06 outside 0..1.04858e+06 MiB"),
        _rejected(rows, 11, "Process id in container '0' is not a pid"),
        _rejected(rows, 12, "Process id in container 'abc' is not a pid"),
    )


def _process_table(count: int) -> list[str]:
    return [_NPU_HEADER, _CHIP_HEADER, _NPU0, _CHIP0, _PROCESS_HEADER,
            *(f"| 0 0 | {pid} | python | 10 |" for pid in range(1, count + 1))]


def test_the_process_row_limit_is_inclusive() -> None:
    limit = LIMITS["processes"]
    assert len(parse(_text(*_process_table(limit))).processes) == limit
    rows = _process_table(limit + 1)
    with pytest.raises(ParseError) as excinfo:
        parse(_text(*rows))
    assert str(excinfo.value) == f"more than {limit} process rows (line {len(rows)}: {rows[-1]!r})"
    assert (excinfo.value.line_no, excinfo.value.line) == (len(rows), rows[-1])


def test_processes_of_a_chip_the_table_does_not_list_are_skipped_not_the_rest() -> None:
    table = parse(_text(_NPU_HEADER, _CHIP_HEADER, _NPU0, _CHIP0, _PROCESS_HEADER,
                        "| 9 0 | 77 | python | 10 |", "| 0 0 | 78 | python | 10 |"))
    counts = [(s.labels, s.value) for s in samples(table, None, CollectContext()) if s.metric == "npu_processes"]
    assert counts == [((("npu", "0"), ("chip", "0")), 1.0)]


def test_npu_info_is_one() -> None:
    table = parse(_text(_NPU_HEADER, _CHIP_HEADER, _NPU0, _CHIP0))
    assert [s.value for s in samples(table, None, CollectContext()) if s.metric == "npu_info"] == [1.0]


@pytest.mark.parametrize("text", ["", " \n\t\n"])
def test_empty_output_names_the_tool(text: str) -> None:
    with pytest.raises(ParseError) as excinfo:
        parse(text)
    assert str(excinfo.value) == "empty npu-smi info output"


def test_output_without_a_row_names_its_first_line() -> None:
    with pytest.raises(ParseError) as excinfo:
        parse("+-----+\n+=====+\n")
    assert str(excinfo.value) == "no valid chip row in npu-smi info output (line 1: '+-----+')"


def test_more_chips_than_the_cap_names_the_first_npu_line_over_it() -> None:
    rows = [_NPU_HEADER, _CHIP_HEADER, _NPU0, _CHIP0, _NPU1, _CHIP1]
    with pytest.raises(ParseError) as excinfo:
        parse(_text(*rows), max_chips=1)
    assert (excinfo.value.line_no, excinfo.value.line) == (5, _NPU1)


def test_headers_without_units_keep_the_usual_column_order() -> None:
    rows = ["| NPU Name | Health | Power Temp Hugepages-Usage |", "| Chip | Bus-Id | AICore Memory-Usage HBM-Usage |",
            "| 0 910B3 | OK | 101.3 41 12 / 64 |", "| 0 | 0000:C1:00.0 | 37 300 / 400 100 / 200 |"]
    table = parse(_text(*rows))
    assert table.rejected == ()
    (chip,) = table.chips
    assert (chip.power_watts, chip.temperature_celsius, chip.hugepages_used, chip.hugepages_total) == \
        (101.3, 41.0, 12.0, 64.0)
    assert (chip.aicore_ratio, chip.memory_used_bytes, chip.hbm_used_bytes) == (0.37, 300 * MIB, 100 * MIB)
