"""False pages of NPUJobStraggler, measured: healthy training jobs with every decoy, through the shipped rules
(alerts/failslow.rules.yml, read at run time) on the real engine, until N node-days have run.

    python bench/failslow_soak.py --node-days 100                 # a table
    python bench/failslow_soak.py --node-days 1000 --workers 8    # on a machine with 16+ cores
    python bench/failslow_soak.py --node-days 5 --json

Each batch is a fleet of healthy jobs running side by side for ``--hours`` in one VictoriaMetrics (each its own
``training_job`` and nodes): shapes drawn from ``--npus`` per node and ``--ranks`` (8 or 16 NPUs, 128 to 1,024
ranks, Megatron layouts whose nodes each hold one pipeline stage), and the decoys a day of training has:
warm-up after the start and every restart, a checkpoint every 30-60 minutes, evaluations, restarts, the last
pipeline stage 5-30 % busier, jittered steps, noisy utilisation and host CPU, scrape jitter and lost scrapes,
PFC bursts on random ports (bench/failslow.py and docs/failslow.md describe the simulator and the replay).
Every alert that fires is a false page; each is listed with its job, seed, rank, node, time and the decoys
around it. The rate's 95 % upper bound is Poisson's: with no page in E node-days, 3.0 / E a node-day.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import random
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import failslow  # noqa: E402
from bench.failslow_scenario import Scenario, parse  # noqa: E402
from bench.failslow_sim import METRICS, Simulation  # noqa: E402
from tests.support.prom_harness import HarnessError, PromProcess, start_victoriametrics  # noqa: E402

TP = 8
DAY_S = 86400.0
CONFIDENCE = 0.95


# ---------------------------------------------------------------------------- the jobs (pure)

def shape(rng: random.Random, npus: Sequence[int], ranks: Sequence[int]) -> dict[str, int]:
    """A Megatron layout: tensor-parallel 8 within a node, pipeline stages of whole nodes (tp x dp a multiple
    of the node's NPUs), data-parallel the rest."""
    npn = rng.choice(list(npus))
    total = rng.choice(list(ranks))
    stages = [pp for pp in (1, 2, 4, 8) if total % (TP * pp) == 0 and (total // pp) % npn == 0]
    pp = rng.choice(stages)
    return {"nodes": total // npn, "npus_per_node": npn, "tp": TP, "pp": pp, "dp": total // (TP * pp)}


def poisson(rng: random.Random, mean: float) -> int:
    """A Poisson count (Knuth's product of uniforms; the means here are small)."""
    limit, product, count = math.exp(-mean), rng.random(), 0
    while product > limit:
        product *= rng.random()
        count += 1
    return count


def _place(rng: random.Random, taken: list[tuple[float, float]], start: float, length: float,
           duration: float) -> tuple[float, float] | None:
    """[start, start + length) unless it runs past the end or comes within 30 s of an event already placed."""
    end = start + length
    if end > duration - 1 or any(start < b + 30 and a < end + 30 for a, b in taken):
        return None
    taken.append((start, end))
    return start, end


def job(rng: random.Random, name: str, seed: int, duration_s: float, *, npus: Sequence[int],
        ranks: Sequence[int]) -> dict[str, Any]:
    """A healthy job's scenario document (docs/failslow.md's format) with every decoy."""
    taken: list[tuple[float, float]] = []
    events: list[dict[str, Any]] = []
    day_hours = duration_s / 3600.0
    for _ in range(poisson(rng, day_hours / rng.uniform(6, 24))):  # a restart every 6 to 24 hours
        placed = _place(rng, taken, rng.uniform(600, duration_s), rng.uniform(60, 600), duration_s)
        if placed:
            events.append({"kind": "restart", "start": round(placed[0], 1), "end": round(placed[1], 1)})
    every = rng.uniform(1800, 3600)
    at = rng.uniform(0.5, 1.0) * every
    while at < duration_s:
        placed = _place(rng, taken, at, rng.uniform(20, 180), duration_s)
        if placed:
            events.append({"kind": "checkpoint", "start": round(placed[0], 1), "end": round(placed[1], 1)})
        at += every + rng.uniform(-120, 120)
    every = rng.uniform(3600, 3 * 3600)
    at = rng.uniform(0.3, 1.0) * every
    while at < duration_s:
        placed = _place(rng, taken, at, rng.uniform(60, 300), duration_s)
        if placed:
            events.append({"kind": "eval", "start": round(placed[0], 1), "end": round(placed[1], 1)})
        at += every
    events.sort(key=lambda e: e["start"])
    return {
        "name": name, "job": name, "seed": seed, **shape(rng, npus, ranks),
        "step_s": round(rng.uniform(0.8, 6.0), 2), "duration_s": duration_s, "events": events,
        "compute_fraction": round(rng.uniform(0.5, 0.85), 2), "pp_imbalance": round(rng.uniform(0.05, 0.3), 2),
        "warmup_s": round(rng.uniform(60, 300)), "warmup_jitter": round(rng.uniform(0.1, 0.3), 2),
        "step_jitter": round(rng.uniform(0.01, 0.04), 3), "scrape_jitter_s": round(rng.uniform(0.2, 1.5), 2),
        "scrape_miss": round(rng.uniform(0.002, 0.03), 3), "util_noise": round(rng.uniform(0.01, 0.05), 3),
        "pfc_background_per_s": round(rng.uniform(0.0, 10.0), 1),
        "pfc_bursts_per_port_hour": round(rng.uniform(0.2, 4.0), 2),
        "pfc_burst_per_s": round(rng.uniform(500, 5000)), "pfc_burst_max_s": round(rng.uniform(3, 15), 1),
        "host_cpu": round(rng.uniform(0.2, 0.5), 2), "host_cpu_noise": round(rng.uniform(0.03, 0.06), 3),
    }


def plan(node_days: float, hours: float, batch_node_days: float, seed: int, *, npus: Sequence[int],
         ranks: Sequence[int]) -> list[list[dict[str, Any]]]:
    """Batches of jobs running side by side for ``hours``, each batch at least ``batch_node_days`` (the last
    what is left), until ``node_days`` in all."""
    rng = random.Random(seed)
    duration = hours * 3600.0
    batches: list[list[dict[str, Any]]] = []
    total = 0.0
    while total < node_days:
        batch: list[dict[str, Any]] = []
        size = 0.0
        while size < min(batch_node_days, node_days - total):
            index = len(batches)
            document = job(rng, f"soak-{seed}-{index}-{len(batch)}", rng.randrange(1 << 31), duration,
                           npus=npus, ranks=ranks)
            parse(document)  # the format's own checks
            batch.append(document)
            size += document["nodes"] * duration / DAY_S
        batches.append(batch)
        total += size
    return batches


def upper_bound(pages: int, exposure: float, confidence: float = CONFIDENCE) -> float:
    """The one-sided upper confidence bound on a Poisson rate (per unit of ``exposure``) after ``pages``
    events: the rate at which seeing ``pages`` or fewer has probability 1 - confidence."""
    def at_most(mean: float) -> float:
        term = total = math.exp(-mean)
        for k in range(1, pages + 1):
            term *= mean / k
            total += term
        return total

    low, high = 0.0, 10.0 + 10.0 * pages
    for _ in range(200):
        mid = (low + high) / 2
        if at_most(mid) > 1.0 - confidence:
            low = mid
        else:
            high = mid
    return high / exposure


def decoys_at(scenario: Scenario, simulation: Simulation, rank: int | None, at: float) -> list[str]:
    """What was going on around a page (within 2 minutes before it): the job's events and the port's bursts."""
    around = [f"{e.kind} {e.start:.0f}-{e.end:.0f} s" for e in scenario.events if e.start - 120 <= at <= e.end + 120]
    if scenario.warmup_s and at < scenario.warmup_s + 120:
        around.append("warm-up")
    if rank is not None:
        for lo, hi in simulation.bursts.get(rank, ()):
            if lo - 120 <= at <= hi + 120:
                around.append(f"PFC burst {lo:.0f}-{hi:.0f} s")
    return around


# ---------------------------------------------------------------------------- a batch on the engine

def _metrics() -> list[str]:
    """The simulated series the rules read (the rules file as it is now)."""
    text = failslow.RULES.read_text(encoding="utf-8")
    return [name for name in METRICS if name in text]


def _check_alone(store: PromProcess, jobs: set[str], end: float) -> None:
    """The store holds this batch's jobs and no other (two stores on one port would merge two batches)."""
    expr = f"count by (training_job) (last_over_time(npu_job_info[{end - failslow.T0:.0f}s]))"
    query = urllib.parse.urlencode({"query": expr, "time": end, "nocache": "1"})
    result = failslow._get(f"{store.url}/api/v1/query?{query}")["data"]["result"]
    found = {series["metric"].get("training_job", "") for series in result}
    if found != jobs:
        raise HarnessError(f"the store holds jobs {sorted(found)}, not this batch's {sorted(jobs)}")


def run_batch(index: int, documents: list[dict[str, Any]]) -> dict[str, Any]:
    group = failslow._group()
    interval = group.get("interval", "10s")
    step = failslow._seconds(interval)
    alert = next(rule for rule in group["rules"] if rule.get("alert") == failslow.ALERT)
    hold = failslow._seconds(alert.get("for", "0s"))
    metrics = _metrics()
    began = time.monotonic()
    samples = 0
    jobs: dict[str, tuple[dict[str, Any], int]] = {}
    duration = max(float(d["duration_s"]) for d in documents)
    with tempfile.TemporaryDirectory(prefix="npuwatch-soak-") as tmp:
        workdir = Path(tmp)
        store = start_victoriametrics(workdir / "vm", failslow.STORE_FLAGS)
        try:
            base = 0
            for document in documents:
                simulation = Simulation(parse(document), node_base=base)
                failslow.import_json(store, simulation.json_lines(failslow.T0, metrics))
                samples += simulation.written
                jobs[document["job"]] = (document, base)
                base += int(document["nodes"])
            imported = time.monotonic() - began
            _check_alone(store, set(jobs), failslow.T0 + duration)
            failslow.replay(store, workdir, interval, failslow.T0, failslow.T0 + duration)
            held = failslow.alert_condition(store, failslow.T0, failslow.T0 + duration)
        finally:
            store.stop()
    pages = []
    for page in failslow.fired(held, step, hold):
        document, base = jobs.get(page["job"], ({}, 0))
        entry = {**page, "batch": index}
        if document:
            scenario = parse(document)
            node = int(page["node"].rsplit("-", 1)[1]) - base if page["node"] else None
            rank = int(page["rank"]) if page["rank"] else None
            entry.update(seed=document["seed"], job_node=node, decoys=decoys_at(scenario, Simulation(scenario), rank,
                                                                                 page["at"]),
                         scenario=document)
        pages.append(entry)
    node_days = sum(d["nodes"] * float(d["duration_s"]) / DAY_S for d in documents)
    return {"batch": index, "jobs": len(documents), "nodes": sum(d["nodes"] for d in documents),
            "chips": sum(d["nodes"] * d["npus_per_node"] for d in documents), "node_days": node_days,
            "samples": samples, "import_s": imported, "wall_s": time.monotonic() - began, "pages": pages}


def summary(results: Sequence[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    node_days = sum(r["node_days"] for r in results)
    pages = [p for r in results for p in r["pages"]]
    samples = sum(r["samples"] for r in results)
    return {"node_days": node_days, "jobs": sum(r["jobs"] for r in results), "samples": samples,
            "false_pages": len(pages),
            "pages_per_1000_node_days": 1000.0 * len(pages) / node_days if node_days else 0.0,
            "upper_95_per_1000_node_days": 1000.0 * upper_bound(len(pages), node_days) if node_days else math.inf,
            "wall_s": wall_s, "samples_per_s": samples / wall_s if wall_s else 0.0,
            "node_days_per_min": node_days / wall_s * 60.0 if wall_s else 0.0, "pages": pages}


def table(total: dict[str, Any]) -> str:
    rows = [("node-days simulated", f"{total['node_days']:.1f} ({total['jobs']} jobs)"),
            ("false pages", str(total["false_pages"])),
            ("pages per 1,000 node-days", f"{total['pages_per_1000_node_days']:.2f}"),
            ("95 % upper bound", f"{total['upper_95_per_1000_node_days']:.1f} per 1,000 node-days"),
            ("wall time", f"{total['wall_s']:.0f} s ({total['node_days_per_min']:.2f} node-days a minute)"),
            ("samples", f"{total['samples']:,} ({total['samples_per_s']:,.0f}/s)")]
    lines = ["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)]
    for page in total["pages"]:
        job = page.get("scenario", {})
        lines.append(f"false page: {page['cause']} {page['job']} (seed {page.get('seed')}: {job.get('nodes')} x "
                     f"{job.get('npus_per_node')} NPUs, pp {job.get('pp')}, step {job.get('step_s')} s, util_noise "
                     f"{job.get('util_noise')}, step_jitter {job.get('step_jitter')}) rank {page['rank'] or '-'} "
                     f"{page['node']} (the job's node {page.get('job_node')}) npu {page['npu'] or '-'} at "
                     f"{page['at']:.0f} s; around: {', '.join(page.get('decoys', [])) or 'nothing'}")
    return "\n".join(lines)


def _numbers(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--node-days", type=float, default=10.0, help="healthy node-days to run (default 10)")
    parser.add_argument("--hours", type=float, default=6.0, help="each batch's span (default 6)")
    parser.add_argument("--batch-node-days", type=float, default=25.0,
                        help="node-days per batch: one store and one replay (default 25)")
    parser.add_argument("--npus", type=_numbers, default=[8, 16], help="NPUs per node to draw from (8,16)")
    parser.add_argument("--ranks", type=_numbers, default=[128, 256, 512, 1024], help="ranks to draw from")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1, help="batches at once, each its own store (2 cores each)")
    parser.add_argument("--max-minutes", type=float, default=math.inf,
                        help="start no batch after this long: the table is of the batches run (default: no limit)")
    parser.add_argument("--json", action="store_true", help="the summary as JSON, with every page's scenario")
    parser.add_argument("--save", type=Path, help="also write the summary as JSON, with every page's scenario, here")
    args = parser.parse_args(argv)
    if any(n <= 0 or r <= 0 or r % TP or r % n for n in args.npus for r in args.ranks):
        parser.error("--ranks must be multiples of 8 and of every --npus")
    batches = plan(args.node_days, args.hours, args.batch_node_days, args.seed, npus=args.npus, ranks=args.ranks)
    began = time.monotonic()
    results: list[dict[str, Any]] = []

    def done(result: dict[str, Any]) -> None:
        results.append(result)
        print(f"batch {result['batch']}: {result['jobs']} jobs, {result['nodes']} nodes, {result['chips']} chips, "
              f"{result['node_days']:.1f} node-days, {result['samples']:,} samples, import {result['import_s']:.0f} s, "
              f"all {result['wall_s']:.0f} s, {len(result['pages'])} pages", file=sys.stderr, flush=True)

    def late() -> bool:
        return time.monotonic() - began > args.max_minutes * 60.0

    if args.workers > 1:
        # spawned, not forked: a forked worker inherits tests/support/ports.py's random state, so two stores
        # were handed one port and the second's readiness check answered by the first
        with ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            running = [pool.submit(run_batch, index, batch) for index, batch in enumerate(batches[:args.workers])]
            following = args.workers
            while running:
                done(running.pop(0).result())
                if following < len(batches) and not late():
                    running.append(pool.submit(run_batch, following, batches[following]))
                    following += 1
    else:
        for index, batch in enumerate(batches):
            if index and late():
                break
            done(run_batch(index, batch))
    total = summary(results, time.monotonic() - began)
    if args.save:
        args.save.write_text(json.dumps(total, indent=1), encoding="utf-8")
    print(json.dumps(total) if args.json else table(total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
