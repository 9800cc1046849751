#!/usr/bin/env python3
"""What the agent costs a node when its tools cost what real ones do: npu-smi path against DCMI path.

Fakes that cost what real tools cost: each npu-smi and hccn_tool call waits ``--latency`` (0.3 s)
and burns ``--tool-cpu`` (0.05 s) of CPU, npu-smi one call at a time per node (an ``flock``: the
driver serialises them), then prints the demo fake's output for that argv (rendered once, then
cached, so the demo's Python does not add its own cost); each DCMI call of the fake libdcmi.so
(tests/fixtures/dcmi/fake_dcmi.c, FAKE_DCMI_DELAY_US / FAKE_DCMI_CPU_US) waits ``--dcmi-latency``
(2 ms) and burns ``--dcmi-cpu`` (0.1 ms) in the helper. The real agent (``npuwatch run --demo``)
runs for ``--seconds`` after ``--warmup`` per configuration (8 and 16 chips, each path), with psutil
measuring the CPU of the agent and of its DCMI helper, the fakes counting their processes, and
/metrics scraped every ``--scrape-every`` seconds for the age of each collector's data
(``npuwatch_collector_last_success_timestamp_seconds``) against its interval.

On the DCMI path the fake npu-smi answers only what DCMI does not serve (``-t board``, ``-t hccs``,
``-t hccs-bw``) and fails the rest: a fallback would show as a failing collector, and the trust
check's comparison at start finds nothing to compare (the demo's chips are not the fake library's).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._util import (  # noqa: E402
    Table,
    free_port,
    launch_until_answering,
    percentile,
    scrape,
    stop_process,
    verdict,
)

TOOLS = ("npu-smi", "hccn_tool")
FAKE_DCMI = ROOT / "tests" / "fixtures" / "dcmi" / "fake_dcmi.c"
DCMI_ONLY_TOOL = ("-t board", "-t hccs")  # what npu-smi still answers while DCMI serves (hccs-bw matches too)
_BURN_C = r"""
#include <stdlib.h>
#include <time.h>
static double cpu(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
                          return t.tv_sec + t.tv_nsec / 1e9; }
