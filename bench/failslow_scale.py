"""What the fail-slow rule group (alerts/failslow.rules.yml) costs a Prometheus as the fleet grows: its
evaluation time per round, with every chip of the fleet in training jobs.

    python bench/failslow_scale.py --nodes 1000,4000      # 16 chips a node, jobs of 64 nodes (1,024 ranks)

A Prometheus 2.42 (remote-write receiver) holds the fleet: per chip the series the group reads (AI Core
busy fraction, the port's pause, error and byte counters, ``npu_job_info``), per node the host CPU, written
every 5 s by remote write (as ``bench/fleet_rules.py`` writes, uncompressed snappy framing), one chip a job
slow. The group is loaded once a minute of samples is in, and its ``evaluationTime`` (``/api/v1/rules``) read
for ``--evaluations`` rounds while the writes go on. The group runs where a job's chips are: one
Prometheus, VictoriaMetrics' per-node vmalert, or each shard of the sharded layout with its part of the fleet
(the time here is for one ruler holding the whole fleet). Target: under 2 s at 16,000 nodes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._util import MB, Table, rss_bytes  # noqa: E402
from bench.fleet_rules import _labels_blob, remote_write  # noqa: E402
from tests.support.prom_harness import rfc3339_epoch, start_prometheus_with  # noqa: E402

NPUS = 16
JOB_NODES = 64
GROUP = "npuwatch-failslow"
SCRAPE_S = 5.0
WARM_S = 65.0  # samples written before the group loads: its longest window is a minute


class FleetWriter:
    """Every series of ``nodes`` nodes, one round every ``SCRAPE_S`` seconds, until stopped."""

    def __init__(self, url: str, nodes: int) -> None:
        self.url, self.nodes = url, nodes
        self.rng = random.Random(1)
        self.rounds = 0
        self.write_s: list[float] = []
        self.stop = threading.Event()
        self.labels = self._labels()

    def _labels(self) -> list[tuple[str, bytes]]:
        out = []
        for node in range(self.nodes):
            base = (("job", "npuwatch"), ("instance", f"10.{node // 250 % 256}.{node % 250}.1:9101"),
                    ("node", f"node-{node:05d}"))
            out.append(("cpu", _labels_blob((("__name__", "npuwatch_host_cpu_utilization_ratio"), *base))))
            for npu in range(NPUS):
                chip = (*base, ("npu", str(npu)), ("chip", "0"))
                rank = node % JOB_NODES * NPUS + npu
                out.append(("util", _labels_blob((("__name__", "npu_aicore_utilization_ratio"), *chip))))
                out.append(("pause", _labels_blob((("__name__", "npu_roce_pfc_pause_frames_total"), *chip,
                                                   ("direction", "rx")))))
                out.append(("errors", _labels_blob((("__name__", "npu_roce_errors_total"), *chip,
                                                    ("counter", "roce_new_pkt_rty_num")))))
                out.append(("bytes", _labels_blob((("__name__", "npu_roce_transmitted_bytes_total"), *chip))))
                out.append(("info", _labels_blob((("__name__", "npu_job_info"), *chip,
                                                  ("training_job", f"job-{node // JOB_NODES}"), ("rank", str(rank)),
                                                  ("local_rank", str(npu)), ("world_size", str(JOB_NODES * NPUS)),
                                                  ("source", "env")))))
        return out

    def series(self, round_: int) -> list[tuple[bytes, float]]:
        rng, t = self.rng, round_ * SCRAPE_S
        values = {"cpu": lambda: 0.35 + rng.gauss(0, 0.05), "util": lambda: 0.6 + rng.gauss(0, 0.02),
                  "pause": lambda: 2.0 * t, "errors": lambda: 0.0, "bytes": lambda: 7e9 * t, "info": lambda: 1.0}
        return [(blob, values[kind]()) for kind, blob in self.labels]

    def run(self) -> None:
        while not self.stop.is_set():
            began = time.monotonic()
            remote_write(self.url, self.series(self.rounds), int(time.time() * 1000))
            self.write_s.append(time.monotonic() - began)
            self.rounds += 1
            self.stop.wait(max(0.0, SCRAPE_S - (time.monotonic() - began)))


def _group(url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url + "/api/v1/rules", timeout=60) as response:
            groups = json.load(response)["data"]["groups"]
    except (OSError, ValueError, KeyError):
        return None
    return next((g for g in groups if g["name"] == GROUP), None)


def measure(nodes: int, evaluations: int, tmp: Path) -> dict[str, Any]:
    rules = tmp / "failslow.rules.yml"
    rules.write_text((ROOT / "alerts" / "failslow.rules.yml").read_text(encoding="utf-8"), encoding="utf-8")
    config: dict[str, Any] = {"global": {"scrape_interval": "10s", "evaluation_interval": "10s"},
                              "rule_files": [], "scrape_configs": []}
    prom = start_prometheus_with(config, tmp / "prometheus", extra_args=["--web.enable-remote-write-receiver"])
    writer = FleetWriter(prom.url + "/api/v1/write", nodes)
    thread = threading.Thread(target=writer.run, daemon=True)
    try:
        thread.start()
        time.sleep(WARM_S)
        config["rule_files"] = [str(rules)]
        prom.config_path.write_text(json.dumps(config), encoding="utf-8")
        with urllib.request.urlopen(urllib.request.Request(prom.url + "/-/reload", method="POST"), timeout=60):
            pass
        loaded = time.time()
        seen: dict[str, float] = {}
        slowest: dict[str, float] = {}
        deadline = time.monotonic() + 60 + 30 * evaluations
        while len(seen) < evaluations and time.monotonic() < deadline:
            group = _group(prom.url)
            at = (group or {}).get("lastEvaluation", "")
            if group and at.startswith("2") and rfc3339_epoch(at) > loaded:
                seen[at] = float(group["evaluationTime"])
                for rule in group["rules"]:  # the slowest rules of the last evaluation seen
                    slowest[f"{rule['name']}{rule.get('labels') or ''}"] = float(rule.get("evaluationTime", 0.0))
            time.sleep(2.0)
        rss = rss_bytes(prom.popen.pid)
    finally:
        writer.stop.set()
        thread.join(timeout=120)
        prom.stop()
    times = sorted(seen.values())
    return {"nodes": nodes, "chips": nodes * NPUS, "series": len(writer.labels), "evaluations": times,
            "median_s": times[len(times) // 2] if times else None, "worst_s": times[-1] if times else None,
            "write_s_median": sorted(writer.write_s)[len(writer.write_s) // 2] if writer.write_s else None,
            "rss_mb": rss / MB, "slowest_rules": sorted(slowest.items(), key=lambda kv: -kv[1])[:4],
            "load_average": os.getloadavg()[0]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--nodes", default="1000,4000,16000", help="fleet sizes in nodes")
    parser.add_argument("--evaluations", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    table = Table(("nodes", "chips", "series", "evaluation (median / worst)", "< 2 s", "Prometheus RSS",
                   "a round's write", "slowest rules", "load average"))
    results = []
    for nodes in (int(n) for n in args.nodes.split(",")):
        with tempfile.TemporaryDirectory(prefix="npuwatch-failslow-scale-") as tmp:
            result = measure(nodes, args.evaluations, Path(tmp))
        results.append(result)
        median, worst = result["median_s"], result["worst_s"]
        table.add(nodes, result["chips"], result["series"],
                  f"{median:.3f} s / {worst:.3f} s (of {len(result['evaluations'])})" if median is not None else "none",
                  "yes" if median is not None and median < 2.0 else "NO", f"{result['rss_mb']:.0f} MB",
                  f"{result['write_s_median']:.1f} s" if result["write_s_median"] is not None else "-",
                  ", ".join(f"{name.split(':')[-1]} {seconds:.2f} s" for name, seconds in result["slowest_rules"]),
                  f"{result['load_average']:.1f}")
    table.note(f"{NPUS} chips a node, jobs of {JOB_NODES} nodes; a round written every {SCRAPE_S:.0f} s while the "
               f"group is timed; machine: {os.cpu_count()} CPUs, shared")
    print(table.render())
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
