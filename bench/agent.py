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
* the same, per sampling mode (``--modes``; docs/failslow.md#signals): ``npu-smi`` and ``dcmi`` with the
  fail-slow sampling of issue 43 on (the defaults: ``hccn_tool -stat`` every 5 s, and with DCMI each
  chip's AI Core busy fraction and clock read every second, the busy fraction's mean exported every 5 s),
  ``dcmi-1read`` (not run by default) reading them once every 5 s, ``*-before`` with it off (``stat_interval`` and
  ``failslow_interval`` none: -stat once a minute, the AI Core readings at the npu-smi intervals);
  ``npu-smi-5s`` (not run by default) also reads the npu-smi info table every 5 s, which is how a node
  without DCMI gets its busy fraction every 5 s. In the fail-slow modes the bench also GETs
  ``/metrics/failslow`` every 5 s during the window, as the generated Prometheus configs do.
  The ``dcmi`` modes load the fake libdcmi.so (tests/fixtures/dcmi/fake_dcmi.c, compiled here) for the
  readings it serves; the DCMI helper is a Python process of the agent's own, so its CPU is printed
  apart and added to the agent's. The tools' own CPU (fakes are Python scripts: their start-up is not
  the real tools') is never counted, only how many processes the agent starts.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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
FAILSLOW_CPU_TARGET_S_PER_H = 40.0  # issue 43: the agent's own CPU with the fail-slow sampling on, 16 chips
FAILSLOW_PATH = "/metrics/failslow"
FAILSLOW_SCRAPE_S = 5.0  # the npuwatch-failslow job's scrape interval (docs/failslow.md#signals)
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
@dataclass(frozen=True)
class Mode:
    """A sampling mode of the CPU runs: its config (over the bench's) and whether the fake DCMI serves."""

    name: str
    config: dict[str, object]
    dcmi: bool
    failslow: bool

    @property
    def cpu_target(self) -> float:
        return FAILSLOW_CPU_TARGET_S_PER_H if self.failslow else CPU_TARGET_S_PER_H


_BEFORE: dict[str, object] = {"collectors": {"dcmi": {"failslow_interval": None},
                                             "hccn_tool": {"stat_interval": None}}}
MODES = {
    "npu-smi": Mode("npu-smi, fail-slow sampling", {}, dcmi=False, failslow=True),
    "npu-smi-before": Mode("npu-smi, before", _BEFORE, dcmi=False, failslow=False),
    # without DCMI the busy fraction is the npu-smi info table's: at 5 s too, one more process every 5 s
    "npu-smi-5s": Mode("npu-smi, fail-slow sampling, table every 5 s", {"collectors": {"npu_smi": {"interval": "5s"}}},
                       dcmi=False, failslow=True),
    "dcmi": Mode("DCMI, fail-slow sampling", {}, dcmi=True, failslow=True),
    # the busy fraction read once every 5 s instead of the default 5 times (failslow_reads): what the reads cost
    "dcmi-1read": Mode("DCMI, fail-slow sampling, one read in 5 s", {"collectors": {"dcmi": {"failslow_reads": 1}}},
                       dcmi=True, failslow=True),
    "dcmi-before": Mode("DCMI, before", _BEFORE, dcmi=True, failslow=False),
}


@dataclass(frozen=True)
class ProcessRun:
    chips: int
    mode: Mode
    launcher: str
    window_s: float
    cpu_s: float
    helper_cpu_s: float  # the DCMI helper's (0 without DCMI)
    calls: dict[str, int]
    rss: int
    expected_calls_per_min: float
    given_back: tuple[str, ...] = ()  # sources the DCMI trust check handed back to npu-smi
    failslow_scrapes: int = 0  # answered GETs of /metrics/failslow in the window

    @property
    def cpu_s_per_h(self) -> float:
        return self.cpu_s / self.window_s * 3600

    @property
    def helper_cpu_s_per_h(self) -> float:
        return self.helper_cpu_s / self.window_s * 3600

    @property
    def calls_per_min(self) -> float:
        return sum(self.calls.values()) / self.window_s * 60


def scheduled_calls_per_min(chips: int, mode: Mode | None = None) -> float:
    """Tool processes per minute the schedule asks for on a ``chips``-chip node (with DCMI: the sources it does
    not serve, the health group's npu-smi ones at ``collectors.dcmi.npu_smi_interval``, as the agent runs them)."""
    from agent.daemon.service import enabled_sources, group_interval
    from bench._util import bench_config
    from collectors.dcmi.plans import SERVED

    config = bench_config(mode.config if mode is not None else None)
    dcmi = mode is not None and mode.dcmi
    total = 0.0
    for source in enabled_sources(config):
        if dcmi and source.name in SERVED:
            continue
        group = "npu_smi_slow" if dcmi and source.tool == "npu-smi" and source.group == "health" else source.group
        per_run = chips if source.scope == "chip" else 1
        total += per_run * 60 / group_interval(config, group)
    return total


# What npu-smi still answers while DCMI serves the chips (bench/tool_cost.py's; -t hccs matches hccs-bw too)
DCMI_ONLY_TOOL = ("-t board", "-t hccs")


def _install_counting_shims(bin_dir: Path, counts_dir: Path, dcmi: bool = False) -> None:
    """Wrap each fake: the shim appends one byte to a counter file, then execs the real fake. With ``dcmi`` the
    npu-smi shim refuses what DCMI serves, as on a node whose npu-smi cannot vouch for the fake library's chips:
    the trust check then finds nothing to compare and leaves DCMI serving (the demo's npu-smi describes other
    chips than the fake library, and a disagreement would hand the readings back to npu-smi)."""
    counts_dir.mkdir(parents=True, exist_ok=True)
    for tool in TOOLS:
        target = bin_dir / tool
        real = bin_dir / f".real-{tool}"
        real.write_bytes(target.read_bytes())
        real.chmod(0o755)
        counter = counts_dir / tool
        counter.touch()
        shim = bin_dir / f".shim-{tool}"
        refuse = ""
        if dcmi and tool == "npu-smi":
            wanted = "|".join(f"*'{arg}'*" for arg in DCMI_ONLY_TOOL)
            refuse = f'case " $* " in {wanted}) ;; *) echo "bench: DCMI serves this" >&2; exit 1;; esac\n'
        shim.write_text(
            "#!/bin/sh\n"
            f"printf . >> {shlex.quote(str(counter))}\n"
            f"{refuse}"
            f'exec {shlex.quote(str(real))} "$@"\n',
            encoding="utf-8",
        )
        shim.chmod(0o755)
        shim.replace(target)  # atomic: a concurrent exec sees the fake or the shim, never nothing


def _counts(counts_dir: Path) -> dict[str, int]:
    return {tool: (counts_dir / tool).stat().st_size for tool in TOOLS}


def _launch(argv: list[str], log_path: Path, port: int, env: dict[str, str],
            then: Callable[[], None]) -> subprocess.Popen[bytes] | None:
    """Start ``argv``; the process once /metrics answers and it is still alive 1 s later (``then`` runs first:
    the shims go in before the DCMI trust check's first comparison)."""
    proc: subprocess.Popen[bytes] = launch_until_answering(argv, log_path, port, env=env)
    then()
    time.sleep(1)  # `run` imports more after start(); a failure there ends the process
    if proc.poll() is not None:
        stop_process(proc)
        return None
    return proc


def _first_error(log_path: Path) -> str:
    lines = log_path.read_text(errors="replace").splitlines()
    errors = [line for line in lines if re.match(r"^[\w.]*(Error|Exception)\b", line)]
    return (errors or lines[-1:] or ["no output"])[0][:160]


def fake_dcmi_library(work: Path) -> Path:
    """The tests' fake libdcmi.so, compiled into ``work``."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("the dcmi modes need a C compiler (cc or gcc) for the fake libdcmi.so; --modes npu-smi")
    target = work / "libdcmi.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-fvisibility=hidden", "-pthread", "-o", str(target),
                    str(_BENCH_DIR.parent / "tests" / "fixtures" / "dcmi" / "fake_dcmi.c")],
                   check=True, capture_output=True, timeout=120)
    return target


def _helper_cpu(process: object) -> dict[int, float]:
    """CPU seconds of each DCMI helper under the agent, by pid."""
    import psutil

    assert isinstance(process, psutil.Process)
    found: dict[int, float] = {}
    try:
        children = process.children(recursive=True)
    except psutil.Error:
        return found
    for child in children:
        try:
            if "collectors.dcmi.worker" in " ".join(child.cmdline()):
                times = child.cpu_times()
                found[child.pid] = times.user + times.system
        except psutil.Error:
            continue
    return found


def measure_process(chips: int, seconds: float, warmup_s: float, delay_s: float, work: Path, *,
                    mode: Mode = MODES["npu-smi"]) -> ProcessRun:
    import psutil
    import yaml

    from agent.demo.node import DemoNode
    from bench._util import _merged

    slug = f"{mode.name.replace(' ', '').replace(',', '-')}-{chips}"
    where = next(work / f"{slug}-{n}" for n in range(1, 1000) if not (work / f"{slug}-{n}").exists())  # a mode twice
    where.mkdir(parents=True)
    demo_dir = where / "demo"
    node = DemoNode(demo_dir).create(chips=chips, delay_s=delay_s)
    config: dict[str, object] = _merged({"probes": {"enabled": False}}, mode.config)
    env = dict(os.environ)
    if mode.dcmi:
        config = _merged(config, {"collectors": {"dcmi": {"library": str(fake_dcmi_library(where)),
                                                          "lock_file": str(where / "dcmi.lock")}}})
        env.update(FAKE_DCMI_CHIPS=str(chips), FAKE_DCMI_PHY_BASE="0")
    config_file = where / "bench-config.yml"
    config_file.write_text(yaml.safe_dump(config), encoding="utf-8")
    log_path = where / "agent.log"
    port = free_port()
    cli = [sys.executable, "-m", "agent", "run", "--config", str(config_file), "--demo",
           "--demo-dir", str(demo_dir), "--demo-chips", str(chips),
           "--web.listen-address", "127.0.0.1", "--web.port", str(port)]
    launcher = "python -m agent run --demo"
    launched = _launch(cli, log_path, port, env,
                       lambda: _install_counting_shims(node.bin_dir, where / "counts", dcmi=mode.dcmi))
    if launched is None:
        if mode.dcmi:
            raise RuntimeError(f"`agent run` with the fake DCMI failed: {_first_error(log_path)}")
        launcher = f"bench._util serve --tools subprocess (`agent run` failed: {_first_error(log_path)})"
        proc, port = start_server_process(demo_dir, chips, where / "serve.log", tools="subprocess")
    else:
        proc = launched
    try:
        if launched is None:
            _install_counting_shims(node.bin_dir, where / "counts")
        process = psutil.Process(proc.pid)
        time.sleep(warmup_s)
        cpu0 = process.cpu_times()
        helpers0 = _helper_cpu(process)
        helpers = dict(helpers0)
        calls0 = _counts(where / "counts")
        failslow_scrapes = 0
        wall0 = time.monotonic()
        deadline = wall0 + seconds
        next_scrape = wall0
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"agent exited with {proc.returncode}; see {log_path}")
            if mode.failslow and time.monotonic() >= next_scrape:  # as Prometheus's npuwatch-failslow job
                failslow_scrapes += scrape(port, FAILSLOW_PATH).status == 200
                next_scrape += FAILSLOW_SCRAPE_S
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
            for pid, cpu in _helper_cpu(process).items():  # a helper restarted in the window counts too
                helpers[pid] = max(helpers.get(pid, 0.0), cpu)
        cpu1 = process.cpu_times()
        calls1 = _counts(where / "counts")
        body = scrape(port).body.decode(errors="replace")
        given_back = sorted({line.split('collector="')[1].split('"')[0] for line in body.splitlines()
                             if line.startswith("npuwatch_dcmi_field_disagreements{")})
        window = time.monotonic() - wall0
        rss = process.memory_info().rss
    finally:
        stop_process(proc)
    return ProcessRun(
        chips=chips,
        mode=mode,
        launcher=launcher,
        window_s=window,
        cpu_s=(cpu1.user + cpu1.system) - (cpu0.user + cpu0.system),
        helper_cpu_s=sum(cpu - helpers0.get(pid, 0.0) for pid, cpu in helpers.items()),
        calls={tool: calls1[tool] - calls0[tool] for tool in TOOLS},
        rss=rss,
        expected_calls_per_min=scheduled_calls_per_min(chips, mode),
        given_back=tuple(given_back),
        failslow_scrapes=failslow_scrapes,
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
    parser.add_argument("--modes", default="npu-smi-before,npu-smi,dcmi-before,dcmi",
                        help=f"sampling modes of the CPU runs, of {', '.join(MODES)} (docs/failslow.md#signals)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for the smoke test")
    args = parser.parse_args(argv)
    if args.quick:
        args.cycles, args.scrapes, args.renders = 20, 50, 20
        args.minutes, args.warmup, args.nodes = 0.1, 0.5, "1"  # holds the start-up burst, loaded or not
        args.modes = "npu-smi,dcmi" if shutil.which("cc") or shutil.which("gcc") else "npu-smi"
    nodes = [int(n) for n in args.nodes.split(",") if n.strip()]
    unknown = [name for name in args.modes.split(",") if name.strip() and name.strip() not in MODES]
    if unknown:
        parser.error(f"unknown --modes {', '.join(unknown)}; known: {', '.join(MODES)}")
    modes = [MODES[name.strip()] for name in args.modes.split(",") if name.strip()]
    checkpoint = max(1, args.cycles // 10)

    table = Table()
    with tempfile.TemporaryDirectory(prefix="npuwatch-bench-") as tmp:
        work = Path(tmp)
        rss = measure_cycles(work / "cycles", args.chips, args.cycles, checkpoint)
        renders, body = measure_render(work / "render", args.chips, args.renders)
        scrapes, failures = measure_scrapes(work / "render", args.chips, args.scrapes, work / "serve.log")
        runs = [measure_process(chips, args.minutes * 60, args.warmup, args.delay, work, mode=mode)
                for chips in nodes for mode in modes]

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
        label = f"{run.chips} chips, {run.mode.name}, {run.window_s:.0f} s window"
        target = run.mode.cpu_target
        if run.mode.dcmi:
            own = run.cpu_s_per_h + run.helper_cpu_s_per_h
            table.add(f"agent CPU-s/h, {label}", f"{run.cpu_s_per_h:.1f}", "-", "-")
            table.add(f"DCMI helper CPU-s/h, {label}", f"{run.helper_cpu_s_per_h:.1f}", "-", "-")
            table.add(f"agent + helper CPU-s/h, {label}", f"{own:.1f}", f"< {target:g}", verdict(own < target))
        else:
            table.add(f"agent CPU-s/h, {label}", f"{run.cpu_s_per_h:.1f}", f"< {target:g}",
                      verdict(run.cpu_s_per_h < target))
        expected = run.expected_calls_per_min
        table.add(f"tool processes/min, {label}", f"{run.calls_per_min:.1f}", f"~{expected:.1f} (schedule)",
                  verdict(abs(run.calls_per_min - expected) <= 0.1 * expected))
        table.add(f"agent process RSS, {label}", mib(run.rss), "< 60 MB", verdict(as_shown_mib(run.rss) < RSS_TARGET))
        per_tool = ", ".join(f"{tool} {count}" for tool, count in run.calls.items())
        back = f"; given back to npu-smi by the trust check: {', '.join(run.given_back) or 'none'}" \
            if run.mode.dcmi else ""
        scraped = f"; {FAILSLOW_PATH} scrapes answered: {run.failslow_scrapes}" if run.mode.failslow else ""
        table.note(f"{run.chips} chips, {run.mode.name}: launcher {run.launcher}; calls in window: {per_tool}{back}"
                   f"{scraped}")
    if failures:
        table.note(f"{failures} of {len(scrapes)} scrapes did not answer 200")
    table.note("RSS rows at cycle k run the collection in-process (no fork/exec); "
               "'agent process RSS' is the real agent with subprocess fakes")
    table.note("CPU rows: the agent's own (its process; with DCMI also its helper process), never the fake tools' "
               "(Python scripts whose start-up is not the real tools'): their cost is the tool processes/min row")
    print(table.render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