int main(int argc, char **argv) {
    double wait = argc > 1 ? atof(argv[1]) : 0, burn = argc > 2 ? atof(argv[2]) : 0;
    double until = cpu() + burn;
    volatile unsigned long spin = 0;
    while (cpu() < until) spin++;
    double rest = wait - burn;
    if (rest > 0) { struct timespec p = { (time_t)rest, (long)((rest - (time_t)rest) * 1e9) }; nanosleep(&p, NULL); }
    return 0;
}
"""
_LAST_SUCCESS = re.compile(r'^npuwatch_collector_last_success_timestamp_seconds\{collector="([^"]+)"\} (\S+)$', re.M)


@dataclass
class Run:
    chips: int
    path: str  # "npu-smi" or "dcmi"
    window_s: float = 0.0
    agent_cpu_s: float = 0.0
    helper_cpu_s: float = 0.0
    processes: dict[str, int] = field(default_factory=dict)
    dcmi_calls: float = 0.0
    ages: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    intervals: dict[str, float] = field(default_factory=dict)

    def per_hour(self, seconds: float) -> float:
        return seconds / self.window_s * 3600 if self.window_s else 0.0

    def per_minute(self, count: float) -> float:
        return count / self.window_s * 60 if self.window_s else 0.0

    def worst_age(self, q: float) -> tuple[float, str]:
        """The largest age / interval at quantile ``q`` over the collectors with an interval, and its collector."""
        ratios = [(percentile(ages, q) / self.intervals[name], name) for name, ages in self.ages.items()
                  if ages and name in self.intervals]
        return max(ratios) if ratios else (0.0, "-")


def _compile(source: str | Path, target: Path, *flags: str) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("bench/tool_cost.py needs a C compiler (cc or gcc) for its fakes")
    if isinstance(source, str):
        path = target.with_suffix(".c")
        path.write_text(source, encoding="utf-8")
        source = path
    subprocess.run([cc, "-O1", *flags, "-o", str(target), str(source)], check=True, capture_output=True, timeout=120)
    return target


def _install_costly_shims(bin_dir: Path, work: Path, burn: Path, *, latency_s: float, cpu_s: float,
                          dcmi: bool) -> dict[str, Path]:
    """Wrap each demo fake: count the process, wait and burn (npu-smi under the node's flock), print the
    demo's output for this argv (rendered once, then cached)."""
    counters: dict[str, Path] = {}
    lock = work / "npu-smi.lock"
    for tool in TOOLS:
        target = bin_dir / tool
        real = bin_dir / f".real-{tool}"
        if not real.exists():
            real.write_bytes(target.read_bytes())
            real.chmod(0o755)
        cache = work / f"cache-{tool}"
        cache.mkdir(exist_ok=True)
        counter = work / f"count-{tool}"
        counter.touch()
        counters[tool] = counter
        cost = f"{shlex.quote(str(burn))} {latency_s} {cpu_s}"
        if tool == "npu-smi":
            cost = f"flock {shlex.quote(str(lock))} {cost}"
        refuse = ""
        if dcmi and tool == "npu-smi":
            wanted = "|".join(f"*'{arg}'*" for arg in DCMI_ONLY_TOOL)
            refuse = f'case " $* " in {wanted}) ;; *) echo "bench: DCMI serves this" >&2; exit 1;; esac\n'
        shim = bin_dir / f".shim-{tool}"
        shim.write_text(
            "#!/bin/sh\n"
            f"printf . >> {shlex.quote(str(counter))}\n"
            f"{refuse}"
            f"{cost}\n"
            f'key={shlex.quote(str(cache))}/$(printf "%s_" "$@" | tr -c "A-Za-z0-9_.-" "_")\n'
            'if [ ! -s "$key" ]; then\n'
            f'  {shlex.quote(str(real))} "$@" > "$key.$$" || {{ cat "$key.$$"; rm -f "$key.$$"; exit 1; }}\n'
            '  mv "$key.$$" "$key"\n'
            "fi\n"
            'exec cat "$key"\n',
            encoding="utf-8",
        )
        shim.chmod(0o755)
        shim.replace(target)
    return counters


def _helpers(agent: Any) -> dict[int, Any]:
    import psutil

    found = {}
    with contextlib.suppress(psutil.Error):
        for child in agent.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "collectors.dcmi.worker" in " ".join(child.cmdline()):
                    found[child.pid] = child
    return found


def _cpu(proc: Any) -> float:
    import psutil

    try:
        times = proc.cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


def _intervals(config_file: Path, dcmi: bool) -> dict[str, float]:
    import yaml

    from agent.core.config import build_config
    from agent.daemon.service import enabled_sources, group_interval
    from collectors.dcmi.plans import SERVED

    config = build_config(yaml.safe_load(config_file.read_text()))
    out = {}
    for source in enabled_sources(config):
        group = source.group
        if dcmi and source.tool == "npu-smi" and group == "health" and source.name not in SERVED:
            group = "npu_smi_slow"  # as the agent moves them while DCMI serves (agent.daemon.service)
        out[source.name] = float(group_interval(config, group))
    return out


def measure(chips: int, path: str, args: argparse.Namespace, *, work: Path, burn: Path, library: Path | None) -> Run:
    import os

    import psutil
    import yaml

    from agent.demo.node import DemoNode

    dcmi = path == "dcmi"
    where = work / f"{path}-{chips}"
    where.mkdir()
    demo_dir = where / "demo"
    node = DemoNode(demo_dir).create(chips=chips)
    config: dict[str, Any] = {"probes": {"enabled": False}, "collectors": {"hccl_logs": {"enabled": False}}}
    if dcmi:
        assert library is not None
        config["collectors"]["dcmi"] = {"library": str(library), "lock_file": str(where / "dcmi.lock")}
    config_file = where / "npuwatch.yml"
    config_file.write_text(yaml.safe_dump(config), encoding="utf-8")
    port = free_port()
    env = {**os.environ, "FAKE_DCMI_CHIPS": str(chips), "FAKE_DCMI_DELAY_US": str(int(args.dcmi_latency * 1e6)),
           "FAKE_DCMI_CPU_US": str(int(args.dcmi_cpu * 1e6)), "FAKE_DCMI_PHY_BASE": "0",
           "FAKE_DCMI_LOG": str(where / "dcmi-calls.log"), "PYTHONPATH": str(ROOT)}
    log_path = where / "agent.log"
    proc = launch_until_answering([sys.executable, "-m", "agent", "run", "--config", str(config_file), "--demo",
                                   "--demo-dir", str(demo_dir), "--demo-chips", str(chips),
                                   "--web.listen-address", "127.0.0.1", "--web.port", str(port)],
                                  log_path, port, cwd=where, env=env)
    run = Run(chips=chips, path=path, intervals=_intervals(config_file, dcmi))
    try:
        if proc.poll() is not None:
            raise RuntimeError(f"the agent exited ({proc.returncode}); see {log_path}")
        counters = _install_costly_shims(node.bin_dir, where, burn, latency_s=args.latency, cpu_s=args.tool_cpu,
                                         dcmi=dcmi)
        agent = psutil.Process(proc.pid)
        time.sleep(args.warmup)

        def dcmi_calls() -> float:
            """Library function calls so far: the fake logs one line each (the agent's own count,
            npuwatch_dcmi_calls_total, is exported every 15 s)."""
            calls_log = where / "dcmi-calls.log"
            return float(calls_log.read_bytes().count(b"\n")) if calls_log.exists() else 0.0

        agent0, helpers0 = _cpu(agent), {pid: _cpu(p) for pid, p in _helpers(agent).items()}
        helpers_seen = dict(_helpers(agent))
        counts0 = {tool: counter.stat().st_size for tool, counter in counters.items()}
        calls0 = dcmi_calls()
        started = time.monotonic()
        last_cpu: dict[int, float] = dict(helpers0)
        while time.monotonic() - started < args.seconds:
            if proc.poll() is not None:
                raise RuntimeError(f"the agent exited ({proc.returncode}); see {log_path}")
            body = scrape(port, timeout_s=5).body.decode()
            now = time.time()
            for name, stamp in _LAST_SUCCESS.findall(body):
                if float(stamp) > 0:
                    run.ages[name].append(now - float(stamp))
            for pid, helper in _helpers(agent).items():
                helpers_seen.setdefault(pid, helper)
                last_cpu[pid] = max(last_cpu.get(pid, 0.0), _cpu(helper))
            time.sleep(args.scrape_every)
        run.window_s = time.monotonic() - started
        run.agent_cpu_s = _cpu(agent) - agent0
        run.dcmi_calls = dcmi_calls() - calls0
        for pid, helper in helpers_seen.items():
            last_cpu[pid] = max(last_cpu.get(pid, 0.0), _cpu(helper))
        run.helper_cpu_s = sum(last_cpu[pid] - helpers0.get(pid, 0.0) for pid in last_cpu)
        run.processes = {tool: counter.stat().st_size - counts0[tool] for tool, counter in counters.items()}
    finally:
        stop_process(proc)
    return run


def report(runs: list[Run], args: argparse.Namespace) -> Table:
    table = Table()
    for run in runs:
        name = f"{run.path} path, {run.chips} chips"
        npu_smi, hccn = run.processes.get("npu-smi", 0), run.processes.get("hccn_tool", 0)
        table.add(f"{name}: tool processes/min", f"{run.per_minute(npu_smi + hccn):.1f} "
                  f"(npu-smi {run.per_minute(npu_smi):.1f}, hccn_tool {run.per_minute(hccn):.1f})", "-", "-")
        per_chip = run.per_minute(npu_smi) / run.chips
        if run.path == "dcmi":
            table.add(f"{name}: npu-smi processes/chip/min", f"{per_chip:.2f}", "<= 1", verdict(per_chip <= 1))
            table.add(f"{name}: DCMI library calls/min", f"{run.per_minute(run.dcmi_calls):.0f}", "-", "-")
        agent_h, helper_h = run.per_hour(run.agent_cpu_s), run.per_hour(run.helper_cpu_s)
        tools_h = run.per_hour((npu_smi + hccn) * args.tool_cpu)
        both = agent_h + helper_h
        target = "< 25" if run.path == "dcmi" and run.chips == 16 else "-"
        modeled = f" of which {run.per_hour(run.dcmi_calls * args.dcmi_cpu):.1f} modeled library" \
            if run.path == "dcmi" else ""
        table.add(f"{name}: agent + helper CPU-s/h",
                  f"{both:.1f} (agent {agent_h:.1f}, helper {helper_h:.1f}{modeled})",
                  target, verdict(both < 25) if target != "-" else "-")
        table.add(f"{name}: tools' CPU-s/h (modeled)", f"{tools_h:.1f}", "-", "-")
        p50, p50_name = run.worst_age(50)
        p99, p99_name = run.worst_age(99)
        table.add(f"{name}: data age p50 / interval, worst", f"{p50:.2f} ({p50_name})", "-", "-")
        target = "<= 2" if run.path == "npu-smi" else "-"
        table.add(f"{name}: data age p99 / interval, worst", f"{p99:.2f} ({p99_name})", target,
                  verdict(p99 <= 2) if target != "-" else "-")
    table.note(f"{args.seconds:.0f} s per configuration after {args.warmup:.0f} s warm-up; tool call {args.latency} s "
               f"+ {args.tool_cpu} CPU-s (npu-smi one at a time), DCMI call {args.dcmi_latency * 1e3:g} ms + "
               f"{args.dcmi_cpu * 1e3:g} CPU-ms; a shared machine makes the CPU figures noisy")
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=150.0, help="measured window per configuration")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds before the window opens")
    parser.add_argument("--chips", default="8,16", help="chip counts")
    parser.add_argument("--paths", default="npu-smi,dcmi", help="which paths to run")
    parser.add_argument("--latency", type=float, default=0.3, help="seconds each tool call takes")
    parser.add_argument("--tool-cpu", type=float, default=0.05, help="CPU-seconds each tool call burns")
    parser.add_argument("--dcmi-latency", type=float, default=0.002, help="seconds each DCMI call takes")
    parser.add_argument("--dcmi-cpu", type=float, default=0.0001, help="CPU-seconds each DCMI call burns")
    parser.add_argument("--scrape-every", type=float, default=2.0, help="seconds between scrapes")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for the smoke test")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, caches)")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.warmup, args.chips, args.scrape_every = 12.0, 3.0, "2", 1.0
    with tempfile.TemporaryDirectory(prefix="npuwatch-tool-cost-") as tmp:
        work = Path(tempfile.mkdtemp(prefix="npuwatch-tool-cost-kept-") if args.keep else tmp)
        if args.keep:
            print(f"work directory (kept): {work}", file=sys.stderr)
        burn = _compile(_BURN_C, work / "burn")
        paths = [p for p in args.paths.split(",") if p]
        library = _compile(FAKE_DCMI, work / "libdcmi.so", "-shared", "-fPIC", "-fvisibility=hidden") \
            if "dcmi" in paths else None
        runs = [measure(int(chips), path, args, work=work, burn=burn, library=library)
                for chips in args.chips.split(",") for path in paths]
        print(report(runs, args).render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
