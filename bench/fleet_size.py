"""Fleet sizing: series per node (16 and 8 chips) and what a 1,000-node fleet sends Prometheus.

    python bench/fleet_size.py                    # default config, fakes rendered in-process
    python bench/fleet_size.py --tools subprocess # the demo's fake executables, a process per call
    python bench/fleet_size.py --nodes 2000
    python bench/fleet_size.py --disable npu_smi_hccs_bw   # effect of a cut

Builds a demo agent of each size at the default config (probes off: they need torch), runs
``collect_once()`` (every collector group and internal job) and counts the samples in one
``/metrics`` exposition: every non-comment line, per metric family and in total. From the
16-chip count it derives, for the fleet at the default scrape interval (15 s) and at 30 s:
series, samples/s, and disk per day at the 1-2 bytes per sample Prometheus documents for its
TSDB. Prints one table: totals first, then every family, largest first.

Not included: probe series (off here; with probes on, add per chip one gemm flops/efficiency/
correct series per dtype and per node a handful of all-reduce and probe-runner series) and
``npu_process_memory_bytes`` (opt-in, one series per process on a chip). Host series depend on
this machine's network interfaces and mount points.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import InProcessTools, Table, count_series, demo_agent, verdict

SERIES_TARGET_16_CHIPS = 1660  # as bench/agent.py
SCRAPE_INTERVALS_S = (15.0, 30.0)
BYTES_PER_SAMPLE = (1.0, 2.0)  # Prometheus storage docs: 1-2 bytes per sample after compression


def families(body: bytes) -> Counter[str]:
    """Samples per metric name (``npu_hccl_errors_total`` counts as itself)."""
    counts: Counter[str] = Counter()
    for line in body.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        counts[name] += 1
    return counts


def disable_config(sources: Sequence[str]) -> dict[str, Any]:
    """Config that turns off tool-backed sources by name (``collectors.<tool>.disable``)."""
    from collectors.sources import SOURCES

    tool_keys = {"npu-smi": "npu_smi", "hccn_tool": "hccn_tool"}
    by_name = {source.name: tool_keys.get(source.tool) for source in SOURCES}
    unknown = sorted(name for name in sources if by_name.get(name) is None)
    if unknown:
        known = ", ".join(sorted(name for name, key in by_name.items() if key))
        raise ValueError(f"cannot disable {', '.join(unknown)}; sources: {known}")
    config: dict[str, Any] = {}
    for name in sources:
        key = by_name[name]
        config.setdefault("collectors", {}).setdefault(key, {"disable": []})["disable"].append(name)
    return config


def exposition(chips: int, tools: str, disable: Sequence[str] = ()) -> bytes:
    """One rendered exposition of a fresh demo agent with ``chips`` chips after ``collect_once()``."""
    with tempfile.TemporaryDirectory(prefix=f"npuwatch-fleet-{chips}-") as tmp:
        bundle = demo_agent(Path(tmp) / "demo", chips, disable_config(disable))
        try:
            with _tools(Path(tmp) / "demo", tools):
                bundle.agent.collect_once()
            return bundle.agent.cache.render().body
        finally:
            bundle.agent.stop()


@contextlib.contextmanager
def _tools(demo_dir: Path, tools: str) -> Iterator[None]:
    if tools == "subprocess":
        yield
        return
    with InProcessTools(demo_dir):
        yield


def _count(value: float) -> str:
    return f"{value:,.0f}"


def _bytes(value: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:,.0f} B"


def build_table(big: bytes, small: bytes, nodes: int) -> Table:
    big_families, small_families = families(big), families(small)
    total_big, total_small = count_series(big), count_series(small)
    table = Table(("metric", "16 chips", "8 chips", "target", "ok"))
    table.add("series per node", _count(total_big), _count(total_small),
              f"<= {SERIES_TARGET_16_CHIPS:,} (16 chips)", verdict(total_big <= SERIES_TARGET_16_CHIPS))
    table.add("series per chip (incl. node-level)", f"{total_big / 16:.0f}", f"{total_small / 8:.0f}", "-", "-")
    table.add(f"fleet series, {nodes:,} nodes", _count(total_big * nodes), _count(total_small * nodes), "-", "-")
    for interval in SCRAPE_INTERVALS_S:
        rate_big, rate_small = total_big * nodes / interval, total_small * nodes / interval
        table.add(f"fleet samples/s, scrape {interval:g} s", _count(rate_big), _count(rate_small), "-", "-")
        per_day = [rate_big * 86400 * b for b in BYTES_PER_SAMPLE]
        table.add(f"fleet disk/day, scrape {interval:g} s (1-2 B/sample)",
                  f"{_bytes(per_day[0])}-{_bytes(per_day[1])}",
                  "-".join(_bytes(rate_small * 86400 * b) for b in BYTES_PER_SAMPLE), "-", "-")
    for name, count in sorted(big_families.items(), key=lambda item: (-item[1], item[0])):
        share = f"{100 * count / total_big:.1f}% of node"
        table.add(f"  {name}", _count(count), _count(small_families.get(name, 0)), share, "-")
    for name in sorted(set(small_families) - set(big_families)):
        table.add(f"  {name}", "0", _count(small_families[name]), "-", "-")
    if total_big > SERIES_TARGET_16_CHIPS:
        top = ", ".join(name for name, _ in big_families.most_common(5))
        table.note(f"over target: the largest families are {top}; see docs/fleet-scale.md for cuts")
    table.note("probes off (no torch here) and npu_process_memory_bytes off (opt-in): not counted")
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=1000, help="fleet size to extrapolate to (default 1000)")
    parser.add_argument("--tools", choices=("inprocess", "subprocess"), default="inprocess",
                        help="render the demo fakes in this process (fast) or run their executables")
    parser.add_argument("--disable", action="append", default=[], metavar="SOURCE",
                        help="count with this source turned off (e.g. npu_smi_hccs_bw); repeatable")
    args = parser.parse_args(argv)
    if args.nodes < 1:
        parser.error(f"--nodes must be at least 1, got {args.nodes}")
    try:
        disable_config(args.disable)
    except ValueError as exc:
        parser.error(str(exc))
    big = exposition(16, args.tools, args.disable)
    small = exposition(8, args.tools, args.disable)
    print(build_table(big, small, args.nodes).render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
