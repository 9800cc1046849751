#!/usr/bin/env python3
"""The agent's own CPU per tool run: the fail-slow ``hccn_tool -i N -stat -g`` sampling, measured in-process.

    python bench/tool_run_cpu.py                 # 16 chips, 40 rounds, 3 repeats
    python bench/tool_run_cpu.py --profile 20    # also a cProfile of 20 rounds (top functions by own time)

A demo agent (16 chips) is built in this process and collected once; then its ``hccn_tool`` is replaced by
a compiled C program that prints a captured ``-stat -g`` listing and exits, so the child costs next to
nothing and the parent's share shows: spawn (``run_tool``), read and reap, parse, samples, the snapshot
store's put and its listeners (the renderer's warm-up, the node page's history). Each round is one
``roce_stat`` group run (one tool call per chip, through the hccn_tool pool); a /metrics render follows
every third round (a 15 s scrape against the 5 s stat interval). Reported: this process's CPU (all
threads, ``time.process_time``) per tool run, with and without the renders, the best and the median of
``--repeats``. The tool processes' own CPU is theirs and not counted.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._util import Table  # noqa: E402

_FAKE_C = r"""
#include <time.h>
#include <unistd.h>
static const char out[] = %s;
int main(void) {
    const struct timespec latency = {0, %d};
    const char *p = out; long left = sizeof(out) - 1;
    nanosleep(&latency, 0);
    while (left > 0) { long n = write(1, p, left); if (n <= 0) return 1; p += n; left -= n; }
    return 0;
}
"""


def _c_string(text: str) -> str:
    return '"' + "".join(f"\\x{byte:02x}" for byte in text.encode()) + '"'


def _fast_fake(bin_dir: Path, env: dict[str, str], work: Path, latency_s: float) -> None:
    """Replace the demo's hccn_tool by a C program printing what the demo fake prints for ``-i 0 -stat -g``."""
    listing = subprocess.run([str(bin_dir / "hccn_tool"), "-i", "0", "-stat", "-g"], env={**os.environ, **env},
                             capture_output=True, text=True, timeout=60, check=True).stdout
    from collectors import hccn_stat

    plain = getattr(hccn_stat, "_parse_plain", None)  # absent before the one-pass read: runs against older trees
    if plain is not None and plain(listing) is None:
        print("tool_run_cpu: note: the captured listing is not a plain one: parsed line by line")
    source = work / "fake_stat.c"
    source.write_text(_FAKE_C % (_c_string(listing), int(latency_s * 1e9)))
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        sys.exit("tool_run_cpu: needs a C compiler (cc) for the cheap fake tool")
    target = bin_dir / "hccn_tool"
    target.unlink()
    subprocess.run([compiler, "-O2", "-o", str(target), str(source)], check=True, timeout=120)


def _build(work: Path, chips: int, latency_s: float):  # type: ignore[no-untyped-def]
    from agent.core.config import build_config
    from agent.daemon.assemble import build_agent

    config = build_config({
        "web": {"listen_address": "127.0.0.1", "port": 19_999},
        "collectors": {"hccn_tool": {"stat_interval": "5s"}, "hccl_logs": {"enabled": False}},
        "probes": {"enabled": False},
    })
    bundle = build_agent(config, work / "demo", chips)
    agent = bundle.agent
    for group in agent.groups():
        agent.collect_group(group)
    assert bundle.demo is not None
    _fast_fake(bundle.demo.bin_dir, agent._tool_env or {}, work, latency_s)
    agent.collect_group("roce_stat")
    snap = agent.store.get("hccn_stat")
    assert snap is not None and snap.ok, snap
    return bundle


def _measure(agent, rounds: int, render_every: int) -> float:  # type: ignore[no-untyped-def]
    cpu = time.process_time()
    for number in range(rounds):
        agent.collect_group("roce_stat")
        if render_every and number % render_every == render_every - 1:
            agent.cache.render()
    return time.process_time() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chips", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tool-latency", type=float, default=0.02, metavar="S",
                        help="each fake run sleeps this long before it answers (0: the pool's threads collide "
                             "all the time, which real tools that take 0.1-0.3 s seldom do)")
    parser.add_argument("--profile", type=int, default=0, metavar="ROUNDS",
                        help="also profile this many rounds (cProfile, all threads' calls are not seen: the pool's "
                             "threads run under a profiler of their own)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="npuwatch-toolcpu-") as tmp:
        bundle = _build(Path(tmp), args.chips, args.tool_latency)
        agent = bundle.agent
        try:
            runs = args.rounds * args.chips
            table = Table(("measure", "best ms/run", "median ms/run", "runs"))
            for label, render_every in (("collect (spawn..store)", 0), ("collect + /metrics every 3rd round", 3)):
                results = [_measure(agent, args.rounds, render_every) / runs * 1000 for _ in range(args.repeats)]
                table.add(label, f"{min(results):.3f}", f"{statistics.median(results):.3f}", runs)
            table.note(f"{args.chips} chips, {args.rounds} rounds x {args.repeats}, fake tool latency "
                       f"{args.tool_latency:g} s; this process's CPU, all threads; python {sys.version.split()[0]}")
            print(table.render())
            if args.profile:
                _profile(agent, args.profile)
        finally:
            agent.stop()
    return 0


def _profile(agent, rounds: int) -> None:  # type: ignore[no-untyped-def]
    import threading

    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()

    def per_thread(frame, event, arg):  # type: ignore[no-untyped-def]
        profile = cProfile.Profile(time.thread_time)
        with lock:
            profiles.append(profile)
        sys.setprofile(None)
        profile.enable()

    # pool threads already exist: profile them by running the work through a fresh pool of the same size
    from concurrent.futures import ThreadPoolExecutor

    old = agent._pools["hccn_tool"]
    threading.setprofile(per_thread)
    pool = ThreadPoolExecutor(old._max_workers, thread_name_prefix="hccn-profiled")
    agent._pools["hccn_tool"] = pool
    agent.runner._pools = agent._pools
    main_profile = cProfile.Profile(time.thread_time)
    main_profile.enable()
    try:
        _measure(agent, rounds, 3)
    finally:
        main_profile.disable()
        threading.setprofile(None)  # type: ignore[arg-type]
        pool.shutdown(wait=True)
        agent._pools["hccn_tool"] = old
    for profile in profiles:
        profile.disable()
    stats = pstats.Stats(main_profile, stream=(out := io.StringIO()))
    for profile in profiles:
        stats.add(profile)
    stats.sort_stats("tottime").print_stats(30)
    print(out.getvalue())
    stats = pstats.Stats(main_profile, stream=(out := io.StringIO()))
    for profile in profiles:
        stats.add(profile)
    stats.sort_stats("cumulative").print_stats(45)
    print(out.getvalue())


if __name__ == "__main__":
    raise SystemExit(main())
