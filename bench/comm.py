"""Benchmark the communicator-fact parser (``collectors.hccl.comm``) on a synthetic plog.

    python bench/comm.py                 # 200 MiB plog, mostly INFO noise
    python bench/comm.py --size-mb 20    # quicker

Writes a run/debug plog of mostly ``[INFO]`` lines (a few of them pass the substring pre-filter
without stating a fact), with a per-op ``Entry-HcclAllReduce`` line every ``--entry-every`` lines
(HCCL_ENTRY_LOG_ENABLE=1) and a 3-line Task-run-failed block every ``--failure-every`` lines, into
a temporary directory. Then reads it line by line through ``CommFactParser`` and prints lines/s,
MiB/s and the facts found (they must match what was written: exit 1 otherwise). For comparison it
also times the same file through the error classifier (``hccl_classify.StreamClassifier``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collectors.hccl.classify import StreamClassifier
from collectors.hccl.comm import CommFactParser
from collectors.hccl.facts import CollectiveFailure, CollectiveOp

MIB = 1 << 20
HEAD = "HCCL(4242,python3):2025-03-02-08:{mm:02d}:{ss:02d}.{ms:03d}.000"
NOISE = (
    "[INFO] " + HEAD + " [hccl_op.cc:{n}] [4300][AllReduce] op finished, tag[AllReduce_198.51.100.1%eth0_60000_0_17], "
    "count[{n}], dataType[float16], stream[4]\n",
    "[INFO] " + HEAD + " [heartbeat.cc:951] [4310][Heartbeat] send ok to rank[{r}], seq[{n}]\n",
    "[DEBUG] " + HEAD + " [dispatcher.cc:210] [4300][Dispatch] launch task id[{n}] on stream[4] notify[0x{n:x}]\n",
    # passes the pre-filter ("onnect"), states no fact
    "[INFO] " + HEAD + " [transport_manager.cc:400] [4300][Link] connected to rank[{r}] qp[0x{n:x}] in 12 us\n",
    "[INFO] " + HEAD + " [externalinput.cc:598] [4242][HCCL_ENV] HCCL_CONNECT_TIMEOUT set by default to [120]s\n",
)
ENTRY = ("[INFO] " + HEAD + " [hccl_opbase_atrace_info.cc:56][4301]Entry-HcclAllReduce: "
         "tag[AllReduce_198.51.100.1%eth0_60000_0_17], sendBuf[0x1241d3dcdc00], recvBuf[0x124702f40200], "
         "count[{n}], dataType[float32], op[sum], localRank[2], streamId[7],comm[0xfffe380078d0], deviceLogicId[2]\n")
FAILURE = (
    "[ERROR] " + HEAD + " [task_exception_handler.cc:908] [4300][TaskExecStage][Timeout][Host]Task run failed, "
    "base information is streamID:[4], taskID[{n}], tag[AllReduce_198.51.100.1%eth0_60000_0_17], "
    "AlgType(level 0-1-2):[fullmesh-ring-NHR].\n"
    "[ERROR] " + HEAD + " [task_exception_handler.cc:771] [4300][TaskExecStage][Timeout][Host]Task run failed, "
    "groupRank information is group:[198.51.100.1%eth0_60000_0_17], user define information[], rankSize[8], "
    "rankId[2].\n"
    "[ERROR] " + HEAD + " [task_exception_handler.cc:704] [4300][TaskExecStage][Timeout][Host]Task run failed, "
    "opData information is timeStamp:[2025-03-02-08:00:02.000.000], deviceId[2], index[{n}], count[1024], "
    "reduceType[sum], dataType[float16].\n"
)


def generate(path: Path, size: int, entry_every: int, failure_every: int) -> tuple[int, int, int]:
    """Write about ``size`` bytes; returns (lines, entry lines, failure blocks)."""
    lines = entries = failures = written = 0
    batch: list[str] = []
    with path.open("w", encoding="ascii") as handle:
        while written < size:
            n = lines
            clock = {"mm": n // 60000 % 60, "ss": n // 1000 % 60, "ms": n % 1000, "n": n % 1_000_000, "r": n % 8}
            if n % failure_every == failure_every - 1:
                text, lines, failures = FAILURE.format(**clock), lines + 3, failures + 1
            elif n % entry_every == entry_every - 1:
                text, lines, entries = ENTRY.format(**clock), lines + 1, entries + 1
            else:
                text, lines = NOISE[n % len(NOISE)].format(**clock), lines + 1
            batch.append(text)
            written += len(text)
            if len(batch) >= 4096:
                handle.write("".join(batch))
                batch.clear()
        handle.write("".join(batch))
    return lines, entries, failures


def time_comm(path: Path) -> tuple[float, Counter[str]]:
    parser = CommFactParser()
    kinds: Counter[str] = Counter()
    start = time.perf_counter()
    with path.open(encoding="ascii") as handle:
        for line in handle:
            for fact in parser.feed(line):
                kinds[type(fact).__name__] += 1
    for fact in parser.finish():
        kinds[type(fact).__name__] += 1
    return time.perf_counter() - start, kinds


def time_classifier(path: Path) -> float:
    stream = StreamClassifier()
    start = time.perf_counter()
    with path.open(encoding="ascii") as handle:
        for line in handle:
            stream.feed(line)
    stream.flush()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=200, help="plog size in MiB (default 200)")
    parser.add_argument("--entry-every", type=int, default=100, help="an Entry-HcclAllReduce line every N lines")
    parser.add_argument("--failure-every", type=int, default=200_000, help="a failure block every N lines")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="npuwatch-bench-") as tmp:
        path = Path(tmp) / "plog-4242_1.log"
        start = time.perf_counter()
        lines, entries, failures = generate(path, args.size_mb * MIB, args.entry_every, args.failure_every)
        gen_s = time.perf_counter() - start
        size = path.stat().st_size
        comm_s, kinds = time_comm(path)
        classify_s = time_classifier(path)

    rows = [
        ("file size", f"{size / MIB:,.0f} MiB, {lines:,} lines ({entries:,} Entry- lines, {failures:,} failures)"),
        ("generate", f"{gen_s:,.1f} s"),
        ("hccl_comm parse", f"{comm_s:,.2f} s"),
        ("hccl_comm lines/s", f"{lines / comm_s:,.0f}"),
        ("hccl_comm MiB/s", f"{size / MIB / comm_s:,.1f}"),
        ("facts", ", ".join(f"{kind} {count:,}" for kind, count in sorted(kinds.items()))),
        ("hccl_classify lines/s", f"{lines / classify_s:,.0f} (same file, for comparison)"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    expected = {CollectiveOp.__name__: entries, CollectiveFailure.__name__: failures}
    return 0 if all(kinds[kind] == count for kind, count in expected.items()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
