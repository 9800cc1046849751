"""The commands' reader over a record backend, without a process: DCMI first (the fake library's formulas
answered in process, tests.support.dcmi_calls), the tool as the per-reading fallback, a failed helper given
up on for the rest of the command, ``as_text`` always the tool's. The tools here are missing, so no
process is started: a reading the tool would serve says "not found"."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.core.config import build_config
from agent.dcmi.backend import DcmiBackend
from agent.health.node import chip_parse, read_chip_list, read_chips
from agent.health.reader import ToolReader, as_text
from collectors import hccn_net_health, npu_smi_board, npu_smi_ecc, npu_smi_health, npu_smi_info
from collectors.base import ChipRef
from tests.support import fake_dcmi as fake
from tests.support.dcmi_calls import FakeCalls

CARD0 = ChipRef(npu=0, chip=0)  # logic id 3


@pytest.fixture
def config(tmp_path: Path) -> object:
    return build_config({"collectors": {"npu_smi": {"path": str(tmp_path / "no-npu-smi")},
                                        "hccn_tool": {"path": str(tmp_path / "no-hccn_tool")}}})


def _reader(config: object, calls: FakeCalls) -> ToolReader:
    return ToolReader(config, None, DcmiBackend(calls))  # type: ignore[arg-type]


def test_chips_health_and_ecc_come_from_the_backend_in_the_callers_shape(config: object) -> None:
    reader = _reader(config, FakeCalls(chips=8))
    table, chips = read_chip_list(reader)
    assert table.ok and table.by == "dcmi"
    assert [(ref.npu, ref.chip) for ref in chips] == [(card, 0) for card in range(8)]
    row = table.value.chips[0]  # npu_smi_info.parse's InfoTable, not the Source's 1-tuple
    assert row.temperature_celsius == fake.expected_temperature(3)
    node = read_chips(reader, None)
    health = node.health[node.chips[0]]
    assert health.ok and health.value.health == "Critical"  # logic 3: health 3; one record, not a list
    assert node.ecc[node.chips[0]].ok
    # the Source's own parser gets the Source's sequence, as the collection stores it
    listed = reader.read(npu_smi_health.SOURCE, CARD0)
    assert isinstance(listed.value, list) and len(listed.value) == 1
    assert reader.read(hccn_net_health.SOURCE, CARD0, hccn_net_health.parse).ok
    assert reader.served == {"dcmi": 2 * 2 + 8 * 2 + 2}  # two chip lists (info, -m), health and ecc, two more


def test_text_and_unserved_sources_are_the_tools(config: object) -> None:
    reader = _reader(config, FakeCalls(chips=8))
    text = reader.read(npu_smi_info.SOURCE, None, as_text)
    assert not text.ok and "not found" in str(text.error)  # never records where the tool's words are asked for
    board = reader.read(npu_smi_board.SOURCE, CARD0, npu_smi_board.parse)
    assert not board.ok and board.error == text.error  # looked for once: the same error
    direct = reader.read_direct(npu_smi_info.SOURCE)
    assert direct is not None and direct.ok and isinstance(direct.value, tuple)
    assert reader.read_direct(npu_smi_board.SOURCE, CARD0) is None


def test_a_failed_reading_falls_back_and_a_failed_helper_is_given_up(config: object) -> None:
    calls = FakeCalls(chips=8)
    calls.codes["error_codes"] = -8012
    reader = _reader(config, calls)
    health = reader.read(npu_smi_health.SOURCE, CARD0, chip_parse(npu_smi_health.parse, 0))
    assert not health.ok and "not found" in str(health.error) and "(after dcmi: DCMI:" in str(health.error)
    assert reader.backend_down() is None  # one reading's return code: DCMI still asked for the next
    assert reader.read(npu_smi_ecc.SOURCE, CARD0, chip_parse(npu_smi_ecc.parse, 0)).ok
    calls.worker["ecc"] = "timeout"
    assert not reader.read(npu_smi_ecc.SOURCE, CARD0, chip_parse(npu_smi_ecc.parse, 0)).ok
    assert "DCMI helper timeout" in str(reader.backend_down())
    asked = calls.calls
    table = reader.read(npu_smi_info.SOURCE, None, npu_smi_info.parse)
    assert not table.ok and calls.calls == asked  # given up on: not asked again in this command


def test_close_ends_what_the_reader_owns_and_leaves_the_tools(config: object) -> None:
    closed: list[bool] = []
    reader = ToolReader(config, None, DcmiBackend(FakeCalls(chips=2)),  # type: ignore[arg-type]
                        owns=lambda: closed.append(True))
    with reader:
        assert reader.read(npu_smi_info.SOURCE, None, npu_smi_info.parse).by == "dcmi"
    assert closed == [True]
    reader.close()
    assert closed == [True]
    assert not reader.read(npu_smi_info.SOURCE, None, npu_smi_info.parse).ok  # the tool's now: missing
