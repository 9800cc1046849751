"""Golden frames of ``npuwatch top``: a demo node's exposition (captured once, kept as a fixture) rendered at
40x10, 80x24, 120x40 and 200x60, compared by tests/unit/test_top_render.py.

Tests only compare. ``python -m tests.support.top_golden`` renders the frames again from the kept exposition
(after a deliberate change to the view); ``--capture`` first captures a new exposition from a demo agent with
the faults below. Review the diff like any other change.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from agent.top.cli import DEMO_NODE
from agent.top.history import History
from agent.top.model import Fetched, parse_view, samples_of
from agent.top.render import TopState, frame, plain
from tests.support.golden import report_rewritten, write_if_changed
from tests.support.paths import FIXTURES

GOLDEN = FIXTURES / "top"
EXPOSITION = GOLDEN / "demo_metrics.txt"
NOW = 1_796_617_502.5  # the frames' clock: 3 s after the exposition's last npu-smi round (every reading fresh)
SIZES = ((40, 10), (80, 24), (120, 40), (200, 60))


def fetched(text: str, error: str | None = None) -> Fetched:
    return Fetched(parse_view(samples_of(text)), NOW - 1.5, error, "http://127.0.0.1:9611/metrics")


def render(width: int, height: int, state: TopState | None = None, text: str | None = None) -> str:
    got = fetched(text if text is not None else EXPOSITION.read_text(encoding="utf-8"))
    history = History()
    assert got.view is not None
    history.add(got.view)
    return plain(frame(got, history, state or TopState(), width=width, height=height, node=DEMO_NODE, now=NOW))


def capture() -> str:
    """A demo agent with a hot chip, a dead link, an isolated chip, an HCCL timeout and a process on every chip
(listed one by one): one exposition."""
    from tests.support.agent_harness import demo_bundle

    with tempfile.TemporaryDirectory() as tmp:
        extra = {"collectors": {"hccl_logs": {"enabled": True}, "npu_smi": {"per_process_metrics": True}},
                 "state_dir": tmp}
        bundle = demo_bundle(Path(tmp), extra, chips=8)
        assert bundle.demo is not None
        try:
            bundle.agent.collect_once()  # the log scanner starts at the logs' end: the timeout comes after
            bundle.demo.set_fault("hot", chip=4)
            bundle.demo.set_fault("link_down", chip=6)
            bundle.demo.set_fault("health", chip=2, state="Alarm", codes=["80E18402"])
            bundle.demo.set_fault("hccl_timeout", chip=1)
            for chip in range(8):  # a training job on every chip, one process each
                bundle.demo.set_fault("process", chip=chip, pid=41200 + chip, memory_mb=4096 + 1024 * chip)
            bundle.agent.collect_once()
            return bundle.agent.cache.render().body.decode()
        finally:
            bundle.agent.stop()


def regenerate(recapture: bool = False) -> list[Path]:
    changed: list[Path] = []
    if recapture or not EXPOSITION.exists():
        write_if_changed(EXPOSITION, capture(), changed)
    for width, height in SIZES:
        write_if_changed(GOLDEN / f"frame_{width}x{height}.txt", render(width, height), changed)
    return changed


if __name__ == "__main__":
    report_rewritten(regenerate("--capture" in sys.argv[1:]))
