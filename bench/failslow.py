"""Fail-slow detection, measured: a scenario (docs/failslow.md) through the simulator and the shipped rules
(alerts/failslow.rules.yml) on a real engine, and every alert that fired scored against the scenario's events.

    python bench/failslow.py --scenario bench/failslow_scenarios/compute-1024.json --json
    python bench/failslow.py --scenario bench/failslow_scenarios/*.json     # a table, and the totals

The simulator's series (bench/failslow_sim.py) are imported into a VictoriaMetrics on 127.0.0.1 with their
timestamps (the scenario starts at ``T0``), and vmalert replays the rule group over the scenario's span
(``-replay.*``: every recording rule evaluated at the group's interval, in order, its results written back).
The alert's recorded condition is then read at every evaluation over the span, and ``for`` and the hold
applied as the rule manager does with the alert's expression (firing once the condition has held for ``for``
at consecutive evaluations, firing on 10 minutes after its last sample): vmalert 1.79's replay evaluates
alerting rules but writes none of their state. promtool's
tests (alerts/tests/failslow-test.yml) check the same rules with Prometheus' own rule manager.

An alert is right when its cause is the fault's and it names the fault's rank (``compute_slow``), either rank
of the pair (``link_slow``) or the node (``host_slow``), from the fault's start to a minute after its end.
Precision: right alerts over all alerts (1.0 with none); recall: faults named over faults; time to detect:
from the fault's start to the first right alert; false pages a day per 1,000 nodes from the wrong ones.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from queue import Queue
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.failslow_scenario import Event, Scenario, ScenarioError, load  # noqa: E402
from bench.failslow_sim import Simulation, chip_of, node_name  # noqa: E402
from tests.support.prom_harness import (  # noqa: E402
    HarnessError,
    PromProcess,
    find_binary,
    start_victoriametrics,
)

RULES = ROOT / "alerts" / "failslow.rules.yml"
ALERT = "NPUJobStraggler"
CONDITION = "npuwatch:alert_condition:NPUJobStraggler"  # recorded just before the alert
HOLD_S = 600.0  # a firing alert outlives its condition by its hold (alerts/README.md)
T0 = 1_700_000_000  # the scenario's second 0 (a multiple of the group's interval)
GRACE_S = 60.0  # an alert this long after a fault's end still names it
BATCH = 100_000  # lines per import request (text format)
BATCH_BYTES = 8 << 20  # bytes per import request (JSON lines)
# Replay's results written back in bigger batches by two writers (the defaults: 1,000 series a flush, a
# 100,000-sample queue), for the per-chip rules of a fleet-sized soak (bench/failslow_soak.py)
REPLAY_FLAGS = ["-remoteWrite.concurrency=2", "-remoteWrite.maxBatchSize=20000", "-remoteWrite.maxQueueSize=2000000"]
# The store the scenarios are replayed on. A look-back under the group's interval: a record is read at its own
# evaluation only, as Prometheus' staleness markers end a recorded series that a rule stops returning (every raw
# series the rules read is read over an explicit window). vmalert's replay writes a rule's result of one range
# query (up to 1,000 points a series) as one request: 2,400 chips' worth is 44 MB, over VictoriaMetrics' default
# 32 MB, and vmalert drops what is refused (a soak of that size lost recorded points and paged falsely).
STORE_FLAGS = ["-search.disableCache", "-search.latencyOffset=0s", "-search.maxStalenessInterval=5s",
               "-retentionPeriod=100y", "-maxInsertRequestSize=1073741824"]


def _groups() -> list[dict[str, Any]]:
    """The rule file's groups, in its order: a group reads only the records of those before it."""
    return [dict(group) for group in yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]]


def _group() -> dict[str, Any]:
    """The groups' common settings (their evaluation interval) and every rule, the groups' rules in order."""
    groups = _groups()
    settings = [{key: value for key, value in group.items() if key not in ("name", "rules")} for group in groups]
    if any(each != settings[0] for each in settings):
        raise HarnessError(f"{RULES}: the groups' settings differ ({settings}); the replay takes one interval")
    return {**settings[0], "name": groups[0]["name"], "rules": [rule for group in groups for rule in group["rules"]]}


