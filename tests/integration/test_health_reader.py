"""``agent.health``'s tool reader against the demo node's fake npu-smi and hccn_tool, run as real
subprocesses: the argv of every call is the collector Source's, a hung tool costs one timeout, a
missing tool and unreadable output become error readings."""

from __future__ import annotations

import collections
import shlex
import time
from pathlib import Path
from typing import Any

import pytest

from agent.core.config import build_config
from agent.demo.node import DemoNode
from agent.health.node import read_cards, read_chip_list, read_chips, read_node
from agent.health.reader import NodeReader, ToolReader, as_text
from collectors import (
    hccn_ip,
    hccn_link,
    hccn_link_stat,
    hccn_net_health,
    hccn_optical,
    hccn_stat,
    npu_smi_board,
    npu_smi_ecc,
    npu_smi_hccs,
    npu_smi_health,
    npu_smi_info,
    npu_smi_mapping,
)
from collectors.base import ChipRef, Source

CHIPS = 2
TOOLS = ("npu-smi", "hccn_tool")


@pytest.fixture
def node(tmp_path: Path) -> DemoNode:
    return DemoNode(tmp_path / "demo").create(chips=CHIPS)


def tool_config(paths: dict[str, Path], timeout: str = "3s") -> Any:
    return build_config({"collectors": {
        "npu_smi": {"timeout": timeout, "path": str(paths["npu-smi"])},
        "hccn_tool": {"timeout": timeout, "path": str(paths["hccn_tool"])},
    }})


def demo_reader(node: DemoNode, timeout: str = "3s") -> ToolReader:
    return ToolReader(tool_config({tool: node.tool_path(tool) for tool in TOOLS}, timeout), node.env())


def recording_tools(node: DemoNode, directory: Path) -> tuple[dict[str, Path], Path]:
    """Wrappers around the demo's fakes that log each call's argv (one line per call) before running it."""
    directory.mkdir()
    log = directory / "calls.log"
    paths: dict[str, Path] = {}
    for tool in TOOLS:
        wrapper = directory / tool
        wrapper.write_text(f'#!/bin/sh\necho "{tool} $*" >> {shlex.quote(str(log))}\n'
                           f'exec {shlex.quote(str(node.tool_path(tool)))} "$@"\n')
        wrapper.chmod(0o755)
        paths[tool] = wrapper
    return paths, log


def calls(log: Path) -> collections.Counter[str]:
    return collections.Counter(log.read_text().splitlines())


def shown(source: Source, chip: ChipRef | None = None) -> str:
    return " ".join([source.tool, *source.argv(chip)])


def test_the_tool_reader_is_a_node_reader(node: DemoNode) -> None:
    reader: NodeReader = demo_reader(node)  # mypy checks the protocol; the call checks it answers
    assert reader.read(npu_smi_info.SOURCE, parse=npu_smi_info.parse).ok


def test_every_call_of_read_node_is_a_collector_sources_argv(node: DemoNode, tmp_path: Path) -> None:
    paths, log = recording_tools(node, tmp_path / "bin")
    readings = read_node(ToolReader(tool_config(paths), node.env()), gap_s=0.0)
    assert len(readings.chips) == CHIPS
    assert all(reading.ok for reading in readings.health.values())
    per_chip = (npu_smi_health.SOURCE, npu_smi_ecc.SOURCE, hccn_link.SOURCE, hccn_link_stat.SOURCE,
                hccn_net_health.SOURCE, hccn_ip.SOURCE, hccn_optical.SOURCE, hccn_optical.SOURCE,
                hccn_stat.SOURCE, hccn_stat.SOURCE)  # optics and counters: two samples
    expected = collections.Counter([shown(npu_smi_info.SOURCE), shown(npu_smi_mapping.SOURCE)])
    expected.update(shown(source, ref) for ref in readings.chips for source in per_chip)
    assert calls(log) == expected


def test_the_cards_and_the_chips_only_read_the_sources_argv(node: DemoNode, tmp_path: Path) -> None:
    paths, log = recording_tools(node, tmp_path / "bin")
    reader = ToolReader(tool_config(paths), node.env())
    boards, hccs = read_cards(reader, want_hccs=True, want_boards=True)
    _, chips = read_chip_list(reader)
    node_readings = read_chips(reader, None)
    assert boards and all(reading.ok for reading in boards.values())
    assert hccs and all(reading.ok for reading in hccs.values())
    assert node_readings.roce == {} and len(node_readings.ecc) == CHIPS
    listing = [shown(npu_smi_info.SOURCE), shown(npu_smi_mapping.SOURCE)]
    expected = collections.Counter(listing * 3)
    expected.update(shown(npu_smi_board.SOURCE, ref) for ref in {ref.npu: ref for ref in chips}.values())
    expected.update(shown(source, ref) for ref in chips
                    for source in (npu_smi_hccs.SOURCE, npu_smi_health.SOURCE, npu_smi_ecc.SOURCE))
    assert calls(log) == expected


