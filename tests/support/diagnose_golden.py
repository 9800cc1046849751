"""Golden text of ``npuwatch diagnose``: demo-node scenarios, plain and coloured, compared by
tests/integration/test_diagnose_golden.py.

Each scenario runs the real checks against a 4-chip demo node whose fake tools' clock is frozen
(counters and fault histories do not move while diagnose samples them) from a scratch directory,
so every path it prints is relative and the text is the same on every machine. The plain text of
``node_faults`` is the README's example.

Tests only compare. After a deliberate change to the checks, the verdict or the rendering,
regenerate with ``python -m tests.support.diagnose_golden`` and review the diff like any other change.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.core.config import build_config
from agent.core.terminal import Style
from agent.demo.node import DemoNode
from agent.diagnose import engine
from agent.diagnose.render import render_text
from tests.support.golden import report_rewritten, write_if_changed
from tests.support.paths import FIXTURES

GOLDEN = FIXTURES / "diagnose"
CHIPS = 4
GAP_S = 0.2


def _plog_time(at: float) -> str:
    return time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime(at)) + ".123.456"


def _write_plog(node: DemoNode, pid: int, lines: list[str]) -> None:
    plog = node.log_root / "debug" / "plog" / f"plog-{pid}_20250101000000000.log"
    plog.parent.mkdir(parents=True, exist_ok=True)
    plog.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def _clean_plog(node: DemoNode, at: float) -> None:
    stamp = _plog_time(at)
    _write_plog(node, 4141, [f"[INFO] HCCL(4141,python3):{stamp} [hccl_communicator.cc:100] [4141]AllReduce entry",
                             f"[INFO] HCCL(4141,python3):{stamp} [hccl_communicator.cc:120] [4141]AllReduce exit"])


def _remote_timeout_plog(node: DemoNode, at: float, rank: int, peer_ip: str) -> None:
    stamp = _plog_time(at)
    _write_plog(node, 4242, [
        f"[INFO] HCCL(4242,python3):{stamp} [hccl_communicator.cc:100] [4300]AllReduce entry",
        f"[ERROR] HCCL(4242,python3):{stamp} [task_exception_handler.cc:812] [4300][TaskExceptionHandler] Task "
        "from HCCL run failed.",
        f"EI0002: [PID: 4242] {stamp} The wait execution of the Notify register times out. Reason: The Notify "
        f"register has not received the Notify record from remote rank [{rank}].base information: [streamID:[14], "
        f"taskID[4], taskType[Notify Wait], tag[AllReduce_1].] task information: [notify id:[0x1], "
        f"stage:[ffffffff], remote rank:[{rank}].",
        f"[ERROR] HCCL(4242,python3):{stamp} [hccl_impl.cc:90] [4300]Cluster Exception Location[IP/ID]:"
        f"[{peer_ip}/{rank}]",
    ])


def _hccn_conf(root: Path) -> None:
    """The addresses the demo's fake hccn_tool reports (29.1.<dev>.<10+dev>), so roce_ip can pass."""
    (root / "hccn.conf").write_text("".join(f"address_{dev}=29.1.{dev}.{10 + dev}\nnetmask_{dev}=255.255.0.0\n"
                                            for dev in range(CHIPS)), encoding="utf-8")


def _config(node: DemoNode, **collectors: Any) -> Any:
    raw: dict[str, Any] = {
        "labels": {"node": "node-a"},
        "collectors": {
            "npu_smi": {"path": str(node.tool_path("npu-smi")), "timeout": "5s"},
            "hccn_tool": {"path": str(node.tool_path("hccn_tool")), "timeout": "5s", "hccn_conf": "hccn.conf"},
            "hccl_logs": {"paths": ["node/log"]},
        },
    }
    for key, values in collectors.items():
        raw["collectors"].setdefault(key, {}).update(values)
    return build_config(raw)


def _node(root: Path) -> tuple[DemoNode, float]:
    node = DemoNode(root / "node").create(chips=CHIPS, seed=0)
    now = float(int(time.time()))
    node.freeze_time(now)
    return node, now


def _run(node: DemoNode, config: Any) -> engine.Report:
    return engine.diagnose(config, engine.DiagnoseOptions(sample_gap_s=GAP_S), node.env())


def healthy(root: Path) -> engine.Report:
    node, now = _node(root)
    _clean_plog(node, now - 60)
    _hccn_conf(root)
    return _run(node, _config(node))


def node_faults(root: Path) -> engine.Report:
    node, now = _node(root)
    _hccn_conf(root)
    node.set_fault("link_down", chip=3)
    node.set_fault("link_down", chip=1)
    node.set_fault("hbm_dbe", chip=2)
    node.set_fault("hccl_timeout", chip=0, rank=0, rank_size=8, time=now - 30)
    return _run(node, _config(node))


def remote_peer(root: Path) -> engine.Report:
    node, now = _node(root)
    _hccn_conf(root)
    _remote_timeout_plog(node, now - 60, rank=5, peer_ip="29.7.0.15")
    return _run(node, _config(node))


def cannot_check(root: Path) -> engine.Report:
    node, _ = _node(root)
    config = _config(node, npu_smi={"path": str(root / "no-npu-smi")}, hccl_logs={"paths": ["no-such-dir/log"]})
    return _run(node, config)


CASES: dict[str, Callable[[Path], engine.Report]] = {
    "healthy": healthy,
    "node_faults": node_faults,
    "remote_peer": remote_peer,
    "cannot_check": cannot_check,
}


def report(name: str, root: Path) -> engine.Report:
    """The scenario's report, run from ``root`` (the working directory is restored after)."""
    before = os.getcwd()
    os.chdir(root)
    try:
        return CASES[name](root)
    finally:
        os.chdir(before)


def texts(result: engine.Report) -> dict[str, str]:
    """The golden file name's suffix -> its text: plain and coloured."""
    return {".txt": render_text(result, Style(False)), ".color.txt": render_text(result, Style(True))}


def regenerate() -> list[Path]:
    changed: list[Path] = []
    for name in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            result = report(name, Path(tmp))
        for suffix, text in texts(result).items():
            golden = GOLDEN / f"{name}{suffix}"
            write_if_changed(golden, text, changed)
    return changed


if __name__ == "__main__":
    report_rewritten(regenerate())
