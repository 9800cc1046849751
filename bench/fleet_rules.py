"""What the fleet-wide rule groups cost as the fleet grows: one evaluation of the triage group and of the
probe-median group, and the ruler's memory, on Prometheus and on VictoriaMetrics + vmalert.

    python bench/fleet_rules.py                         # 1k, 4k and 16k nodes of 16 chips, both engines
    python bench/fleet_rules.py --sizes 1000 --engines prometheus
    python bench/fleet_rules.py --quick                 # 64 nodes (smoke; tests/e2e/test_bench_fleet_rules.py)

A synthetic fleet of N nodes x 16 NPUs holds the series the fleet-wide groups read (the global
Prometheus' federation list, deploy/prometheus/layouts.py ``FEDERATE``): per NPU its device IP
(``npu_roce_ip_info``), link and chip state, chip model (``npu_info``), GEMM probe flops and
efficiency, and the rank it holds in its job's communicator (jobs of 64 nodes, 1024 ranks); per
node the log scanner's ``npuwatch_collector_up``, two all-reduce bandwidths and ``up`` (no fleet-wide rule
reads it and the global does not federate it; a VictoriaMetrics store fed by vmagent holds it). One job is
hung: its culprit NPU's link is down and the 1023 other ranks report a timeout, each node blaming
the culprit's rank and address. The series are written by remote write (protobuf, uncompressed
snappy framing) into each engine: Prometheus 2.42 with ``--web.enable-remote-write-receiver``, or
VictoriaMetrics (``/api/v1/write``), four rounds 3 minutes apart ending now, so the 10-minute
windows of the scrape-gap hold have a past to read.

The ruler evaluates ``alerts/triage.rules.yml`` and ``alerts/probes-fleet.rules.yml`` (one group
each) every ``--interval``: the time of one evaluation of each
group is Prometheus' own ``evaluationTime`` (``/api/v1/rules``) or vmalert's
``vmalert_iteration_duration_seconds`` (its queries to VictoriaMetrics included), the median and the
worst of ``--evaluations`` evaluations after the last write. Memory: the resident set of Prometheus,
or of VictoriaMetrics and of vmalert. Target: each group under 2 s at 16k nodes; the run checks that
the triage rules name the culprit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # first: bench/agent.py must not shadow the agent package

from bench._util import MB, Table, rss_bytes  # noqa: E402
from tests.support.prom_harness import (  # noqa: E402
    HarnessError,
    PromProcess,
    _Process,
    rfc3339_epoch,
    start_prometheus_with,
    start_victoriametrics,
    start_vmalert,
)

NPUS = 16
JOB_NODES = 64  # nodes per training job (one communicator each)
JOB = "npuwatch"
FLEET_RULE_FILES = ("triage.rules.yml", "probes-fleet.rules.yml")
# group -> (what the table calls it, its interval when not the ruler's)
GROUPS = {
    "npuwatch-hccl-triage": ("triage", None),
    "npuwatch-probes-fleet": ("probe medians", None),
}
TARGET_S = 2.0
ROUND_GAP_S = 180.0
ROUNDS = 4


# ----------------------------------------------------------------------------- remote write, by hand


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _labels_blob(labels: Sequence[tuple[str, str]]) -> bytes:
    """The ``labels`` fields of a prometheus.TimeSeries (sorted by name, as the protocol requires)."""
    return b"".join(_field(1, _field(1, name.encode()) + _field(2, value.encode())) for name, value in sorted(labels))


def _sample(value: float, ms: int) -> bytes:
    return _field(2, b"\x09" + struct.pack("<d", value) + b"\x10" + _varint(ms))


def _snappy_literal(data: bytes) -> bytes:
    """A valid snappy block that stores ``data`` as literals (no compression: snappy's framing only)."""
    out = bytearray(_varint(len(data)))
    for start in range(0, len(data), 1 << 16):
        chunk = data[start:start + (1 << 16)]
        n = len(chunk) - 1
        if n < 60:
            out.append(n << 2)
        elif n < 1 << 8:
            out += bytes([60 << 2, n])
        else:
            out += bytes([61 << 2]) + n.to_bytes(2, "little")
        out += chunk
    return bytes(out)


def remote_write(url: str, series: Sequence[tuple[bytes, float]], ms: int, batch: int = 20_000) -> None:
    """POST every series with one sample at ``ms`` (Prometheus remote write 1.0)."""
    for start in range(0, len(series), batch):
        body = b"".join(_field(1, labels + _sample(value, ms)) for labels, value in series[start:start + batch])
        request = urllib.request.Request(url, data=_snappy_literal(body), method="POST", headers={
            "Content-Type": "application/x-protobuf", "Content-Encoding": "snappy",
            "X-Prometheus-Remote-Write-Version": "0.1.0"})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                response.read()
        except urllib.error.HTTPError as exc:
            raise HarnessError(f"{url}: HTTP {exc.code}: {exc.read()[:300]!r}") from None


# ----------------------------------------------------------------------------- the synthetic fleet


@dataclass(frozen=True)
class Fleet:
    nodes: int

    @property
    def culprit(self) -> tuple[int, int]:
        return (5, 9)  # node index, NPU: in job 0

    def node(self, index: int) -> tuple[tuple[str, str], ...]:
        return (("job", JOB), ("instance", f"10.{index // 250}.{index % 250}.1:9101"), ("node", f"node-{index:05d}"))

    @staticmethod
    def address(index: int, npu: int) -> str:
        return f"29.{index // 256 % 256}.{index % 256}.{npu + 10}"

    def series(self, now: float) -> list[tuple[bytes, float]]:
        """(encoded labels, value) of every series; timestamps in the values where they are times."""
        out: list[tuple[bytes, float]] = []
        culprit_node, culprit_npu = self.culprit
        culprit_rank = culprit_node % JOB_NODES * NPUS + culprit_npu
        for index in range(self.nodes):
            base = self.node(index)
            job, position = index // JOB_NODES, index % JOB_NODES
            comm = f"29.{job // 256}.{job % 256}.10%enp_60000_0_{job}"
            hung = job == 0
            out.append((_labels_blob((("__name__", "up"), *base)), 1.0))
            out.append((_labels_blob((("__name__", "npuwatch_collector_up"), ("collector", "hccl_logs"), *base)), 1.0))
            for scope in ("node", "cluster"):
                out.append((_labels_blob((("__name__", "npu_probe_allreduce_bus_bandwidth_bytes_per_second"),
                                          ("scope", scope), ("size_bytes", "268435456"), *base)),
                            4.0e10 + (index % 7) * 1e8))
            if hung and index != culprit_node:
                out.append((_labels_blob((("__name__", "npu_hccl_peer_blamed_timestamp_seconds"), ("comm", comm),
                                          ("how", "lost"), ("rank", str(culprit_rank)),
                                          ("address", self.address(culprit_node, culprit_npu)), *base)), now - 300))
            for npu in range(NPUS):
                chip = (("npu", str(npu)), ("chip", "0"))
                rank = position * NPUS + npu
                down = hung and (index, npu) == (culprit_node, culprit_npu)
                out.append((_labels_blob((("__name__", "npu_roce_ip_info"), ("npu", str(npu)),
                                          ("address", self.address(index, npu)), *base)), 1.0))
                out.append((_labels_blob((("__name__", "npu_roce_link_up"), ("npu", str(npu)), *base)),
                            0.0 if down else 1.0))
                out.append((_labels_blob((("__name__", "npu_healthy"), *chip, *base)), 1.0))
                out.append((_labels_blob((("__name__", "npu_info"), *chip, ("model", "910B3"), *base)), 1.0))
                out.append((_labels_blob((("__name__", "npu_probe_gemm_flops"), *chip, ("dtype", "fp16"), *base)),
                            3.0e14 * (1 + (index * NPUS + npu) % 11 / 100)))
                out.append((_labels_blob((("__name__", "npu_probe_gemm_efficiency_ratio"), *chip, ("dtype", "fp16"),
                                          *base)), 0.9 + (index * NPUS + npu) % 7 / 100))
                out.append((_labels_blob((("__name__", "npu_hccl_rank_last_seen_timestamp_seconds"), ("comm", comm),
                                          ("rank", str(rank)), ("npu", str(npu)), *base)), now - 900))
                if hung and not down:
                    out.append((_labels_blob((("__name__", "npu_hccl_rank_timeout_timestamp_seconds"),
                                              ("comm", comm), ("rank", str(rank)), ("npu", str(npu)), *base)),
                                now - 240))
        return out


# ----------------------------------------------------------------------------- the engines


def _metrics(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        text = response.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                values[name] = float(value)
            except ValueError:
                continue
    return values


def _rule_files(tmp: Path) -> list[str]:
    rules = tmp / "rules"
    rules.mkdir()
    for name in FLEET_RULE_FILES:
        shutil.copy(ROOT / "alerts" / name, rules / name)
    return [str(rules / name) for name in FLEET_RULE_FILES]


@dataclass
class Result:
    engine: str
    nodes: int
    series: int
    write_s: float
    evaluations: dict[str, list[float]]
    memory: dict[str, int]
    culprits: list[tuple[str, str]]


def _prometheus_evaluations(prom: PromProcess, after: float, count: int, timeout: float) -> dict[str, list[float]]:
    seen: dict[str, dict[str, float]] = {name: {} for name in GROUPS}
    wanted = {name: 1 if interval else count for name, (_, interval) in GROUPS.items()}
    deadline = time.monotonic() + timeout
    while any(len(seen[name]) < wanted[name] for name in GROUPS) and time.monotonic() < deadline:
        for group in prom.api("rules")["groups"]:
            if group["name"] in seen and group.get("lastEvaluation", "").startswith("2"):
                at = rfc3339_epoch(group["lastEvaluation"])
                if at > after or GROUPS[group["name"]][1]:  # a slow group's last evaluation counts
                    seen[group["name"]][group["lastEvaluation"]] = float(group["evaluationTime"])
        time.sleep(1.0)
    return {name: list(values.values())[:count] for name, values in seen.items()}


def _vmalert_evaluations(vmalert: _Process, count: int, timeout: float) -> dict[str, list[float]]:
    """Per group, the mean evaluation time of each interval in which it ran (sum and count deltas)."""
    def sample() -> dict[str, tuple[float, float]]:
        values = _metrics(vmalert.url)
        out = {}
        for name in GROUPS:
            total = next((v for k, v in values.items() if k.startswith("vmalert_iteration_duration_seconds_sum")
                          and f'group="{name}"' in k), None)
            runs = next((v for k, v in values.items() if k.startswith("vmalert_iteration_duration_seconds_count")
                         and f'group="{name}"' in k), None)
            if total is not None and runs is not None:
                out[name] = (total, runs)
        return out

    found: dict[str, list[float]] = {name: [] for name in GROUPS}
    wanted = {name: 1 if interval else count for name, (_, interval) in GROUPS.items()}
    last: dict[str, tuple[float, float]] = {}
    deadline = time.monotonic() + timeout
    while any(len(found[name]) < wanted[name] for name in GROUPS) and time.monotonic() < deadline:
        now = sample()
        for name, (total, runs) in now.items():
            before = last.get(name, (0.0, 0.0))
            if runs > before[1]:
                found[name].append((total - before[0]) / (runs - before[1]))
        last = now
        time.sleep(1.0)
    return {name: values[:count] for name, values in found.items()}


def _write_rounds(url: str, fleet: Fleet) -> tuple[int, float]:
    """The history rounds, ``ROUND_GAP_S`` apart before the start, then one round stamped when it starts (the
    writes of a large fleet take a while: the newest samples must be fresh when the ruler reads them)."""
    started = time.monotonic()
    first = time.time()
    series = fleet.series(first)
    for k in range(ROUNDS - 1, 0, -1):
        remote_write(url, series, int((first - k * ROUND_GAP_S) * 1000))
    remote_write(url, series, int(time.time() * 1000))
    return len(series), time.monotonic() - started


def _wait_culprit(store: PromProcess, timeout: float) -> list[tuple[str, str]]:
    """``hccl:culprit:info`` once the chain of recording rules has produced it (vmalert reads each step's
    result back from storage, so the chain takes a few evaluations there)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [(r["metric"].get("node", ""), r["metric"].get("npu", "")) for r in store.query("hccl:culprit:info")]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(1.0)


def run_prometheus(fleet: Fleet, tmp: Path, interval: str, evaluations: int) -> Result:
    files = _rule_files(tmp)
    config = {"global": {"evaluation_interval": interval}, "rule_files": files}
    prom = start_prometheus_with(config, tmp / "prometheus", "prometheus",
                                 extra_args=["--web.enable-remote-write-receiver"])
    try:
        count, write_s = _write_rounds(prom.url + "/api/v1/write", fleet)
        written = time.time()
        culprits = _wait_culprit(prom, timeout=120)
        times = _prometheus_evaluations(prom, written, evaluations, timeout=120 + 60 * evaluations)
        memory = {"prometheus": rss_bytes(prom.popen.pid)}
        return Result("Prometheus 2.42", fleet.nodes, count, write_s, times, memory, culprits)
    finally:
        prom.stop()


def run_victoriametrics(fleet: Fleet, tmp: Path, interval: str, evaluations: int) -> Result:
    files = _rule_files(tmp)
    vm = start_victoriametrics(tmp / "victoria-metrics", ["-search.latencyOffset=5s"])
    vmalert: _Process | None = None
    try:
        count, write_s = _write_rounds(vm.url + "/api/v1/write", fleet)
        # vmalert starts once the data is in: its first evaluations are measured, as Prometheus' are
        vmalert = start_vmalert(tmp / "vmalert", [*(f"-rule={path}" for path in files), f"-datasource.url={vm.url}",
                                                  f"-remoteWrite.url={vm.url}", f"-evaluationInterval={interval}",
                                                  "-notifier.url=http://127.0.0.1:9"])
        culprits = _wait_culprit(vm, timeout=180)
        times = _vmalert_evaluations(vmalert, evaluations, timeout=120 + 60 * evaluations)
        memory = {"victoria-metrics": rss_bytes(vm.popen.pid), "vmalert": rss_bytes(vmalert.popen.pid)}
        return Result("VictoriaMetrics 1.79 + vmalert", fleet.nodes, count, write_s, times, memory, culprits)
    finally:
        if vmalert is not None:
            vmalert.stop()
        vm.stop()


ENGINES = {"prometheus": run_prometheus, "victoriametrics": run_victoriametrics}


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,4000,16000", help="fleet sizes in nodes (default 1000,4000,16000)")
    parser.add_argument("--engines", default="prometheus,victoriametrics")
    parser.add_argument("--interval", default="20s", help="the ruler's evaluation interval (default 20s)")
    parser.add_argument("--evaluations", type=int, default=3, help="evaluations timed per group (default 3)")
    parser.add_argument("--quick", action="store_true", help="64 nodes, both engines, 2 evaluations (smoke)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    sizes = [64] if args.quick else [int(size) for size in args.sizes.split(",")]
    evaluations = 2 if args.quick else args.evaluations
    interval = "5s" if args.quick else args.interval
    engines = [name.strip() for name in args.engines.split(",")]
    results: list[Result] = []
    table = Table(("nodes", "series", "engine", "group", "evaluation (median / worst)", "< 2 s", "ruler memory",
                   "culprit"))
    ok = True
    for size in sizes:
        fleet = Fleet(size)
        for engine in engines:
            with tempfile.TemporaryDirectory(prefix=f"npuwatch-fleet-rules-{engine}-") as tmp:
                started = time.monotonic()
                result = ENGINES[engine](fleet, Path(tmp), interval, evaluations)
                print(f"{size} nodes on {result.engine}: {result.series} series written in {result.write_s:.1f} s, "
                      f"measured in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
            results.append(result)
            named = result.culprits == [(f"node-{fleet.culprit[0]:05d}", str(fleet.culprit[1]))]
            memory = ", ".join(f"{name} {value / MB:.0f} MB" for name, value in result.memory.items())
            for group, (label, own_interval) in GROUPS.items():
                times = result.evaluations.get(group, [])
                fast = bool(times) and max(times) < TARGET_S
                name = f"{label} (every {own_interval})" if own_interval else label
                ok = ok and fast and named
                shown = (f"{_median(times):.3f} s / {max(times):.3f} s (of {len(times)})" if times
                         else "no evaluation")
                table.add(size, result.series, result.engine, name, shown, "yes" if fast else "NO", memory,
                          "yes" if named else f"NO {result.culprits}")
    table.note(f"{NPUS} NPUs a node, jobs of {JOB_NODES} nodes, one hung; {ROUNDS} remote-write rounds "
               f"{ROUND_GAP_S:.0f} s apart; evaluation every {interval}; machine: {os.cpu_count()} CPUs")
    print(table.render())
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=2, default=str), encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