def test_a_hung_tool_is_killed_once_and_skipped_afterwards(node: DemoNode) -> None:
    node.set_fault("hccn_tool_hang")
    reader = demo_reader(node, timeout="0.5s")
    _, chips = read_chip_list(reader)
    first = reader.read(hccn_link.SOURCE, chips[0], hccn_link.parse)
    assert first.error == f"{shown(hccn_link.SOURCE, chips[0])}: no answer within 0.5s (killed)"
    started = time.monotonic()
    later = reader.read(hccn_stat.SOURCE, chips[1], hccn_stat.parse)
    assert time.monotonic() - started < 0.4  # not run at all
    assert later.error == (f"{shown(hccn_stat.SOURCE, chips[1])}: skipped, hccn_tool hung earlier "
                           f"({shown(hccn_link.SOURCE, chips[0])})")
    assert reader.hung() == [first.error]
    assert reader.skipped() == [f"hccn_tool hung earlier ({shown(hccn_link.SOURCE, chips[0])})"]
    # the other tool is not held against it
    health = reader.read(npu_smi_health.SOURCE, chips[0], lambda text: npu_smi_health.parse(text, chips[0].chip))
    assert health.ok and health.value.health


def test_a_missing_tool_is_an_error_and_not_looked_for_again(node: DemoNode, tmp_path: Path) -> None:
    reader = ToolReader(tool_config({"npu-smi": tmp_path / "no-such-npu-smi",
                                     "hccn_tool": node.tool_path("hccn_tool")}), node.env())
    first = reader.read(npu_smi_info.SOURCE, parse=npu_smi_info.parse)
    assert first.error == "npu-smi: not found (set collectors.npu_smi.path)"
    again = reader.read(npu_smi_mapping.SOURCE)
    assert again.error == first.error  # the same words whichever call looked first (calls run side by side)
    assert reader.skipped() == ["npu-smi not found"]
    assert reader.hung() == []
    port = ChipRef(npu=0, chip=0, phy_id=0)
    assert reader.read(hccn_link.SOURCE, port, hccn_link.parse).ok


def test_garbage_output_is_an_unreadable_reading_and_the_tool_is_asked_again(node: DemoNode) -> None:
    node.set_fault("npu_smi_garbage")
    reader = demo_reader(node)
    for _ in range(2):  # garbage is not a hang: the second call runs too
        reading = reader.read(npu_smi_info.SOURCE, parse=npu_smi_info.parse)
        assert reading.value is None
        assert (reading.error or "").startswith("npu-smi info: unreadable output: ")
    assert reader.skipped() == []


def test_without_a_parser_the_reading_is_what_the_source_parses(node: DemoNode) -> None:
    reader = demo_reader(node)
    _, chips = read_chip_list(reader)
    text = reader.read(hccn_link.SOURCE, chips[0], as_text)
    records = reader.read(hccn_link.SOURCE, chips[0])
    assert isinstance(text.value, str) and "link status" in text.value
    assert records.value == hccn_link.SOURCE.parse(text.value) == [hccn_link.parse(text.value)]


def test_read_node_takes_the_second_sample_after_the_gap_and_says_how_far_it_is(node: DemoNode) -> None:
    said: list[str] = []
    gap = 3.0  # longer than the first round takes, so read_node has to wait
    readings = read_node(demo_reader(node), gap_s=gap, say=said.append)
    per_chip = 2 + 6 + 2
    assert said[0] == "npu-smi info"
    assert f"{CHIPS * per_chip}/{CHIPS * per_chip} npu-smi and hccn_tool calls" in said
    assert any(text.startswith("waiting ") and text.endswith(" for the second optics and counter sample")
               for text in said)
    first = min(reading.at for port in readings.roce.values() for reading in (port.optical[0], port.stat[0]))
    for port in readings.roce.values():
        assert len(port.optical) == 2 and len(port.stat) == 2
        assert all(reading.ok for reading in (*port.optical, *port.stat))
        assert min(port.optical[1].at, port.stat[1].at) - first >= gap
