"""A cut ``npu-smi info`` table is never taken for the node (issue 41, item 11): a table that ends inside a
box, a process box that stops before the last NPU, a table without the process box this npu-smi printed
before, and fewer chips than the node's inventory are collector failures (reason parse) that keep the last
good chips and count in ``npuwatch_parse_rejections_total``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

import pytest

from agent.core import collect
from agent.core.collect import SourceRunner, ToolSettings
from agent.core.snapshot import SnapshotStore
from agent.core.tool_runner import RunResult
from collectors import npu_smi_board, npu_smi_info
from collectors.base import ChipRef, CollectContext, ParseError

RULE = "+===========================+===============+====================================================+"
DASH = "+---------------------------+---------------+----------------------------------------------------+"


def row(*cells: str) -> str:
    widths = (26, 14, 51) if len(cells) == 3 else (26, 14, 25, 24) if len(cells) == 4 else (95,)
    return "".join(f"| {cell:<{width}}" for cell, width in zip(cells, widths)) + "|"


def chip_box(npus: int) -> list[str]:
    lines = [DASH, row("npu-smi 25.0.rc1.1               Version: 25.0.rc1.1"), DASH,
             row("NPU   Name", "Health", "Power(W)    Temp(C)           Hugepages-Usage(page)"),
             row("Chip", "Bus-Id", "AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)"), RULE]
    for npu in range(npus):
        lines += [row(f"{npu:<5} 910B4", "OK", f"90.{npu}        40                0    / 0"),
                  row("0", f"0000:{npu + 1:02X}:00.0", "0           0    / 0          3000 / 32768"), RULE]
    return lines


def process_box(npus: int, busy: int) -> list[str]:
    lines = [DASH, row("NPU     Chip", "Process id", "Process name", "Process memory(MB)"), RULE]
    for npu in range(npus):
        if npu == busy:
            lines.append(row(f"{npu}       0", "4242", "python3", "30000"))
        else:
            lines.append(row(f"No running processes found in NPU {npu}"))
        lines.append(RULE)
    return lines


def table(npus: int = 8, busy: int = 5) -> str:
    return "\n".join([*chip_box(npus), *process_box(npus, busy)]) + "\n"


WHOLE = table()


def test_a_whole_table_is_whole() -> None:
    parsed = npu_smi_info.parse(WHOLE, whole=True)
    assert parsed.cut is None and len(parsed.chips) == 8 and parsed.process_section
    assert [p.npu for p in parsed.processes] == [5]


@pytest.mark.parametrize("keep", range(8, len(WHOLE.splitlines())))
def test_a_table_cut_after_any_line_is_cut_unless_a_separator_closes_it(keep: int) -> None:
    lines = WHOLE.splitlines()
    text = "\n".join(lines[:keep]) + "\n"
    parsed = npu_smi_info.parse(text)
    if lines[keep - 1].startswith("+") and not parsed.process_section:
        assert parsed.cut is None  # closed at a chip-row boundary: the inventory check's case
        return
    assert parsed.cut is not None
    with pytest.raises(ParseError, match="cut short"):
        npu_smi_info.parse(text, whole=True)


def test_a_process_box_cut_at_a_row_boundary_is_cut() -> None:
    lines = WHOLE.splitlines()
    cut = "\n".join(lines[: lines.index(RULE, len(chip_box(8)) + 3) + 1]) + "\n"  # process box: NPU 0 only
    parsed = npu_smi_info.parse(cut)
    assert parsed.cut == "the process box ends before NPU 1, 2, 3, 4, 5, 6, 7 of the chip box"


def test_a_table_cut_at_a_chip_row_boundary_is_short_of_the_inventory() -> None:
    three = "\n".join(chip_box(3)) + "\n"  # 3 chips, each closed by its +===+ line; no process box
    parsed = npu_smi_info.parse(three, whole=True)
    assert parsed.cut is None and not parsed.process_section
    with pytest.raises(ParseError, match="lists 3 chips where the node has 8"):
        npu_smi_info.SOURCE.samples((parsed,), None, CollectContext(inventory_chips=8))
    assert npu_smi_info.SOURCE.samples((parsed,), None, CollectContext(inventory_chips=3))  # a 3-chip node


def test_a_whole_table_with_a_chip_gone_is_taken_for_the_node() -> None:
    """npu-smi printed both boxes, closed, naming every NPU it lists: a chip is gone (NPUChipMissing)."""
    seven = npu_smi_info.parse(table(npus=7), whole=True)
    out = npu_smi_info.SOURCE.samples((seven,), None, CollectContext(inventory_chips=8))
    assert [s.value for s in out if s.metric == "npu_chips"] == [7.0]


def test_a_table_without_the_process_box_printed_before_is_refused() -> None:
    source = npu_smi_info.make_source()
    source.parse(WHOLE)
    chips_only = "\n".join(chip_box(8)) + "\n"  # every chip, cut after the chip box: busy NPU 5 would look idle
    with pytest.raises(ParseError, match="no process box, which this npu-smi printed before"):
        source.parse(chips_only)
    assert npu_smi_info.make_source().parse(chips_only)  # an npu-smi that never printed one (22.0.3.1)


# --- in the agent's runner: up 0, reason parse, the last good chips kept, the refusal counted


class _Tool:
    def __init__(self, text: str) -> None:
        self.text = text

    def resolve(self, tool: str, path: str | None = None, **_: Any) -> str:
        return f"/bin/{tool}"

    def run(self, argv: list[str], timeout: float, env: Any = None) -> RunResult:
        return RunResult(argv=tuple(argv), returncode=0, stdout=self.text, stderr="", duration_s=0.0, truncated=False)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(1)
    yield executor
    executor.shutdown()


@pytest.mark.parametrize("cut", [
    "\n".join(chip_box(3)) + "\n",  # at a chip-row boundary
    "\n".join(chip_box(8)[:-1]) + "\n",  # inside the chip box
    "\n".join(chip_box(8)) + "\n",  # after the chip box: the process box dropped
    "\n".join([*chip_box(8), *process_box(8, 5)[:6]]) + "\n",  # inside the process box
])
def test_the_agent_refuses_a_cut_table_and_keeps_the_last_good_chips(
        monkeypatch: pytest.MonkeyPatch, pool: ThreadPoolExecutor, cut: str) -> None:
    tool = _Tool(WHOLE)
    monkeypatch.setattr(collect, "resolve_tool", tool.resolve)
    monkeypatch.setattr(collect, "run_tool", tool.run)
    store = SnapshotStore(time.time)
    source = npu_smi_info.make_source()
    store.register(source.name, 60.0)
    runner = SourceRunner(store, {"npu-smi": ToolSettings(None, 5.0)}, {"npu-smi": pool},
                          lambda: CollectContext(inventory_chips=8))
    runner.run(source, None)
    good = store.get(source.name)
    assert good is not None and good.ok and good.rejections == 0
    tool.text = cut
    runner.run(source, None)
    snap = store.get(source.name)
    assert snap is not None
    assert (snap.ok, snap.error_reason, snap.rejections) == (False, "parse", 1)
    assert snap.samples == good.samples  # the 8 chips and NPU 5's process stay
    assert [s.value for s in snap.samples if s.metric == "npu_chips"] == [8.0]


class _NeverRuns(Executor):
    """A pool whose workers are gone (as at the interpreter's exit): what it is given never starts."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        return Future()


def test_a_run_whose_calls_never_start_ends_at_its_deadline_as_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collect, "resolve_tool", _Tool("").resolve)
    monkeypatch.setattr(collect, "RUN_SLACK_S", 0.2)
    store = SnapshotStore(time.time)
    source = npu_smi_board.SOURCE
    store.register(source.name, 60.0)
    runner = SourceRunner(store, {"npu-smi": ToolSettings(None, 0.1)}, {"npu-smi": _NeverRuns()},
                          lambda: CollectContext(inventory_chips=2))
    running = threading.Thread(target=runner.run, args=(source, [ChipRef(0, 0), ChipRef(1, 0)]), daemon=True)
    running.start()
    running.join(5)
    assert not running.is_alive()  # 2 x 0.1 s + 0.2 s; without a deadline it waited for good
    snap = store.get(source.name)
    assert snap is not None and (snap.ok, snap.error_reason) == (False, "timeout"), snap
