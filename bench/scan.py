"""Benchmark the HCCL log scanner (tailer + classifier + counters) on a synthetic plog.

    python bench/scan.py                 # 1 GiB plog (takes a while on a small box)
    python bench/scan.py --size-mb 64    # quicker

Writes a plog of mostly ``[INFO]`` lines with an error incident every ``--error-every`` lines into a
temporary directory, then runs ``HcclLogCollector.collect()`` in cycles (as the agent would, with a
per-cycle byte budget) until the file is consumed. Prints lines/s, MB/s, the resident set size after
a quarter of the file and at the end (they must match: memory does not grow with the file) and the
peak RSS of the process.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collectors.hccl.collector import HcclLogCollector
from collectors.hccl.tail import MIB

INFO = ("[INFO] HCCL(4242,python3):2025-03-02-08:{mm:02d}:{ss:02d}.{ms:03d}.000 [hccl_op.cc:{n}] "
        "[4300][AllReduce] op finished, tag[AllReduce_198.51.100.1%eth0_60000_0_17], count[{n}], "
        "dataType[float16], stream[4]\n")
ERROR_BLOCK = (
    "[ERROR] HCCL(4242,python3):{when}.000.000 [task_exception_handler.cc:908] "
    "[4300][TaskExecStage][Timeout][Host]Task run failed, base information is streamID:[4], taskID[12]\n"
    "[ERROR] HCCL(4242,python3):{when}.000.100 [task_exception_handler.cc:452]"
    "[4300][TaskExceptionHandler][Callback]Task run failed, taskType[Notify Wait], remote rank:[5].\n"
)
FIRST_INCIDENT = 1_740_000_000  # incidents are an hour apart, so none dedups into another


def rss_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def generate(path: Path, size: int, error_every: int) -> tuple[int, int]:
    """Write about ``size`` bytes; returns (lines, incidents written)."""
    lines = incidents = written = 0
    batch: list[str] = []
    with path.open("w", encoding="ascii") as handle:
        while written < size:
            n = lines
            if n % error_every == error_every - 1:
                when = time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime(FIRST_INCIDENT + 3600 * incidents))
                text = ERROR_BLOCK.format(when=when)
                incidents += 1
                lines += 2
            else:
                text = INFO.format(mm=n // 60000 % 60, ss=n // 1000 % 60, ms=n % 1000, n=n % 100000)
                lines += 1
            batch.append(text)
            written += len(text)
            if len(batch) >= 4096:
                handle.write("".join(batch))
                batch.clear()
        handle.write("".join(batch))
    return lines, incidents


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="plog size in MiB (default 1024)")
    parser.add_argument("--error-every", type=int, default=20_000, help="an incident every N lines")
    parser.add_argument("--budget-mb", type=int, default=64, help="per-cycle byte budget (MiB)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="npuwatch-bench-") as tmp:
        root = Path(tmp) / "ascend" / "log"
        plog_dir = root / "debug" / "plog"
        plog_dir.mkdir(parents=True)
        path = plog_dir / "plog-4242_1.log"
        start = time.perf_counter()
        lines, incidents = generate(path, args.size_mb * MIB, args.error_every)
        gen_s = time.perf_counter() - start
        size = path.stat().st_size

        budget = min(args.budget_mb * MIB, max(MIB, size // 8))
        collector = HcclLogCollector([root], state_file=Path(tmp) / "state.json",
                                     first_start_window_s=float("inf"), byte_budget=budget)
        rss_start = rss_bytes()
        rss_quarter = None
        cycles = 0
        start = time.perf_counter()
        while True:
            collector.collect()
            cycles += 1
            done = collector.tailer.bytes_read_total
            if rss_quarter is None and done >= size / 4:
                rss_quarter = rss_bytes()
            if done >= size or cycles > 10_000:
                break
        scan_s = time.perf_counter() - start
        rss_end = rss_bytes()
        counted = sum(collector.counts.values())

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    rows = [
        ("file size", f"{size / MIB:,.0f} MiB, {lines:,} lines, {incidents:,} incidents"),
        ("generate", f"{gen_s:,.1f} s"),
        ("scan", f"{scan_s:,.2f} s in {cycles} cycles of <= {budget / MIB:,.0f} MiB"),
        ("lines/s", f"{lines / scan_s:,.0f}"),
        ("MiB/s", f"{size / MIB / scan_s:,.1f}"),
        ("incidents counted", f"{counted:,} (written {incidents:,})"),
        ("RSS before scan", f"{rss_start / MIB:,.1f} MiB"),
        ("RSS at 1/4 of file", f"{(rss_quarter or 0) / MIB:,.1f} MiB"),
        ("RSS at end", f"{rss_end / MIB:,.1f} MiB"),
        ("peak RSS (ru_maxrss)", f"{peak / MIB:,.1f} MiB"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0 if counted == incidents else 1


if __name__ == "__main__":
    raise SystemExit(main())
