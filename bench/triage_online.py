"""Benchmark ``npuwatch triage --prometheus`` against a Prometheus that holds a synthetic fleet.

    python bench/triage_online.py                  # 64 nodes x 8 NPUs, the last hour at 30 s
    python bench/triage_online.py --quick          # 8 nodes, 20 minutes (smoke)

The fleet's series (the incident window of every agent, RoCE addresses and link state, chip health
and some everyday gauges as ballast) are written as OpenMetrics and backfilled with ``promtool tsdb
create-blocks-from openmetrics``; a real Prometheus then serves them from that TSDB. One job holds
every NPU in one communicator (plus one 8-rank communicator per node); halfway through the hour the
culprit NPU's RoCE link goes down and every other rank reports a timeout that blames it.

Timed: reading the evidence over the HTTP API (``agent.triage.prometheus.read_evidence``: instant
and range queries), the engine (``analyze``), the whole command in a fresh process, and one
evaluation of the recording rules of ``alerts/triage.rules.yml`` (each expression as an instant
query, in order). Needs ``prometheus`` and ``promtool`` on PATH.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO, Union

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # first: bench/agent.py must not shadow the agent package

import yaml  # noqa: E402

from agent.triage.engine import analyze  # noqa: E402
from agent.triage.evidence import Window  # noqa: E402
from agent.triage.prometheus import PrometheusClient, PrometheusSource, read_evidence  # noqa: E402
from bench._util import Table, verdict  # noqa: E402
from tests.support.prom_harness import start_prometheus  # noqa: E402

NPUS = 8
JOB = "npuwatch"
WORLD = "29.1.0.10%enp_60000_0_1761275812718970"
READ_TARGET_S = 5.0
RULES_TARGET_S = 1.0
LINK_DOWN_BEFORE_S = 62.0


def _labels(**values: object) -> str:
    return "{" + ",".join(f'{key}="{value}"' for key, value in values.items()) + "}"


class Fleet:
    """Which node and NPU hold which rank, and when the hang is."""

    def __init__(self, nodes: int, start: float, end: float, step: float) -> None:
        self.nodes = nodes
        self.times = [start + k * step for k in range(int((end - start) // step) + 1)]
        self.hang = start + (end - start) / 2
        self.link_down = self.hang - LINK_DOWN_BEFORE_S
        self.job_started = start - 3 * 3600
        self.culprit = (nodes * 3 // 5, 5)  # (node index, npu)

    @staticmethod
    def node(index: int) -> dict[str, str]:
        return {"job": JOB, "instance": f"10.{index // 250}.{index % 250}.1:9101", "node": f"node-{index:03d}"}

    @staticmethod
    def address(index: int, npu: int) -> str:
        return f"29.{(index % 250) + 1}.{npu + 16 * (index // 250)}.{10 + npu}"

    @staticmethod
    def rank(index: int, npu: int) -> int:
        return index * NPUS + npu


# A series' value: a constant, ("from", t, v) absent before t, or ("switch", t, before, after).
# typing.Union, not "|": this alias is evaluated at run time (Python 3.9).
Value = Union[float, tuple[str, float, float], tuple[str, float, float, float]]


def _points(times: list[float], value: Value) -> Iterator[tuple[float, float]]:
    for at in times:
        if not isinstance(value, tuple):
            yield at, value
        elif value[0] == "from":
            if at >= value[1]:
                yield at, value[2]
        else:
            yield at, value[3] if at >= value[1] else value[2]  # type: ignore[misc]


def write_openmetrics(fleet: Fleet, out: TextIO) -> int:
    """The fleet's samples, family by family (OpenMetrics wants each family contiguous); sample count."""
    culprit_node, culprit_npu = fleet.culprit
    culprit_rank = fleet.rank(culprit_node, culprit_npu)
    families: dict[str, list[tuple[str, Value]]] = {}

    def series(metric: str, labels: dict[str, object], value: Value) -> None:
        families.setdefault(metric, []).append((_labels(**labels), value))

    for index in range(fleet.nodes):
        node = fleet.node(index)
        series("up", {"job": JOB, "instance": node["instance"]}, 1.0)
        series("npuwatch_build_info", {**node, "version": "0.1.0", "python": "3.11.2"}, 1.0)
        series("npuwatch_collector_up", {**node, "collector": "hccl_logs"}, 1.0)
        series("npu_hccl_comm_ranks", {**node, "comm": WORLD}, float(fleet.nodes * NPUS))
        series("npu_hccl_comm_ranks", {**node, "comm": f"tp-{index:03d}"}, float(NPUS))
        series("npu_hccl_errors_total", {**node, "code": "EI0002", "category": "exec_timeout"},
               ("switch", fleet.hang, 0.0, 1.0))
        series("npu_hccl_last_error_timestamp_seconds", {**node, "category": "exec_timeout"},
               ("from", fleet.hang, fleet.hang))
        for npu in range(NPUS):
            chip = {**node, "npu": npu, "chip": 0}
            rank = fleet.rank(index, npu)
            culprit = (index, npu) == fleet.culprit
            series("npu_roce_ip_info", {**chip, "address": fleet.address(index, npu)}, 1.0)
            series("npu_roce_link_up", chip, ("switch", fleet.link_down, 1.0, 0.0) if culprit else 1.0)
            series("npu_roce_link_last_change_timestamp_seconds", chip,
                   ("switch", fleet.link_down, fleet.job_started, fleet.link_down) if culprit else fleet.job_started)
            series("npu_health_state", {**chip, "state": "ok"}, 1.0)
            series("npu_healthy", chip, 1.0)
            for metric, gauge in (("npu_temperature_celsius", 55.0 + npu), ("npu_power_watts", 310.0),
                                  ("npu_aicore_utilization_ratio", 0.93), ("npu_hbm_used_bytes", 5.8e10)):
                series(metric, chip, gauge)
            for lane in range(4):
                series("npu_optical_rx_power_watts", {**chip, "lane": lane}, 0.00091)
            seen = {**node, "comm": WORLD, "rank": rank, "npu": npu}
            series("npu_hccl_rank_last_seen_timestamp_seconds", seen, fleet.job_started)
            series("npu_hccl_rank_last_seen_timestamp_seconds", {**seen, "comm": f"tp-{index:03d}", "rank": npu},
                   fleet.job_started)
            if not culprit:
                at = fleet.hang + rank * 0.003
                series("npu_hccl_rank_timeout_timestamp_seconds", seen, ("from", at, at))
        blamed = {**node, "comm": WORLD, "how": "lost", "rank": culprit_rank,
                  "address": fleet.address(culprit_node, culprit_npu)}
        series("npu_hccl_peer_blamed_timestamp_seconds", blamed, ("from", fleet.hang, fleet.hang - 60))
    count = 0
    for metric, rows in families.items():
        family, kind = (metric.removesuffix("_total"), "counter") if metric.endswith("_total") else (metric, "gauge")
        out.write(f"# TYPE {family} {kind}\n")
        for labels, value in rows:
            for at, number in _points(fleet.times, value):
                out.write(f"{metric}{labels} {number:.17g} {at:.3f}\n")
                count += 1
    out.write("# EOF\n")
    return count


