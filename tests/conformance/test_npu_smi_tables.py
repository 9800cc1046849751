"""Conformance of the npu-smi table / ``-m`` / ``-l`` / topo parsers with the shared corpus of real captures.

The corpus lives outside the repository (``../shared/corpus`` or ``$NPUWATCH_CORPUS``);
without it this module is skipped.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from collectors import npu_smi_info, npu_smi_list, npu_smi_mapping, npu_smi_topo
from collectors._text import MIB
from collectors.base import CollectContext, ToolError
from collectors.bounds import rejections
from collectors.catalogue import CATALOGUE
from collectors.npu_smi_info_records import ChipStatus, InfoTable
from tests.support.paths import CORPUS

TOOLS = CORPUS / "tools"
if not TOOLS.is_dir():
    pytest.skip(f"corpus not found at {CORPUS}", allow_module_level=True)

TABLE_FILES = sorted(TOOLS.glob("npu-smi_info__*.txt"))
MAPPING_FILES = sorted(TOOLS.glob("npu-smi_info_-m__*.txt"))
LIST_FILES = sorted(TOOLS.glob("npu-smi_info_-l__*.txt"))
TOPO_FILES = sorted(TOOLS.glob("npu-smi_info_-t_topo__*.txt"))


def _text(prefix: str) -> str:
    matches = [path for path in TOOLS.iterdir() if path.name.startswith(prefix)]
    assert len(matches) == 1, f"expected one corpus file starting {prefix!r}, found {len(matches)}"
    return matches[0].read_text()


def _table(prefix: str) -> InfoTable:
    return npu_smi_info.parse(_text(f"npu-smi_info__{prefix}"))


def _chip(table: InfoTable, npu: int, chip: int = 0) -> ChipStatus:
    return next(c for c in table.chips if (c.npu, c.chip) == (npu, chip))


def test_corpus_has_every_kind() -> None:
    assert len(TABLE_FILES) >= 15
    assert MAPPING_FILES and LIST_FILES and TOPO_FILES


@pytest.mark.parametrize("path", TABLE_FILES, ids=lambda path: path.name[:70])
def test_every_table_parses_into_catalogue_samples(path: Path) -> None:
    table = npu_smi_info.parse(path.read_text())
    assert table.chips
    assert table.rejected == ()  # a real capture never trips a bound or a layout check
    out = npu_smi_info.samples(table, None, CollectContext(per_process_metrics=True))
    keys = [(s.metric, s.labels) for s in out]
    assert len(keys) == len(set(keys))
    for sample in out:
        assert tuple(name for name, _ in sample.labels) == CATALOGUE[sample.metric].labels
        assert math.isfinite(sample.value)


# Captures their publishers cut (INDEX.md says so): the only ones the agent's collector refuses as cut short.
TRIMMED = {"310P3-x4-hugepages-bigIDs-TRUNCATED": "the table ends inside a box",
           "910C-A3-wide-layout-TOP-PARTIAL": "the table ends inside a box",
           "910C-A3-wide-layout-procInContainer-NA-PARTIAL": "the process box ends before NPU 7",
           "910B2C": "the process box ends before NPU 1"}  # "trimmed to 2 NPUs (no 'No running processes ... 1')"


@pytest.mark.parametrize("path", TABLE_FILES, ids=lambda path: path.name[:70])
def test_every_whole_capture_is_whole_and_every_trimmed_one_is_cut(path: Path) -> None:
    table = npu_smi_info.parse(path.read_text())
    trimmed = [why for prefix, why in TRIMMED.items() if path.name.startswith(f"npu-smi_info__{prefix}")]
    if trimmed:
        assert table.cut is not None and table.cut.startswith(trimmed[0])
    else:
        assert table.cut is None
        assert npu_smi_info.make_source().parse(path.read_text())[0] == table


@pytest.mark.parametrize("path", MAPPING_FILES, ids=lambda path: path.name[:70])
def test_every_mapping_parses(path: Path) -> None:
    rows = npu_smi_mapping.parse(path.read_text())
    assert rows and all(row.name for row in rows)
    assert rejections(rows) == ()


@pytest.mark.parametrize("path", LIST_FILES, ids=lambda path: path.name[:70])
def test_every_list_parses(path: Path) -> None:
    listing = npu_smi_list.parse(path.read_text())
    assert listing.total == len(listing.npus)
    assert listing.rejected == ()


@pytest.mark.parametrize("path", TOPO_FILES, ids=lambda path: path.name[:70])
def test_every_topo_parses(path: Path) -> None:
    links = npu_smi_topo.parse(path.read_text())
    assert len(links) == 64  # both captures are 8 x 8
    assert all(link.link_type == "X" for link in links if link.npu == link.peer)
    assert rejections(links) == ()


# --- specific values, file by file ----------------------------------------------------------------


def test_910b4_idle() -> None:
    table = _table("910B4-x8")
    assert table.version == "25.0.rc1.1"
    assert len(table.chips) == 8
    npu3 = _chip(table, 3)
    assert npu3.power_watts == 89.1
    assert npu3.hbm_used_bytes == 2654 * MIB
    assert npu3.hbm_total_bytes == 32768 * MIB
    assert npu3.bus_id == "0000:82:00.0"
    assert _chip(table, 7).hbm_used_bytes == 2653 * MIB
    assert table.process_section and not table.processes
    out = npu_smi_info.samples(table, None, CollectContext())
    counts = [s.value for s in out if s.metric == "npu_processes"]
    assert counts == [0.0] * 8
    assert not any(s.metric.startswith("npu_memory_") for s in out)  # DDR 0 / 0


def test_a3_nputop() -> None:
    table = _table("910C-A3-Ascend910")
    die1 = _chip(table, 0, 1)
    assert die1.power_watts is None
    assert die1.phy_id == 1
    assert _chip(table, 1, 1).phy_id == 3
    assert _chip(table, 1, 1).hbm_used_bytes == 10568 * MIB
    assert _chip(table, 0, 0).power_watts == 162.8
    assert [(p.npu, p.chip, p.pid, p.name, p.memory_bytes) for p in table.processes] == [
        (1, 1, 990711, "python", 7746 * MIB)]


def test_950_vendor_doc() -> None:
    table = _table("950-x1")
    chip = table.chips[0]
    assert (chip.npu, chip.chip, chip.has_chip_id) == (0, 0, False)
    assert chip.hbm_total_bytes == 86016 * MIB
    assert chip.hbm_used_bytes == 4439 * MIB
    assert chip.power_watts == 204.4
    assert chip.aicore_ratio == 0
    assert table.process_section and not table.processes


def test_310p_duo_same_bus_id_no_power() -> None:
    table = _table("310P3-Duo-1card")
    assert [(c.npu, c.chip) for c in table.chips] == [(2, 0), (2, 1)]
    assert table.chips[0].bus_id == table.chips[1].bus_id == "0000:01:00.0"
    assert all(c.power_watts is None for c in table.chips)
    assert [c.memory_total_bytes for c in table.chips] == [44280 * MIB, 43693 * MIB]
    assert table.chips[1].device_id == 1


def test_310p_duo_partial() -> None:
    table = _table("310P3-Duo-2chips-host-PARTIAL")
    assert [(c.npu, c.chip, c.memory_used_bytes) for c in table.chips] == [
        (1, 0, 1397 * MIB), (1, 1, 1520 * MIB)]


def test_310p_big_ids_truncated() -> None:
    table = _table("310P3-x4-hugepages-bigIDs-TRUNCATED")
    assert [c.npu for c in table.chips] == [0, 32, 32768, 32800]
    assert _chip(table, 32768).hugepages_used == 8808
    assert _chip(table, 0).memory_used_bytes == 19435 * MIB
    assert _chip(table, 32800).device_id == 3
    assert not table.process_section


def test_910a_warning_and_processes() -> None:
    table = _table("910A-x8-Warning")
    assert [c.npu for c in table.chips if c.health == "Warning"] == [3, 7]
    assert _chip(table, 3).power_watts == 206.9
    assert len(table.processes) == 32
    assert {p.name for p in table.processes} == {"hlt_host_devmm_"}
    assert {p.memory_bytes for p in table.processes} == {686 * MIB}
    assert _chip(table, 0).memory_used_bytes == 4252 * MIB
    assert _chip(table, 0).hugepages_total == 1232
    out = npu_smi_info.samples(table, None, CollectContext())
    assert [s.value for s in out if s.metric == "npu_healthy"] == [1, 1, 1, 0, 1, 1, 1, 0]


def test_910a_without_process_section() -> None:
    table = _table("910A-x8-noProcSection")
    assert not table.process_section
    npu0 = _chip(table, 0)
    assert (npu0.memory_used_bytes, npu0.memory_total_bytes) == (1867 * MIB, 15077 * MIB)
    assert (npu0.hbm_used_bytes, npu0.hbm_total_bytes) == (0, 32768 * MIB)
    out = npu_smi_info.samples(table, None, CollectContext())
    assert not any(s.metric == "npu_processes" for s in out)


def test_310_old_format_repeated_npu_rows() -> None:
    table = _table("310-Atlas300I-3000-4chips-oldformat")
    assert table.version == "20.2.0"
    assert [(c.npu, c.chip) for c in table.chips] == [(215, 0), (215, 1), (215, 2), (215, 3)]
    assert _chip(table, 215, 1).temperature_celsius == 57
    assert all(c.hugepages_total is None for c in table.chips)


def test_310_misaligned_hugepages() -> None:
    table = _table("310-Atlas300I-3000-4chips-hugepages")
    assert table.version == "21.0.4.B030"
    assert [c.device_id for c in table.chips] == [3, 4, 5, 6]
    assert [c.hugepages_total for c in table.chips] == [970] * 4
    assert _chip(table, 6, 2).temperature_celsius == 70


def test_310b4_soc() -> None:
    chip = _table("310B4-OrangePiAIpro").chips[0]
    assert chip.bus_id is None
    assert chip.power_watts == 7.2
    assert (chip.hugepages_used, chip.hugepages_total) == (15, 15)
    assert (chip.memory_used_bytes, chip.memory_total_bytes) == (1797 * MIB, 3513 * MIB)


def test_a3_wide_partials() -> None:
    top = _table("910C-A3-wide-layout-TOP-PARTIAL")
    assert top.version == "26.0.rc2"
    assert [(c.chip, c.phy_id, c.power_watts) for c in top.chips] == [(0, 0, 162.6), (1, 1, None)]
    middle = _table("910C-A3-wide-layout-procInContainer")
    assert middle.version is None
    assert [(c.npu, c.chip, c.phy_id, c.hbm_used_bytes) for c in middle.chips] == [(7, 1, 15, 31877 * MIB)]
    assert [(p.npu, p.pid, p.name, p.container_pid) for p in middle.processes] == [
        (0, 632268, "python3.1", None)]


def test_910b2c_trailing_spaces() -> None:
    table = _table("910B2C")
    assert [(p.pid, p.name, p.memory_bytes) for p in table.processes] == [(124528, "python3.8", 17400 * MIB)]
    assert _chip(table, 0).hbm_used_bytes == 20701 * MIB


def test_vnpu_and_910prob_and_container() -> None:
    vnpu = _table("310Pvir01").chips[0]
    assert (vnpu.npu, vnpu.name, vnpu.memory_total_bytes) == (7, "310Pvir01", 2690 * MIB)
    prob = _chip(_table("910ProB"), 0)
    assert (prob.memory_used_bytes, prob.hbm_used_bytes) == (2387 * MIB, 18 * MIB)
    container = _table("910B2-x8-container")
    assert container.process_section and not container.processes
    assert _chip(container, 0).hbm_used_bytes == 29954 * MIB


def test_invalid_card_id_capture_is_a_tool_error() -> None:
    with pytest.raises(ToolError):
        npu_smi_info.parse(_text("npu-smi_info_-t_board__error-invalid-card-id"))


def test_mappings() -> None:
    duo = npu_smi_mapping.parse(_text("npu-smi_info_-m__310P-Duo"))
    assert len(duo) == 12 and sum(row.is_mcu for row in duo) == 4
    assert [row.logic_id for row in duo if not row.is_mcu] == list(range(8))
    assert npu_smi_mapping.inventory(duo)[(5, 1)] == {"logic_id": "7"}
    tabbed = npu_smi_mapping.parse(_text("npu-smi_info_-m__910A__"))
    assert [(row.npu, row.logic_id, row.name) for row in tabbed][-1] == (7, 7, "Ascend 910A")
    a950 = npu_smi_mapping.parse(_text("npu-smi_info_-m__950"))
    assert [(row.npu, row.chip, row.logic_id, row.phy_id, row.name) for row in a950] == [
        (0, 0, None, 0, "xxx")]
    minid = npu_smi_mapping.parse(_text("npu-smi_info_-m__310-Atlas300I-3000-MiniD-misaligned"))
    assert [(row.npu, row.chip, row.logic_id) for row in minid] == [(215, i, i) for i in range(4)]
    mcu = npu_smi_mapping.parse(_text("npu-smi_info_-m__310-Atlas300I-3000-MiniD+Mcu"))
    assert mcu[-1].is_mcu and mcu[-1].logic_id is None and mcu[-1].chip == 4


def test_lists() -> None:
    board = npu_smi_list.parse(_text("npu-smi_info_-l__910B4"))
    assert board.total == 8 and [n.chip_count for n in board.npus] == [1] * 8
    card = npu_smi_list.parse(_text("npu-smi_info_-l__950"))
    assert card.npus[0].serial == "IT23HMDA0502FAA"
    assert card.npus[0].product_name == "A5 PCIe Card"


def test_topos() -> None:
    hccs = npu_smi_topo.parse(_text("npu-smi_info_-t_topo__910B1"))
    assert {link.link_type for link in hccs if link.npu != link.peer} == {"HCCS"}
    assert next(link.cpu_affinity for link in hccs if link.npu == 4) == "96-119"
    ub = npu_smi_topo.parse(_text("npu-smi_info_-t_topo__950"))
    pairs = {(link.npu, link.peer) for link in ub if link.link_type == "UB"}
    assert pairs == {(0, 1), (1, 0), (2, 3), (3, 2), (4, 5), (5, 4), (6, 7), (7, 6)}
    assert next(link.cpu_affinity for link in ub if link.npu == 7) == "64-127,192-255"
    assert len(npu_smi_topo.samples(ub, None, CollectContext())) == 56
