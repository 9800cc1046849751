"""Benchmark the agent: scrape latency, series count, memory over cycles, CPU and tool calls.

    python bench/agent.py                # defaults: 1,000 cycles, 3 minutes per node (16 and 8 chips)
    python bench/agent.py --minutes 1    # shorter CPU runs
    python bench/agent.py --quick        # seconds; what tests/integration/test_bench_smoke.py runs

Prints one table (metric | value | target | ok). What each row measures:

* scrape p50/p99: GET /metrics over 127.0.0.1, a new connection per request, from a server process
  holding a fixed 16-chip store, so every answer is the cached exposition.
* uncached render p50/p99: in this process, every source stores new samples (the worst case; each
  store renders that source's block) and ``cache.render()`` joins the blocks; both are timed.
* series: samples in that 16-chip exposition.
* RSS at cycle k: one cycle is ``Agent.collect_once()`` (every collector group and internal job)
  followed by one render, run in this process with the demo fakes' render functions called
  in-process instead of as a process per call (see ``bench._util.InProcessTools``). This measures
  the agent's parse/store/render path; the fork/exec part is covered by the next rows.
* CPU-s/h and tool processes/min: the real agent (``python -m agent run --demo``) in a child
  process at default intervals, fakes answering after 300 ms; user+system CPU of that process only
  (not its children), extrapolated from a window after warm-up. Each fake is wrapped in a
  counting shell shim once the agent is up, so every tool process started is counted.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# This file is called agent.py: keep its directory off sys.path so `import agent` is the package.
_BENCH_DIR = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH_DIR]
sys.path.insert(0, str(_BENCH_DIR.parent))

from bench._util import (  # noqa: E402
    InProcessTools,
    Table,
    as_shown_mib,
    count_series,
    demo_agent,
    free_port,
    launch_until_answering,
    mib,
    ms,
    percentile,
    rss_bytes,
    scrape,
    start_server_process,
    stop_process,
    verdict,
)

SCRAPE_P99_TARGET_S = 0.005
SERIES_TARGET = 1660  # 1,500 before the online-triage series, 1,520 before the config-reload and fault-table series,
# 1,540 before the agent's verdict (a status per chip, one per node) and the verdict and npu_jobs collectors,
# 1,580 before npuwatch_collector_interval_seconds (one per collector: top's stale marks), 1,600 before each
# RoCE port's transmitted bytes and PFC pause frames (3 per chip, issue 43)
RSS_TARGET = 60 << 20
RSS_GROWTH_TARGET = 1 << 20
CPU_TARGET_S_PER_H = 36.0
TOOLS = ("npu-smi", "hccn_tool", "ascend-dmi")


# --- in-process parts
def measure_cycles(demo_dir: Path, chips: int, cycles: int, checkpoint: int) -> dict[int, int]:
    """RSS (bytes) after ``checkpoint`` and ``cycles`` collection cycles."""
    bundle = demo_agent(demo_dir, chips)
    agent = bundle.agent
    rss: dict[int, int] = {}
    try:
        with InProcessTools(demo_dir):
            for cycle in range(1, cycles + 1):
                agent.collect_once()
                agent.cache.render()
                if cycle in (checkpoint, cycles):
                    rss[cycle] = rss_bytes()
    finally:
        agent.stop()
    return rss


def measure_render(demo_dir: Path, chips: int, renders: int) -> tuple[list[float], bytes]:
    """Seconds to store every source anew and render the exposition, and the exposition."""
    bundle = demo_agent(demo_dir, chips)
    agent = bundle.agent
    timings: list[float] = []
    try:
        with InProcessTools(demo_dir):
            agent.collect_once()
        store = agent.store
        body = agent.cache.render().body
        snaps = [snap for snap in store.all() if snap.ok]
        for _ in range(renders):
            # Worst case: every source stores new samples (fresh tuples), so nothing cached is reused.
            # A store renders its source's block at once, so the timer holds the stores too.
            started = time.perf_counter()
            for snap in snaps:
                store.put_success(snap.source, list(snap.samples), snap.records, snap.started_at or 0.0,
                                  snap.duration_s or 0.0)
            agent.cache.render()
            timings.append(time.perf_counter() - started)
    finally:
        agent.stop()
    return timings, body


def measure_scrapes(demo_dir: Path, chips: int, scrapes: int, log_path: Path) -> tuple[list[float], int]:
    """Seconds per cached scrape over HTTP; returns (timings, non-200 answers)."""
    proc, port = start_server_process(demo_dir, chips, log_path)
    try:
        for _ in range(5):  # the first scrape renders; connection set-up warms up too
            scrape(port)
        timings: list[float] = []
        failures = 0
        for _ in range(scrapes):
            result = scrape(port)
            failures += result.status != 200
            timings.append(result.seconds)
    finally:
        stop_process(proc)
    return timings, failures


# --- the real agent in a child process
@dataclass(frozen=True, slots=True)
class ProcessRun:
    chips: int
    launcher: str
    window_s: float
    cpu_s: float
    calls: dict[str, int]
    rss: int
    expected_calls_per_min: float

    @property
    def cpu_s_per_h(self) -> float:
        return self.cpu_s / self.window_s * 3600

    @property
    def calls_per_min(self) -> float:
        return sum(self.calls.values()) / self.window_s * 60


def scheduled_calls_per_min(chips: int) -> float:
    """Tool processes per minute the default schedule asks for on a ``chips``-chip node."""
    from agent.daemon.service import enabled_sources, group_interval
    from bench._util import bench_config

    config = bench_config()
    total = 0.0
    for source in enabled_sources(config):
        per_run = chips if source.scope == "chip" else 1
        total += per_run * 60 / group_interval(config, source.group)
    return total


def _install_counting_shims(bin_dir: Path, counts_dir: Path) -> None:
    """Wrap each fake: the shim appends one byte to a counter file, then execs the real fake."""
    counts_dir.mkdir(parents=True, exist_ok=True)
    for tool in TOOLS:
        target = bin_dir / tool
        real = bin_dir / f".real-{tool}"
        real.write_bytes(target.read_bytes())
        real.chmod(0o755)
        counter = counts_dir / tool
        counter.touch()
        shim = bin_dir / f".shim-{tool}"
        shim.write_text(
            "#!/bin/sh\n"
            f"printf . >> {shlex.quote(str(counter))}\n"
            f'exec {shlex.quote(str(real))} "$@"\n',
            encoding="utf-8",
        )
        shim.chmod(0o755)
        shim.replace(target)  # atomic: a concurrent exec sees the fake or the shim, never nothing


def _counts(counts_dir: Path) -> dict[str, int]:
    return {tool: (counts_dir / tool).stat().st_size for tool in TOOLS}


def _launch(argv: list[str], log_path: Path, port: int) -> subprocess.Popen[bytes] | None:
    """Start ``argv``; the process once /metrics answers and it is still alive 1 s later."""
    proc: subprocess.Popen[bytes] = launch_until_answering(argv, log_path, port)
    time.sleep(1)  # `run` imports more after start(); a failure there ends the process
    if proc.poll() is not None:
        stop_process(proc)
        return None
    return proc


def _first_error(log_path: Path) -> str:
    lines = log_path.read_text(errors="replace").splitlines()
    errors = [line for line in lines if re.match(r"^[\w.]*(Error|Exception)\b", line)]
    return (errors or lines[-1:] or ["no output"])[0][:160]


def measure_process(chips: int, seconds: float, warmup_s: float, delay_s: float, work: Path) -> ProcessRun:
    import psutil

    from agent.demo.node import DemoNode

    demo_dir = work / f"demo{chips}"
    node = DemoNode(demo_dir).create(chips=chips, delay_s=delay_s)
    config_file = work / "bench-config.yml"
    config_file.write_text("probes:\n  enabled: false\n", encoding="utf-8")
    log_path = work / f"agent{chips}.log"
    port = free_port()
    cli = [sys.executable, "-m", "agent", "run", "--config", str(config_file), "--demo",
           "--demo-dir", str(demo_dir), "--demo-chips", str(chips),
           "--web.listen-address", "127.0.0.1", "--web.port", str(port)]
    launcher = "python -m agent run --demo"
    launched = _launch(cli, log_path, port)
    if launched is None:
        launcher = f"bench._util serve --tools subprocess (`agent run` failed: {_first_error(log_path)})"
        proc, port = start_server_process(demo_dir, chips, work / f"serve{chips}.log", tools="subprocess")
    else:
        proc = launched
    try:
        _install_counting_shims(node.bin_dir, work / f"counts{chips}")
        process = psutil.Process(proc.pid)
        time.sleep(warmup_s)
        cpu0 = process.cpu_times()
        calls0 = _counts(work / f"counts{chips}")
        wall0 = time.monotonic()
        deadline = wall0 + seconds
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"agent exited with {proc.returncode}; see {log_path}")
            time.sleep(min(2.0, max(0.0, deadline - time.monotonic())))
        cpu1 = process.cpu_times()
        calls1 = _counts(work / f"counts{chips}")
        window = time.monotonic() - wall0
        rss = process.memory_info().rss
    finally:
        stop_process(proc)
    return ProcessRun(
        chips=chips,
        launcher=launcher,
        window_s=window,
        cpu_s=(cpu1.user + cpu1.system) - (cpu0.user + cpu0.system),
        calls={tool: calls1[tool] - calls0[tool] for tool in TOOLS},
        rss=rss,
        expected_calls_per_min=scheduled_calls_per_min(chips),
    )


# --- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chips", type=int, default=16, help="chips for the latency/series/RSS rows")
    parser.add_argument("--cycles", type=int, default=1000, help="collection cycles for the RSS rows")
    parser.add_argument("--scrapes", type=int, default=1000, help="cached scrapes timed")
    parser.add_argument("--renders", type=int, default=200, help="uncached renders timed")
    parser.add_argument("--minutes", type=float, default=3.0, help="CPU window per node, after warm-up")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds before the CPU window opens")
    parser.add_argument("--nodes", default="16,8", help="chip counts for the CPU/tool-call runs ('' skips)")
    parser.add_argument("--delay", type=float, default=0.3, help="seconds each fake tool call takes")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for the smoke test")
    args = parser.parse_args(argv)
    if args.quick:
        args.cycles, args.scrapes, args.renders = 20, 50, 20
        args.minutes, args.warmup, args.nodes = 0.1, 0.5, "1"  # holds the start-up burst, loaded or not
    nodes = [int(n) for n in args.nodes.split(",") if n.strip()]
    checkpoint = max(1, args.cycles // 10)

    table = Table()
    with tempfile.TemporaryDirectory(prefix="npuwatch-bench-") as tmp:
        work = Path(tmp)
        rss = measure_cycles(work / "cycles", args.chips, args.cycles, checkpoint)
        renders, body = measure_render(work / "render", args.chips, args.renders)
        scrapes, failures = measure_scrapes(work / "render", args.chips, args.scrapes, work / "serve.log")
        runs = [measure_process(chips, args.minutes * 60, args.warmup, args.delay, work) for chips in nodes]

    n = args.chips
    scrape_p99 = percentile(scrapes, 99)
    table.add(f"scrape p50, {n} chips, cached (HTTP, new conn)", ms(percentile(scrapes, 50)), "-", "-")
    table.add(f"scrape p99, {n} chips, cached (HTTP, new conn)", ms(scrape_p99), "< 5 ms",
              verdict(scrape_p99 < SCRAPE_P99_TARGET_S and failures == 0))
    for q in (50, 99):
        table.add(f"render p{q}, {n} chips, uncached (every source changed)", ms(percentile(renders, q)),
                  "-", "-")
    series = count_series(body)
    table.add(f"series, {n} chips", series, f"<= {SERIES_TARGET}", verdict(series <= SERIES_TARGET))
    table.add(f"exposition bytes, {n} chips", len(body), "-", "-")
    table.add(f"RSS at cycle {checkpoint} (in-process fakes)", mib(rss[checkpoint]), "-", "-")
    table.add(f"RSS at cycle {args.cycles} (in-process fakes)", mib(rss[args.cycles]), "< 60 MB",
              verdict(as_shown_mib(rss[args.cycles]) < RSS_TARGET))
    growth = rss[args.cycles] - rss[checkpoint]
    table.add(f"RSS growth, cycle {checkpoint} -> {args.cycles}", mib(growth), "< 1 MB",
              verdict(as_shown_mib(growth) < RSS_GROWTH_TARGET))
    for run in runs:
        label = f"{run.chips} chips, {run.window_s:.0f} s window"
        table.add(f"agent CPU-s/h, {label}", f"{run.cpu_s_per_h:.1f}", f"< {CPU_TARGET_S_PER_H:g}",
                  verdict(run.cpu_s_per_h < CPU_TARGET_S_PER_H))
        expected = run.expected_calls_per_min
        table.add(f"tool processes/min, {label}", f"{run.calls_per_min:.1f}", f"~{expected:.1f} (schedule)",
                  verdict(abs(run.calls_per_min - expected) <= 0.1 * expected))
        table.add(f"agent process RSS, {label}", mib(run.rss), "< 60 MB", verdict(as_shown_mib(run.rss) < RSS_TARGET))
        per_tool = ", ".join(f"{tool} {count}" for tool, count in run.calls.items())
        table.note(f"{run.chips} chips: launcher {run.launcher}; calls in window: {per_tool}")
    if failures:
        table.note(f"{failures} of {len(scrapes)} scrapes did not answer 200")
    table.note("RSS rows at cycle k run the collection in-process (no fork/exec); "
               "'agent process RSS' is the real agent with subprocess fakes")
    print(table.render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