def inlined_rules() -> list[tuple[str, str]]:
    """Each recording rule of alerts/triage-shard.rules.yml and alerts/triage.rules.yml with the recorded
    series it reads replaced by their expressions, so one instant query at any time costs at least what the
    rule costs in the chain. The alert is left out: it reads one recorded series (and its last 10 minutes
    for the scrape-gap hold), which inlined would be a subquery re-running the whole chain at every step."""
    def groups(name: str) -> list[dict[str, Any]]:
        return list(yaml.safe_load((ROOT / "alerts" / name).read_text(encoding="utf-8"))["groups"])

    # the per-node half's groups and the fleet half's, in turn, as a sharded layout runs them
    node, fleet = groups("triage-shard.rules.yml"), groups("triage.rules.yml")
    ordered = [group for pair in zip(node, fleet) for group in pair]
    expanded: dict[str, str] = {}
    out = []
    for group in ordered:
        for rule in group["rules"]:
            expr = rule["expr"]
            for name, body in expanded.items():
                expr = re.sub(rf"(?<![\w:]){re.escape(name)}(?![\w:{{])", f"({body})", expr)
            if "record" in rule:
                expanded[rule["record"]] = expr
                out.append((rule["record"], expr))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--step", type=float, default=30.0, help="seconds between two samples of a series")
    parser.add_argument("--quick", action="store_true", help="8 nodes, 20 minutes")
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.minutes = 8, 20.0
    for binary in ("prometheus", "promtool"):
        if shutil.which(binary) is None:
            print(f"{binary} not found on PATH (Debian: apt-get install prometheus)", file=sys.stderr)
            return 2
    table = Table()
    work = Path(tempfile.mkdtemp(prefix="npuwatch-triage-bench-"))
    try:
        end = float(int(time.time()) - 30)
        fleet = Fleet(args.nodes, end - args.minutes * 60, end, args.step)
        source = work / "fleet.om"
        started = time.perf_counter()
        with source.open("w", encoding="utf-8") as out:
            samples = write_openmetrics(fleet, out)
        table.add("synthetic samples", f"{samples:,} ({args.nodes} nodes x {NPUS} NPUs)", "-", "-")
        table.add("write OpenMetrics", f"{time.perf_counter() - started:.1f} s", "-", "-")
        data = work / "prometheus" / "data"
        started = time.perf_counter()
        subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
                       check=True, capture_output=True, timeout=1800)
        table.add("promtool backfill", f"{time.perf_counter() - started:.1f} s", "-", "-")
        source.unlink()
        prom = start_prometheus(work, [])
        try:
            client = PrometheusClient(PrometheusSource(prom.url, timeout_s=120))
            window = Window(end - args.minutes * 60, end)
            started = time.perf_counter()
            evidence = read_evidence(client, window)
            read_s = time.perf_counter() - started
            table.add("read evidence (HTTP API)", f"{read_s:.2f} s", f"<= {READ_TARGET_S:g} s",
                      verdict(read_s <= READ_TARGET_S))
            counts = evidence.counts()
            table.add("records", ", ".join(f"{k} {v}" for k, v in counts.items() if v), "-", "-")
            started = time.perf_counter()
            report = analyze(evidence, window)
            table.add("analyze", f"{time.perf_counter() - started:.2f} s", "-", "-")
            culprit_node, culprit_npu = fleet.culprit
            best = report.incidents[0].culprits[0] if report.incidents and report.incidents[0].culprits else None
            named = best is not None and (best.node, best.npu) == (fleet.node(culprit_node)["node"], culprit_npu)
            table.add("culprit named", f"{best.where if best else 'none'}", fleet.node(culprit_node)["node"],
                      verdict(named))
            started = time.perf_counter()
            command = subprocess.run(
                [sys.executable, "-m", "agent", "triage", "--prometheus", prom.url, "--since", str(window.start),
                 "--until", str(end), "--json"], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
            whole_s = time.perf_counter() - started
            exit_ok = command.returncode == 2 and json.loads(command.stdout)["outcome"] == "culprit"
            table.add("npuwatch triage --prometheus (new process)", f"{whole_s:.2f} s", "exit 2", verdict(exit_ok))
            rules_s = 0.0
            for name, expr in inlined_rules():
                started = time.perf_counter()
                found = client.query(expr, end)
                rules_s += time.perf_counter() - started
                if name == "hccl:culprit:info":
                    named_by_rules = sorted((r.get("node"), r.get("npu")) for r, _ in found)
                    table.note(f"hccl:culprit:info at the end: {named_by_rules}")
            table.add("triage rules, one evaluation (inlined)", f"{rules_s:.3f} s", f"<= {RULES_TARGET_S:g} s",
                      verdict(rules_s <= RULES_TARGET_S))
        finally:
            prom.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(table.render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