def _seconds(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    return float(text[:-1]) * units[text[-1]]


def _post(url: str, body: bytes, timeout: float = 300) -> bytes:
    request = urllib.request.Request(url, data=body, method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return bytes(response.read())


def _get(url: str, timeout: float = 300) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


def _flush(store: PromProcess) -> None:
    """Make what was written searchable now (VictoriaMetrics flushes its buffers every second anyway)."""
    with urllib.request.urlopen(store.url + "/internal/force_flush", timeout=60) as response:
        response.read()


def _rfc3339(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def import_series(store: PromProcess, lines: Iterator[str]) -> int:
    """Prometheus' text format, a sample a line (kept for series written by hand)."""
    count = 0
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= BATCH:
            _post(store.url + "/api/v1/import/prometheus", "\n".join(batch).encode())
            count += len(batch)
            batch = []
    if batch:
        _post(store.url + "/api/v1/import/prometheus", "\n".join(batch).encode())
        count += len(batch)
    _flush(store)
    return count


def import_json(store: PromProcess, lines: Iterable[str], batch_bytes: int = BATCH_BYTES) -> None:
    """VictoriaMetrics' JSON-line import (a series and its samples a line), posted from a thread while the
    next batch is produced, one batch at most waiting: memory stays at two batches."""
    queue: Queue[bytes | None] = Queue(maxsize=1)
    failed: list[BaseException] = []

    def post() -> None:
        while True:
            body = queue.get()
            if body is None:
                return
            if not failed:
                try:
                    _post(store.url + "/api/v1/import", body)
                except BaseException as exc:  # raised again in the producer
                    failed.append(exc)

    poster = threading.Thread(target=post, name="failslow-import", daemon=True)
    poster.start()
    try:
        batch: list[str] = []
        size = 0
        for line in lines:
            if failed:
                break
            batch.append(line)
            size += len(line) + 1
            if size >= batch_bytes:
                queue.put("\n".join(batch).encode())
                batch, size = [], 0
        if batch and not failed:
            queue.put("\n".join(batch).encode())
    finally:
        queue.put(None)
        poster.join()
    if failed:
        raise failed[0]
    _flush(store)


def replay(store: PromProcess, workdir: Path, interval: str, start: float, end: float) -> float:
    """vmalert's replay of the rule groups over [start, end], one recording rule at a time in the file's order
    (each run's results flushed before the next reads them: vmalert's ``-replay.rulesDelay`` alone leaves a
    new series unsearchable for a while); returns the wall time."""
    binary = find_binary("vmalert", package="victoria-metrics")
    group = _group()
    began = time.monotonic()
    for index, rule in enumerate(group["rules"]):
        if "record" not in rule:
            continue
        rules = workdir / f"rule-{index:02d}.yml"
        one = {key: value for key, value in group.items() if key != "rules"}
        rules.write_text(yaml.safe_dump({"groups": [{**one, "rules": [rule]}]}, sort_keys=False), encoding="utf-8")
        log = workdir / f"vmalert-replay-{index:02d}.log"
        argv = [binary, f"-rule={rules}", f"-datasource.url={store.url}", f"-remoteWrite.url={store.url}",
                f"-replay.timeFrom={_rfc3339(start)}", f"-replay.timeTo={_rfc3339(end)}",
                "-replay.disableProgressBar", "-replay.rulesDelay=0s", "-remoteWrite.flushInterval=200ms",
                f"-datasource.queryStep={interval}", "-httpListenAddr=127.0.0.1:0", "-loggerLevel=ERROR",
                *REPLAY_FLAGS]
        with log.open("wb") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                code = process.wait(timeout=1800)
            finally:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        if code != 0:
            raise HarnessError(f"vmalert replay of {rule['record']} failed ({code}): "
                               f"{log.read_text(errors='replace')[-2000:]}")
        refused = replay_errors(log.read_text(errors="replace"))
        if refused:  # results it could not write are gone: the evaluations after them would read holes
            raise HarnessError(f"vmalert replay of {rule['record']} lost results: {refused[0]}")
        _flush(store)
        _wait_searchable(store, rule["record"], start, end)
    return time.monotonic() - began


def replay_errors(log: str) -> list[str]:
    """The error lines of a replay's log (run at -loggerLevel=ERROR, so every logged line but its banner)."""
    return [line for line in log.splitlines() if "\terror\t" in line or "\tfatal\t" in line]


def _wait_searchable(store: PromProcess, name: str, start: float, end: float, timeout: float = 30.0) -> None:
    """Until the series written as ``name`` are all found (their count stops growing for a second)."""
    query = urllib.parse.urlencode({"query": f"count(count_over_time({name}[{end - start:.0f}s]))",
                                    "time": end, "nocache": "1"})
    deadline = time.monotonic() + timeout
    last = -1.0
    while time.monotonic() < deadline:
        result = _get(f"{store.url}/api/v1/query?{query}")["data"]["result"]
        count = float(result[0]["value"][1]) if result else 0.0
        if count == last:
            return
        last = count
        time.sleep(1.0)


def alert_condition(store: PromProcess, start: float, end: float) -> dict[tuple, list[float]]:
    """For every label set of the alert: the evaluations at which its recorded condition held (its raw
    samples, ``/api/v1/export``: one per evaluation that held, so no look-back fills one that did not)."""
    _flush(store)
    query = urllib.parse.urlencode({"match[]": CONDITION, "start": start, "end": end})
    with urllib.request.urlopen(f"{store.url}/api/v1/export?{query}", timeout=300) as response:
        lines = response.read().decode().splitlines()
    held: dict[tuple, list[float]] = {}
    for line in filter(None, lines):
        series = json.loads(line)
        labels = {k: v for k, v in series["metric"].items() if k != "__name__"}
        held.setdefault(tuple(sorted(labels.items())), []).extend(ms / 1000.0 for ms in series["timestamps"])
    return {key: sorted(set(times)) for key, times in held.items()}


def fired(held: dict[tuple, list[float]], step: float, hold: float) -> list[dict[str, Any]]:
    """The rule manager's ``for`` and the alert's hold: pending from the first evaluation its condition holds,
    firing once it has held ``hold`` at every evaluation since (a false one resets a pending alert); a firing
    alert ends ``HOLD_S`` after its condition's last sample. One entry per alert that started firing."""
    alerts = []
    for key, times in held.items():
        labels = dict(key)
        active = previous = None
        firing_until = -1.0
        for at in times:
            if at <= firing_until:  # firing, held
                firing_until = at + HOLD_S
                previous = at
                continue
            if previous is None or at - previous > step * 1.5:
                active = at
            previous = at
            if active is not None and at - active >= hold:
                firing_until = at + HOLD_S
                active = None
                alerts.append({"at": at - T0, "job": labels.get("training_job", ""), "rank": labels.get("rank", ""),
                               "node": labels.get("node", ""), "npu": labels.get("npu", ""),
                               "cause": labels.get("cause", "")})
    return sorted(alerts, key=lambda a: (a["at"], a["node"], a["npu"]))


def _names(scenario: Scenario, event: Event, alert: dict[str, Any]) -> bool:
    if alert["cause"] != event.cause or not event.start <= alert["at"] <= event.end + GRACE_S:
        return False
    if event.kind == "host_slow":
        return alert["node"] == node_name(event.node or 0)
    ranks = event.ranks if event.kind == "compute_slow" else (event.pair or ())
    for rank in ranks:
        node, npu = chip_of(scenario, rank)
        if alert["rank"] == str(rank) and alert["node"] == node_name(node) and alert["npu"] == str(npu):
            return True
    return False


def score(scenario: Scenario, alerts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    faults = [e for e in scenario.events if e.fault]
    right = [a for a in alerts if any(_names(scenario, e, a) for e in faults)]
    wrong = [a for a in alerts if a not in right]
    found = []
    for e in faults:
        firsts = [a["at"] for a in alerts if _names(scenario, e, a)]
        target: Any = list(e.ranks) if e.ranks else (list(e.pair) if e.pair else e.node)
        found.append({"kind": e.kind, "target": target, "factor": e.factor, "start": e.start, "end": e.end,
                      "ttd_s": (min(firsts) - e.start) if firsts else None})
    ttds = [f["ttd_s"] for f in found if f["ttd_s"] is not None]
    days = scenario.duration_s / 86400.0
    return {
        "precision": len(right) / len(alerts) if alerts else 1.0,
        "recall": len(ttds) / len(faults) if faults else 1.0,
        "ttd_s_median": statistics.median(ttds) if ttds else None,
        "ttd_s_max": max(ttds) if ttds else None,
        "within_60s": sum(1 for t in ttds if t <= 60.0) / len(faults) if faults else 1.0,
        "false_pages": len(wrong),
        "false_pages_per_day_per_1000_nodes": len(wrong) / days / (scenario.nodes / 1000.0),
        "faults": found,
    }


def run(path: Path) -> dict[str, Any]:
    scenario = load(path)
    group = _group()
    interval = group.get("interval", "10s")
    step = _seconds(interval)
    [hold] = {_seconds(rule.get("for", "0s")) for rule in group["rules"] if rule.get("alert") == ALERT}
    with tempfile.TemporaryDirectory(prefix="npuwatch-failslow-") as tmp:
        workdir = Path(tmp)
        began = time.monotonic()
        simulation = Simulation(scenario)
        store = start_victoriametrics(workdir / "vm", STORE_FLAGS)
        try:
            import_json(store, simulation.json_lines(T0))
            samples = simulation.written
            simulated_s = time.monotonic() - began
            end = T0 + scenario.duration_s
            replay_s = replay(store, workdir, interval, T0, end)
            held = alert_condition(store, T0, end)
        finally:
            store.stop()
    alerts = fired(held, step, hold)
    return {"scenario": str(path), "name": scenario.name, "nodes": scenario.nodes, "ranks": scenario.ranks,
            "duration_s": scenario.duration_s, "samples": samples, "simulate_and_import_s": round(simulated_s, 1),
            "replay_s": round(replay_s, 1), "engine": "VictoriaMetrics + vmalert replay", "alerts": alerts,
            **score(scenario, alerts)}


def _print(result: dict[str, Any]) -> None:
    print(f"# {result['scenario']}: {result['ranks']} ranks, {result['duration_s']:.0f} s, {result['samples']} samples")
    for alert in result["alerts"]:
        print(json.dumps(alert))
    for fault in result["faults"]:
        ttd = "missed" if fault["ttd_s"] is None else f"{fault['ttd_s']:.0f} s"
        print(f"  {fault['kind']} {fault['target']} x{fault['factor']} at {fault['start']:.0f} s: {ttd}")
    print(f"  precision {result['precision']:.3f}, recall {result['recall']:.3f}, "
          f"within 60 s {result['within_60s']:.3f}, false pages {result['false_pages']} "
          f"({result['false_pages_per_day_per_1000_nodes']:.1f} a day per 1,000 nodes)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--scenario", type=Path, nargs="+", required=True, help="scenario JSON file(s)")
    parser.add_argument("--json", action="store_true", help="one JSON document per scenario on stdout")
    args = parser.parse_args(argv)
    results = []
    for path in args.scenario:
        try:
            result = run(path)
        except ScenarioError as exc:
            print(f"failslow: {exc}", file=sys.stderr)
            return 2
        results.append(result)
        if args.json:
            print(json.dumps(result))
        else:
            _print(result)
        sys.stdout.flush()
    if len(results) > 1:
        alerts = sum(len(r["alerts"]) for r in results)
        right = sum(r["precision"] * len(r["alerts"]) for r in results)
        faults = [f for r in results for f in r["faults"]]
        named = [f for f in faults if f["ttd_s"] is not None]
        total = {"scenarios": len(results), "alerts": alerts, "precision": right / alerts if alerts else 1.0,
                 "faults": len(faults), "recall": len(named) / len(faults) if faults else 1.0,
                 "within_60s": sum(1 for f in named if f["ttd_s"] <= 60) / len(faults) if faults else 1.0,
                 "false_pages": sum(r["false_pages"] for r in results)}
        print(json.dumps({"total": total}) if args.json else f"total: {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
