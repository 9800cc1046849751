"""Parse time against output size for the npu-smi parsers: does it grow linearly?

    python bench/parsers.py [--rows 1000,2000,4000,8000] [--repeat 3] [--quick]

For each parser a generator writes N bogus-but-well-formed rows of that tool's
output (``npu-smi info``: N NPU/chip line pairs' worth of lines; ``-t <type>``:
N ``key : value`` lines in repeated chip blocks; ``hccs-bw``: N link rows). The
table shows the best CPU time of ``--repeat`` runs, the time per row and the growth
factor against the previous N: about 2 for each doubling when parsing is linear,
about 4 when it is quadratic. Nothing here is asserted; the numbers are for
reading (the smoke test only checks that the table is printed).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from collectors import (  # noqa: E402
    npu_smi_board,
    npu_smi_common,
    npu_smi_ecc,
    npu_smi_hccs,
    npu_smi_hccs_bw,
    npu_smi_health,
    npu_smi_info,
    npu_smi_memory,
    npu_smi_power,
    npu_smi_temp,
    npu_smi_usages,
)
from collectors.base import ParseError  # noqa: E402

COLUMNS = ("parser", "rows", "bytes", "cpu ms", "us/row", "growth")

_INFO_HEADER = (
    "| npu-smi 24.1.rc2.2               Version: 24.1.rc2.2                                           |\n"
    "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n"
    "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n"
)


def info_table(rows: int) -> str:
    """``rows`` table lines: NPU/chip line pairs of distinct chips."""
    pairs = [
        f"| {n:<5} 910B3               | OK            | 101.3       41                0    / 0             |\n"
        f"| 0                         | 0000:C1:00.0  | 37          0    / 0          41052/ 65536         |\n"
        for n in range(rows // 2)
    ]
    return _INFO_HEADER + "".join(pairs)


def info_npu_lines(rows: int) -> str:
    """``rows`` NPU lines of one NPU without chip lines (the old "next free chip" rescan)."""
    line = "| 0     910B3               | OK            | 101.3       41                0    / 0             |\n"
    return _INFO_HEADER + line * rows


def key_values(block: Sequence[tuple[str, str]]) -> Callable[[int], str]:
    """``rows`` key : value lines: ``block`` repeated, one chip block after another."""

    def make(rows: int) -> str:
        lines: list[str] = []
        chip = 0
        while len(lines) < rows:
            lines.extend(f"\t{key:<40} : {value}" for key, value in block)
            lines.append(f"\t{'Chip ID':<40} : {chip}")
            lines.append("")
            chip += 1
        return "\n".join(lines[:rows]) + "\n"

    return make


def hccs_bw(rows: int) -> str:
    header = "hccs link                      tx_bandwidth(GB/S)             rx_bandwidth(GB/S)\n"
    return header + "".join(f"{n:<35d} {12.5:<30.6f} {3.25:<30.6f}\n" for n in range(rows))


CASES: dict[str, tuple[Callable[[str], Any], Callable[[int], str]]] = {
    "info (table)": (lambda text: npu_smi_info.parse(text, max_chips=1 << 30), info_table),
    "info (no chip lines)": (lambda text: npu_smi_info.parse(text, max_chips=1 << 30), info_npu_lines),
    "-t usages": (npu_smi_usages.parse, key_values([("HBM Capacity(MB)", "65536"), ("HBM Usage Rate(%)", "4"),
                                                   ("Aicore Usage Rate(%)", "37"), ("Aicpu Usage Rate(%)", "1")])),
    "-t common": (npu_smi_common.parse, key_values([("Aicore Freq(MHZ)", "1800"), ("Aicore curFreq(MHZ)", "800"),
                                                   ("Temperature(C)", "46"), ("NPU Real-time Power(W)", "93.4")])),
    "-t power": (npu_smi_power.parse, key_values([("NPU Real-time Power(W)", "93.4")])),
    "-t temp": (npu_smi_temp.parse, key_values([("NPU Temperature (C)", "46"), ("HBM Temperature (C)", "40")])),
    "-t memory": (npu_smi_memory.parse, key_values([("HBM Capacity(MB)", "65536"), ("HBM Temperature(C)", "41")])),
    "-t ecc": (npu_smi_ecc.parse, key_values([("HBM Single Bit Error Count", "0"),
                                             ("HBM Double Bit Aggregate Total Err Cnt", "2")])),
    "-t health": (npu_smi_health.parse, key_values([("Health Status", "OK"), ("Error Code", "NA")])),
    "-t board": (npu_smi_board.parse, key_values([("Serial Number", "1025C9048791"), ("Chip Count", "1")])),
    "-t hccs": (npu_smi_hccs.parse, key_values([("hccs health status", "OK"), ("hccs error count", "[0 0 0 0]")])),
    "-t hccs-bw": (npu_smi_hccs_bw.parse, hccs_bw),
}


def best_seconds(parse: Callable[[str], Any], text: str, repeat: int) -> float:
    """Best of ``repeat`` runs in CPU seconds of this process, the cyclic GC off while timing.

    CPU time rather than wall time: on a shared machine, being scheduled out must
    not look like a slower parser.
    """
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            started = time.process_time()
            with contextlib.suppress(ParseError):  # e.g. a cap reached: the time is what matters here
                parse(text)
            best = min(best, time.process_time() - started)
        finally:
            gc.enable()
    return best


def measure(rows: Sequence[int], repeat: int) -> list[tuple[str, ...]]:
    table: list[tuple[str, ...]] = []
    for name, (parse, make) in CASES.items():
        previous: float | None = None
        for count in rows:
            text = make(count)
            seconds = best_seconds(parse, text, repeat)
            growth = "-" if previous is None or previous <= 0 else f"{seconds / previous:.2f}x"
            table.append((name, str(count), str(len(text)), f"{seconds * 1e3:.2f}",
                          f"{seconds * 1e6 / count:.2f}", growth))
            previous = seconds
    return table


def render(rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in (COLUMNS, *rows)) for i in range(len(COLUMNS))]

    def line(cells: Sequence[str]) -> str:
        return " | ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip()

    return "\n".join([line(COLUMNS), "-|-".join("-" * width for width in widths), *(line(row) for row in rows)])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/parsers.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="1000,2000,4000,8000",
                        help="comma-separated row counts, each about twice the last (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per size; the best is shown (default: 3)")
    parser.add_argument("--quick", action="store_true", help="small sizes and one run (for the smoke test)")
    args = parser.parse_args(argv)
    rows = [100, 200] if args.quick else [int(part) for part in args.rows.split(",") if part.strip()]
    if not rows or any(count <= 0 for count in rows):
        parser.error(f"--rows needs positive counts, got {args.rows!r}")
    print(render(measure(rows, 1 if args.quick else max(1, args.repeat))))
    print("note: growth is the time against the previous row count; ~2x per doubling is linear, ~4x quadratic")
    return 0


if __name__ == "__main__":
    sys.exit(main())
