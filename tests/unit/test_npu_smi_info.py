"""Tests of the ``npu-smi info`` table parser and its samples.

Golden files: ``tests/fixtures/npu_smi_tables/info_*.txt`` (synthetic, modelled
on real captures) each sit next to the expected records in ``info_*.json``.
Regenerate after a deliberate change with ``python -m tests.support.golden`` (a separate command: a test run never
writes golden files) and review the diff. Formerly ``NPUWATCH_UPDATE_GOLDEN=1 pytest
tests/unit/test_npu_smi_info.py`` and review the diff.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors import npu_smi_info
from collectors._text import MIB
from collectors.base import ChipRef, CollectContext, ParseError, Sample, ToolError
from collectors.bounds import LIMITS, Rejection, clip
from collectors.catalogue import CATALOGUE
from collectors.npu_smi_info import HEALTH_STATES, chip_refs, health_state, make_source, parse, samples
from collectors.npu_smi_info_records import InfoTable, NpuProcess
from collectors.npu_smi_mapping import MappingRow
from tests.support import golden, paths

FIXTURES = paths.FIXTURES / "npu_smi_tables"
INFO_CASES = sorted(FIXTURES.glob("info_*.txt"))


def _load(name: str) -> InfoTable:
    return parse((FIXTURES / name).read_text())


def _value(out: list[Sample], metric: str, **labels: str) -> float | None:
    wanted = set(labels.items())
    found = [s.value for s in out if s.metric == metric and wanted <= set(s.labels)]
    assert len(found) <= 1, f"{metric}{labels} matched {len(found)} samples"
    return found[0] if found else None


def _metrics(out: list[Sample]) -> set[str]:
    return {s.metric for s in out}


# --- golden files ---------------------------------------------------------------------------------


def test_fixtures_present() -> None:
    assert len(INFO_CASES) >= 8


@pytest.mark.parametrize("case", INFO_CASES, ids=lambda path: path.stem)
def test_golden(case: Path) -> None:
    assert golden.parsed(case) == golden.expected(case)


# --- layouts, value by value ----------------------------------------------------------------------


def test_910b3_values_and_processes() -> None:
    table = _load("info_910b3_x2_procs.txt")
    assert table.version == "24.1.rc2.2"
    assert [(c.npu, c.chip) for c in table.chips] == [(0, 0), (1, 0)]
    first = table.chips[0]
    assert first.power_watts == 101.3
    assert first.temperature_celsius == 41
    assert first.aicore_ratio == pytest.approx(0.37)
    assert first.hbm_used_bytes == 41052 * MIB  # "41052/ 65536": no space before the slash
    assert first.hbm_total_bytes == 65536 * MIB
    assert first.memory_total_bytes == 0
    assert first.bus_id == "0000:C1:00.0"
    assert table.chips[1].health == "Alarm"
    assert table.process_section
    assert [(p.npu, p.chip, p.pid, p.name) for p in table.processes] == [
        (0, 0, 2210418, "python3.10"),
        (0, 0, 2210555, ""),
        (1, 0, 2210418, "python3.10"),
    ]
    assert table.processes[0].memory_bytes == 37600 * MIB


def test_a3_dies_phy_id_and_power_dash() -> None:
    table = _load("info_a3_dies.txt")
    die0, die1 = table.chips[0], table.chips[1]
    assert (die0.npu, die0.chip, die0.phy_id, die0.device_id) == (4, 0, 8, None)
    assert (die1.npu, die1.chip, die1.phy_id) == (4, 1, 9)
    assert die0.power_watts == 171.5
    assert die1.power_watts is None  # '-' on die 1: power is reported per NPU
    assert table.chips[2].health == "Critical"


def test_950_blank_chip_and_wide_process_columns() -> None:
    table = _load("info_950dt_wide_nobanner.txt")
    assert table.version is None  # no banner
    chip = table.chips[0]
    assert (chip.npu, chip.chip, chip.has_chip_id) == (0, 0, False)
    assert chip.aicore_ratio == pytest.approx(0.83)  # NPU Util(%)
    assert chip.hbm_total_bytes == 147456 * MIB
    assert chip.bus_id is None
    unknown = table.chips[1]
    assert unknown.power_watts is None and unknown.temperature_celsius is None
    assert unknown.hbm_used_bytes is None and unknown.hbm_total_bytes is None
    assert [(p.npu, p.chip, p.pid, p.container_pid) for p in table.processes] == [(0, 0, 88123, 412)]


def test_310p_duo_all_dash_separators_group_by_npu_id() -> None:
    table = _load("info_310p_duo_alldash.txt")
    assert [(c.npu, c.chip, c.device_id) for c in table.chips] == [(4, 0, 4), (4, 1, 5), (5, 0, 6), (5, 1, 7)]
    assert table.chips[0].bus_id == table.chips[1].bus_id == "0000:3B:00.0"
    assert all(c.power_watts is None for c in table.chips)
    assert all(c.hbm_total_bytes is None for c in table.chips)  # 310P has no HBM column
    assert table.chips[1].memory_total_bytes == 43693 * MIB


def test_310_old_layout_repeats_npu_row_per_chip() -> None:
    table = _load("info_310_old_repeated.txt")
    assert [(c.npu, c.chip, c.device_id) for c in table.chips] == [(9, 0, 4), (9, 1, 5)]
    assert table.chips[1].power_watts == 12.9
    assert table.chips[0].hugepages_total is None  # no Hugepages column in 20.x
    assert table.chips[0].memory_used_bytes == 2703 * MIB
    assert not table.process_section


def test_truncated_capture_keeps_what_is_there() -> None:
    table = _load("info_truncated.txt")
    assert [(c.npu, c.chip) for c in table.chips] == [(0, 0), (1, 0)]
    assert table.chips[1].power_watts == 90.7
    assert table.chips[1].hbm_total_bytes is None  # the line was cut before the HBM cell


def test_tab_indented_na_values_are_none() -> None:
    table = _load("info_tab_indented.txt")
    broken = table.chips[1]
    assert broken.health == "Degraded"
    assert broken.power_watts is None and broken.temperature_celsius is None  # 'NA', 'N/A'
    assert broken.aicore_ratio is None  # '-'
    assert broken.hugepages_used == 15  # 'N/A' before it did not shift the pair columns
    assert table.chips[0].hbm_used_bytes == 31004 * MIB


def test_vnpu_and_big_ids() -> None:
    table = _load("info_vnpu_bigids.txt")
    assert [(c.npu, c.name) for c in table.chips] == [(100, "310Pvir02"), (65536, "310P3")]
    assert table.chips[1].hugepages_used == 8728
    assert table.processes[0].npu == 65536


def test_wide_26x_process_in_container_na() -> None:
    table = _load("info_910b4_wide_26x.txt")
    assert [p.container_pid for p in table.processes] == [77, None]
    assert table.processes[0].name == ""


def test_chip_line_missing_gets_next_free_chip() -> None:
    text = (
        "| NPU   Name   | Health | Power(W) Temp(C) Hugepages-Usage(page)|\n"
        "| 0     910B3  | OK     | 90.1     40      0 / 0 |\n"
        "| 0     910B3  | OK     | 91.0     41      0 / 0 |\n"
        "| 1                     | 0000:02:00.0 | 5  0 / 0  10 / 20 |\n"
    )
    table = parse(text)
    assert [(c.npu, c.chip, c.power_watts) for c in table.chips] == [(0, 0, 90.1), (0, 1, 91.0)]
    assert table.chips[1].hbm_used_bytes == 10 * MIB


def test_orphan_chip_line_at_top_of_partial_capture_is_skipped() -> None:
    text = (
        "| 0     0      | NA           | 0   1797 / 3513 |\n"
        "| 3     310B4  | OK           | 7.2  37  15 / 15 |\n"
        "| 0     0      | NA           | 0   1797 / 3513 |\n"
    )
    table = parse(text)
    assert [(c.npu, c.chip, c.name) for c in table.chips] == [(3, 0, "310B4")]


# --- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   \n\t\n"])
def test_empty_output_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError) as excinfo:
        parse(text)
    assert not isinstance(excinfo.value, ToolError)


def test_invalid_card_id_and_usage_is_a_tool_error() -> None:
    text = (
        "Invalid card id.\n"
        "Error parameter of -i\n"
        "Usage: npu-smi info <watch|proc|-h|-m|-l|-t type> [Options...]\n"
    )
    with pytest.raises(ToolError, match="Invalid card id"):
        parse(text)


@pytest.mark.parametrize(
    "text",
    [
        "hello world\nthis is not a table\n",
        "+-----+\n| npu-smi 25.2.0  Version: 25.2.0 |\n+-----+\n",
        "| NPU Name | Health | Power(W) Temp(C) |\n| Chip | Bus-Id | AICore(%) Memory-Usage(MB) |\n",
        "| 0 0 | 0000:01:00.0 | 0 0 / 0 1 / 2 |\n",
    ],
    ids=["garbage", "banner-only", "header-only", "chip-line-only"],
)
def test_not_a_table_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError) as excinfo:
        parse(text)
    assert not isinstance(excinfo.value, ToolError)
    assert excinfo.value.line_no == 1


# --- samples --------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", INFO_CASES, ids=lambda path: path.stem)
def test_samples_follow_the_catalogue(case: Path) -> None:
    out = samples(parse(case.read_text()), None, CollectContext(per_process_metrics=True))
    assert out
    series = set()
    for sample in out:
        spec = CATALOGUE[sample.metric]
        assert spec.source == "npu_smi_info"
        assert tuple(name for name, _ in sample.labels) == spec.labels
        assert math.isfinite(sample.value)
        key = (sample.metric, sample.labels)
        assert key not in series, f"duplicate series {key}"
        series.add(key)


def test_samples_910b3() -> None:
    out = samples(_load("info_910b3_x2_procs.txt"), None, CollectContext())
    assert _value(out, "npu_chips") == 2
    assert _value(out, "npu_power_watts", npu="0", chip="0") == 101.3
    assert _value(out, "npu_temperature_celsius", npu="1", chip="0") == 44
    assert _value(out, "npu_aicore_utilization_ratio", npu="1", chip="0") == 1.0
    assert _value(out, "npu_hbm_used_bytes", npu="0", chip="0") == 41052 * MIB
    assert _value(out, "npu_hbm_total_bytes", npu="0", chip="0") == 65536 * MIB
    assert "npu_memory_used_bytes" not in _metrics(out)  # DDR 0 / 0 on 910B is skipped
    assert "npu_memory_total_bytes" not in _metrics(out)
    assert _value(out, "npu_healthy", npu="0", chip="0") == 1
    assert _value(out, "npu_healthy", npu="1", chip="0") == 0
    states = {dict(s.labels)["state"]: s.value for s in out
              if s.metric == "npu_health_state" and ("npu", "1") in s.labels}
    assert states == {"ok": 0, "warning": 0, "alarm": 1, "critical": 0, "unknown": 0}
    assert _value(out, "npu_processes", npu="0", chip="0") == 2
    assert _value(out, "npu_processes", npu="1", chip="0") == 1
    assert "npu_process_memory_bytes" not in _metrics(out)  # opt-in only


def test_samples_310p_memory_and_absent_power() -> None:
    out = samples(_load("info_310p_duo_alldash.txt"), None, CollectContext())
    assert _value(out, "npu_memory_used_bytes", npu="4", chip="0") == 3561 * MIB
    assert _value(out, "npu_memory_total_bytes", npu="4", chip="1") == 43693 * MIB
    assert "npu_power_watts" not in _metrics(out)
    assert "npu_hbm_used_bytes" not in _metrics(out)
    assert _value(out, "npu_processes", npu="5", chip="1") == 0  # chips without a process row count 0


def test_samples_without_process_section_have_no_process_counts() -> None:
    out = samples(_load("info_310_old_repeated.txt"), None, CollectContext())
    assert "npu_processes" not in _metrics(out)
    assert _value(out, "npu_chips") == 2


def test_samples_950_unknown_health_and_missing_values() -> None:
    out = samples(_load("info_950dt_wide_nobanner.txt"), None, CollectContext())
    assert _value(out, "npu_healthy", npu="1", chip="0") == 0
    assert _value(out, "npu_health_state", npu="1", chip="0", state="unknown") == 1
    assert _value(out, "npu_health_state", npu="1", chip="0", state="ok") == 0
    assert _value(out, "npu_power_watts", npu="1", chip="0") is None
    assert _value(out, "npu_hbm_used_bytes", npu="1", chip="0") is None
    assert _value(out, "npu_power_watts", npu="0", chip="0") == 412.7


def test_npu_info_labels_from_table_and_inventory() -> None:
    table = _load("info_a3_dies.txt")
    ctx = CollectContext(inventory={(4, 1): {"logic_id": "1", "serial": "SN41", "firmware": "7.7.0.1",
                                             "driver": "25.3.rc1"}})
    infos = [dict(s.labels) for s in samples(table, None, ctx) if s.metric == "npu_info"]
    assert len(infos) == 4
    assert infos[1] == {"npu": "4", "chip": "1", "model": "Ascend910", "bus_id": "0000:5D:00.0",
                        "logic_id": "1", "serial": "SN41", "firmware": "7.7.0.1", "driver": "25.3.rc1"}
    assert infos[0]["logic_id"] == infos[0]["serial"] == infos[0]["firmware"] == ""


def test_process_memory_opt_in_with_and_without_owner() -> None:
    table = _load("info_910b3_x2_procs.txt")
    plain = samples(table, None, CollectContext(per_process_metrics=True))
    mem = {dict(s.labels)["pid"] + "/" + dict(s.labels)["npu"]: (dict(s.labels), s.value)
           for s in plain if s.metric == "npu_process_memory_bytes"}
    assert set(mem) == {"2210418/0", "2210555/0", "2210418/1"}
    assert mem["2210418/0"][0]["process"] == "python3.10" and mem["2210418/0"][0]["user"] == ""
    assert mem["2210418/0"][1] == 37600 * MIB

    def owner(pid: int) -> tuple[str, str]:
        return ("vllm" if pid == 2210418 else "", "alice")

    owned = samples(table, None, CollectContext(per_process_metrics=True, process_owner=owner))
    labels = [dict(s.labels) for s in owned if s.metric == "npu_process_memory_bytes"]
    assert {(lab["pid"], lab["process"], lab["user"]) for lab in labels} == {
        ("2210418", "vllm", "alice"), ("2210555", "", "alice")}


def test_same_pid_twice_on_one_chip_is_summed() -> None:
    text = (FIXTURES / "info_910b4_wide_26x.txt").read_text().replace("3326001", "3325989")
    out = samples(parse(text), None, CollectContext(per_process_metrics=True))
    assert _value(out, "npu_process_memory_bytes", pid="3325989") == (17200 + 300) * MIB
    assert _value(out, "npu_processes", npu="0", chip="0") == 2


@pytest.mark.parametrize(
    ("printed", "state"),
    [("OK", "ok"), ("Warning", "warning"), ("Alarm", "alarm"), ("Critical", "critical"),
     ("UNKNOWN", "unknown"), ("Degraded", "unknown"), ("", "unknown"), (" ok ", "ok")],
)
def test_health_state(printed: str, state: str) -> None:
    assert health_state(printed) == state
    assert state in HEALTH_STATES


# --- chip refs and the Source ---------------------------------------------------------------------


def test_chip_refs_with_mapping() -> None:
    table = _load("info_a3_dies.txt")
    mapping = (
        MappingRow(npu=4, chip=0, logic_id=6, phy_id=None, name="Ascend 910", is_mcu=False),
        MappingRow(npu=4, chip=1, logic_id=7, phy_id=None, name="Ascend 910", is_mcu=False),
        MappingRow(npu=4, chip=2, logic_id=None, phy_id=None, name="Mcu", is_mcu=True),
    )
    refs = chip_refs(table, mapping)
    assert refs[:2] == [ChipRef(4, 0, True, 6, 8), ChipRef(4, 1, True, 7, 9)]
    assert refs[2] == ChipRef(5, 0, True, None, 10)
    assert chip_refs(table) == [ChipRef(c.npu, c.chip, True, None, c.phy_id) for c in table.chips]


def test_chip_refs_950_phy_id_from_mapping() -> None:
    table = _load("info_950dt_wide_nobanner.txt")
    mapping = [MappingRow(npu=1, chip=0, logic_id=None, phy_id=5, name="Ascend 950DT", is_mcu=False)]
    refs = chip_refs(table, mapping)
    assert refs == [ChipRef(0, 0, False, None, None), ChipRef(1, 0, False, None, 5)]


def test_source_wiring() -> None:
    source = npu_smi_info.SOURCE
    assert (source.name, source.tool, source.group) == ("npu_smi_info", "npu-smi", "info")
    assert source.scope == "node"
    assert source.argv(None) == ["info"]
    text = (FIXTURES / "info_910b3_x2_procs.txt").read_text()
    records = source.parse(text)
    assert list(records) == [parse(text)]
    ctx = CollectContext()
    assert source.samples(records, None, ctx) == samples(parse(text), None, ctx)


# --- robustness -----------------------------------------------------------------------------------

_TABLE_ALPHABET = st.sampled_from(
    [*"|+-= /.:\t\n0123456789ABCDNOKPabcdx", "NA", "N/A", "OK", "Ascend910", "Bus-Id", "Health", "Name",
     "Process id", "Phy-ID"]
)


def _parse_or_parse_error(text: str) -> None:
    try:
        table = parse(text)
    except ParseError:
        return
    out = samples(table, None, CollectContext(per_process_metrics=True))
    assert all(math.isfinite(s.value) for s in out)
    assert table.chips


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
def test_arbitrary_text_only_raises_parse_error(text: str) -> None:
    _parse_or_parse_error(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_TABLE_ALPHABET, max_size=300).map("".join))
def test_table_like_text_only_raises_parse_error(text: str) -> None:
    _parse_or_parse_error(text)


@st.composite
def _mutated_table(draw: st.DrawFn) -> str:
    lines = draw(st.sampled_from(INFO_CASES)).read_text().splitlines()
    for _ in range(draw(st.integers(1, 6))):
        if not lines:
            break
        index = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["drop", "dup", "cut", "swap", "insert", "replace", "unpipe"]))
        if action == "drop":
            del lines[index]
        elif action == "dup":
            lines.insert(index, lines[index])
        elif action == "cut":
            lines[index] = lines[index][: draw(st.integers(0, len(lines[index])))]
        elif action == "swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[index], lines[other] = lines[other], lines[index]
        elif action == "insert":
            lines.insert(index, draw(st.text(max_size=80)))
        elif action == "replace" and lines[index]:
            position = draw(st.integers(0, len(lines[index]) - 1))
            char = draw(st.characters())
            lines[index] = lines[index][:position] + char + lines[index][position + 1:]
        elif action == "unpipe":
            lines[index] = lines[index].replace("|", draw(st.sampled_from([" ", "||", "/", ""])))
    return "\n".join(lines)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated_table())
def test_mutated_tables_only_raise_parse_error(text: str) -> None:
    _parse_or_parse_error(text)


# --- hostile output: rows off the layout, impossible values, too many chips -----------------------

_HEADER = (
    "| npu-smi 24.1.rc2.2               Version: 24.1.rc2.2                                           |\n"
    "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n"
    "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n"
)


def _npu_row(npu: object = 0, name: str = "910B3", *, health: str = "OK", power: str = "90.5", temp: str = "41",
             hugepages: str = "0 / 0") -> str:
    return f"| {npu}     {name}          | {health}            | {power}       {temp}           {hugepages}  |\n"


def _chip_row(chip: object = 0, bus: str = "0000:C1:00.0", *, aicore: str = "37", memory: str = "0 / 0",
              hbm: str = "3397 / 65536") -> str:
    return f"| {chip}                         | {bus}  | {aicore}          {memory}          {hbm}         |\n"


def _table(*rows: str) -> str:
    return _HEADER + "".join(rows)


_GOOD = _npu_row(1) + _chip_row(0, "0000:01:00.0")


@pytest.mark.parametrize(
    ("rows", "reason"),
    [
        (_npu_row("x1") + _chip_row(), "NPU ID 'x1' is not an integer"),
        (_npu_row(0, "910\x01B3") + _chip_row(), "control characters"),
        (_npu_row(0, "910B3\x1b[31m") + _chip_row(), "control characters"),
        (_npu_row(0, "Ascend\u00e9910") + _chip_row(), "Name 'Ascend\u00e9910' is not a chip name"),
        (_npu_row(0, "A" * 40) + _chip_row(), "is not a chip name"),
        (_npu_row(0, health="O\u00fcK") + _chip_row(), "Health 'O\u00fcK' is not a health word"),
        (_npu_row(0) + _chip_row(bus="0000:ZZ:00.0"), "Bus-Id '0000:ZZ:00.0' is neither a PCI address nor NA"),
        (_npu_row(0) + _chip_row(bus="NA\x7f"), "control characters"),
        (_npu_row(0, power="9o.5") + _chip_row(), "'9o.5' is not a number"),
        (_npu_row(0) + _chip_row(hbm="3397 / 6553b"), "'3397/6553b' is not a 'used / total' pair"),
        (_npu_row(0) + _chip_row(aicore="37 12 99"), "values for 3 columns"),
        (_npu_row(0) + _chip_row(chip="99999999999"), "chip id 99999999999 is beyond any id"),
    ],
    ids=["npu-id", "name-control", "name-escape", "name-non-ascii", "name-too-long", "health", "bus-id",
         "bus-control", "power-text", "hbm-text", "too-many-values", "chip-id-range"],
)
def test_a_row_off_the_layout_is_dropped_and_reported_with_its_line(rows: str, reason: str) -> None:
    bad_first_line = _HEADER.count("\n") + 1
    table = parse(_table(rows, _GOOD))
    assert [(c.npu, c.chip) for c in table.chips] == [(1, 0)]  # the healthy chip survives
    assert len(table.rejected) == 1, table.rejected
    rejection = table.rejected[0]
    assert reason in rejection.reason
    assert rejection.line_no in (bad_first_line, bad_first_line + 1)
    bad_line = _table(rows).splitlines()[rejection.line_no - 1].strip()
    assert rejection.line == clip(bad_line)  # at most 80 characters, control characters escaped
    assert len(rejection.line) <= 80 and rejection.line.isprintable()
    out = samples(table, None, CollectContext())
    assert {dict(s.labels).get("npu") for s in out if s.labels} == {"1"}


def test_a_table_of_only_bad_rows_is_a_parse_error_naming_the_first_line() -> None:
    text = _table(_npu_row(0, "910\x00B3\x00" + "x" * 100) + _chip_row(), _npu_row("NaN") + _chip_row())
    with pytest.raises(ParseError, match="no valid chip row") as excinfo:
        parse(text)
    assert excinfo.value.line_no == 4
    assert excinfo.value.line is not None and len(excinfo.value.line) <= 80
    assert "control characters" in str(excinfo.value)


@pytest.mark.parametrize(
    ("rows", "field", "reason"),
    [
        (_npu_row(0, power="-3.0") + _chip_row(), "power_watts", "Power(W) -3 outside 0..2000 W"),
        (_npu_row(0, power="2400.0") + _chip_row(), "power_watts", "Power(W) 2400 outside"),
        (_npu_row(0, temp="151") + _chip_row(), "temperature_celsius", "Temp(C) 151 outside -40..150 C"),
        (_npu_row(0, temp="-41") + _chip_row(), "temperature_celsius", "Temp(C) -41 outside"),
        (_npu_row(0) + _chip_row(aicore="101"), "aicore_ratio", "AICore(%) 101 outside 0..100 %"),
        (_npu_row(0) + _chip_row(aicore="-1"), "aicore_ratio", "AICore(%) -1 outside"),
        (_npu_row(0) + _chip_row(hbm="3397 / 1048577"), "hbm_total_bytes", "HBM-Usage(MB) total 1.04858e+06 outside"),
        (_npu_row(0) + _chip_row(hbm="65538 / 65536"), "hbm_used_bytes",
         "HBM-Usage(MB) used 65538 exceeds total 65536"),
        (_npu_row(0) + _chip_row(memory="9 / 0"), "memory_used_bytes", "Memory-Usage(MB) used 9 exceeds total 0"),
        (_npu_row(0, hugepages="-1 / 15") + _chip_row(), "hugepages_used", "Hugepages-Usage(page) used -1 outside"),
    ],
    ids=["power-negative", "power-2.4kW", "temp-151", "temp-minus-41", "aicore-101", "aicore-negative",
         "hbm-over-1TiB", "hbm-used-over-total", "ddr-used-over-total", "hugepages-negative"],
)
def test_an_impossible_value_is_dropped_and_reported_but_the_chip_stays(rows: str, field: str, reason: str) -> None:
    table = parse(_table(rows, _GOOD))
    assert [(c.npu, c.chip) for c in table.chips] == [(0, 0), (1, 0)]
    assert getattr(table.chips[0], field) is None
    assert getattr(table.chips[1], field) is not None
    assert [r.reason for r in table.rejected if reason in r.reason], table.rejected
    assert all(r.line_no in (4, 5) for r in table.rejected)
    metric = {"power_watts": "npu_power_watts", "temperature_celsius": "npu_temperature_celsius",
              "aicore_ratio": "npu_aicore_utilization_ratio"}.get(field)
    if metric is not None:
        assert _value(samples(table, None, CollectContext()), metric, npu="0", chip="0") is None


def test_rounding_slack_and_limits_themselves_are_accepted() -> None:
    rows = _npu_row(0, power="2000", temp="-40") + _chip_row(aicore="100", hbm="65537 / 65536")
    chip = parse(_table(rows)).chips[0]
    assert (chip.power_watts, chip.temperature_celsius, chip.aicore_ratio) == (2000, -40, 1.0)
    assert chip.hbm_used_bytes == 65537 * MIB  # 1 MB over total is rounding, not a fault


def test_the_same_chip_twice_keeps_the_first_and_reports_the_second() -> None:
    table = parse(_table(_npu_row(0, power="90.5") + _chip_row(), _npu_row(0, power="12.0") + _chip_row()))
    assert [c.power_watts for c in table.chips] == [90.5]
    assert [r.line_no for r in table.rejected] == [7]
    assert "listed twice" in table.rejected[0].reason


def test_more_chips_than_max_chips_is_a_parse_error_naming_the_first_extra_chip() -> None:
    rows = [_npu_row(npu) + _chip_row() for npu in range(65)]
    with pytest.raises(ParseError, match=r"65 chips, more than max_chips=64") as excinfo:
        parse(_table(*rows))
    assert excinfo.value.line_no == 4 + 64 * 2
    assert len(parse(_table(*rows[:64])).chips) == 64
    assert len(parse(_table(*rows), max_chips=100).chips) == 65
    with pytest.raises(ParseError, match=r"3 chips, more than max_chips=2"):
        npu_smi_info.make_source(max_chips=2).parse(_table(*rows[:3]))


def test_a_4mib_table_of_bogus_rows_is_refused_not_turned_into_series() -> None:
    rows = [_npu_row(npu % 100_000, f"X{npu}") + _chip_row(npu % 7) for npu in range(26_000)]
    text = _table(*rows)
    assert len(text) > 4 << 20
    with pytest.raises(ParseError, match=r"chips, more than max_chips=64"):
        npu_smi_info.SOURCE.parse(text)


def test_many_npu_lines_without_chip_lines_take_linear_chip_indexes() -> None:
    # The "next free chip" search used to rescan every chip of the NPU: quadratic in rows.
    text = _table(*[_npu_row(0) for _ in range(3000)])
    table = parse(text, max_chips=5000)
    assert [c.chip for c in table.chips] == list(range(3000))


def test_over_long_lines_are_rejected_before_any_pattern_runs() -> None:
    long_header = "| NPU Name | Health | " + "Power" * 400 + " Temp(C) |"
    table = parse(_table(long_header + "\n", _GOOD))
    assert [r.reason for r in table.rejected] == ["line longer than 1024 characters"]
    assert len(table.rejected[0].line) == 80


def test_process_rows_are_checked_and_only_listed_chips_get_series() -> None:
    text = _table(_GOOD) + (
        "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |\n"
        "| 1       0                 | 2210418       | python3.10               | 37600                   |\n"
        "| 1       0                 | 0             | python3.10               | 1                       |\n"
        "| 1       0                 | 2210419       | py\u00e9thon                  | 20                      |\n"
        "| 1       0                 | 2210420       | python                   | 99999999999             |\n"
        "| 1       0                 | 2210421       | python                   | lots                    |\n"
        "| 9       0                 | 2210422       | python                   | 5                       |\n"
    )
    table = parse(text)
    assert [(p.pid, p.name, p.memory_bytes) for p in table.processes] == [
        (2210418, "python3.10", 37600 * MIB), (2210419, "", 20 * MIB), (2210420, "python", None),
        (2210422, "python", 5 * MIB)]
    reasons = [r.reason for r in table.rejected]
    assert len(reasons) == 4
    assert "Process id '0' is not a pid" in reasons[0]
    assert "process name is not printable ASCII" in reasons[1]
    assert "Process memory(MB) 1e+11 outside" in reasons[2]
    assert "Process memory 'lots' is not a number" in reasons[3]
    out = samples(table, None, CollectContext(per_process_metrics=True))
    assert {(dict(s.labels)["npu"], dict(s.labels)["chip"]) for s in out if s.metric.startswith("npu_process")} == {
        ("1", "0")}  # npu 9 is not in the table: no series invented for it
    assert _value(out, "npu_processes", npu="1", chip="0") == 3


def test_labels_from_inventory_and_psutil_are_printable_or_empty() -> None:
    table = _load("info_910b3_x2_procs.txt")
    ctx = CollectContext(
        inventory={(0, 0): {"serial": "SN\x00\x1b[2J", "firmware": "7.1", "driver": "d" * 65, "logic_id": "0"}},
        per_process_metrics=True,
        process_owner=lambda pid: ("evil\nname", "root\x00"),
    )
    out = samples(table, None, ctx)
    info = next(dict(s.labels) for s in out if s.metric == "npu_info" and ("npu", "0") in s.labels)
    assert (info["serial"], info["firmware"], info["driver"], info["logic_id"]) == ("", "7.1", "", "0")
    owners = {(dict(s.labels)["process"], dict(s.labels)["user"])
              for s in out if s.metric == "npu_process_memory_bytes"}
    assert owners == {("python3.10", ""), ("", "")}


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


def test_per_process_usage_is_cpu_time_start_and_a_bounded_command_line() -> None:
    table = _load("info_910b3_x2_procs.txt")
    usage = {2210418: (12.5, 1_796_600_000.0, "python3 train.py --cfg a\x00b " + "x" * 200)}
    out = samples(table, None, CollectContext(per_process_metrics=True, process_usage=usage.get))
    assert _value(out, "npu_process_cpu_seconds_total", pid="2210418", npu="0") == 12.5
    assert _value(out, "npu_process_start_time_seconds", pid="2210418", npu="1") == 1_796_600_000.0
    commands = {dict(s.labels)["command"] for s in out if s.metric == "npu_process_info"}
    assert len(commands) == 1
    command = commands.pop()
    assert command.startswith("python3 train.py --cfg a?b ") and command.endswith("...") and len(command) == 120
    assert not [s for s in out if dict(s.labels).get("pid") == "2210555" and s.metric != "npu_process_memory_bytes"]
    off = samples(table, None, CollectContext(per_process_metrics=False, process_usage=usage.get))
    assert not [s for s in off if s.metric.startswith("npu_process_") and s.metric != "npu_processes"]
