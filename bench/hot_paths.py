"""Speed of the hot paths the test suite once judged by wall clock (tests check behaviour, this checks speed).

    python bench/hot_paths.py                # 100,000 INFO lines each, 12 fake tool calls
    python bench/hot_paths.py --lines 1000000

Rows:
- INFO noise through the HCCL error classifier (``collectors.hccl.classify.StreamClassifier``) and the
  communicator-fact parser (``collectors.hccl.comm.CommFactParser``): lines/s of a line that states
  nothing. Most of a plog is such lines; the scanner must skip them at about a million a second.
  Targets as the tests held them (tests/unit/test_hccl_classify.py, tests/unit/test_hccl_comm.py):
  200,000 and 100,000 lines/s, generous for a busy CI box (measured 2M and 1M on an idle core).
- a demo fake tool call (``npu-smi info``, ``npu-smi info -t usages``, ``hccn_tool -stat``) run as a
  subprocess the way the agent runs it: mean and max, target mean < 1 s (tests/integration/test_demo_fakes.py
  held it): the demo and the integration tests make hundreds of them.

Exit status 1 when a row misses its target.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.demo.node import DemoNode
from agent.demo.state import DEMO_TIME_ENV
from bench._util import Table, ms, verdict
from collectors.hccl.classify import StreamClassifier
from collectors.hccl.comm import CommFactParser

CLASSIFY_INFO = ("[INFO] HCCL(1595259,alltoall_test):2026-01-06-15:38:29.881.877 [externalinput.cc:598] "
                 "[1595259][HCCL_ENV] an ordinary message about op AllReduce count[1024] dataType[fp16]")
COMM_INFO = ("[INFO] HCCL(1595259,alltoall_test):2026-01-06-15:38:29.881.877 [hccl_op.cc:598] "
             "[1595259][AllReduce] op finished, tag[AllReduce_198.51.100.1%eth0_60000_0_17], count[1024], stream[4]")
FAKE_CALLS = (("npu-smi", "info"), ("npu-smi", "info", "-t", "usages", "-i", "0"),
              ("hccn_tool", "-i", "0", "-stat", "-g"))


def lines_per_second(feed: object, line: str, count: int) -> float:
    lines = [line] * count
    start = time.perf_counter()
    feed(lines)  # type: ignore[operator]
    return count / (time.perf_counter() - start)


def fake_call_seconds(rounds: int) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="npuwatch-bench-") as tmp:
        node = DemoNode(Path(tmp) / "demo").create()
        env = {"PATH": "/usr/bin:/bin", DEMO_TIME_ENV: repr(1_700_000_000.0)}
        durations = []
        for _ in range(rounds):
            for tool, *args in FAKE_CALLS:
                started = time.perf_counter()
                subprocess.run([str(node.tool_path(tool)), *args], env=env, capture_output=True, check=True,
                               timeout=30)
                durations.append(time.perf_counter() - started)
    return durations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000, help="INFO lines per parser (default 100,000)")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of the three fake tool calls (default 4)")
    args = parser.parse_args(argv)

    table = Table()
    classify = lines_per_second(StreamClassifier().feed_lines, CLASSIFY_INFO, args.lines)
    comm = lines_per_second(CommFactParser().feed_lines, COMM_INFO, args.lines)
    table.add("INFO lines/s, hccl classifier", f"{classify:,.0f}", "> 200,000", verdict(classify > 200_000))
    table.add("INFO lines/s, hccl comm parser", f"{comm:,.0f}", "> 100,000", verdict(comm > 100_000))
    durations = fake_call_seconds(args.rounds)
    mean = sum(durations) / len(durations)
    table.add(f"demo fake tool call, mean of {len(durations)}", ms(mean), "< 1000 ms", verdict(mean < 1.0))
    table.add("demo fake tool call, max", ms(max(durations)), "-", "-")
    print(table.render())
    return 0 if all(row[3] != "NO" for row in table.rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
