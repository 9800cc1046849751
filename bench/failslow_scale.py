"""What the fail-slow rule groups (alerts/failslow.rules.yml) cost a Prometheus as the fleet grows: Prometheus' own
evaluation time of each group and of each rule, with every chip of the fleet in training jobs.

    python bench/failslow_scale.py --nodes 1000                 # 16 chips a node, jobs of 64 nodes (1,024 ranks)
    python bench/failslow_scale.py --nodes 1000 --rules OLD.yml --rules alerts/failslow.rules.yml   # back to back

A Prometheus 2.42 (remote-write receiver) is given the fleet's series first: per chip what the group reads (AI
Core busy fraction, the port's rx and tx pause frames, ``--error-counters`` error counters and transmitted
bytes, ``npu_job_info``), per node the host CPU, one sample every 5 s from a minute before the group loads to
``AHEAD_S`` after the write ends (each series written once with all its samples: samples a few minutes ahead
are kept and become visible as the clock reaches them). Writing then stops, the file's groups are loaded, and
``/api/v1/rules`` is read after each of ``--evaluations`` evaluations: each group's ``evaluationTime`` and every
rule's, with nothing else running in that Prometheus. The groups of one file run beside each other (an engine
evaluates each group on its own), so each group's time is measured while the others run too; the file's time is
its slowest group's, and its CPU is all its groups'. One chip a job is slow and one port a job pauses, so the
groups' candidates are not empty.

The groups run where a job's chips are. In the sharded layout (deploy/prometheus/layouts.py) it is a per-node
rule file: each shard of ``NODES_PER_SHARD`` (1,000) nodes evaluates it over its own nodes, so the 2 s target at
16,000 nodes is a shard's time at 1,000 nodes; one Prometheus holding 16,000 nodes is the other extreme.
The machine's load average is printed before and after each measure: on a shared machine the times move with it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import struct
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._remote_write import _field, _varint, labels_blob, post_write_request  # noqa: E402
from bench._util import MB, Table, rss_bytes  # noqa: E402
from tests.support.prom_harness import rfc3339_epoch, start_prometheus_with  # noqa: E402

NPUS = 16
JOB_NODES = 64
GROUP = "npuwatch-failslow"  # the groups timed: this one and those named after it (npuwatch-failslow-links)
SCRAPE_S = 5.0
BEHIND_S = 65.0  # samples before the group loads: its longest window is a minute
AHEAD_S = 60.0  # beyond the evaluations timed (each ``INTERVAL_S``)
INTERVAL_S = 10.0
NODES_PER_SHARD = 1000
ERROR_COUNTERS = ("roce_new_pkt_rty_num", "roce_rx_err_pkt_num", "roce_tx_err_pkt_num", "mac_rx_bad_pkt_num",
                  "mac_tx_bad_pkt_num", "mac_rx_bad_oct_num", "roce_unexpected_ack_num", "roce_out_of_order_num")


def fleet_labels(nodes: int | Sequence[int], error_counters: int,
                 extra: tuple[tuple[str, str], ...] = ()) -> list[tuple[str, int, bytes]]:
    """(kind, chip index or -1, encoded labels) of every series of the fleet: of ``nodes`` nodes, or of the
    nodes of those indices (a shard's), each node's series with the ``extra`` labels too. The chip index counts
    the chips written, so the slow chip and the pausing port of ``_samples`` recur every ``JOB_NODES`` nodes
    written, whichever they are."""
    out = []
    for position, node in enumerate(range(nodes) if isinstance(nodes, int) else nodes):
        base = (("job", "npuwatch"), ("instance", f"10.{node // 250 % 256}.{node % 250}.1:9101"),
                ("node", f"node-{node:05d}"), *extra)
        out.append(("cpu", -1, labels_blob((("__name__", "npuwatch_host_cpu_utilization_ratio"), *base))))
        for npu in range(NPUS):
            chip = (*base, ("npu", str(npu)), ("chip", "0"))
            index = position * NPUS + npu
            rank = node % JOB_NODES * NPUS + npu
            out.append(("util", index, labels_blob((("__name__", "npu_aicore_utilization_ratio"), *chip))))
            for direction in ("rx", "tx"):
                out.append((f"pause_{direction}", index, labels_blob((
                    ("__name__", "npu_roce_pfc_pause_frames_total"), *chip, ("direction", direction)))))
            for counter in ERROR_COUNTERS[:error_counters]:
                out.append(("errors", index, labels_blob((("__name__", "npu_roce_errors_total"), *chip,
                                                          ("counter", counter)))))
            out.append(("bytes", index, labels_blob((("__name__", "npu_roce_transmitted_bytes_total"), *chip))))
            out.append(("info", index, labels_blob((("__name__", "npu_job_info"), *chip,
                                                    ("training_job", f"job-{node // JOB_NODES}"), ("rank", str(rank)),
                                                    ("local_rank", str(npu)), ("world_size", str(JOB_NODES * NPUS)),
                                                    ("source", "env")))))
    return out


def _samples(kind: int | str, index: int, stamps: Sequence[int], rng: random.Random) -> bytes:
    """A TimeSeries' samples: gauges around their healthy level, counters at their healthy rates; in each job the
    chip of NPU 3 on its third node computes 1.3x longer and the port of NPU 7 on its fifth node pauses."""
    slow = index >= 0 and index % (JOB_NODES * NPUS) == 2 * NPUS + 3
    pausing = index >= 0 and index % (JOB_NODES * NPUS) == 4 * NPUS + 7
    out = []
    for ms in stamps:
        t = ms / 1000.0
        if kind == "cpu":
            value = 0.35 + rng.gauss(0, 0.05)
        elif kind == "util":
            value = (0.8 if slow else 0.6) + rng.gauss(0, 0.02)
        elif kind == "pause_rx":
            value = float(int((2000.0 if pausing else 2.0) * t))
        elif kind == "errors":
            value = float(int(50.0 * t)) if pausing else 0.0
        elif kind == "bytes":
            value = float(int(7e9 * t))
        elif kind == "pause_tx":
            value = float(int(1.0 * t))
        else:
            value = 1.0
        out.append(_field(2, b"\x09" + struct.pack("<d", value) + b"\x10" + _varint(ms)))
    return b"".join(out)


def write_fleet(url: str, labels: Sequence[tuple[str, int, bytes]], stamps: Sequence[int], batch: int = 2000) -> None:
    """Every series once, with all its samples (remote write 1.0, uncompressed snappy framing)."""
    rng = random.Random(1)
    for start in range(0, len(labels), batch):
        body = b"".join(_field(1, blob + _samples(kind, index, stamps, rng))
                        for kind, index, blob in labels[start:start + batch])
        post_write_request(url, body, timeout=300)


def _timed(name: str) -> bool:
    return name == GROUP or name.startswith(GROUP + "-")


def _groups(url: str) -> list[dict[str, Any]]:
    try:
        with urllib.request.urlopen(url + "/api/v1/rules", timeout=60) as response:
            groups = json.load(response)["data"]["groups"]
    except (OSError, ValueError, KeyError):
        return []
    return [g for g in groups if _timed(g["name"])]


def _rule_name(rule: dict[str, Any], index: int) -> str:
    labels = rule.get("labels") or {}
    cause = f"{{cause={labels['cause']}}}" if "cause" in labels else ""
    return f"{index:02d} {rule['name'].split(':', 1)[-1]}{cause}"  # the index is the rule's place in its group


def _cpu_s(pid: int) -> float:
    """User and system CPU seconds of a process (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _reload(prom: Any, config: dict[str, Any], rules: Sequence[Path]) -> float:
    config["rule_files"] = [str(path) for path in rules]
    prom.config_path.write_text(json.dumps(config), encoding="utf-8")
    with urllib.request.urlopen(urllib.request.Request(prom.url + "/-/reload", method="POST"), timeout=60):
        pass
    return time.time()


def _turn(prom: Any, evaluations: int, groups: int, loaded: float,
          data_end: float) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each group's evaluation times, and each rule's, over ``evaluations`` evaluations of every one of the
    ``groups`` groups after ``loaded``."""
    seen: dict[str, dict[str, float]] = {}
    per_rule: dict[str, list[float]] = {}
    deadline = time.monotonic() + 30 + 25 * evaluations
    while (len(seen) < groups or min(len(times) for times in seen.values()) < evaluations) \
            and time.monotonic() < deadline and time.time() < data_end - SCRAPE_S:
        for found in _groups(prom.url):
            at = found.get("lastEvaluation", "")
            times = seen.setdefault(found["name"], {})
            if at.startswith("2") and rfc3339_epoch(at) > loaded and at not in times and len(times) < evaluations:
                times[at] = float(found["evaluationTime"])
                for index, rule in enumerate(found["rules"]):
                    per_rule.setdefault(_rule_name(rule, index), []).append(float(rule.get("evaluationTime", 0.0)))
        time.sleep(0.5)
    return {name: list(times.values()) for name, times in seen.items()}, per_rule


def measure(nodes: int, rule_files: Sequence[Path], tmp: Path, *, evaluations: int, turns: int,
            error_counters: int) -> list[dict[str, Any]]:
    """The fleet written once; then each rule file's groups alone, in turns (A, B, A, B ...), ``evaluations``
    evaluations a turn: the machine's load drifts alike over both."""
    rules = []
    group_counts = []
    for index, rules_file in enumerate(rule_files):
        document = yaml.safe_load(rules_file.read_text(encoding="utf-8"))
        groups = [g for g in document["groups"] if _timed(g["name"])]
        if not groups:
            raise SystemExit(f"{rules_file}: no group {GROUP}")
        group_counts.append(len(groups))
        rules.append(tmp / f"rules-{index}.yml")
        rules[-1].write_text(yaml.safe_dump({"groups": groups}, sort_keys=False), encoding="utf-8")
    config: dict[str, Any] = {"global": {"scrape_interval": "10s", "evaluation_interval": "10s"},
                              "rule_files": [], "scrape_configs": []}
    load_before = os.getloadavg()
    prom = start_prometheus_with(config, tmp / "prometheus", extra_args=["--web.enable-remote-write-receiver"])
    times: list[dict[str, list[float]]] = [{} for _ in rule_files]
    cpu: list[list[float]] = [[] for _ in rule_files]
    per_rule: list[dict[str, list[float]]] = [{} for _ in rule_files]
    try:
        labels = fleet_labels(nodes, error_counters)
        began = time.time()
        # the write takes about a second per 3,000 series here: its samples reach past its end and the turns
        expected_write_s = len(labels) / 3000.0
        first = began - BEHIND_S
        last = began + expected_write_s + AHEAD_S + turns * len(rules) * (INTERVAL_S * (evaluations + 1) + 15)
        stamps = [int((first + k * SCRAPE_S) * 1000) for k in range(int((last - first) / SCRAPE_S) + 1)]
        write_fleet(prom.url + "/api/v1/write", labels, stamps)
        written = time.time()
        data_end = stamps[-1] / 1000.0
        for _ in range(turns):
            for index, path in enumerate(rules):
                loaded = _reload(prom, config, [path])
                cpu_before = _cpu_s(prom.popen.pid)
                seen, rule_times = _turn(prom, evaluations, group_counts[index], loaded, data_end)
                if seen:  # the CPU of one evaluation of every group
                    cpu[index].append((_cpu_s(prom.popen.pid) - cpu_before) / max(len(t) for t in seen.values()))
                for name, values in seen.items():
                    times[index].setdefault(name, []).extend(values)
                for name, values in rule_times.items():
                    per_rule[index].setdefault(name, []).extend(values)
                _reload(prom, config, [])
                time.sleep(INTERVAL_S / 2)
        rss = rss_bytes(prom.popen.pid)
    finally:
        prom.stop()
    out = []
    for index, rules_file in enumerate(rule_files):
        timed: dict[str, dict[str, Any]] = {
            name: {"evaluations": sorted(values), "median_s": statistics.median(values)}
            for name, values in sorted(times[index].items()) if values}
        slowest = max(timed.values(), key=lambda group: group["median_s"], default=None)
        ordered = slowest["evaluations"] if slowest else []
        out.append({"nodes": nodes, "chips": nodes * NPUS, "series": len(labels), "samples_per_series": len(stamps),
                    "write_s": round(written - began, 1), "evaluations": ordered, "groups": timed,
                    "median_s": statistics.median(ordered) if ordered else None,
                    "worst_s": ordered[-1] if ordered else None,
                    "cpu_s_per_evaluation": statistics.median(cpu[index]) if cpu[index] else None,
                    "rss_mb": rss / MB, "rules": str(rules_file),
                    "rules_median_s": sorted(((name, statistics.median(values)) for name, values in
                                              per_rule[index].items()), key=lambda kv: -kv[1]),
                    "load_average_before": load_before[0], "load_average_after": os.getloadavg()[0]})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--nodes", default="1000", help="fleet sizes in nodes (a shard holds 1,000)")
    parser.add_argument("--evaluations", type=int, default=3, help="evaluations timed a turn")
    parser.add_argument("--turns", type=int, default=2, help="turns of each rule file, in alternation")
    parser.add_argument("--error-counters", type=int, default=4, choices=range(1, len(ERROR_COUNTERS) + 1),
                        help="npu_roce_errors_total series per port (hccn_tool prints several)")
    parser.add_argument("--rules", type=Path, action="append",
                        help="rule file(s) holding the group, measured one after the other (default: the shipped)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    rule_files = args.rules or [ROOT / "alerts" / "failslow.rules.yml"]
    table = Table(("rules", "nodes", "chips", "series", "slowest group's evaluation (median / worst)", "< 2 s",
                   "each group (median)", "Prometheus CPU a evaluation of all", "slowest rules (median)",
                   "load average (before / after)"))
    results = []
    for nodes in (int(n) for n in args.nodes.split(",")):
        with tempfile.TemporaryDirectory(prefix="npuwatch-failslow-scale-") as tmp:
            measured = measure(nodes, rule_files, Path(tmp), evaluations=args.evaluations, turns=args.turns,
                               error_counters=args.error_counters)
        for result in measured:
            results.append(result)
            median, worst, cpu = result["median_s"], result["worst_s"], result["cpu_s_per_evaluation"]
            table.add(Path(result["rules"]).name, nodes, result["chips"], result["series"],
                      f"{median:.3f} s / {worst:.3f} s (of {len(result['evaluations'])})" if median is not None
                      else "none", "yes" if median is not None and median < 2.0 else "NO",
                      ", ".join(f"{name} {group['median_s']:.3f} s" for name, group in result["groups"].items()),
                      f"{cpu:.2f} s" if cpu is not None else "-",
                      ", ".join(f"{name.split(' ', 1)[1]} {seconds:.3f} s"
                                for name, seconds in result["rules_median_s"][:3]),
                      f"{result['load_average_before']:.1f} / {result['load_average_after']:.1f}")
        sys.stdout.flush()
    table.note(f"{NPUS} chips a node, jobs of {JOB_NODES} nodes, {args.error_counters} error counters a port; the "
               f"series written first (a sample every {SCRAPE_S:.0f} s), then each file's groups timed alone, "
               f"{args.turns} turns of {args.evaluations} evaluations in alternation; Prometheus' evaluationTime and "
               f"its process's CPU seconds over a turn's evaluations; machine: {os.cpu_count()} CPUs, shared. "
               f"Sharded layout: a shard holds {NODES_PER_SHARD} nodes")
    print(table.render())
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
