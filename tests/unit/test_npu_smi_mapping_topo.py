"""Tests of the ``npu-smi info -m`` / ``-l`` / ``-t topo`` parsers.

Golden files: ``tests/fixtures/npu_smi_tables/{mapping,list,topo}_*.txt`` (synthetic)
with the expected records in the matching ``.json``. Regenerate with ``python -m tests.support.golden`` (never
from a test run) and review the diff.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors import npu_smi_list, npu_smi_mapping, npu_smi_topo
from collectors.base import CollectContext, ParseError, ToolError
from collectors.catalogue import CATALOGUE
from tests.support import golden, paths
from tests.support.invariants import assert_rejections_come_from, assert_values_within_bounds

FIXTURES = paths.FIXTURES / "npu_smi_tables"
PARSERS: dict[str, Callable[[str], Any]] = {
    "mapping": npu_smi_mapping.parse,
    "list": npu_smi_list.parse,
    "topo": npu_smi_topo.parse,
}
CASES = sorted(path for kind in PARSERS for path in FIXTURES.glob(f"{kind}_*.txt"))
ERROR_TEXT = (
    "Invalid card id.\n"
    "Error parameter of -i\n"
    "Usage: npu-smi info <watch|proc|-h|-m|-l|-t type> [Options...]\n"
)


def _as_json(records: Any) -> Any:
    if dataclasses.is_dataclass(records) and not isinstance(records, type):
        return json.loads(json.dumps(dataclasses.asdict(records)))
    return json.loads(json.dumps([dataclasses.asdict(record) for record in records]))


def _read(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize("case", CASES, ids=lambda path: path.stem)
def test_golden(case: Path) -> None:
    assert golden.parsed(case) == golden.expected(case)


def test_every_kind_has_fixtures() -> None:
    kinds = {path.stem.split("_")[0] for path in CASES}
    assert kinds == set(PARSERS)


# --- -m mapping -----------------------------------------------------------------------------------


def test_mapping_mcu_rows_and_names_with_spaces() -> None:
    rows = npu_smi_mapping.parse(_read("mapping_910b4_mcu.txt"))
    assert [(r.npu, r.chip, r.logic_id, r.name, r.is_mcu) for r in rows[:2]] == [
        (0, 0, 0, "Ascend 910B4", False),
        (0, 1, None, "Mcu", True),
    ]
    assert rows[4].npu == 3 and rows[4].logic_id == 2
    assert npu_smi_mapping.inventory(rows) == {
        (0, 0): {"logic_id": "0"}, (1, 0): {"logic_id": "1"}, (3, 0): {"logic_id": "2"}}


def test_mapping_a3_phy_id_column() -> None:
    rows = npu_smi_mapping.parse(_read("mapping_a3_phyid.txt"))
    assert [(r.npu, r.chip, r.logic_id, r.phy_id) for r in rows if not r.is_mcu] == [
        (0, 0, 0, 0), (0, 1, 1, 1), (1, 0, 2, 2), (1, 1, 3, 3)]
    assert rows[2].is_mcu and rows[2].phy_id is None


def test_mapping_950_has_no_logic_id() -> None:
    rows = npu_smi_mapping.parse(_read("mapping_950.txt"))
    assert [(r.npu, r.chip, r.logic_id, r.phy_id, r.name) for r in rows] == [
        (0, 0, None, 0, "Ascend 950DT"), (1, 0, None, 1, "Ascend 950DT")]
    assert npu_smi_mapping.inventory(rows) == {}


def test_mapping_misaligned_minid() -> None:
    rows = npu_smi_mapping.parse(_read("mapping_310_minid_misaligned.txt"))
    assert [(r.npu, r.chip, r.logic_id, r.name) for r in rows] == [
        (12, 0, 4, "MiniD"), (12, 1, 5, "MiniD"), (12, 2, None, "Mcu")]


def test_mapping_without_header_uses_default_columns() -> None:
    rows = npu_smi_mapping.parse("3   0   5   Ascend 910B3\n")
    assert [(r.npu, r.chip, r.logic_id, r.name) for r in rows] == [(3, 0, 5, "Ascend 910B3")]


def test_mapping_source() -> None:
    source = npu_smi_mapping.SOURCE
    assert (source.name, source.group, source.scope) == ("npu_smi_mapping", "inventory", "node")
    assert source.argv(None) == ["info", "-m"]
    assert source.samples(source.parse(_read("mapping_a3_phyid.txt")), None, CollectContext()) == []


# --- -l list --------------------------------------------------------------------------------------


def test_list_card_count_serials_and_chip_counts() -> None:
    listing = npu_smi_list.parse(_read("list_cards.txt"))
    assert listing.total == 3
    assert [(n.npu, n.chip_count, n.product_name, n.serial) for n in listing.npus] == [
        (1, 2, "Atlas 300I Duo", "102345678901"),
        (2, 2, "Atlas 300I Duo", None),  # 'NA'
        (7, 1, None, None),  # no blank line before it: still its own NPU
    ]
    assert npu_smi_list.inventory(listing) == {
        (1, 0): {"serial": "102345678901"}, (1, 1): {"serial": "102345678901"}}
    assert npu_smi_list.inventory(listing, chips=[(1, 0), (2, 0)]) == {(1, 0): {"serial": "102345678901"}}


def test_list_source_is_opt_in() -> None:
    source = npu_smi_list.SOURCE
    assert source.argv(None) == ["info", "-l"]
    assert source.default_enabled is False
    assert source.group == "inventory"


# --- topo -----------------------------------------------------------------------------------------


def test_topo_matrix_and_legend_ignored() -> None:
    links = npu_smi_topo.parse(_read("topo_4npu_mixed.txt"))
    assert len(links) == 16  # 4 x 4, the 'NPU9 = ...' legend line is not a row
    by_pair = {(link.npu, link.peer): link for link in links}
    assert by_pair[(2, 3)].link_type == "HCCS_SW"
    assert by_pair[(0, 2)].link_type == "PIX"
    assert by_pair[(1, 1)].link_type == "X"
    assert by_pair[(3, 0)].cpu_affinity == "32-63"


def test_topo_shrinking_columns_and_missing_affinity() -> None:
    links = npu_smi_topo.parse(_read("topo_shrinking_cols.txt"))
    by_pair = {(link.npu, link.peer): link for link in links}
    assert len(by_pair) == 36
    assert by_pair[(4, 5)].link_type == "UB"
    assert by_pair[(4, 5)].cpu_affinity is None
    assert by_pair[(0, 5)].link_type == "NA"
    assert by_pair[(5, 0)].cpu_affinity == "64-127"


def test_topo_samples_skip_self() -> None:
    links = npu_smi_topo.parse(_read("topo_4npu_mixed.txt"))
    out = npu_smi_topo.samples(links, None, CollectContext())
    assert len(out) == 12
    spec = CATALOGUE["npu_topology_link"]
    assert all(tuple(name for name, _ in s.labels) == spec.labels and s.value == 1 for s in out)
    labels = {tuple(value for _, value in s.labels) for s in out}
    assert ("2", "3", "HCCS_SW") in labels
    assert not any(npu == peer for npu, peer, _ in labels)
    source = npu_smi_topo.SOURCE
    assert source.argv(None) == ["info", "-t", "topo"]
    assert (source.name, source.group) == ("npu_smi_topo", "inventory")
    assert source.samples(source.parse(_read("topo_4npu_mixed.txt")), None, CollectContext()) == out


def test_topo_a3_container_labels_dies_by_phy_id_without_cpu_affinity() -> None:
    links = npu_smi_topo.parse(_read("topo_a3_phyid_container.txt"))
    assert [(link.npu, link.peer, link.link_type, link.cpu_affinity) for link in links] == [
        (12, 12, "X", None), (12, 13, "SIO", None), (13, 12, "SIO", None), (13, 13, "X", None)]
    labels = {tuple(value for _, value in s.labels) for s in npu_smi_topo.samples(links, None, CollectContext())}
    assert labels == {("12", "13", "SIO"), ("13", "12", "SIO")}
    four = ("           Phy-ID0    Phy-ID1    Phy-ID2    Phy-ID3\n"
            "Phy-ID0    X          SIO        HCCS_SW    HCCS_SW\n"
            "Phy-ID1    SIO        X          HCCS_SW    HCCS_SW\n"
            "Phy-ID2    HCCS_SW    HCCS_SW    X          SIO\n"
            "Phy-ID3    HCCS_SW    HCCS_SW    SIO        X\n")
    by_pair = {(link.npu, link.peer): link.link_type for link in npu_smi_topo.parse(four)}
    assert len(by_pair) == 16 and by_pair[(0, 1)] == "SIO" and by_pair[(1, 2)] == "HCCS_SW"
    one = npu_smi_topo.parse("           Phy-ID12\nPhy-ID12   X\n")
    assert one == [npu_smi_topo.TopoLink(12, 12, "X", None)]


def test_topo_single_npu_header() -> None:
    links = npu_smi_topo.parse("           NPU0       CPU Affinity\nNPU0       X          0-23\n")
    assert links == [npu_smi_topo.TopoLink(0, 0, "X", "0-23")]
    assert npu_smi_topo.samples(links, None, CollectContext()) == []


# --- errors and robustness ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_error_text_is_a_tool_error(kind: str) -> None:
    with pytest.raises(ToolError):
        PARSERS[kind](ERROR_TEXT)


@pytest.mark.parametrize("kind", sorted(PARSERS))
@pytest.mark.parametrize("text", ["", "\n  \n", "some random words\nmore words\n"])
def test_empty_or_garbage_is_a_parse_error(kind: str, text: str) -> None:
    with pytest.raises(ParseError) as excinfo:
        PARSERS[kind](text)
    assert not isinstance(excinfo.value, ToolError)


@st.composite
def _mutated(draw: st.DrawFn) -> tuple[str, str]:
    case = draw(st.sampled_from(CASES))
    lines = case.read_text().splitlines()
    for _ in range(draw(st.integers(1, 5))):
        if not lines:
            break
        index = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["drop", "dup", "cut", "insert", "replace"]))
        if action == "drop":
            del lines[index]
        elif action == "dup":
            lines.insert(index, lines[index])
        elif action == "cut":
            lines[index] = lines[index][: draw(st.integers(0, len(lines[index])))]
        elif action == "insert":
            lines.insert(index, draw(st.text(max_size=60)))
        elif lines[index]:
            position = draw(st.integers(0, len(lines[index]) - 1))
            lines[index] = lines[index][:position] + draw(st.characters()) + lines[index][position + 1:]
    return case.stem.split("_")[0], "\n".join(lines)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
def test_mutated_outputs_only_raise_parse_error(kind_and_text: tuple[str, str]) -> None:
    kind, text = kind_and_text
    try:
        records = PARSERS[kind](text)
    except ParseError:
        return
    if kind == "topo":
        npu_smi_topo.samples(records, None, CollectContext())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(PARSERS)), st.text())
def test_arbitrary_text_only_raises_parse_error(kind: str, text: str) -> None:
    try:
        records = PARSERS[kind](text)
    except ParseError:
        return
    assert_values_within_bounds(records)
    assert_rejections_come_from(records, text)


# --- hostile output: bad rows dropped and reported, caps --------------------------------------------

_MAPPING_HEADER = "NPU ID    Chip ID    Chip Logic ID    Chip Name\n"


@pytest.mark.parametrize(("row", "reason"), [
    ("x1    0    0    Ascend 910B4", "NPU ID 'x1' is not an integer"),
    ("1    zero    0    Ascend 910B4", "Chip ID 'zero' is not an integer"),
    ("1    0    0    Ascend 910\u00e9", "Chip Name is not printable ASCII"),
    ("1    0    0    Ascend\x1b[2J 910B4", "control characters"),
    ("99999999999    0    0    Ascend 910B4", "id 99999999999 is beyond any id"),
    ("0    0    7    Ascend 910B4", "npu 0 chip 0 is listed twice"),
])
def test_mapping_bad_rows_are_dropped_and_reported(row: str, reason: str) -> None:
    rows = npu_smi_mapping.parse(_MAPPING_HEADER + "0    0    0    Ascend 910B4\n" + row + "\n")
    assert [(r.npu, r.chip, r.logic_id) for r in rows] == [(0, 0, 0)]
    assert len(rows.rejected) == 1 and reason in rows.rejected[0].reason  # type: ignore[attr-defined]
    assert rows.rejected[0].line_no == 3  # type: ignore[attr-defined]


def test_mapping_of_only_bad_rows_is_a_parse_error_naming_the_line() -> None:
    with pytest.raises(ParseError, match="NPU ID 'x1' is not an integer") as excinfo:
        npu_smi_mapping.parse(_MAPPING_HEADER + "x1    0    0    Ascend 910B4\n")
    assert excinfo.value.line_no == 2


def test_list_labels_and_counts_are_checked() -> None:
    text = ("Total Count : 2\n\nNPU ID : 0\nProduct Name : Atlas\u00ae 300I\nSerial Number : SN\x07\n"
            "Chip Count : 999\n\nNPU ID : 1\nSerial Number : " + "9" * 65 + "\nChip Count : 1\n")
    listing = npu_smi_list.parse(text)
    assert [(n.npu, n.product_name, n.serial, n.chip_count) for n in listing.npus] == [
        (0, None, None, None), (1, None, None, 1)]
    assert [r.line_no for r in listing.rejected] == [4, 5, 6, 9]
    assert npu_smi_list.inventory(listing) == {}


def test_list_with_more_npus_than_the_cap_is_a_parse_error() -> None:
    text = "".join(f"NPU ID : {n}\nChip Count : 64\nSerial Number : SN{n}\n\n" for n in range(65))
    with pytest.raises(ParseError, match="more than max_npus=64 NPUs"):
        npu_smi_list.parse(text)
    assert len(npu_smi_list.parse(text, max_npus=65).npus) == 65


def test_topo_header_beyond_max_chips_is_refused_and_stray_rows_are_rejected() -> None:
    header = " ".join(f"NPU{n}" for n in range(65)) + " CPU Affinity\n"
    with pytest.raises(ParseError, match="65 NPUs in the topology header, more than max_chips=64"):
        npu_smi_topo.parse("   " + header)
    text = _read("topo_4npu_mixed.txt").replace(
        "\nLegend:", "\nNPU9       X          X          X          X          0-1\n"
                     "NPU1       X          X          X          X          0-1\nLegend:")
    links = npu_smi_topo.parse(text)
    assert len(links) == 16
    assert [r.line_no for r in links.rejected] == [7, 8]  # type: ignore[attr-defined]


def test_topo_link_types_are_short_words() -> None:
    text = "      NPU0    NPU1    CPU Affinity\nNPU0  X  " + "H" * 17 + "  0-3\nNPU1  HCCS  X  0-3\n"
    links = npu_smi_topo.parse(text)
    assert [(link.npu, link.peer, link.link_type) for link in links] == [(0, 0, "X"), (1, 0, "HCCS"), (1, 1, "X")]
    assert links[0].cpu_affinity == "H" * 17 + " 0-3"
