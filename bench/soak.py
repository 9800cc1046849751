"""Soak the collection path: RSS over many collection cycles of a 16-chip demo node.

    python bench/soak.py                  # 10,000 cycles, RSS at 1k/5k/10k
    python bench/soak.py --cycles 3000    # RSS at 300/1,500/3,000
    python bench/soak.py --tracemalloc    # also list the top allocation growth after warm-up
    python bench/soak.py --quick          # what tests/integration/test_bench_smoke.py runs

One cycle is ``Agent.collect_once()`` (every collector group and internal job) plus one
``cache.render()``, in this process, with the demo fakes' render functions called in-process
instead of one process per call (``bench._util.InProcessTools``): the agent's parse, store and
render path is exercised; fork/exec is not (``bench/agent.py`` measures the real process).
Warm-up ends at the first checkpoint (10% of the cycles); target: growth after it < 5 MB.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import InProcessTools, Table, demo_agent, mib, rss_bytes, verdict

GROWTH_TARGET = 5 << 20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=10_000)
    parser.add_argument("--chips", type=int, default=16)
    parser.add_argument("--tracemalloc", action="store_true", help="report where memory grew (slower)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for the smoke test")
    args = parser.parse_args(argv)
    if args.quick:
        args.cycles = 30
    checkpoints = sorted({max(1, args.cycles // 10), max(1, args.cycles // 2), args.cycles})
    warmup = checkpoints[0]

    rss: dict[int, int] = {}
    objects: dict[int, int] = {}
    growth_sites: list[str] = []
    with tempfile.TemporaryDirectory(prefix="npuwatch-soak-") as tmp:
        demo_dir = Path(tmp) / "demo"
        agent = demo_agent(demo_dir, args.chips).agent
        baseline = None
        started = time.perf_counter()
        try:
            with InProcessTools(demo_dir) as tools:
                for cycle in range(1, args.cycles + 1):
                    agent.collect_once()
                    agent.cache.render()
                    if cycle in checkpoints:
                        rss[cycle] = rss_bytes()
                        objects[cycle] = len(gc.get_objects())
                        if args.tracemalloc and cycle == warmup:
                            tracemalloc.start(5)
                            baseline = tracemalloc.take_snapshot()
            if baseline is not None:
                stats = tracemalloc.take_snapshot().compare_to(baseline, "traceback")
                for stat in stats[:5]:
                    frame = stat.traceback[-1]
                    growth_sites.append(f"{stat.size_diff / 1024:+.1f} KiB {frame.filename}:{frame.lineno}")
                tracemalloc.stop()
        finally:
            agent.stop()
        elapsed = time.perf_counter() - started

    table = Table()
    for cycle in checkpoints:
        table.add(f"RSS at cycle {cycle}", mib(rss[cycle]), "-", "-")
    growth = rss[args.cycles] - rss[warmup]
    table.add(f"RSS growth, cycle {warmup} -> {args.cycles}", mib(growth), "< 5 MB",
              verdict(growth < GROWTH_TARGET))
    table.add(f"gc objects, cycle {warmup} -> {args.cycles}", f"{objects[warmup]} -> {objects[args.cycles]}",
              "-", "-")
    table.add("ms per cycle", f"{elapsed / args.cycles * 1000:.1f}", "-", "-")
    table.note(f"{args.chips} chips, {tools.calls} in-process tool calls; no fork/exec (see bench/agent.py)")
    for site in growth_sites:
        table.note(f"growth after warm-up: {site}")
    print(table.render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
