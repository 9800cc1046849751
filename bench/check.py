"""Does each level of `npuwatch check` keep its time budget? Timed on the demo node (real subprocess fakes).

    python bench/check.py              # quick (8 and 16 chips, and with a hung tool), medium, long
    python bench/check.py --quick      # the quick rows only (the smoke test runs this)

Each row runs the level ``--runs`` times through the same code path as ``npuwatch check --demo`` and
reports the slowest run against the level's budget (quick 10 s, medium 2 min, long 15 min). The
medium and long levels run the probe workers on the CPU (torch), so they measure the orchestration
and a small CPU workload, not an NPU's; the sustained GEMM runs the worker's cpu default of 10 s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.check.demo import demo_setup
from agent.check.levels import BUDGET_S
from agent.check.runner import RunOptions, run_level
from agent.core.config import build_config
from agent.demo.node import DemoNode
from bench._util import Table, verdict

COLUMNS = ("level", "checks", "seconds", "budget", "ok")
# Only the demo's own log directory; no agent is asked (the bench runs none).
CONFIG: dict[str, Any] = {"collectors": {"hccl_logs": {"paths": []}}, "check": {"skip": ["agent"]}}


def time_level(level: str, chips: int, runs: int, fault: str | None = None) -> tuple[int, float, str]:
    """(checks run, slowest of ``runs`` in seconds, the verdict of the last run)."""
    with tempfile.TemporaryDirectory(prefix="npuwatch-bench-check-") as directory:
        node = DemoNode(Path(directory) / "demo").create(chips=chips)
        if fault is not None:
            node.set_fault(fault)
        config, env = demo_setup(build_config(CONFIG), node.directory, chips)
        slowest, checks, last = 0.0, 0, "?"
        for _ in range(runs):
            started = time.monotonic()
            report = run_level(config, RunOptions(level=level, tool_env=env))
            slowest = max(slowest, time.monotonic() - started)
            checks, last = len(report.checks), report.verdict
        return checks, slowest, last


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the quick rows only, one run each")
    parser.add_argument("--runs", type=int, default=3, help="runs per quick row (the slowest counts)")
    args = parser.parse_args(argv)
    runs = 1 if args.quick else args.runs
    rows: list[tuple[str, str, int, int, str | None]] = [
        ("quick", "quick, 8 chips", 8, runs, None),
        ("quick", "quick, 16 chips", 16, runs, None),
        ("quick", "quick, 8 chips, hccn_tool hangs", 8, 1, "hccn_tool_hang"),
        ("quick", "quick, 8 chips, npu-smi hangs", 8, 1, "npu_smi_hang"),
    ]
    if not args.quick:
        rows += [("medium", "medium, 8 chips", 8, 1, None), ("long", "long, 8 chips", 8, 1, None)]
    table = Table(COLUMNS)
    failed = False
    for level, name, chips, count, fault in rows:
        checks, seconds, last = time_level(level, chips, count, fault)
        ok = seconds < BUDGET_S[level]
        failed |= not ok
        table.add(name, checks, f"{seconds:.2f} s ({last})", f"{BUDGET_S[level]:.0f} s", verdict(ok))
    table.note("seconds: the slowest run (verdict of the last in brackets); cpu probes on the demo node")
    print(table.render())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
