"""``collectors.npu_smi_info``: the Source a test builds itself (bench/mutation.py).

mutmut switches a mutant on after the modules are imported, so ``SOURCE = make_source()`` at
import time never sees one; this builds the Source inside the test.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from collectors import npu_smi_info
from collectors.base import CollectContext, ParseError
from collectors.npu_smi_info import make_source, parse, samples

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
