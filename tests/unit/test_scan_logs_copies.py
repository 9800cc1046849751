"""``npuwatch scan-logs`` counts one failure once across files: a job log's copy of a plog line, the screen's
code for what the plog words (``collectors.hccl.copies``)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

from agent.cli import main as npuwatch
from agent.demo.node import DemoNode
from agent.diagnose.scan_logs import scan_paths
from collectors.hccl import copies
from collectors.hccl.classify import Event
from collectors.hccl.copies import CopyFolder
from tests.support.ei0002_copies import write_node

T0 = 1_760_000_000.0


def test_the_screens_ei0002_and_the_plogs_block_are_one_incident_under_the_printed_code(tmp_path: Path) -> None:
    # real torch_npu screen output (PID 7277) and the same process's plog block, a few milliseconds apart
    report = scan_paths([str(write_node(tmp_path / "node-a"))])
    assert report.by_category["exec_timeout"] == 1
    assert report.by_code["EI0002"] == 1
    assert "task_exec_timeout" not in report.by_code
    assert report.copies == 1
    assert report.events_total == sum(report.by_code.values()) == sum(report.by_category.values())


def test_the_demo_hang_counts_each_ranks_timeout_once_on_its_node(tmp_path: Path) -> None:
    dirs = [tmp_path / f"node-{index}" for index in (1, 2)]
    for directory in dirs:
        DemoNode(directory).create(chips=4)
    with redirect_stdout(io.StringIO()):
        assert npuwatch(["demo", "fleet", "hccl-hang", "--culprit", "node-2", "--npu", "1", "--time", str(T0),
                         *map(str, dirs)]) == 0
    report = scan_paths([str(dirs[0] / "log")])
    # four ranks timed out on node-1: each plog's block, and the job log's EI0002 block of the first of them
    assert report.by_category["exec_timeout"] == 4
    assert report.by_code["EI0002"] == 1 and report.by_code["task_exec_timeout"] == 3
    assert report.copies == 1
    out = io.StringIO()
    with redirect_stdout(out):
        npuwatch(["scan-logs", "--json", str(dirs[0] / "log")])
    assert json.loads(out.getvalue())["copies"] == 1


def event(source: str, code: str = "EI0002", at: float | None = T0, text: str = "[PID: 7] x",
          rank: int | None = None) -> Event:
    return Event(code, "exec_timeout", at, text, source, rank=rank)


def test_what_is_not_a_copy() -> None:
    folder = CopyFolder()
    assert folder.fold(event("a")) is None
    assert folder.fold(event("a")) is None  # the same file: the classifier's business
    assert folder.fold(event("b", at=T0 + 3)) is None  # another moment
    assert folder.fold(event("c", text="[PID: 8] x")) is None  # another process
    assert folder.fold(event("d", at=None)) is None  # no time
    assert folder.fold(event("e", text="no process")) is None  # no process
    assert folder.fold(event("f", text="[PID: 9] x", rank=0)) is None
    assert folder.fold(event("g", text="[PID: 9] x", rank=1)) is None  # the same pid naming another rank
    assert folder.fold(event("h", text="[PID: 7] x", at=T0 + 0.9)) is not None  # a copy, stamped a moment later


def test_copies_too_far_apart_are_counted_twice_never_lost() -> None:
    folder = CopyFolder()
    first = event("a")
    assert folder.fold(first) is None
    for pid in range(10, 10 + copies.KEPT):
        assert folder.fold(event("a", text=f"[PID: {pid}] x")) is None
    assert folder.fold(event("b")) is None
